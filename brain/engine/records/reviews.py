"""REVIEW_LIST and REVIEW_DECIDE: the decisions the database leaves to a person.

A ``contradiction`` item names the current statements of a subject and
predicate that disagree, the newest last. Its decisions:

- ``keep_both``: both stay current;
- ``supersede``: the newest supersedes each of the others still current (their
  validity is closed by its ``valid_from`` as for any supersession) and becomes
  the next version of the one of them recorded last, so one chain, and the
  history of either, holds both (its state row records the chain it joined,
  its content row being written once);
- ``reject_new``: the newest is tombstoned.

An ``ambiguous_entity`` item is a name that writes used while it tied between
entities (:mod:`brain.engine.records.refs`). REVIEW_LIST shows its ``name`` (and
``type``) and, as ``records``, the tied candidates (best first), then the
statements and relations waiting on it (at most :data:`MAX_WAITING_SHOWN`).
Its decisions:

- ``merge`` with ``into`` one of the candidates: the name means that entity
  (followed through merges, so the one it answers as now, which must be live).
  The name becomes its alias unless it already answers to it; the other
  candidates are left alone, for a person who says "this name means X" has
  said nothing about whether the others are X too (ENTITY_MERGE says that);
- ``distinct``: the name is a thing of its own: a new entity with that name
  (and type) is created, and the candidates are left alone.

Either way the waiting records answer from then on as the chosen entity
(their stored subject stays the pending key, so history is not rewritten), the
graph arm sees them, and later writes naming it resolve to that entity by
name or alias. A decision for the other kind is INVALID_ARGUMENT, and so is
``into`` missing from a ``merge``, naming no candidate, or given with any other
decision. Every decision is a write with its own record time and an audit
entry; a decided item cannot be decided again (CONFLICT).
"""

from __future__ import annotations

from typing import Final

from brain import cbor
from brain.engine.records import statements
from brain.engine.records.audit import audit_entry
from brain.engine.records.entity_rows import (
    aliases_of,
    canonical_entity,
    entity_row,
    index_changes,
    index_names,
    is_live,
    new_row,
    normalise_name,
    row_change,
)
from brain.engine.records.refs import PENDING_TAG, absorb, pending_name_key
from brain.engine.records.relation_rows import edges_of
from brain.engine.records.review_queue import open_key, review_row
from brain.engine.records.statement_reads import scan_ids
from brain.engine.records.versioned import Versioned
from brain.engine.store.scan import scan_keys
from brain.engine.store.scope import SCOPE_PREFIX_BYTES, Scope
from brain.engine.store.tables import REVIEWS, REVIEWS_BY_NAME, REVIEWS_OPEN
from brain.engine.write.plan import Change, Delete, Put
from brain.engine.write.reads import ReadContext
from brain.engine.write.writer import PlanContext
from brain.errors import Conflict, InvalidArgument, NotFound
from brain.wire.messages.review_ops import (
    ReviewDecide,
    ReviewDecided,
    ReviewItem,
    ReviewList,
    ReviewListOk,
)

__all__ = ["DEFAULT_REVIEW_LIMIT", "MAX_WAITING_SHOWN", "plan_review_decide", "read_review_list"]

DEFAULT_REVIEW_LIMIT: Final = 100
"""Items REVIEW_LIST answers when it names no limit."""

MAX_WAITING_SHOWN: Final = 1000
"""Waiting records one ambiguous-name item lists: enough to judge the name by, while
an item that a busy agent fed for days does not make one answer huge."""

_DECISIONS: Final = {
    "contradiction": frozenset({"keep_both", "supersede", "reject_new"}),
    "ambiguous_entity": frozenset({"merge", "distinct"}),
}


def _ids(row: dict[str, object]) -> list[bytes]:
    records = row["records"]
    assert isinstance(records, list)
    return [bytes(r) for r in records if isinstance(r, bytes)]


def _waiting(ctx: ReadContext, scope: Scope, review_id: bytes) -> list[bytes]:
    """Statements, then relations, stored with the pending key of ``review_id``."""
    key = PENDING_TAG + review_id
    found = [statement_id for _, statement_id in scan_ids(ctx, scope, key, None)]
    found += [
        rid for _, rid in edges_of(ctx.store, ctx.txn, scope, [key], direction="both", types=None)
    ]
    return found[:MAX_WAITING_SHOWN]


def read_review_list(ctx: ReadContext, scope: Scope, request: ReviewList) -> ReviewListOk:
    """REVIEW_LIST: open items, oldest first."""
    limit = DEFAULT_REVIEW_LIMIT if request.limit is None else request.limit
    prefix = scope.key()
    items: list[ReviewItem] = []
    for key in scan_keys(ctx.txn, ctx.store.table(REVIEWS_OPEN), prefix):
        if len(items) >= limit:
            break
        review_id = key[SCOPE_PREFIX_BYTES + 8 :]
        row = review_row(ctx.store, ctx.txn, scope, review_id)
        assert row is not None
        records = _ids(row)
        name = row.get("name")
        type_ = row.get("type")
        if row["kind"] == "ambiguous_entity":
            records += _waiting(ctx, scope, review_id)
        items.append(
            ReviewItem(
                review_id=review_id,
                kind=str(row["kind"]),
                records=tuple(records),
                created_at=int(str(row["created_at"])),
                name=name if isinstance(name, str) else None,
                type_=type_ if isinstance(type_, str) else None,
            )
        )
    return ReviewListOk(items=tuple(items))


