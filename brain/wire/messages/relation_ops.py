"""Relations: RELATION_CREATE, GET, SUPERSEDE, TOMBSTONE, LIST, TRAVERSE (spec/02-data-model.md §8).

GET, SUPERSEDE and TOMBSTONE have the shapes of their statement counterparts.
"""

from __future__ import annotations

from typing import Annotated, Final

from brain.wire.messages.common import (
    ByIdRequest,
    Reason,
    Tombstoned,
    TxnReadRequest,
    TxnWriteRequest,
    check_validity,
)
from brain.wire.messages.records import EvidenceList, Relation
from brain.wire.messages.values import (
    Confidence,
    Cursor,
    Id,
    Limit,
    Nanos,
    Ref,
    RelationType,
    Space,
    UInt,
)
from brain.wire.schema import Choice, Len, Message, Range, wire_message

__all__ = [
    "MAX_TRAVERSE_DEPTH",
    "MAX_TRAVERSE_TYPES",
    "RelationCreate",
    "RelationCreateOk",
    "RelationDraft",
    "RelationGet",
    "RelationGetOk",
    "RelationList",
    "RelationListOk",
    "RelationSupersede",
    "RelationSupersedeOk",
    "RelationTombstone",
    "RelationTombstoned",
    "RelationTraverse",
    "RelationTraverseOk",
    "TraversalNode",
]

MAX_TRAVERSE_DEPTH: Final = 5
"""Deepest traversal (spec/02-data-model.md §8): the frontier grows geometrically with each hop."""

MAX_TRAVERSE_TYPES: Final = 256
"""Most relation types one traversal filters on: a schema declares a few dozen."""

Direction = Annotated[str, Choice(("out", "in", "both"))]
"""Which edges of an entity to follow: outgoing, incoming or both."""

Depth = Annotated[int, Range(1, MAX_TRAVERSE_DEPTH)]
"""How many hops a traversal may take."""

Hop = Annotated[int, Range(0, MAX_TRAVERSE_DEPTH)]
"""How many hops from the start a node lies (0 for the start itself)."""


@wire_message
class RelationDraft(Message):
    """The content of a relation: the fields of RELATION_CREATE other than ``space``,
    ``request_id`` and ``txn_id``; RELATION_SUPERSEDE's ``new``.

    ``from`` and ``to`` must name entities (a memory ref is refused by the server);
    ``confidence`` left out means 1.0, applied by the server; ``valid_from ≤
    valid_to``."""

    type_: RelationType
    from_: Ref
    to: Ref
    confidence: Confidence | None = None
    evidence: EvidenceList | None = None
    valid_from: Nanos | None = None
    valid_to: Nanos | None = None

    cross_checks = (check_validity,)


@wire_message
class RelationCreate(RelationDraft):
    """RELATION_CREATE: a typed edge. A type with a constrained cardinality supersedes
    the current edge on its constrained end (spec/03-time.md §4)."""

    space: Space | None = None
    request_id: Id
    txn_id: Id | None = None


@wire_message
class RelationCreateOk(Message):
    """The answer to RELATION_CREATE; ``superseded`` names the edge a cardinality
    constraint replaced."""

    relation_id: Id
    lsn: UInt
    recorded_at: Nanos
    superseded: Id | None = None


@wire_message
class RelationGet(ByIdRequest):
    """RELATION_GET: one relation by id."""


@wire_message
class RelationGetOk(Message):
    """The answer to RELATION_GET."""

    relation: Relation


@wire_message
class RelationSupersede(TxnWriteRequest):
    """RELATION_SUPERSEDE: replace the current relation ``old`` by ``new``."""

    old: Id
    new: RelationDraft


@wire_message
class RelationSupersedeOk(Message):
    """The answer to RELATION_SUPERSEDE; ``superseded`` is the replaced relation."""

    relation_id: Id
    lsn: UInt
    recorded_at: Nanos
    superseded: Id


@wire_message
class RelationTombstone(TxnWriteRequest):
    """RELATION_TOMBSTONE: soft-delete a relation; ``reason`` goes to the audit log."""

    id: Id
    reason: Reason | None = None


@wire_message
class RelationTombstoned(Tombstoned):
    """The answer to RELATION_TOMBSTONE."""


@wire_message
class RelationList(TxnReadRequest):
    """RELATION_LIST: the relations of ``entity`` in ``direction``, through the same
    temporal and as-of filters as statements."""

    entity: Id
    direction: Direction
    type_: RelationType | None = None
    valid_at: Nanos | None = None
    as_of: Nanos | None = None
    limit: Limit | None = None
    cursor: Cursor | None = None


@wire_message
class RelationListOk(Message):
    """The answer to RELATION_LIST; ``cursor`` is present only when more rows follow."""

    relations: tuple[Relation, ...]
    cursor: Cursor | None = None


@wire_message
class RelationTraverse(TxnReadRequest):
    """RELATION_TRAVERSE: walk up to ``depth`` hops from the entity ``from``,
    optionally only over ``types`` (absent: every type; never empty) and in one
    ``direction`` (absent: the server's default)."""

    from_: Id
    types: Annotated[tuple[RelationType, ...], Len(1, MAX_TRAVERSE_TYPES)] | None = None
    direction: Direction | None = None
    depth: Depth
    valid_at: Nanos | None = None
    as_of: Nanos | None = None
    limit: Limit | None = None


@wire_message
class TraversalNode(Message):
    """An entity a traversal reached, and in how many hops."""

    entity_id: Id
    hop: Hop


@wire_message
class RelationTraverseOk(Message):
    """The answer to RELATION_TRAVERSE: the entities reached and the edges walked."""

    nodes: tuple[TraversalNode, ...]
    edges: tuple[Relation, ...]
