"""The vocabulary: SCHEMA_PUT and SCHEMA_GET (spec/02-data-model.md §6, spec/03-time.md §4).

Predicates and relation types not declared are open vocabulary: not stateful,
many-to-many. Without ``space`` both name the namespace's schema, in force in
every space that has none of its own; with ``space``, that space's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Final

from brain.errors import InvalidArgument
from brain.wire.messages.common import ReadRequest, ScopedRequest
from brain.wire.messages.values import Kind, Name, Predicate, RelationType, UInt
from brain.wire.schema import Choice, Len, Message, wire_message

__all__ = [
    "MAX_SCHEMA_ENTRIES",
    "PredicateDecl",
    "RelationTypeDecl",
    "Schema",
    "SchemaGet",
    "SchemaPut",
    "SchemaPutOk",
]

MAX_SCHEMA_ENTRIES: Final = 10_000
"""Most predicates, relation types or entity types one SCHEMA_PUT declares: a
vocabulary of thousands is already large."""

Cardinality = Annotated[str, Choice(("many_to_many", "many_to_one", "one_to_many", "one_to_one"))]
"""How many current relations of a type each end may have."""

SchemaScope = Annotated[str, Choice(("namespace", "space"))]
"""Which schema SCHEMA_GET answers: the namespace's, or the space's own."""


@wire_message
class PredicateDecl(Message):
    """A declared predicate: ``stateful`` keeps one current value per subject."""

    name: Predicate
    kind: Kind | None = None
    stateful: bool


@wire_message
class RelationTypeDecl(Message):
    """A declared relation type with its cardinality."""

    name: RelationType
    cardinality: Cardinality
    symmetric: bool | None = None


RelationTypeDecls = Annotated[tuple[RelationTypeDecl, ...], Len(0, MAX_SCHEMA_ENTRIES)]
"""The relation types one SCHEMA_PUT declares."""


def _no_duplicates(names: Iterable[str], what: str, suffix: str) -> None:
    seen: set[str] = set()
    for index, name in enumerate(names):
        if name in seen:
            raise InvalidArgument(
                f"{what} {name!r} is declared twice", field=f"{what}[{index}]{suffix}"
            )
        seen.add(name)


def _declared_once(put: SchemaPut) -> None:
    """Each name is declared at most once per list: two declarations would contradict."""
    _no_duplicates((p.name for p in put.predicates or ()), "predicates", ".name")
    _no_duplicates((r.name for r in put.relation_types or ()), "relation_types", ".name")
    _no_duplicates(put.entity_types or (), "entity_types", "")


@wire_message
class SchemaPut(ScopedRequest):
    """SCHEMA_PUT: declare predicates, relation types and entity types, in the
    namespace's schema (no ``space``) or in the space's own."""

    predicates: Annotated[tuple[PredicateDecl, ...], Len(0, MAX_SCHEMA_ENTRIES)] | None = None
    relation_types: RelationTypeDecls | None = None
    entity_types: Annotated[tuple[Name, ...], Len(0, MAX_SCHEMA_ENTRIES)] | None = None

    cross_checks = (_declared_once,)


@wire_message
class SchemaPutOk(Message):
    """The answer to SCHEMA_PUT: the new version of the schema it declared in."""

    version: UInt


@wire_message
class SchemaGet(ReadRequest):
    """SCHEMA_GET: the namespace's schema (no ``space``), or the one in force in the space."""


@wire_message
class Schema(Message):
    """The answer to SCHEMA_GET: every declaration, the schema's version, and whose
    schema it is (``namespace``, or ``space`` for the space's own)."""

    predicates: tuple[PredicateDecl, ...]
    relation_types: tuple[RelationTypeDecl, ...]
    entity_types: tuple[Name, ...]
    version: UInt
    scope: SchemaScope