def plan_review_decide(
    ctx: PlanContext, scope: Scope, request: ReviewDecide
) -> tuple[list[Change], ReviewDecided]:
    """REVIEW_DECIDE."""
    row = review_row(ctx.store, ctx.txn, scope, request.review_id)
    if row is None:
        raise NotFound(f"no review item {request.review_id.hex()}", field="review_id")
    if row["status"] != "open":
        raise Conflict(
            f"review item {request.review_id.hex()} is already decided", field="review_id"
        )
    kind = str(row["kind"])
    if request.decision not in _DECISIONS[kind]:
        allowed = ", ".join(sorted(_DECISIONS[kind]))
        raise InvalidArgument(
            f"{request.decision!r} does not decide a {kind} item (it takes {allowed})",
            field="decision",
        )
    _check_into(kind, request, _ids(row))
    decided: dict[str, object] = {
        **row,
        "status": "decided",
        "decision": request.decision,
        "decided_at": ctx.record_time,
    }
    if kind == "contradiction":
        changes = _decide_contradiction(ctx, scope, request.decision, _ids(row))
        audited = _ids(row)
    else:
        changes, chosen = _decide_name(ctx, scope, request, row)
        decided["resolved_to"] = chosen
        audited = [chosen, *_ids(row)]
    created = row["created_at"]
    assert isinstance(created, int)
    changes += [
        Put(REVIEWS, scope.key(request.review_id), cbor.encode(decided)),
        Delete(REVIEWS_OPEN, open_key(scope, created, request.review_id)),
        audit_entry(ctx, scope, f"review_{request.decision}", [request.review_id, *audited]),
    ]
    return changes, ReviewDecided(lsn=ctx.lsn)


def _decide_contradiction(
    ctx: PlanContext, scope: Scope, decision: str, ids: list[bytes]
) -> list[Change]:
    newest = statements.load(ctx, scope, ids[-1], "review_id")
    changes: list[Change] = []
    if decision == "supersede":
        if not newest.current:
            raise Conflict(
                "the newest statement of the item is no longer current", field="review_id"
            )
        valid_from = newest.int_field("valid_from")
        superseded: list[Versioned] = []
        for other_id in ids[:-1]:
            other = statements.load(ctx, scope, other_id, "review_id")
            if other.current:
                changes += statements.superseded_changes(ctx, scope, other, newest.id, valid_from)
                superseded.append(other)
        if superseded:
            # As a stateful create does: the newest continues the chain of the one
            # recorded last, so the history of either shows both.
            latest = max(superseded, key=lambda s: int(str(s.content["recorded_at"])))
            changes += statements.rechain_changes(scope, newest, latest)
    elif decision == "reject_new" and "tombstoned_at" not in newest.state:
        changes += statements.tombstone_changes(ctx, scope, newest, "user_request")
    return changes


def _check_into(kind: str, request: ReviewDecide, candidates: list[bytes]) -> None:
    """Refuse an ``into`` that does not fit the decision: required by ``merge`` and one
    of the item's candidates, given with no other decision."""
    if kind == "ambiguous_entity" and request.decision == "merge":
        if request.into is None:
            raise InvalidArgument("a merge names the candidate the name means (into)", field="into")
        if request.into not in candidates:
            raise InvalidArgument(
                f"entity {request.into.hex()} is not a candidate of this name", field="into"
            )
    elif request.into is not None:
        raise InvalidArgument(
            f"into belongs only to a merge of an ambiguous name, not to {request.decision!r}",
            field="into",
        )


def _decide_name(
    ctx: PlanContext, scope: Scope, request: ReviewDecide, row: dict[str, object]
) -> tuple[list[Change], bytes]:
    """The changes of deciding an ambiguous name, and the entity it now answers as."""
    name = str(row["name"])
    type_ = row.get("type")
    assert type_ is None or isinstance(type_, str)
    changes: list[Change] = []
    if request.decision == "merge":
        assert request.into is not None  # _check_into
        # The candidate may have been merged away since the item was queued: the name
        # means what it answers as now.
        chosen = canonical_entity(ctx.store, ctx.txn, scope, request.into)
        kept_row = entity_row(ctx.store, ctx.txn, scope, chosen)
        if kept_row is None or not is_live(kept_row):
            raise Conflict(
                f"candidate {request.into.hex()} was tombstoned since; name another "
                "candidate or decide 'distinct'",
                field="into",
            )
        # A fuzzy tie's name becomes the chosen entity's alias, so later writes with it
        # resolve there. Candidates that own the name exactly all keep it, so later
        # writes with it tie again and ask again, as after 'distinct'.
        if normalise_name(name) not in index_names(kept_row):
            with_alias = {**kept_row, "aliases": [*aliases_of(kept_row), name]}
            changes.append(row_change(scope, chosen, with_alias))
            changes += index_changes(scope, chosen, index_names(kept_row), index_names(with_alias))
    else:
        chosen = ctx.ids.new()
        made = new_row(
            scope, name=name, type_=type_, aliases=[], attributes={}, created_at=ctx.record_time
        )
        changes.append(row_change(scope, chosen, made))
        changes += index_changes(scope, chosen, set(), index_names(made))
    changes.append(absorb(scope, chosen, PENDING_TAG + request.review_id))
    changes.append(Delete(REVIEWS_BY_NAME, pending_name_key(scope, name, type_)))
    return changes, chosen
