"""Queueing review items (SEMANTICS.md §3, §7): what the database will not decide alone.

An item lives under ``scope ‖ review_id`` in ``reviews``; open items are also
indexed by ``scope ‖ created_at ‖ review_id`` in ``reviews_open`` so that
REVIEW_LIST answers the oldest first without scanning decided ones.
"""

from __future__ import annotations

from typing import Final

from brain.engine.plan import Change, Put
from brain.engine.scope import Scope
from brain.engine.writer import PlanContext
from brain.wire import cbor

__all__ = ["OPEN", "REVIEWS", "queue_review"]

REVIEWS: Final = b"reviews"
OPEN: Final = b"reviews_open"


def queue_review(
    ctx: PlanContext, scope: Scope, kind: str, records: list[bytes]
) -> tuple[bytes, list[Change]]:
    """Queue an open item of ``kind`` about ``records``; return its id and the changes."""
    review_id = ctx.ids.new()
    row = {"kind": kind, "records": records, "created_at": ctx.record_time, "status": "open"}
    return review_id, [
        Put(REVIEWS, scope.key(review_id), cbor.encode(row)),
        Put(OPEN, scope.key(ctx.record_time.to_bytes(8, "big"), review_id), b""),
    ]
