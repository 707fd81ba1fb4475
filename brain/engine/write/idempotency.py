"""Idempotency (spec/05-durability.md §7): a repeated write returns its first answer.

The table maps ``scope ‖ request_id`` to the SHA-256 of the canonical request
and the encoded answer. Its row is one of the plan's own changes, so it is
logged and applied with the write it describes: after a crash, replay
recreates both or neither. A repeat with the same content gets the stored
answer bytes unchanged; with other content, ``IDEMPOTENCY_CONFLICT``.
Rows live at least the retention (24 h by default, ``server.idempotency_retention_s``);
the sweep then drops the answer and leaves a mark, so a retry later than the
retention is refused instead of being done twice. A mark goes :data:`MARK_SPAN_NS`
after its answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import lmdb

from brain import cbor
from brain.engine.store.env import Store
from brain.engine.store.scope import DEFAULT_SPACE, SCOPE_PREFIX_BYTES, Scope
from brain.engine.store.tables import IDEMPOTENCY, IDEMPOTENCY_BY_TIME, IDEMPOTENCY_MARKS
from brain.engine.write.plan import Change, Put
from brain.engine.write.tuning import DEFAULT_RETENTION_NS
from brain.errors import IdempotencyConflict
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = [
    "DEFAULT_RETENTION_NS",
    "MARK_SPAN_NS",
    "Swept",
    "lookup",
    "request_digest",
    "row_changes",
    "sweep",
]

MARK_SPAN_NS: Final = 30 * 24 * 3600 * 10**9
"""A mark outlives its answer by 30 days: a mark is about 120 bytes per write, so
keeping one forever would grow the store with every write, and a client sending a
request_id a month after its answer expired is not retrying: it gets a new write."""

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
    """The stored answer for a repeat of this request, or None for a new request.

    A request_id whose answer the sweep dropped is refused whatever the request: the
    database cannot tell whether the late retry is the same write, and doing it twice
    is the one thing idempotency exists to prevent.
    """
    raw = txn.get(scope.key(request_id), db=store.table(IDEMPOTENCY))
    if raw is None:
        return None
    row = cbor.decode_stored(raw)
    assert isinstance(row, dict)
    if "hash" not in row:
        raise IdempotencyConflict(
            f"request_id {request_id.hex()} was answered longer ago than the idempotency"
            " retention and its answer is no longer kept; send a new request_id",
            field="request_id",
        )
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


@dataclass(frozen=True, slots=True)
class Swept:
    """What one sweep did: answers dropped to marks, and marks removed."""

    marked: int
    removed: int


def sweep(store: Store, older_than: int, marks_older_than: int | None = None) -> Swept:
    """Drop the answers recorded before ``older_than`` to marks, and remove the marks
    recorded before ``marks_older_than`` (None keeps every mark).

    The sweep writes LMDB directly, outside the log: it runs just before a checkpoint,
    which makes it durable, and losing it to a crash only keeps rows a little longer.
    """
    answers, marks = store.table(IDEMPOTENCY), store.table(IDEMPOTENCY_MARKS)

    def to_mark(txn: lmdb.Transaction, prefix: bytes, stamp: int, request_id: bytes) -> None:
        txn.put(prefix + request_id, cbor.encode({"recorded_at": stamp}), db=answers)
        txn.put(prefix + stamp.to_bytes(8, "big") + request_id, b"", db=marks)

    def remove(txn: lmdb.Transaction, prefix: bytes, stamp: int, request_id: bytes) -> None:
        del stamp
        txn.delete(prefix + request_id, db=answers)

    marked = _expire(store, IDEMPOTENCY_BY_TIME, older_than, to_mark)
    removed = 0
    if marks_older_than is not None:
        removed = _expire(store, IDEMPOTENCY_MARKS, marks_older_than, remove)
    return Swept(marked=marked, removed=removed)


def _expire(
    store: Store,
    index: bytes,
    older_than: int,
    action: Callable[[lmdb.Transaction, bytes, int, bytes], None],
) -> int:
    """Apply ``action`` to every entry of the time-ordered ``index`` stamped before
    ``older_than``, deleting the entry; return how many there were.

    Visits each scope's range from its oldest entry and stops at the first young one,
    then skips to the next scope: the work is proportional to the scopes plus the
    entries expired, not to the table.
    """
    done = 0
    table = store.table(index)
    position: bytes | None = b""
    while position is not None:
        with store.env.begin(write=True) as txn:
            cursor = txn.cursor(db=table)
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
                action(txn, prefix, stamp, key[SCOPE_PREFIX_BYTES + 8 :])
                cursor.delete()
                batch += 1
                position = key
        done += batch
    return done
