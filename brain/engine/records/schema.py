"""The schema: declared predicates, relation types and entity types, for a namespace
and per space.

Undeclared predicates and relation types are open vocabulary: not stateful,
many-to-many (spec/02-data-model.md §6). Entity types are open until the schema
declares some; from then on a write that would make an entity of another type is
refused (:func:`check_entity_type`). SCHEMA_PUT declares or redeclares entries and
bumps the version; it never removes one, and a put that changes nothing
answers the current version and writes nothing. A declaration applies to writes
from its record time on; it does not rewrite statements already stored
(declaring a predicate stateful does not supersede the several current values
a subject may already have; the next write of that predicate does).

A SCHEMA_PUT without ``space`` declares the namespace's schema, which is in force
in every space of the namespace; one with ``space`` declares that space's own
schema, which replaces the namespace's there whole (from an empty schema of its
own: nothing of the namespace's carries over). SCHEMA_GET without ``space``
answers the namespace's schema; with ``space``, the one in force there, and
``scope`` says which of the two that is.

Each schema is one row in ``schema``: a space's under its scope prefix, the
namespace's under the prefix of the scope whose space is
:data:`NAMESPACE_SCHEMA_SPACE`, a name no request can give a space.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import lmdb

from brain import cbor
from brain.engine.store.env import Store
from brain.engine.store.scope import Scope
from brain.engine.store.tables import SCHEMA
from brain.engine.write.plan import Change, Put
from brain.engine.write.reads import ReadContext
from brain.engine.write.writer import PlanContext
from brain.errors import InvalidArgument
from brain.wire.messages.schema_ops import (
    PredicateDecl,
    RelationTypeDecl,
    Schema,
    SchemaGet,
    SchemaPut,
    SchemaPutOk,
)

__all__ = [
    "FROM_NAMESPACE",
    "FROM_SPACE",
    "NAMESPACE_SCHEMA_SPACE",
    "OPEN_CARDINALITY",
    "SpaceSchema",
    "cardinality_of",
    "check_entity_type",
    "load_schema",
    "plan_schema_put",
    "read_schema_get",
    "schema_scope",
]

OPEN_CARDINALITY: Final = "many_to_many"

NAMESPACE_SCHEMA_SPACE: Final = "*"
"""The space name whose scope prefix keys the namespace's schema. Space names are 1-64
characters of ``[a-z0-9_.-]`` (``Space`` in brain/wire/messages/values.py), so no
request's scope has this prefix (its 16-byte space id could equal a real space's
only as two real spaces' ids could); it begins with the namespace id, so a
namespace's export carries it and its import puts it back."""

FROM_NAMESPACE: Final = "namespace"
"""SCHEMA_GET's ``scope`` when the namespace's schema is in force."""

FROM_SPACE: Final = "space"
"""SCHEMA_GET's ``scope`` when the space's own schema is in force."""

MAX_DECODED_SCHEMAS: Final = 1024
"""Decoded schema rows :func:`load_schema` keeps, each a few KiB at most: far more than
the spaces and namespaces one server writes to at a time; past it they are decoded
afresh."""


@dataclass(slots=True)
class SpaceSchema:
    """One stored schema, the namespace's or a space's own (``source`` says which)."""

    version: int = 0
    predicates: dict[str, dict[str, object]] = field(default_factory=dict)
    relation_types: dict[str, dict[str, object]] = field(default_factory=dict)
    entity_types: list[str] = field(default_factory=list)
    source: str = FROM_NAMESPACE

    def predicate(self, name: str) -> dict[str, object] | None:
        """The declaration of predicate ``name``, or None when undeclared."""
        return self.predicates.get(name)

    def is_stateful(self, name: str) -> bool:
        """True when ``name`` holds one current value per subject."""
        decl = self.predicates.get(name)
        return bool(decl and decl.get("stateful"))

    def encode(self) -> bytes:
        """The stored row."""
        return cbor.encode(
            {
                "version": self.version,
                "predicates": self.predicates,
                "relation_types": self.relation_types,
                "entity_types": self.entity_types,
            }
        )


_EMPTY: Final = SpaceSchema()
"""The schema of a namespace that declared nothing (shared, as :func:`load_schema`'s
answers are)."""


def schema_scope(namespace: str, space: str | None) -> Scope:
    """The scope whose row a SCHEMA_PUT or SCHEMA_GET with ``space`` names: the
    namespace's schema when ``space`` is absent, else that space's own."""
    return Scope(namespace, NAMESPACE_SCHEMA_SPACE if space is None else space)


def _source(scope: Scope) -> str:
    """Which kind of schema the row under ``scope``'s prefix is."""
    return FROM_NAMESPACE if scope.space == NAMESPACE_SCHEMA_SPACE else FROM_SPACE


def _decode(raw: bytes, source: str) -> SpaceSchema:
    """A stored schema row."""
    row = cbor.decode_stored(raw)
    assert isinstance(row, dict)
    version, predicates = row["version"], row["predicates"]
    relation_types, entity_types = row["relation_types"], row["entity_types"]
    assert isinstance(version, int) and isinstance(predicates, dict)
    assert isinstance(relation_types, dict) and isinstance(entity_types, list)
    return SpaceSchema(
        version,
        {str(k): dict(v) for k, v in predicates.items() if isinstance(v, dict)},
        {str(k): dict(v) for k, v in relation_types.items() if isinstance(v, dict)},
        [str(t) for t in entity_types],
        source,
    )


