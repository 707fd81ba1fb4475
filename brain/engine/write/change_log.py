"""The change log: which write changed which record, for SUBSCRIBE (spec/02-data-model.md §10).

Every logged write that creates or changes a memory, entity, statement or
relation adds one entry per record to ``change_log``, in its own transaction,
keyed ``S ‖ u64 lsn ‖ record tag ‖ record id`` (``S`` the record's scope
prefix): a subscription is a range scan of its own scope from an LSN on, with
no gap and no duplicate by construction, and it survives restarts and WAL
checkpoints. The value is CBOR ``[op, record, recorded_at]``.

The entries are derived from the write's physical changes and the state before
them, so no planner has to remember to announce what it did:

- a put of a content row (``memories``, ``entities``, ``statements``,
  ``relations``) whose key did not exist is ``create``;
- any other put or delete of a record's rows (``statement_state``,
  ``relation_state`` and the content rows) takes the verb of the write's
  opcode (:data:`VERBS`: ``supersede``, ``tombstone``, ``retract``, ``forget``,
  ``update``, ``merge``, ``unmerge``, ``review``), ``update`` by default;
  a hard FORGET retracts the statements it cascades to, a soft one tombstones them;
- one entry per record per write, ``create`` winning over any other verb.

Writes that change no such record (SCHEMA_PUT, the indexer's vector writes)
leave no entry. Entries hold ids and verbs, never text.
"""

from __future__ import annotations

from typing import Final

import lmdb

from brain import cbor
from brain.engine.store.env import Store
from brain.engine.store.scan import scan
from brain.engine.store.scope import SCOPE_PREFIX_BYTES, Scope
from brain.engine.store.tables import (
    CHANGE_LOG,
    ENTITIES,
    MEMORIES,
    RELATION_STATE,
    RELATIONS,
    STATEMENT_STATE,
    STATEMENTS,
)
from brain.engine.write.plan import Change, Put
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = ["VERBS", "LoggedChange", "change_entries", "read_changes"]

_CONTENT: Final = {
    MEMORIES: "memory",
    ENTITIES: "entity",
    STATEMENTS: "statement",
    RELATIONS: "relation",
}
_STATE: Final = {STATEMENT_STATE: "statement", RELATION_STATE: "relation"}
_TAGS: Final = {"memory": b"m", "entity": b"e", "statement": b"s", "relation": b"r"}
_RECORDS: Final = {tag: record for record, tag in _TAGS.items()}
_ID_BYTES: Final = 16
_KEY_TAIL: Final = 8 + 1 + _ID_BYTES

VERBS: Final = {
    Opcode.STATEMENT_CREATE: "supersede",  # a stateful predicate's old value
    Opcode.STATEMENT_SUPERSEDE: "supersede",
    Opcode.STATEMENT_TOMBSTONE: "tombstone",
    Opcode.STATEMENT_RETRACT: "retract",
    Opcode.ENTITY_UPDATE: "update",
    Opcode.ENTITY_MERGE: "merge",
    Opcode.ENTITY_UNMERGE: "unmerge",
    Opcode.ENTITY_TOMBSTONE: "tombstone",
    Opcode.RELATION_CREATE: "supersede",  # a constrained cardinality's old edge
    Opcode.RELATION_SUPERSEDE: "supersede",
    Opcode.RELATION_TOMBSTONE: "tombstone",
    Opcode.REVIEW_DECIDE: "review",
}
"""The verb of a record a write changed but did not create, by the write's opcode."""


class LoggedChange:
    """One entry of the change log as read back."""

    __slots__ = ("id", "lsn", "op", "record", "recorded_at")

    def __init__(self, lsn: int, op: str, record: str, record_id: bytes, recorded_at: int) -> None:
        self.lsn = lsn
        self.op = op
        self.record = record
        self.id = record_id
        self.recorded_at = recorded_at


def _verb(opcode: Opcode, request: Message, record: str) -> str:
    if opcode is Opcode.FORGET:
        if record == "memory":
            return "forget"
        return "retract" if getattr(request, "mode", None) == "hard" else "tombstone"
    return VERBS.get(opcode, "update")


def _op_of(raw: bytes) -> str:
    value = cbor.decode_stored(raw)
    assert isinstance(value, list) and value
    return str(value[0])


def change_entries(
    store: Store,
    txn: lmdb.Transaction,
    changes: list[Change],
    *,
    opcode: Opcode,
    request: Message,
    lsn: int,
    recorded_at: int,
) -> list[Change]:
    """The change-log puts for a write's ``changes``; ``txn`` holds the state before them."""
    found: dict[bytes, str] = {}
    for change in changes:
        record = _CONTENT.get(change.table) or _STATE.get(change.table)
        if record is None or len(change.key) != SCOPE_PREFIX_BYTES + _ID_BYTES:
            continue
        key = change.key[:SCOPE_PREFIX_BYTES] + _TAGS[record] + change.key[SCOPE_PREFIX_BYTES:]
        new = (
            isinstance(change, Put)
            and change.table in _CONTENT
            and txn.get(change.key, db=store.table(change.table)) is None
        )
        op = "create" if new else _verb(opcode, request, record)
        if found.get(key) != "create":
            found[key] = op
    entries: list[Change] = []
    log = store.table(CHANGE_LOG)
    for key, op in found.items():
        prefix, tail = key[:SCOPE_PREFIX_BYTES], key[SCOPE_PREFIX_BYTES:]
        entry_key = prefix + lsn.to_bytes(8, "big") + tail
        earlier = txn.get(entry_key, db=log)
        if earlier is not None and _op_of(bytes(earlier)) == "create":
            continue  # created by an earlier write of the same transaction
        record = _RECORDS[tail[:1]]
        value = cbor.encode([op, record, recorded_at])
        entries.append(Put(CHANGE_LOG, entry_key, value))
    return entries


def read_changes(
    store: Store, txn: lmdb.Transaction, scope: Scope, after: bytes, limit: int
) -> list[tuple[bytes, LoggedChange]]:
    """Up to ``limit`` entries of ``scope`` whose key tail (``u64 lsn ‖ tag ‖ id``) is
    greater than ``after`` (``b""``: from the start), in log order, each with its tail."""
    prefix = scope.key()
    found: list[tuple[bytes, LoggedChange]] = []
    for key, raw_value in scan(txn, store.table(CHANGE_LOG), prefix, start=prefix + after):
        if len(found) >= limit:
            break
        tail = key[len(prefix) :]
        if tail <= after or len(tail) != _KEY_TAIL:
            continue
        value = cbor.decode_stored(raw_value)
        assert isinstance(value, list) and len(value) == 3
        op, record, recorded_at = value
        assert isinstance(op, str) and isinstance(record, str) and isinstance(recorded_at, int)
        lsn = int.from_bytes(tail[:8], "big")
        found.append((tail, LoggedChange(lsn, op, record, tail[9:], recorded_at)))
    return found
