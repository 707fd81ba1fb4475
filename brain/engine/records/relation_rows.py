"""How relations are stored: rows, index entries and the scans over them.

Every key is scope-prefixed. An *end key* is the subject key of
:mod:`brain.engine.records.refs` (a tag byte and the id).

- ``relations``: ``id`` → the content row, written once;
- ``relation_state``: ``id`` → what happened to it later, each a stamp with its
  record time: ``superseded_by``, ``record_invalidated_at``, ``tombstoned_at``,
  ``tombstone_reason`` (and the free-text ``tombstone_note`` of the request),
  and the validity close a supersession makes (``closed_valid_to`` learned at
  ``closed_at``);
- ``relation_by_from`` / ``relation_by_to``: ``end key ‖ type hash ‖
  recorded_at ‖ id`` for each end (LIST and TRAVERSE in either direction);
- ``relation_by_time``: ``recorded_at ‖ id`` (whole-space scans in record order);
- ``relation_current``: ``end marker ‖ end key ‖ type hash ‖ id`` for the
  relations neither superseded nor tombstoned, once per end (cardinality checks).

The semantics (chains, cardinality, the filter chain) live in
:mod:`brain.engine.records.relations`; this module only knows the layout.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

import lmdb

from brain import cbor
from brain.engine.records.filters import RowTimes, validity_at
from brain.engine.records.refs import SUBJECT_KEY_BYTES, answers_as, ref_of_key
from brain.engine.records.versioned import Versioned, load_versioned
from brain.engine.store.env import Store
from brain.engine.store.rows import load_row
from brain.engine.store.scan import scan_keys
from brain.engine.store.scope import Scope
from brain.engine.store.tables import (
    RELATION_BY_FROM,
    RELATION_BY_TIME,
    RELATION_BY_TO,
    RELATION_CURRENT,
    RELATION_STATE,
    RELATIONS,
)
from brain.engine.write.plan import Change, Delete, Put
from brain.wire.messages.records import Relation

__all__ = [
    "FROM_END",
    "TO_END",
    "LoadedRelation",
    "current_ids",
    "edges_of",
    "insert_changes",
    "load_relation",
    "load_row",
    "no_longer_current",
    "relation_message",
    "state_change",
]

FROM_END: Final = b"f"
"""Marks a ``relation_current`` key of the ``from`` end."""

TO_END: Final = b"t"
"""Marks a ``relation_current`` key of the ``to`` end."""

_TYPE_HASH_BYTES: Final = 8
"""Types are up to 1024 characters; index keys carry a hash, rows the text."""

_RECORDED_AT_BYTES: Final = 8
"""``recorded_at`` in keys: unsigned big-endian, so keys sort in record order."""

_DIRECTION_TABLES: Final = {
    "out": (RELATION_BY_FROM,),
    "in": (RELATION_BY_TO,),
    "both": (RELATION_BY_FROM, RELATION_BY_TO),
}
"""Which end index a direction scans."""

_OTHER_END: Final = {RELATION_BY_FROM: RELATION_BY_TO, RELATION_BY_TO: RELATION_BY_FROM}
"""The end index that finds a symmetric relation from its other end."""


def _type_hash(type_: str) -> bytes:
    return hashlib.sha256(type_.encode("utf-8")).digest()[:_TYPE_HASH_BYTES]


def _u64(value: int) -> bytes:
    return value.to_bytes(_RECORDED_AT_BYTES, "big")


@dataclass(frozen=True, slots=True)
class LoadedRelation(Versioned):
    """A relation's content row and state row, as read in one transaction."""

    @property
    def type_(self) -> str:
        """The relation type."""
        return str(self.content["type"])

    def end(self, name: str) -> bytes:
        """The end key of ``"from"`` or ``"to"``."""
        key = self.content[name]
        assert isinstance(key, bytes)
        return key

    def times(self) -> RowTimes:
        """What the filter chain judges the relation by."""
        confidence = self.content["confidence"]
        assert isinstance(confidence, int | float)
        return RowTimes(
            kind=None,
            predicate=self.type_,  # the type step of the chain matches relation types
            confidence=float(confidence),
            **self.record_axis(),  # type: ignore[arg-type]
        )


def load_relation(
    store: Store, txn: lmdb.Transaction, scope: Scope, relation_id: bytes, field: str
) -> LoadedRelation:
    """The relation ``relation_id`` of ``scope``; NOT_FOUND (on ``field``) otherwise."""
    row = load_versioned(
        store, txn, scope, (RELATIONS, RELATION_STATE), relation_id, what="relation", field=field
    )
    return LoadedRelation(row.id, row.content, row.state)


def _end_ref(
    store: Store, txn: lmdb.Transaction, scope: Scope, key: bytes, as_of: int | None
) -> object:
    """An end as an answer shows it: what its key answers as (at ``as_of``, else now)."""
    return ref_of_key(answers_as(store, txn, scope, key, as_of=as_of)).to_wire()