def _stored(store: Store, txn: lmdb.Transaction, scope: Scope) -> SpaceSchema | None:
    """The schema row stored under ``scope``'s prefix, or None: a copy of its own, which
    the caller may change."""
    raw = txn.get(scope.key(), db=store.table(SCHEMA))
    return None if raw is None else _decode(bytes(raw), _source(scope))


_decoded: dict[tuple[str, bytes], SpaceSchema] = {}
"""Schemas as :func:`load_schema` read them, by (source, stored row). A row is a
deterministic encoding of its whole schema, version included, so a put makes a new
key rather than a stale entry, and a row decodes the same in any store."""


def _shared(store: Store, txn: lmdb.Transaction, scope: Scope) -> SpaceSchema | None:
    """:func:`_stored`, decoded once per stored row and shared with every later read of
    the same row: never changed by its callers."""
    raw = txn.get(scope.key(), db=store.table(SCHEMA))
    if raw is None:
        return None
    key = (_source(scope), bytes(raw))
    found = _decoded.get(key)
    if found is None:
        if len(_decoded) >= MAX_DECODED_SCHEMAS:
            _decoded.clear()  # rows of old versions are never asked for again
        found = _decoded[key] = _decode(key[1], key[0])
    return found


def load_schema(store: Store, txn: lmdb.Transaction, scope: Scope) -> SpaceSchema:
    """The schema in force in ``scope``: the space's own when it has one, else the
    namespace's (empty, version 0, when nothing was declared). Every write of a
    statement or a relation reads it, so a row is decoded once, not once per write;
    the answer is shared with other reads and must not be changed."""
    own = _shared(store, txn, scope)
    if own is not None:
        return own
    namespace = _shared(store, txn, schema_scope(scope.namespace, None))
    return _EMPTY if namespace is None else namespace


def cardinality_of(store: Store, txn: lmdb.Transaction, scope: Scope, type_name: str) -> str:
    """The declared cardinality of a relation type (many_to_many when undeclared)."""
    decl = load_schema(store, txn, scope).relation_types.get(type_name)
    return str(decl["cardinality"]) if decl else OPEN_CARDINALITY


def check_entity_type(
    store: Store, txn: lmdb.Transaction, scope: Scope, type_: str | None, field: str
) -> None:
    """Refuse a new entity (or a pending name) of ``type_`` when the schema in force in
    ``scope`` declares entity types and ``type_`` is not one of them: INVALID_ARGUMENT
    naming ``field``. An untyped entity, and any type where none is declared, pass."""
    if type_ is None:
        return
    declared = load_schema(store, txn, scope).entity_types
    if declared and type_ not in declared:
        raise InvalidArgument(
            f"entity type {type_!r} is not one of the entity types the schema in force "
            f"in space {scope.space!r} declares",
            field=field,
        )


def plan_schema_put(
    ctx: PlanContext, scope: Scope, request: SchemaPut
) -> tuple[list[Change], SchemaPutOk]:
    """SCHEMA_PUT: declare or redeclare; the version goes up by one.

    A put that leaves every declaration as it is (a repeat, or one that
    redeclares entries exactly as they stand) answers the current version and
    plans no change. SCHEMA_PUT has no ``request_id`` (spec/02-data-model.md §6), so this is
    what makes a client's retry harmless: it must not look like a new version.
    """
    target = schema_scope(scope.namespace, request.space)
    source = FROM_NAMESPACE if request.space is None else FROM_SPACE
    # A space's first put starts its own schema from empty, not from the namespace's.
    current = _stored(ctx.store, ctx.txn, target) or SpaceSchema(source=source)
    schema = _stored(ctx.store, ctx.txn, target) or SpaceSchema(source=source)
    for p in request.predicates or ():
        decl: dict[str, object] = {"stateful": p.stateful}
        if p.kind is not None:
            decl["kind"] = p.kind
        schema.predicates[p.name] = decl
    for r in request.relation_types or ():
        schema.relation_types[r.name] = {
            "cardinality": r.cardinality,
            "symmetric": bool(r.symmetric),
        }
    for t in request.entity_types or ():
        if t not in schema.entity_types:
            schema.entity_types.append(t)
    if (schema.predicates, schema.relation_types, schema.entity_types) == (
        current.predicates,
        current.relation_types,
        current.entity_types,
    ):
        return [], SchemaPutOk(version=current.version)
    schema.version += 1
    return [Put(SCHEMA, target.key(), schema.encode())], SchemaPutOk(version=schema.version)


def read_schema_get(ctx: ReadContext, scope: Scope, request: SchemaGet) -> Schema:
    """SCHEMA_GET: every declaration, in name order, of the namespace's schema
    (``space`` absent) or of the one in force in the space, and which it is."""
    if request.space is None:
        schema = _stored(ctx.store, ctx.txn, schema_scope(scope.namespace, None)) or SpaceSchema()
    else:
        schema = load_schema(ctx.store, ctx.txn, scope)
    predicates = tuple(
        PredicateDecl(
            name=name,
            kind=str(d["kind"]) if "kind" in d else None,
            stateful=bool(d.get("stateful")),
        )
        for name, d in sorted(schema.predicates.items())
    )
    relation_types = tuple(
        RelationTypeDecl(
            name=name,
            cardinality=str(d["cardinality"]),
            symmetric=bool(d.get("symmetric")),
        )
        for name, d in sorted(schema.relation_types.items())
    )
    return Schema(
        predicates=predicates,
        relation_types=relation_types,
        entity_types=tuple(schema.entity_types),
        version=schema.version,
        scope=schema.source,
    )
