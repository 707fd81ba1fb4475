"""Idempotency (spec/05-durability.md §7): a repeated write returns its first answer.

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

from brain import cbor
from brain.engine.store.env import Store
from brain.engine.store.scope import DEFAULT_SPACE, SCOPE_PREFIX_BYTES, Scope
from brain.engine.store.tables import IDEMPOTENCY, IDEMPOTENCY_BY_TIME
from brain.engine.write.plan import Change, Put
from brain.errors import IdempotencyConflict
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
"""Rows are kept at least 24 h (spec/01-wire.md §4); a client retrying later than that
may get a second copy, which is why the window is generous."""

SWEEP_BATCH: Final = 10_000
"""Rows deleted per sweep transaction, so a sweep never holds the writer long."""


def request_digest(opcode: Opcode, request: Message) -> bytes:
    """SHA-256 of the opcode and the canonical encoding of the request.

    ``txn_id`` is left out: a client that lost a commit's answer redoes the same
    writes in a new transaction, and they must count as the same requests.
    """
    wire = request.to_wire()
    wire.pop("txn_id", None)
    # An absent space is the default space: both spellings are the same request.
    wire.setdefault("space", DEFAULT_SPACE)
    body = cbor.encode(wire)
    return hashlib.sha256(int(opcode).to_bytes(2, "big") + body).digest()


def lookup(
    store: Store, txn: lmdb.Transaction, scope: Scope, request_id: bytes, digest: bytes
) -> bytes | None:
    """The stored answer for a repeat of this request, or None for a new request."""
    raw = txn.get(scope.key(request_id), db=store.table(IDEMPOTENCY))
    if raw is None:
        return None
    row = cbor.decode_stored(raw)
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
        Put(IDEMPOTENCY, scope.key(request_id), row),
        # scope ‖ recorded_at ‖ request_id: scoped like every key, time-ordered per scope.
        Put(IDEMPOTENCY_BY_TIME, scope.key(recorded_at.to_bytes(8, "big"), request_id), b""),
    ]


def _next_prefix(prefix: bytes) -> bytes | None:
    """The smallest key above every key that starts with ``prefix``."""
    value = int.from_bytes(prefix, "big") + 1
    if value >> (8 * len(prefix)):
        return None
    return value.to_bytes(len(prefix), "big")


def sweep(store: Store, older_than: int) -> int:
    """Delete rows recorded before ``older_than``; return how many went.

    Visits each scope's time-ordered range from its oldest row and stops at the
    first young one, then skips to the next scope: the work is proportional to
    the scopes plus the rows removed, not to the table.
    """
    removed = 0
    by_time, table = store.table(IDEMPOTENCY_BY_TIME), store.table(IDEMPOTENCY)
    position: bytes | None = b""
    while position is not None:
        with store.env.begin(write=True) as txn:
            cursor = txn.cursor(db=by_time)
            batch = 0
            while position is not None and batch < SWEEP_BATCH:
                if not cursor.set_range(position):
                    position = None
                    break
                key = bytes(cursor.key())
                prefix = key[:SCOPE_PREFIX_BYTES]
                stamp = int.from_bytes(key[SCOPE_PREFIX_BYTES : SCOPE_PREFIX_BYTES + 8], "big")
                if stamp >= older_than:
                    position = _next_prefix(prefix)
                    continue
                txn.delete(prefix + key[SCOPE_PREFIX_BYTES + 8 :], db=table)
                cursor.delete()
                batch += 1
                position = key
        removed += batch
    return removed
