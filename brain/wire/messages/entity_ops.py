"""Entities: ENTITY_CREATE, GET, UPDATE, MERGE, UNMERGE, RESOLVE, LIST, TOMBSTONE."""

from __future__ import annotations

from typing import Annotated, Final

from brain.errors import InvalidArgument
from brain.wire.messages.common import (
    ByIdRequest,
    ReadRequest,
    TxnReadRequest,
    TxnWriteRequest,
)
from brain.wire.messages.records import Entity
from brain.wire.messages.values import Cursor, Id, Limit, Name, Nanos, UInt
from brain.wire.schema import Choice, Finite, Len, Message, Range, wire_message

__all__ = [
    "MAX_ALIASES",
    "EntityCreate",
    "EntityCreateOk",
    "EntityGet",
    "EntityGetOk",
    "EntityHistory",
    "EntityHistoryOk",
    "EntityList",
    "EntityListOk",
    "EntityMatch",
    "EntityMerge",
    "EntityMergeOk",
    "EntityResolve",
    "EntityResolveOk",
    "EntityTombstone",
    "EntityTombstoneOk",
    "EntityUnmerge",
    "EntityUnmergeOk",
    "EntityUpdate",
    "EntityUpdateOk",
]

MAX_ALIASES: Final = 256
"""Most aliases one request adds or removes: an entity has a handful of names."""

Aliases = Annotated[tuple[Name, ...], Len(0, MAX_ALIASES)]
"""Other names an entity resolves by."""

MatchScore = Annotated[float, Range(0.0, 1.0), Finite()]
"""How well a name matched: 1.0 for exact and alias matches, the fuzzy ratio below."""

MatchTier = Annotated[str, Choice(("exact", "alias", "fuzzy"))]
"""Which resolution step matched (spec/02-data-model.md §4)."""


@wire_message
class EntityCreate(TxnWriteRequest):
    """ENTITY_CREATE: a new entity with a name, optional type, aliases and attributes
    (a free map of text keys)."""

    name: Name
    type_: Name | None = None
    aliases: Aliases | None = None
    attributes: dict[str, object] | None = None


@wire_message
class EntityCreateOk(Message):
    """The answer to ENTITY_CREATE."""

    entity_id: Id
    lsn: UInt


@wire_message
class EntityGet(ByIdRequest):
    """ENTITY_GET: one entity by id, as it is now or as it was believed at ``as_of``."""

    as_of: Nanos | None = None


@wire_message
class EntityGetOk(Message):
    """The answer to ENTITY_GET."""

    entity: Entity


@wire_message
class EntityUpdate(TxnWriteRequest):
    """ENTITY_UPDATE: rename, add or remove aliases, replace attributes."""

    id: Id
    name: Name | None = None
    add_aliases: Aliases | None = None
    remove_aliases: Aliases | None = None
    attributes: dict[str, object] | None = None


@wire_message
class EntityUpdateOk(Message):
    """The answer to ENTITY_UPDATE: the entity as it is now."""

    entity: Entity


def _distinct_entities(merge: EntityMerge) -> None:
    """An entity cannot be merged into itself."""
    if merge.keep == merge.merge:
        raise InvalidArgument("cannot merge an entity into itself", field="merge")


@wire_message
class EntityMerge(TxnWriteRequest):
    """ENTITY_MERGE: point ``merge`` at ``keep`` and move its aliases (spec/02-data-model.md §4)."""

    keep: Id
    merge: Id

    cross_checks = (_distinct_entities,)


@wire_message
class EntityMergeOk(Message):
    """The answer to ENTITY_MERGE; ``merge_id`` is what ENTITY_UNMERGE takes."""

    merge_id: Id
    lsn: UInt


@wire_message
class EntityUnmerge(TxnWriteRequest):
    """ENTITY_UNMERGE: restore exactly the state before the merge ``merge_id``."""

    merge_id: Id


@wire_message
class EntityUnmergeOk(Message):
    """The answer to ENTITY_UNMERGE."""

    lsn: UInt


@wire_message
class EntityResolve(ReadRequest):
    """ENTITY_RESOLVE: which entities a name means, by exact name, alias, then fuzzy."""

    name: Name
    type_: Name | None = None
    limit: Limit | None = None
    as_of: Nanos | None = None


@wire_message
class EntityMatch(Message):
    """One candidate of ENTITY_RESOLVE."""

    entity_id: Id
    name: Name
    score: MatchScore
    tier: MatchTier


@wire_message
class EntityResolveOk(Message):
    """The answer to ENTITY_RESOLVE: ``resolved`` when one entity wins, ``ambiguous``
    when a fuzzy tie leaves the choice to a review."""

    matches: tuple[EntityMatch, ...]
    resolved: Id | None = None
    ambiguous: bool


@wire_message
class EntityList(TxnReadRequest):
    """ENTITY_LIST: entities, optionally of one type or with a name prefix."""

    type_: Name | None = None
    prefix: Name | None = None
    limit: Limit | None = None
    cursor: Cursor | None = None
    as_of: Nanos | None = None


@wire_message
class EntityListOk(Message):
    """The answer to ENTITY_LIST; ``cursor`` is present only when more rows follow."""

    entities: tuple[Entity, ...]
    cursor: Cursor | None = None


@wire_message
class EntityHistory(ReadRequest):
    """ENTITY_HISTORY: every version of the entity ``id`` on the record axis (committed
    versions only: a transaction's writes have no record time until its commit)."""

    id: Id


@wire_message
class EntityHistoryOk(Message):
    """The answer to ENTITY_HISTORY: the entity's versions, oldest first."""

    versions: tuple[Entity, ...]


@wire_message
class EntityTombstone(TxnWriteRequest):
    """ENTITY_TOMBSTONE: soft-delete an entity."""

    id: Id


@wire_message
class EntityTombstoneOk(Message):
    """The answer to ENTITY_TOMBSTONE."""

    id: Id
    lsn: UInt
