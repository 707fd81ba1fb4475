"""An export carries the namespace's schema, and an import puts it back in force.

The namespace's schema is keyed by the scope prefix of a space name no request
can give (spec/02-data-model.md §6), inside the namespace's key range, so a
namespace's export holds it beside every space's own.
"""

from __future__ import annotations

from pathlib import Path

import brain
from brain.engine.admin.transfer import Header, Row
from brain.engine.database import Database
from brain.engine.records.schema import schema_scope
from brain.wire.messages.schema_ops import PredicateDecl, Schema, SchemaGet, SchemaPut
from brain.wire.messages.statement_ops import StatementCreate, StatementCreateOk
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid

WORKS_AT = PredicateDecl(name="works_at", kind="fact", stateful=True)
LIVES_IN = PredicateDecl(name="lives_in", stateful=True)


def _copy(source: Database, target: Database) -> list[Row]:
    lines = list(source.export(NS))
    header, rows = lines[0], lines[1:-1]
    head = Header(NS, bytes.fromhex(str(header["export_id"])), int(str(header["clock"])))
    parsed = [
        Row(str(r["table"]).encode(), bytes.fromhex(str(r["key"])), bytes.fromhex(str(r["value"])))
        for r in rows
    ]
    target.import_rows(head, parsed)
    return parsed


def _schema(db: Database, space: str | None) -> Schema:
    answer = db.execute(NS, Opcode.SCHEMA_GET, SchemaGet(space=space))
    assert isinstance(answer, Schema)
    return answer


def _works_at(db: Database, space: str, value: str) -> StatementCreateOk:
    request = StatementCreate(
        space=space,
        request_id=rid(),
        kind="fact",
        subject=NameRef(name="Ada"),
        predicate="works_at",
        object_=TextValue(text=value),
    )
    answer = db.execute(NS, Opcode.STATEMENT_CREATE, request)
    assert isinstance(answer, StatementCreateOk)
    return answer


def test_an_import_puts_the_namespace_schema_back_in_force(tmp_path: Path) -> None:
    with brain.open(tmp_path / "a") as source, brain.open(tmp_path / "b") as target:
        source.execute(NS, Opcode.SCHEMA_PUT, SchemaPut(predicates=(WORKS_AT,)))
        source.execute(NS, Opcode.SCHEMA_PUT, SchemaPut(space="own", predicates=(LIVES_IN,)))
        _works_at(source, "s1", "Acme")
        rows = _copy(source, target)
        # A space the export never wrote to follows the imported namespace schema.
        first = _works_at(target, "s2", "Acme")
        assert _works_at(target, "s2", "Globex").superseded == first.statement_id
        key = schema_scope(NS, None).key()
        assert any(row.table == b"schema" and row.key == key for row in rows)
        for space in (None, "s1", "own"):
            assert _schema(target, space) == _schema(source, space)
        assert _schema(target, "s1").scope == "namespace"
        assert _schema(target, "own").scope == "space"
