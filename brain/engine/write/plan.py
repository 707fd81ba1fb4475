"""Plans: the exact changes one write makes, as a value the WAL can carry.

The planner turns a validated request into a :class:`Plan` after its checks
(scope, idempotency, budget, preconditions). A plan is physical: a list of
puts and deletes on named tables, plus the encoded answer. The WAL logs it as
one record; applying it to LMDB is the same code path live and during
recovery, so a replayed write lands byte for byte as the original did.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

import lmdb

from brain import cbor
from brain.engine.store.env import Store
from brain.errors import InvalidArgument, StorageFault

__all__ = [
    "COUNTER_BYTES",
    "PLAN_RECORD_KIND",
    "Add",
    "Change",
    "Delete",
    "Plan",
    "Put",
    "apply_changes",
    "decode_plan",
    "encode_plan",
    "read_counter",
]

PLAN_RECORD_KIND: Final = 1
"""WAL record type of a plan (a single write, or a committed transaction)."""

_PUT: Final = 1
_DELETE: Final = 2
_ADD: Final = 3

COUNTER_BYTES: Final = 8
"""A counter :class:`Add` changes: a signed 64-bit big-endian integer."""


@dataclass(frozen=True, slots=True)
class Put:
    """Store ``value`` under ``key`` in ``table``."""

    table: bytes
    key: bytes
    value: bytes


@dataclass(frozen=True, slots=True)
class Delete:
    """Remove ``key`` from ``table`` (absent is fine: replay must be idempotent)."""

    table: bytes
    key: bytes


@dataclass(frozen=True, slots=True)
class Add:
    """Add ``delta`` to the counter under ``key`` in ``table`` (absent counts as 0).

    Read and written when applied, so several adds to one counter in one plan (or
    one batch) compose, where puts computed at planning time would overwrite each
    other. Replay applies each logged record exactly once, so the sum is exact."""

    table: bytes
    key: bytes
    delta: int


Change = Put | Delete | Add


def read_counter(raw: bytes | None) -> int:
    """The value of a counter row (0 when absent)."""
    return 0 if raw is None else int.from_bytes(raw, "big", signed=True)


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything one logged write does.

    ``answers`` holds the encoded answer payload of each request the record
    covers (one for a single write, one per write for a transaction); it is
    logged so that a replica or a subscriber can see the answers too.
    """

    changes: tuple[Change, ...]
    answers: tuple[bytes, ...]
    after: Callable[[], None] | None = field(default=None, compare=False)
    """Runs once the write is committed (never logged): in-memory side effects."""


def encode_plan(plan: Plan) -> bytes:
    """The WAL payload of a plan."""
    rows: list[object] = []
    for change in plan.changes:
        if isinstance(change, Put):
            rows.append([_PUT, change.table, change.key, change.value])
        elif isinstance(change, Add):
            rows.append([_ADD, change.table, change.key, change.delta])
        else:
            rows.append([_DELETE, change.table, change.key])
    return cbor.encode({"changes": rows, "answers": list(plan.answers)})


def decode_plan(payload: bytes) -> Plan:
    """Invert :func:`encode_plan`; a malformed payload is a storage fault."""
    try:
        body = cbor.decode_stored(payload)
    except InvalidArgument as exc:
        raise StorageFault(f"a logged plan is not valid CBOR: {exc}") from exc
    if not isinstance(body, dict):
        raise StorageFault("a logged plan is not a map")
    rows, answers = body.get("changes"), body.get("answers")
    if not isinstance(rows, list) or not isinstance(answers, list):
        raise StorageFault("a logged plan lacks its changes or answers")
    changes = [_decode_change(row) for row in rows]
    if not all(isinstance(a, bytes) for a in answers):
        raise StorageFault("a logged plan has an answer that is not bytes")
    return Plan(tuple(changes), tuple(a for a in answers if isinstance(a, bytes)))


def _decode_change(row: object) -> Change:
    if isinstance(row, list) and len(row) == 4 and row[0] == _PUT:
        table, key, value = row[1], row[2], row[3]
        if isinstance(table, bytes) and isinstance(key, bytes) and isinstance(value, bytes):
            return Put(table, key, value)
    if isinstance(row, list) and len(row) == 4 and row[0] == _ADD:
        table, key, delta = row[1], row[2], row[3]
        if isinstance(table, bytes) and isinstance(key, bytes) and isinstance(delta, int):
            return Add(table, key, delta)
    if isinstance(row, list) and len(row) == 3 and row[0] == _DELETE:
        table, key = row[1], row[2]
        if isinstance(table, bytes) and isinstance(key, bytes):
            return Delete(table, key)
    raise StorageFault(f"a logged plan holds a malformed change: {row!r:.80}")


def apply_changes(store: Store, txn: lmdb.Transaction, changes: Sequence[Change]) -> None:
    """Apply changes inside ``txn``; may raise ``lmdb.MapFullError``."""
    # Every write applies a few dozen changes, so the loop is kept lean: one dict
    # lookup finds a table's handle and refuses an unknown one, and puts (most
    # changes) are tested for first.
    tables = store.tables
    put = txn.put
    for change in changes:
        db = tables.get(change.table)
        if db is None:
            raise StorageFault(f"a plan names the unknown table {change.table!r}")
        if isinstance(change, Put):
            put(change.key, change.value, db=db)
        elif isinstance(change, Add):
            raw = txn.get(change.key, db=db)
            value = read_counter(None if raw is None else bytes(raw)) + change.delta
            txn.put(change.key, value.to_bytes(COUNTER_BYTES, "big", signed=True), db=db)
        else:
            txn.delete(change.key, db=db)
