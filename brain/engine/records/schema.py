"""The schema of a space: declared predicates, relation types and entity types.

Undeclared predicates and types are open vocabulary: not stateful,
many-to-many (spec/02-data-model.md §6). SCHEMA_PUT declares or redeclares entries and
bumps the version; it never removes one, and a put that changes nothing
answers the current version and writes nothing. A declaration applies to writes
from its record time on; it does not rewrite statements already stored
(declaring a predicate stateful does not supersede the several current values
a subject may already have; the next write of that predicate does).

The schema of a scope is one row under the scope prefix in ``schema``.
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
from brain.wire.messages.schema_ops import (
    PredicateDecl,
    RelationTypeDecl,
    Schema,
    SchemaGet,
    SchemaPut,
    SchemaPutOk,
)

__all__ = [
    "OPEN_CARDINALITY",
    "SpaceSchema",
    "cardinality_of",
    "load_schema",
    "plan_schema_put",
    "read_schema_get",
]

OPEN_CARDINALITY: Final = "many_to_many"


@dataclass(slots=True)
class SpaceSchema:
    """The declarations in force in one scope."""

    version: int = 0
    predicates: dict[str, dict[str, object]] = field(default_factory=dict)
    relation_types: dict[str, dict[str, object]] = field(default_factory=dict)
    entity_types: list[str] = field(default_factory=list)

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


def load_schema(store: Store, txn: lmdb.Transaction, scope: Scope) -> SpaceSchema:
    """The schema of ``scope`` (empty when nothing was declared)."""
    raw = txn.get(scope.key(), db=store.table(SCHEMA))
    if raw is None:
        return SpaceSchema()
    row = cbor.decode(bytes(raw))
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
    )


def cardinality_of(store: Store, txn: lmdb.Transaction, scope: Scope, type_name: str) -> str:
    """The declared cardinality of a relation type (many_to_many when undeclared)."""
    decl = load_schema(store, txn, scope).relation_types.get(type_name)
    return str(decl["cardinality"]) if decl else OPEN_CARDINALITY


def plan_schema_put(
    ctx: PlanContext, scope: Scope, request: SchemaPut
) -> tuple[list[Change], SchemaPutOk]:
    """SCHEMA_PUT: declare or redeclare; the version goes up by one.

    A put that leaves every declaration as it is (a repeat, or one that
    redeclares entries exactly as they stand) answers the current version and
    plans no change. SCHEMA_PUT has no ``request_id`` (spec/02-data-model.md §6), so this is
    what makes a client's retry harmless: it must not look like a new version.
    """
    current = load_schema(ctx.store, ctx.txn, scope)
    schema = load_schema(ctx.store, ctx.txn, scope)
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
    return [Put(SCHEMA, scope.key(), schema.encode())], SchemaPutOk(version=schema.version)


def read_schema_get(ctx: ReadContext, scope: Scope, request: SchemaGet) -> Schema:
    """SCHEMA_GET: every declaration, in name order."""
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
    )
