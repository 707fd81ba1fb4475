"""Entities on the record axis (spec/02-data-model.md §4.7).

An entity's row, the name index and the absorbed-key index are edited in place:
they answer what is believed now. Beside each, a history keyed by record time
says what was believed at any earlier instant:

- ``entity_versions``: ``S ‖ entity_id ‖ u64 recorded_at`` -> the row from then on,
  until the next version's ``recorded_at`` (its ``record_invalidated_at``);
- ``entity_name_events`` and ``entity_absorbed_events``: the index key followed by
  ``u64 recorded_at`` -> :data:`HELD` or :data:`DROPPED`: the index held the key
  from then on, or no longer held it.

They are derived from a write's own changes (:func:`history_entries`), with the
write's record time, so every path that changes an entity (ENTITY_* opcodes, a
name that creates an entity, merges, unmerges, review decisions) leaves its
version, logged and replayed with the write. A change to the same key twice in
one plan (a transaction touching an entity twice, at one record time) keeps the
last: the state the commit left.

This module reads and writes raw bytes only; the rows are decoded by
:mod:`brain.engine.records.entity_rows`, which builds on it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Final

import lmdb

from brain.engine.store.env import Store
from brain.engine.store.scan import scan
from brain.engine.store.tables import (
    ENTITIES,
    ENTITY_ABSORBED,
    ENTITY_ABSORBED_EVENTS,
    ENTITY_BY_NAME,
    ENTITY_NAME_EVENTS,
    ENTITY_VERSIONS,
)
from brain.engine.write.plan import Change, Delete, Put

__all__ = [
    "DROPPED",
    "HELD",
    "TIME_BYTES",
    "held_at",
    "history_entries",
    "interval_at",
    "members_at",
    "version_at",
    "versions",
]

HELD: Final = b"\x01"
"""An index event: the index holds the key from this record time on."""

DROPPED: Final = b"\x00"
"""An index event: the index no longer holds the key from this record time on."""

TIME_BYTES: Final = 8
"""Every history key ends with the record time, big-endian, so a key's events sort by time."""

_EVENTS: Final = {ENTITY_BY_NAME: ENTITY_NAME_EVENTS, ENTITY_ABSORBED: ENTITY_ABSORBED_EVENTS}

_LAST_TIME: Final = (1 << (8 * TIME_BYTES)) - 1


def _stamp(recorded_at: int) -> bytes:
    return recorded_at.to_bytes(TIME_BYTES, "big")


def history_entries(changes: Sequence[Change], recorded_at: int) -> list[Change]:
    """The history puts that record ``changes`` (a write's own) at ``recorded_at``."""
    entries: list[Change] = []
    stamp = _stamp(recorded_at)
    for change in changes:
        if change.table == ENTITIES and isinstance(change, Put):
            entries.append(Put(ENTITY_VERSIONS, change.key + stamp, change.value))
            continue
        events = _EVENTS.get(change.table)
        if events is not None and isinstance(change, Put | Delete):
            state = HELD if isinstance(change, Put) else DROPPED
            entries.append(Put(events, change.key + stamp, state))
    return entries


def _last_at(
    store: Store, txn: lmdb.Transaction, table: bytes, key: bytes, as_of: int
) -> bytes | None:
    """The value of the last ``key ‖ u64 t`` entry of ``table`` with ``t`` at or before
    ``as_of``; None when there is none."""
    if as_of < 0:
        return None
    cursor = txn.cursor(db=store.table(table))
    after = key + _stamp(min(as_of, _LAST_TIME - 1) + 1)
    moved = cursor.prev() if cursor.set_range(after) else cursor.last()
    if not moved:
        return None
    found = bytes(cursor.key())
    if len(found) != len(key) + TIME_BYTES or not found.startswith(key):
        return None
    return bytes(cursor.value())


def interval_at(
    store: Store, txn: lmdb.Transaction, row_key: bytes, as_of: int | None
) -> tuple[int, int | None] | None:
    """The record interval (``recorded_at``, ``record_invalidated_at``) of the version of
    the row under ``row_key`` believed at ``as_of`` (None: the last one); None when there
    is none. Two cursor steps, whatever the length of the row's history: a point read
    stays a few key lookups."""
    if as_of is not None and as_of < 0:
        return None
    cursor = txn.cursor(db=store.table(ENTITY_VERSIONS))
    bound = _LAST_TIME if as_of is None else min(as_of, _LAST_TIME - 1) + 1
    after = row_key + _stamp(bound)
    moved = cursor.prev() if cursor.set_range(after) else cursor.last()
    if not moved:
        return None
    found = bytes(cursor.key())
    if len(found) != len(row_key) + TIME_BYTES or not found.startswith(row_key):
        return None
    start = int.from_bytes(found[-TIME_BYTES:], "big")
    if not cursor.next():
        return start, None
    later = bytes(cursor.key())
    if len(later) != len(row_key) + TIME_BYTES or not later.startswith(row_key):
        return start, None
    return start, int.from_bytes(later[-TIME_BYTES:], "big")


def version_at(store: Store, txn: lmdb.Transaction, row_key: bytes, as_of: int) -> bytes | None:
    """The raw row stored under ``row_key`` (``S ‖ entity_id``) as believed at ``as_of``:
    its last version recorded at or before it; None before the first."""
    return _last_at(store, txn, ENTITY_VERSIONS, row_key, as_of)


def versions(store: Store, txn: lmdb.Transaction, row_key: bytes) -> Iterator[tuple[int, bytes]]:
    """``(recorded_at, raw row)`` of every version of the row under ``row_key``, oldest first."""
    for key, value in scan(txn, store.table(ENTITY_VERSIONS), row_key):
        if len(key) == len(row_key) + TIME_BYTES:
            yield int.from_bytes(key[-TIME_BYTES:], "big"), bytes(value)


def members_at(
    store: Store,
    txn: lmdb.Transaction,
    index: bytes,
    prefix: bytes,
    as_of: int,
    *,
    most: int | None = None,
) -> Iterator[bytes]:
    """The rest of every key of ``index`` (ENTITY_BY_NAME or ENTITY_ABSORBED) beginning
    with ``prefix`` that the index held at ``as_of``, in key order; with ``most``, from
    the first ``most`` events only (a bound on the work, as the caller's own)."""
    held: bytes | None = None
    member: bytes | None = None
    rows = scan(txn, store.table(_EVENTS[index]), prefix)
    for key, value in rows if most is None else itertools.islice(rows, most):
        this = key[len(prefix) : -TIME_BYTES]
        if this != member:
            if held is not None:
                yield held
            member, held = this, None
        if int.from_bytes(key[-TIME_BYTES:], "big") <= as_of:
            held = this if value == HELD else None
    if held is not None:
        yield held


def held_at(store: Store, txn: lmdb.Transaction, index: bytes, key: bytes, as_of: int) -> bool:
    """Whether ``index`` held ``key`` at ``as_of``: its last event at or before then."""
    return _last_at(store, txn, _EVENTS[index], key, as_of) == HELD
