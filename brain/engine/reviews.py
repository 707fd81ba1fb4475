"""REVIEW_LIST and REVIEW_DECIDE: the decisions the database leaves to a person.

A ``contradiction`` item names the current statements of a subject and
predicate that disagree, the newest last. Its decisions:

- ``keep_both``: both stay current;
- ``supersede``: the newest supersedes each of the others still current (their
  validity is closed by its ``valid_from`` as for any supersession);
- ``reject_new``: the newest is tombstoned.

``merge`` and ``distinct`` decide ``ambiguous_entity`` items and are
refused for contradictions. Every decision is a write with its own record
time and an audit entry; a decided item cannot be decided again.
"""

from __future__ import annotations

from typing import Final

from brain.engine import statements
from brain.engine.audit import audit_entry
from brain.engine.plan import Change, Delete, Put
from brain.engine.reads import ReadContext
from brain.engine.review_queue import OPEN, REVIEWS
from brain.engine.scope import SCOPE_PREFIX_BYTES, Scope
from brain.engine.writer import PlanContext
from brain.errors import Conflict, InvalidArgument, NotFound
from brain.wire import cbor
from brain.wire.messages.review_ops import (
    ReviewDecide,
    ReviewDecided,
    ReviewItem,
    ReviewList,
    ReviewListOk,
)

__all__ = ["plan_review_decide", "read_review_list"]

DEFAULT_REVIEW_LIMIT: Final = 100
"""Items REVIEW_LIST answers when it names no limit."""

_CONTRADICTION_DECISIONS: Final = frozenset({"keep_both", "supersede", "reject_new"})


def read_review_list(ctx: ReadContext, scope: Scope, request: ReviewList) -> ReviewListOk:
    """REVIEW_LIST: open items, oldest first."""
    limit = DEFAULT_REVIEW_LIMIT if request.limit is None else request.limit
    prefix = scope.key()
    cursor = ctx.txn.cursor(db=ctx.store.table(OPEN))
    items: list[ReviewItem] = []
    if cursor.set_range(prefix):
        for key, _ in cursor:
            raw = bytes(key)
            if not raw.startswith(prefix) or len(items) >= limit:
                break
            review_id = raw[SCOPE_PREFIX_BYTES + 8 :]
            row = _row(ctx.txn.get(scope.key(review_id), db=ctx.store.table(REVIEWS)))
            records = row["records"]
            assert isinstance(records, list)
            items.append(
                ReviewItem(
                    review_id=review_id,
                    kind=str(row["kind"]),
                    records=tuple(bytes(r) for r in records if isinstance(r, bytes)),
                    created_at=int(str(row["created_at"])),
                )
            )
    return ReviewListOk(items=tuple(items))


def _row(raw: object) -> dict[str, object]:
    assert isinstance(raw, bytes | memoryview)
    row = cbor.decode(bytes(raw))
    assert isinstance(row, dict)
    return {str(k): v for k, v in row.items()}


def plan_review_decide(
    ctx: PlanContext, scope: Scope, request: ReviewDecide
) -> tuple[list[Change], ReviewDecided]:
    """REVIEW_DECIDE."""
    raw = ctx.txn.get(scope.key(request.review_id), db=ctx.store.table(REVIEWS))
    if raw is None:
        raise NotFound(f"no review item {request.review_id.hex()}", field="review_id")
    row = _row(raw)
    if row["status"] != "open":
        raise Conflict(
            f"review item {request.review_id.hex()} is already decided", field="review_id"
        )
    if row["kind"] != "contradiction" or request.decision not in _CONTRADICTION_DECISIONS:
        raise InvalidArgument(
            f"{request.decision!r} does not decide a {row['kind']} item", field="decision"
        )
    records = row["records"]
    assert isinstance(records, list)
    ids = [bytes(r) for r in records if isinstance(r, bytes)]
    newest = statements.load(ctx, scope, ids[-1], "review_id")
    changes: list[Change] = []
    if request.decision == "supersede":
        if not newest.current:
            raise Conflict(
                "the newest statement of the item is no longer current", field="review_id"
            )
        valid_from = newest.int_field("valid_from")
        linked = None
        for other_id in ids[:-1]:
            other = statements.load(ctx, scope, other_id, "review_id")
            if other.current:
                changes += statements.superseded_changes(ctx, scope, other, newest.id, valid_from)
                linked = other.id
        if linked is not None:
            state = dict(newest.state)
            state["supersedes"] = linked
            changes.append(Put(statements.STATE, scope.key(newest.id), cbor.encode(state)))
    elif request.decision == "reject_new" and "tombstoned_at" not in newest.state:
        changes += statements.tombstone_changes(ctx, scope, newest, "user_request")
    created = row["created_at"]
    assert isinstance(created, int)
    decided = {
        **row,
        "status": "decided",
        "decision": request.decision,
        "decided_at": ctx.record_time,
    }
    changes += [
        Put(REVIEWS, scope.key(request.review_id), cbor.encode(decided)),
        Delete(OPEN, scope.key(created.to_bytes(8, "big"), request.review_id)),
        audit_entry(ctx, scope, f"review_{request.decision}", [request.review_id, *ids]),
    ]
    return changes, ReviewDecided(lsn=ctx.lsn)
