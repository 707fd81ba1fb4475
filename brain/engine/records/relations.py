"""Relations: typed edges between entities, on the two time axes of statements.

Every relation opcode of spec/02-data-model.md §8. The rows and indexes are laid out in
:mod:`brain.engine.records.relation_rows`, like the statements' ones: a content row
written once, a state row of later stamps, one index per end, and an index of
current relations per end for cardinality checks.

Decisions where spec/01-wire.md and spec/02-data-model.md are silent:

- Both ends must name entities; a ``{"memory": id}`` end is INVALID_ARGUMENT.
- RELATION_SUPERSEDE keeps the ``from`` entity (the statement rule "same
  subject"); its type and ``to`` may change. The new version continues the old
  one's chain (``chain_root`` and ``version`` are kept in the row, as for
  statements) and the validity split is the statements' one.
- A cardinality (spec/03-time.md §4) is read through the hook :data:`cardinality_of`.
  RELATION_CREATE supersedes the one current relation on the constrained end
  (a new version of its chain, validity split included); two or more current
  conflicting relations are CARDINALITY_VIOLATION. RELATION_SUPERSEDE never
  replaces a second relation: a new version that would conflict with another
  current relation is CARDINALITY_VIOLATION.
- RELATION_LIST and RELATION_TRAVERSE on an entity id the scope does not hold
  answer NOT_FOUND, like a read by id.
- A relation type the schema declares ``symmetric`` holds both ways in reads: an edge
  of it is found from either end by RELATION_LIST and RELATION_TRAVERSE in every
  direction, as if it were stated both ways (:func:`symmetric_types`). It is stored
  once, as written, and cardinality reads its ends as written.
- Traversal follows only ends that are entities (an end pending review is left
  out of the graph, spec/02-data-model.md §4), is bounded by :data:`MAX_EDGES_PER_NODE`
  and the request's node ``limit``, and stops once that limit is reached.

Every relation an answer shows carries the validity believed at the query's
``as_of`` (now when absent), exactly as statements do.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Final

import lmdb

from brain.engine.records import schema
from brain.engine.records.audit import audit_entry
from brain.engine.records.entity_rows import entity_row
from brain.engine.records.filters import Filters, judge
from brain.engine.records.memories import check_citations
from brain.engine.records.refs import (
    answers_as,
    keys_answering_as,
    ref_of_key,
    resolve_for_read,
    resolve_for_write,
)
from brain.engine.records.relation_rows import (
    FROM_END,
    TO_END,
    LoadedRelation,
    current_ids,
    edges_of,
    insert_changes,
    load_relation,
    no_longer_current,
    relation_message,
    state_change,
)
from brain.engine.records.versioned import superseded_state, tombstoned_state
from brain.engine.store.env import Store
from brain.engine.store.scope import Scope
from brain.engine.write.plan import Change
from brain.engine.write.reads import ReadContext
from brain.engine.write.writer import PlanContext, staged
from brain.errors import (
    AsOfInFuture,
    CardinalityViolation,
    Conflict,
    Internal,
    InvalidArgument,
    NotFound,
)
from brain.wire.messages.records import Relation
from brain.wire.messages.relation_ops import (
    RelationCreate,
    RelationCreateOk,
    RelationDraft,
    RelationGet,
    RelationGetOk,
    RelationList,
    RelationListOk,
    RelationSupersede,
    RelationSupersedeOk,
    RelationTombstone,
    RelationTombstoned,
    RelationTraverse,
    RelationTraverseOk,
    TraversalNode,
)
from brain.wire.messages.values import EntityRef, MemoryRef
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = [
    "CARDINALITIES",
    "DEFAULT_LIST_LIMIT",
    "DEFAULT_TRAVERSE_LIMIT",
    "MAX_EDGES_PER_NODE",
    "RELATION_READS",
    "RELATION_WRITES",
    "cardinality_of",
    "plan_create",
    "plan_supersede",
    "plan_tombstone",
    "read_get",
    "read_list",
    "read_traverse",
    "symmetric_types",
]

MANY_TO_MANY: Final = "many_to_many"
MANY_TO_ONE: Final = "many_to_one"
ONE_TO_MANY: Final = "one_to_many"
ONE_TO_ONE: Final = "one_to_one"
CARDINALITIES: Final = (MANY_TO_MANY, MANY_TO_ONE, ONE_TO_MANY, ONE_TO_ONE)
"""The cardinalities SCHEMA_PUT may declare (spec/02-data-model.md §8)."""

DEFAULT_LIST_LIMIT: Final = 100
"""Page size when RELATION_LIST names none, as for STATEMENT_LIST (spec/02-data-model.md §8)."""

DEFAULT_TRAVERSE_LIMIT: Final = 100
"""Nodes a traversal reaches when the request names no ``limit``."""

MAX_EDGES_PER_NODE: Final = 1000
"""Edges expanded from one node: a hub with millions of edges must not make one
traversal read them all; a thousand is more than any answer can usefully show."""

CardinalityHook = Callable[[Store, lmdb.Transaction, Scope, str], str]
"""Reads the declared cardinality of a relation type in a scope."""


cardinality_of: CardinalityHook = schema.cardinality_of
"""The cardinality hook: the schema's declared cardinality (many-to-many when
undeclared); tests replace it to exercise each rule."""


# --- writes -------------------------------------------------------------------------------


def _resolve_ends(
    ctx: PlanContext, scope: Scope, draft: RelationDraft, prefix: str
) -> tuple[bytes, bytes, list[Change]]:
    """The end keys of ``draft``, creating the entities new names need."""
    for name, ref in (("from", draft.from_), ("to", draft.to)):
        if isinstance(ref, MemoryRef):
            raise InvalidArgument(
                "a relation end must be an entity, not a memory", field=f"{prefix}{name}"
            )
    from_key, changes = resolve_for_write(ctx, scope, draft.from_, f"{prefix}from")
    if not changes:
        to_key, more = resolve_for_write(ctx, scope, draft.to, f"{prefix}to")
        return from_key, to_key, changes + more
    # ``from`` created an entity the store does not hold yet: resolve ``to`` where it
    # does, so the same new name at both ends names one entity, not two.
    with staged(ctx, changes) as nested:
        to_key, more = resolve_for_write(nested, scope, draft.to, f"{prefix}to")
    return from_key, to_key, changes + more


def _conflicting(
    ctx: PlanContext, scope: Scope, type_: str, from_key: bytes, to_key: bytes
) -> set[bytes]:
    """Current relations a new ``from → to`` edge of ``type_`` conflicts with."""
    store, txn = ctx.store, ctx.txn
    cardinality = cardinality_of(store, txn, scope, type_)
    if cardinality not in CARDINALITIES:
        raise Internal(f"relation type {type_!r} has an unknown cardinality {cardinality!r}")
    found: set[bytes] = set()
    # An end's relations include those stored under every key that answers as what
    # the end answers as (an end may name a merged-away entity).
    for marker, key, constrained in (
        (FROM_END, from_key, (MANY_TO_ONE, ONE_TO_ONE)),
        (TO_END, to_key, (ONE_TO_MANY, ONE_TO_ONE)),
    ):
        if cardinality in constrained:
            keys = keys_answering_as(store, txn, scope, answers_as(store, txn, scope, key))
            found |= current_ids(store, txn, scope, marker=marker, end_keys=keys, type_=type_)
    return found


def _violation(type_: str, ids: Collection[bytes], field: str) -> CardinalityViolation:
    listed = ", ".join(sorted(i.hex() for i in ids))
    return CardinalityViolation(
        f"relation type {type_!r} allows one current relation on its constrained end; "
        f"this one conflicts with {listed}",
        field=field,
    )


def _content(
    ctx: PlanContext,
    scope: Scope,
    draft: RelationDraft,
    *,
    ends: tuple[bytes, bytes],
    chain: tuple[int, bytes],
    supersedes: bytes | None,
) -> dict[str, object]:
    version, chain_root = chain
    row: dict[str, object] = {
        "namespace": scope.namespace,
        "space": scope.space,
        "type": draft.type_,
        "from": ends[0],
        "to": ends[1],
        "confidence": 1.0 if draft.confidence is None else draft.confidence,
        "evidence": [e.to_wire() for e in draft.evidence or ()],
        "recorded_at": ctx.record_time,
        "version": version,
        "chain_root": chain_root,
    }
    if draft.valid_from is not None:
        row["valid_from"] = draft.valid_from
    if draft.valid_to is not None:
        row["valid_to"] = draft.valid_to
    if supersedes is not None:
        row["supersedes"] = supersedes
    return row


def _new_version(
    ctx: PlanContext,
    scope: Scope,
    draft: RelationDraft,
    ends: tuple[bytes, bytes],
    old: LoadedRelation | None,
) -> tuple[bytes, list[Change]]:
    """Insert ``draft`` as a new relation, superseding ``old`` (if any) in its chain."""
    relation_id = ctx.ids.new()
    if old is None:
        row = _content(ctx, scope, draft, ends=ends, chain=(1, relation_id), supersedes=None)
        return relation_id, insert_changes(scope, relation_id, row)
    root = old.content["chain_root"]
    assert isinstance(root, bytes)
    version = int(str(old.content["version"])) + 1
    row = _content(ctx, scope, draft, ends=ends, chain=(version, root), supersedes=old.id)
    state = superseded_state(old, relation_id, draft.valid_from, ctx.record_time)
    changes = insert_changes(scope, relation_id, row)
    changes += [state_change(scope, old.id, state), *no_longer_current(scope, old)]
    return relation_id, changes


def plan_create(
    ctx: PlanContext, scope: Scope, request: RelationCreate
) -> tuple[list[Change], RelationCreateOk]:
    """RELATION_CREATE; a constrained cardinality supersedes the current edge it replaces."""
    check_citations(ctx.store, ctx.txn, scope, request.evidence or (), "")
    from_key, to_key, changes = _resolve_ends(ctx, scope, request, "")
    conflicting = _conflicting(ctx, scope, request.type_, from_key, to_key)
    if len(conflicting) > 1:
        raise _violation(request.type_, conflicting, "type")
    old = None
    if conflicting:
        old = load_relation(ctx.store, ctx.txn, scope, conflicting.pop(), "type")
    relation_id, inserted = _new_version(ctx, scope, request, (from_key, to_key), old)
    answer = RelationCreateOk(
        relation_id=relation_id,
        lsn=ctx.lsn,
        recorded_at=ctx.record_time,
        superseded=None if old is None else old.id,
    )
    return changes + inserted, answer


def plan_supersede(
    ctx: PlanContext, scope: Scope, request: RelationSupersede
) -> tuple[list[Change], RelationSupersedeOk]:
    """RELATION_SUPERSEDE: a new version with the same ``from``; the old one is invalidated."""
    old = load_relation(ctx.store, ctx.txn, scope, request.old, "old")
    if not old.current:
        why = "tombstoned" if "tombstoned_at" in old.state else "already superseded"
        raise Conflict(
            f"relation {request.old.hex()} is {why}; only a current one can be superseded",
            field="old",
        )
    draft = request.new
    check_citations(ctx.store, ctx.txn, scope, draft.evidence or (), "new.")
    from_key, to_key, changes = _resolve_ends(ctx, scope, draft, "new.")
    answered = answers_as(ctx.store, ctx.txn, scope, from_key)
    if answered != answers_as(ctx.store, ctx.txn, scope, old.end("from")):
        raise InvalidArgument("a new version must have the same from entity", field="new.from")
    others = _conflicting(ctx, scope, draft.type_, from_key, to_key) - {old.id}
    if others:
        raise _violation(draft.type_, others, "new")
    relation_id, inserted = _new_version(ctx, scope, draft, (from_key, to_key), old)
    answer = RelationSupersedeOk(
        relation_id=relation_id, lsn=ctx.lsn, recorded_at=ctx.record_time, superseded=old.id
    )
    return changes + inserted, answer


def plan_tombstone(
    ctx: PlanContext, scope: Scope, request: RelationTombstone
) -> tuple[list[Change], RelationTombstoned]:
    """RELATION_TOMBSTONE (soft): hidden by default, kept for ``as_of``; the request's
    ``reason`` is kept in the state row as ``tombstone_note``."""
    loaded = load_relation(ctx.store, ctx.txn, scope, request.id, "id")
    if "tombstoned_at" in loaded.state:
        raise Conflict(f"relation {request.id.hex()} is already tombstoned", field="id")
    state = tombstoned_state(loaded, "user_request", ctx.record_time)
    if request.reason is not None:
        state["tombstone_note"] = request.reason
    changes: list[Change] = [
        state_change(scope, loaded.id, state),
        *no_longer_current(scope, loaded),
        audit_entry(ctx, scope, "relation_tombstone", [loaded.id], reason=request.reason),
    ]
    return changes, RelationTombstoned(id=loaded.id, lsn=ctx.lsn, tombstoned_at=ctx.record_time)


# --- reads --------------------------------------------------------------------------------


def symmetric_types(store: Store, txn: lmdb.Transaction, scope: Scope) -> frozenset[str]:
    """The relation types the schema in force in ``scope`` declares symmetric."""
    declared = schema.load_schema(store, txn, scope).relation_types
    return frozenset(name for name, decl in declared.items() if decl.get("symmetric"))


def _check_as_of(as_of: int | None, now: int) -> None:
    if as_of is not None and as_of > now:
        raise AsOfInFuture(f"as_of {as_of} is after the record clock ({now})", field="as_of")


def _entity_key(
    ctx: ReadContext, scope: Scope, entity_id: bytes, field: str, as_of: int | None
) -> bytes:
    """The end key of an entity the scope holds (what it answers as at ``as_of``, else
    now); NOT_FOUND otherwise."""
    if entity_row(ctx.store, ctx.txn, scope, entity_id) is None:
        raise NotFound(f"no entity {entity_id.hex()} in space {scope.space!r}", field=field)
    key = resolve_for_read(ctx.store, ctx.txn, scope, EntityRef(entity=entity_id), as_of=as_of)
    assert key is not None
    return key


def read_get(ctx: ReadContext, scope: Scope, request: RelationGet) -> RelationGetOk:
    """RELATION_GET: the relation as believed now."""
    loaded = load_relation(ctx.store, ctx.txn, scope, request.id, "id")
    return RelationGetOk(relation=relation_message(ctx.store, ctx.txn, scope, loaded, None))


def read_list(ctx: ReadContext, scope: Scope, request: RelationList) -> RelationListOk:
    """RELATION_LIST: an entity's relations through the filter chain of spec/04-retrieval.md §5,
    in record order, a page at a time."""
    _check_as_of(request.as_of, ctx.now)
    end_key = _entity_key(ctx, scope, request.entity, "entity", request.as_of)
    types = None if request.type_ is None else (request.type_,)
    filters = Filters(predicates=types, valid_at=request.valid_at, as_of=request.as_of)
    limit = DEFAULT_LIST_LIMIT if request.limit is None else request.limit
    after = request.cursor or b""
    page: list[Relation] = []
    more = False
    last = b""
    keys = keys_answering_as(ctx.store, ctx.txn, scope, end_key, as_of=request.as_of)
    rows = edges_of(
        ctx.store,
        ctx.txn,
        scope,
        keys,
        direction=request.direction,
        types=types,
        symmetric=symmetric_types(ctx.store, ctx.txn, scope),
    )
    for position, relation_id in rows:
        if position <= after:
            continue
        loaded = load_relation(ctx.store, ctx.txn, scope, relation_id, "id")
        if not judge(loaded.times(), filters).kept:
            continue
        if len(page) == limit:
            more = True
            break
        page.append(relation_message(ctx.store, ctx.txn, scope, loaded, request.as_of))
        last = position
    return RelationListOk(relations=tuple(page), cursor=last if more else None)


def read_traverse(ctx: ReadContext, scope: Scope, request: RelationTraverse) -> RelationTraverseOk:
    """RELATION_TRAVERSE: breadth first from ``from`` over the relations the filter chain
    keeps (current ones, or those valid at ``valid_at`` / believed at ``as_of``).

    Each node is reached once, at its smallest hop; an edge is shown once, when
    both its ends are nodes. At most :data:`MAX_EDGES_PER_NODE` edges are
    expanded from one node, and the walk stops when ``limit`` nodes (the start
    included) are reached. An edge of a symmetric type is followed from either end,
    whatever the direction.
    """
    _check_as_of(request.as_of, ctx.now)
    start = _entity_key(ctx, scope, request.from_, "from", request.as_of)
    direction = "both" if request.direction is None else request.direction
    filters = Filters(predicates=request.types, valid_at=request.valid_at, as_of=request.as_of)
    limit = DEFAULT_TRAVERSE_LIMIT if request.limit is None else request.limit
    symmetric = symmetric_types(ctx.store, ctx.txn, scope)
    nodes = [TraversalNode(entity_id=start[1:], hop=0)]
    visited = {start}
    edges: list[Relation] = []
    shown: set[bytes] = set()
    frontier = [start]
    for hop in range(1, request.depth + 1):
        reached: list[bytes] = []
        for key in frontier:
            expanded = 0
            keys = keys_answering_as(ctx.store, ctx.txn, scope, key, as_of=request.as_of)
            rows = edges_of(
                ctx.store,
                ctx.txn,
                scope,
                keys,
                direction=direction,
                types=request.types,
                symmetric=symmetric,
            )
            for _, relation_id in rows:
                if expanded == MAX_EDGES_PER_NODE:
                    break
                loaded = load_relation(ctx.store, ctx.txn, scope, relation_id, "id")
                if not judge(loaded.times(), filters).kept:
                    continue
                ends = [
                    answers_as(ctx.store, ctx.txn, scope, loaded.end(e), as_of=request.as_of)
                    for e in ("from", "to")
                ]
                other = ends[1] if ends[0] == key else ends[0]
                end = ref_of_key(other)
                if not isinstance(end, EntityRef):
                    continue  # an end pending review is not in the graph yet
                if other not in visited:
                    if len(nodes) == limit:
                        return RelationTraverseOk(nodes=tuple(nodes), edges=tuple(edges))
                    visited.add(other)
                    nodes.append(TraversalNode(entity_id=end.entity, hop=hop))
                    reached.append(other)
                expanded += 1
                if relation_id not in shown:
                    shown.add(relation_id)
                    edges.append(relation_message(ctx.store, ctx.txn, scope, loaded, request.as_of))
        frontier = reached
    return RelationTraverseOk(nodes=tuple(nodes), edges=tuple(edges))


RELATION_WRITES: Final[dict[Opcode, Callable[..., tuple[list[Change], Message]]]] = {
    Opcode.RELATION_CREATE: plan_create,
    Opcode.RELATION_SUPERSEDE: plan_supersede,
    Opcode.RELATION_TOMBSTONE: plan_tombstone,
}
"""The relation planners, for :data:`brain.engine.dispatch.WRITES`."""

RELATION_READS: Final[dict[Opcode, Callable[..., Message]]] = {
    Opcode.RELATION_GET: read_get,
    Opcode.RELATION_LIST: read_list,
    Opcode.RELATION_TRAVERSE: read_traverse,
}
"""The relation readers, for :data:`brain.engine.dispatch.READS`."""
