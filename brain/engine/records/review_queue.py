"""Queueing review items (spec/02-data-model.md §7): what the database will not decide alone.

An item lives under ``scope ‖ review_id`` in ``reviews``; open items are also
indexed by ``scope ‖ created_at ‖ review_id`` in ``reviews_open`` so that
REVIEW_LIST answers the oldest first without scanning decided ones.
"""

from __future__ import annotations

import lmdb

from brain import cbor
from brain.engine.store.env import Store
from brain.engine.store.scope import Scope
from brain.engine.store.tables import REVIEWS, REVIEWS_OPEN
from brain.engine.write.plan import Change, Put
from brain.engine.write.writer import PlanContext

__all__ = ["open_key", "queue_review", "review_row"]


def review_row(
    store: Store, txn: lmdb.Transaction, scope: Scope, review_id: bytes
) -> dict[str, object] | None:
    """The stored item ``review_id`` of ``scope``, or None."""
    raw = txn.get(scope.key(review_id), db=store.table(REVIEWS))
    if raw is None:
        return None
    row = cbor.decode_stored(bytes(raw))
    assert isinstance(row, dict)
    return {str(k): v for k, v in row.items()}


def open_key(scope: Scope, created_at: int, review_id: bytes) -> bytes:
    """The ``reviews_open`` key of an open item created at ``created_at``."""
    return scope.key(created_at.to_bytes(8, "big"), review_id)


def queue_review(
    ctx: PlanContext,
    scope: Scope,
    kind: str,
    records: list[bytes],
    extra: dict[str, object] | None = None,
) -> tuple[bytes, list[Change]]:
    """Queue an open item of ``kind`` about ``records`` (with the ``extra`` fields its
    kind keeps); return its id and the changes."""
    review_id = ctx.ids.new()
    row: dict[str, object] = {
        **(extra or {}),
        "kind": kind,
        "records": records,
        "created_at": ctx.record_time,
        "status": "open",
    }
    return review_id, [
        Put(REVIEWS, scope.key(review_id), cbor.encode(row)),
        Put(REVIEWS_OPEN, open_key(scope, ctx.record_time, review_id), b""),
    ]
