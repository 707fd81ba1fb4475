"""Idempotency (WIRE.md §5, DURABILITY.md §4): a repeated write returns its first answer.

The table maps ``scope ‖ request_id`` to the SHA-256 of the canonical request
and the encoded answer. Its row is one of the plan's own changes, so it is
logged and applied with the write it describes: after a crash, replay
recreates both or neither. A repeat with the same content gets the stored
answer bytes unchanged; with other content, ``IDEMPOTENCY_CONFLICT``.
Rows live at least the retention (24 h by default) and are swept after.
"""

from __future__ import annotations

import hashlib
from typing import Final

import lmdb

from brain.engine.plan import Change, Put
from brain.engine.scope import Scope
from brain.engine.store.env import Store
from brain.errors import IdempotencyConflict
from brain.wire import cbor
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = [
    "DEFAULT_RETENTION_NS",
    "lookup",
    "request_digest",
    "row_changes",
    "sweep",
]

DEFAULT_RETENTION_NS: Final = 24 * 3600 * 10**9
"""Rows are kept at least 24 h (WIRE.md §5); a client retrying later than that
may get a second copy, which is why the window is generous."""

SWEEP_BATCH: Final = 10_000
"""Rows deleted per sweep transaction, so a sweep never holds the writer long."""

_TABLE: Final = b"idempotency"
_BY_TIME: Final = b"idempotency_by_time"


def request_digest(opcode: Opcode, request: Message) -> bytes:
    """SHA-256 of the opcode and the canonical encoding of the request.

    ``txn_id`` is left out: a client that lost a commit's answer redoes the same
    writes in a new transaction, and they must count as the same requests.
    """
    wire = request.to_wire()
    wire.pop("txn_id", None)
    body = cbor.encode(wire)
    return hashlib.sha256(int(opcode).to_bytes(2, "big") + body).digest()


def lookup(
    store: Store, txn: lmdb.Transaction, scope: Scope, request_id: bytes, digest: bytes
) -> bytes | None:
    """The stored answer for a repeat of this request, or None for a new request."""
    raw = txn.get(scope.key(request_id), db=store.table(_TABLE))
    if raw is None:
        return None
    row = cbor.decode(bytes(raw))
    assert isinstance(row, dict)
    if row["hash"] != digest:
        raise IdempotencyConflict(
            f"request_id {request_id.hex()} was already used for a different request",
            field="request_id",
        )
    answer = row["answer"]
    assert isinstance(answer, bytes)
    return answer


def row_changes(
    scope: Scope, request_id: bytes, digest: bytes, answer: bytes, recorded_at: int
) -> list[Change]:
    """The changes that remember this request's answer."""
    row = cbor.encode({"hash": digest, "answer": answer, "recorded_at": recorded_at})
    return [
        Put(_TABLE, scope.key(request_id), row),
        Put(_BY_TIME, recorded_at.to_bytes(8, "big") + scope.key(request_id), b""),
    ]


def sweep(store: Store, older_than: int) -> int:
    """Delete rows recorded before ``older_than``; return how many went."""
    removed = 0
    by_time, table = store.table(_BY_TIME), store.table(_TABLE)
    while True:
        with store.env.begin(write=True) as txn:
            cursor = txn.cursor(db=by_time)
            batch = 0
            if cursor.first():
                while batch < SWEEP_BATCH:
                    key = bytes(cursor.key())
                    if int.from_bytes(key[:8], "big") >= older_than:
                        break
                    txn.delete(key[8:], db=table)
                    cursor.delete()
                    batch += 1
                    if not cursor.key():
                        break
        removed += batch
        if batch < SWEEP_BATCH:
            return removed
