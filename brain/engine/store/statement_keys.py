"""The keys of the two statement indexes a subject's reads walk, and how one follows from the other.

``statement_by_subject`` keys are ``S ‖ subject key ‖ predicate hash ‖ u64 recorded_at ‖
id``: one subject and predicate's statements in record order. ``statement_by_subject_time``
keys are the same without the predicate hash, ``S ‖ subject key ‖ u64 recorded_at ‖ id``:
one subject's statements in record order, whatever their predicate. Each statement has
both keys or neither (a retraction deletes both), so the second follows from the first
byte for byte (:func:`subject_time_key`): an import writes it from the first's rows,
and a store of the previous format gets it the same way when it is opened
(:mod:`brain.engine.store.upgrade`).

The tail both keys end with, ``u64 recorded_at ‖ id``, is a statement's *position*:
STATEMENT_LIST's order and its cursor (``spec/02-data-model.md`` §5.4).
"""

from __future__ import annotations

from typing import Final

from brain.engine.store.scope import SCOPE_PREFIX_BYTES

__all__ = [
    "BY_SUBJECT_KEY_BYTES",
    "POSITION_BYTES",
    "PREDICATE_HASH_BYTES",
    "RECORD_ID_BYTES",
    "RECORD_TIME_BYTES",
    "SUBJECT_KEY_BYTES",
    "position_time",
    "subject_time_key",
]

RECORD_ID_BYTES: Final = 16
"""A record id: a UUIDv7 (``brain/ids.py``)."""

SUBJECT_KEY_BYTES: Final = 1 + RECORD_ID_BYTES
"""A subject key: a tag byte and a record id (``brain/engine/records/refs.py``)."""

PREDICATE_HASH_BYTES: Final = 8
"""Predicates are up to 1024 characters; index keys carry a hash of one, rows the text."""

RECORD_TIME_BYTES: Final = 8
"""A record time in a key: u64 big-endian, so byte order is time order."""

POSITION_BYTES: Final = RECORD_TIME_BYTES + RECORD_ID_BYTES
"""A statement's position, ``u64 recorded_at ‖ id``: the tail of both index keys."""

_SUBJECT_END: Final = SCOPE_PREFIX_BYTES + SUBJECT_KEY_BYTES
"""Where the subject key ends in either index key."""

BY_SUBJECT_KEY_BYTES: Final = _SUBJECT_END + PREDICATE_HASH_BYTES + POSITION_BYTES
"""The length of every ``statement_by_subject`` key."""


def subject_time_key(by_subject_key: bytes) -> bytes:
    """The ``statement_by_subject_time`` key of the statement a ``statement_by_subject``
    key names: the same key without its predicate hash."""
    if len(by_subject_key) != BY_SUBJECT_KEY_BYTES:
        raise ValueError(
            f"a statement_by_subject key has {BY_SUBJECT_KEY_BYTES} bytes, not "
            f"{len(by_subject_key)}: {by_subject_key.hex()}"
        )
    return by_subject_key[:_SUBJECT_END] + by_subject_key[_SUBJECT_END + PREDICATE_HASH_BYTES :]


def position_time(position: bytes) -> int:
    """The record time a position (``u64 recorded_at ‖ id``) begins with."""
    return int.from_bytes(position[:RECORD_TIME_BYTES], "big")