def relation_message(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    loaded: LoadedRelation,
    believed_at: int | None,
) -> Relation:
    """The relation as an answer shows it, with the validity believed at ``believed_at``
    (None: now); an end that was merged away or a decided name answers as the entity
    it became by then (spec/02-data-model.md §4, spec/03-time.md §6)."""
    c, s = loaded.content, loaded.state
    wire: dict[str, object] = {
        "id": loaded.id,
        "type": c["type"],
        "from": ref_of_key(
            answers_as(store, txn, scope, loaded.end("from"), as_of=believed_at)
        ).to_wire(),
        "to": ref_of_key(
            answers_as(store, txn, scope, loaded.end("to"), as_of=believed_at)
        ).to_wire(),
        "confidence": c["confidence"],
        "evidence": c["evidence"],
        "recorded_at": c["recorded_at"],
    }
    if "supersedes" in c:
        wire["supersedes"] = c["supersedes"]
    for key in ("superseded_by", "record_invalidated_at", "tombstoned_at"):
        if key in s:
            wire[key] = s[key]
    start, end = validity_at(loaded.times(), believed_at)
    if start is not None:
        wire["valid_from"] = start
    if end is not None:
        wire["valid_to"] = end
    return Relation.from_wire(wire)


def insert_changes(scope: Scope, relation_id: bytes, row: dict[str, object]) -> list[Change]:
    """The content row of a new relation and all its index entries (it starts current)."""
    from_key, to_key, type_, recorded = row["from"], row["to"], row["type"], row["recorded_at"]
    assert isinstance(from_key, bytes) and isinstance(to_key, bytes)
    assert isinstance(type_, str) and isinstance(recorded, int)
    th, at = _type_hash(type_), _u64(recorded)
    return [
        Put(RELATIONS, scope.key(relation_id), cbor.encode(row)),
        Put(RELATION_BY_FROM, scope.key(from_key, th, at, relation_id), b""),
        Put(RELATION_BY_TO, scope.key(to_key, th, at, relation_id), b""),
        Put(RELATION_BY_TIME, scope.key(at, relation_id), b""),
        Put(RELATION_CURRENT, scope.key(FROM_END, from_key, th, relation_id), b""),
        Put(RELATION_CURRENT, scope.key(TO_END, to_key, th, relation_id), b""),
    ]


def no_longer_current(scope: Scope, loaded: LoadedRelation) -> list[Change]:
    """Remove a superseded or tombstoned relation from the cardinality index."""
    th = _type_hash(loaded.type_)
    return [
        Delete(RELATION_CURRENT, scope.key(FROM_END, loaded.end("from"), th, loaded.id)),
        Delete(RELATION_CURRENT, scope.key(TO_END, loaded.end("to"), th, loaded.id)),
    ]


def state_change(scope: Scope, relation_id: bytes, state: dict[str, object]) -> Put:
    """Store a relation's state row (its stamps only grow)."""
    return Put(RELATION_STATE, scope.key(relation_id), cbor.encode(state))


def current_ids(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    *,
    marker: bytes,
    end_keys: Collection[bytes],
    type_: str,
) -> set[bytes]:
    """The ids of current relations of ``type_`` whose end ``marker`` is one of
    ``end_keys``."""
    found: set[bytes] = set()
    table = store.table(RELATION_CURRENT)
    for end_key in end_keys:
        prefix = scope.key(marker, end_key, _type_hash(type_))
        for key in scan_keys(txn, table, prefix):
            relation_id = key[len(prefix) :]
            # The hash is short: a colliding type is a different type.
            if load_relation(store, txn, scope, relation_id, "id").type_ == type_:
                found.add(relation_id)
    return found


def edges_of(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    end_keys: Collection[bytes],
    *,
    direction: str,
    types: Collection[str] | None,
    symmetric: Collection[str] = (),
) -> list[tuple[bytes, bytes]]:
    """``(recorded_at ‖ id, id)`` of every relation touching one of ``end_keys`` in
    ``direction`` (``out``, ``in`` or ``both``), of ``types`` (all when None), in record
    order; a relation seen from both ends appears once. The first item is the LIST
    cursor.

    A relation of a type in ``symmetric`` holds both ways, so ``out`` and ``in`` also
    find it from its other end: the other end index is scanned under those types'
    hashes only, which keeps the other types' edges out of that scan's reach."""
    prefixes = [
        scope.key(end_key, *([] if t is None else [_type_hash(t)]))
        for end_key in end_keys
        for t in ([None] if types is None else sorted(set(types)))
    ]
    tables = _DIRECTION_TABLES[direction]
    scans = [(table, prefixes) for table in tables]
    both_ways = set(symmetric) if types is None else set(symmetric) & set(types)
    if len(tables) == 1 and both_ways:
        reverse = [scope.key(k, _type_hash(t)) for k in end_keys for t in sorted(both_ways)]
        scans.append((_OTHER_END[tables[0]], reverse))
    # Every end key has the same length (a subject key), so the position starts at
    # the same offset under each prefix.
    skip = len(scope.key()) + SUBJECT_KEY_BYTES + _TYPE_HASH_BYTES
    found: set[tuple[bytes, bytes]] = set()
    for table, scanned in scans:
        for prefix in scanned:
            for key in scan_keys(txn, store.table(table), prefix):
                position = key[skip:]
                found.add((position, position[_RECORDED_AT_BYTES:]))
    return sorted(found)
