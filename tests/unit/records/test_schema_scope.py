"""Whose schema is in force: the namespace's in every space, unless a space has its own.

A SCHEMA_PUT without ``space`` declares the namespace's schema; one with
``space`` declares that space's own, which replaces the namespace's there whole;
SCHEMA_GET says which of the two it answers (spec/02-data-model.md §6).
"""

from __future__ import annotations

import pytest

from brain.engine.database import Database
from brain.engine.records.schema import NAMESPACE_SCHEMA_SPACE, schema_scope
from brain.engine.store.scope import Scope
from brain.errors import InvalidArgument
from brain.wire.messages.relation_ops import RelationCreate, RelationCreateOk
from brain.wire.messages.schema_ops import (
    PredicateDecl,
    RelationTypeDecl,
    Schema,
    SchemaGet,
    SchemaPut,
    SchemaPutOk,
)
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementList,
    StatementListOk,
)
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid

WORKS_AT = PredicateDecl(name="works_at", kind="fact", stateful=True)
LIVES_IN = PredicateDecl(name="lives_in", stateful=True)


def declare(db: Database, space: str | None = None, **kw: object) -> int:
    request = SchemaPut(space=space, **kw)  # type: ignore[arg-type]
    answer = db.execute(NS, Opcode.SCHEMA_PUT, request)
    assert isinstance(answer, SchemaPutOk)
    return answer.version


def schema(db: Database, space: str | None = None) -> Schema:
    answer = db.execute(NS, Opcode.SCHEMA_GET, SchemaGet(space=space))
    assert isinstance(answer, Schema)
    return answer


def say(db: Database, space: str | None, predicate: str, value: str) -> StatementCreateOk:
    request = StatementCreate(
        space=space,
        request_id=rid(),
        kind="fact",
        subject=NameRef(name="Ada"),
        predicate=predicate,
        object_=TextValue(text=value),
    )
    answer = db.execute(NS, Opcode.STATEMENT_CREATE, request)
    assert isinstance(answer, StatementCreateOk)
    return answer


def current(db: Database, space: str | None, predicate: str) -> list[str]:
    request = StatementList(space=space, subject=NameRef(name="Ada"), predicate=predicate)
    answer = db.execute(NS, Opcode.STATEMENT_LIST, request)
    assert isinstance(answer, StatementListOk)
    return sorted(s.object_.text for s in answer.statements)  # type: ignore[union-attr]


def behaves_stateful(db: Database, space: str | None, predicate: str) -> bool:
    """Whether a second value of ``predicate`` supersedes the first in ``space``."""
    first = say(db, space, predicate, "first")
    second = say(db, space, predicate, "second")
    if current(db, space, predicate) == ["second"]:
        assert second.superseded == first.statement_id
        return True
    assert current(db, space, predicate) == ["first", "second"]
    return False


def test_a_schema_without_space_is_in_force_in_every_space(db: Database) -> None:
    assert declare(db, predicates=(WORKS_AT,)) == 1
    assert behaves_stateful(db, "s1", "works_at")
    assert behaves_stateful(db, None, "works_at")
    assert behaves_stateful(db, "default", "works_at")
    # Another namespace has a schema of its own: nothing declared there.
    other = StatementCreate(
        request_id=rid(),
        kind="fact",
        subject=NameRef(name="Ada"),
        predicate="works_at",
        object_=TextValue(text="one"),
    )
    db.execute("elsewhere", Opcode.STATEMENT_CREATE, other)
    again = StatementCreate(
        request_id=rid(),
        kind="fact",
        subject=NameRef(name="Ada"),
        predicate="works_at",
        object_=TextValue(text="two"),
    )
    answer = db.execute("elsewhere", Opcode.STATEMENT_CREATE, again)
    assert isinstance(answer, StatementCreateOk) and answer.superseded is None


def test_a_namespace_cardinality_holds_in_every_space(db: Database) -> None:
    declare(db, relation_types=(RelationTypeDecl(name="reports_to", cardinality="many_to_one"),))

    def reports(boss: str) -> RelationCreateOk:
        request = RelationCreate(
            space="s1",
            request_id=rid(),
            type_="reports_to",
            from_=NameRef(name="Ann"),
            to=NameRef(name=boss),
        )
        answer = db.execute(NS, Opcode.RELATION_CREATE, request)
        assert isinstance(answer, RelationCreateOk)
        return answer

    first = reports("Bo")
    assert reports("Cy").superseded == first.relation_id


def test_a_space_schema_replaces_the_namespace_schema_whole(db: Database) -> None:
    declare(db, predicates=(WORKS_AT,))
    # The space's first put starts its own schema, at its own version 1.
    assert declare(db, "s2", predicates=(LIVES_IN,)) == 1
    assert behaves_stateful(db, "s2", "lives_in")
    assert not behaves_stateful(db, "s2", "works_at")
    # Other spaces keep the namespace's, and a later namespace put does not reach s2.
    assert not behaves_stateful(db, "s1", "lives_in")
    assert declare(db, predicates=(PredicateDecl(name="role", stateful=True),)) == 2
    assert behaves_stateful(db, "s1", "role")
    assert not behaves_stateful(db, "s2", "role")


def test_an_explicit_default_space_is_a_space_of_its_own(db: Database) -> None:
    declare(db, predicates=(WORKS_AT,))
    declare(db, "default", predicates=(LIVES_IN,))
    assert not behaves_stateful(db, None, "works_at")
    assert behaves_stateful(db, "s1", "works_at")
    assert schema(db).scope == "namespace"
    assert [p.name for p in schema(db).predicates] == ["works_at"]
    assert schema(db, "default").scope == "space"


def test_schema_get_names_the_schema_in_force(db: Database) -> None:
    empty = schema(db, "s1")
    assert (empty.version, empty.predicates, empty.scope) == (0, (), "namespace")
    declare(db, predicates=(WORKS_AT,))
    shared = schema(db)
    assert (shared.version, shared.scope) == (1, "namespace")
    assert shared.predicates == (WORKS_AT,)
    # A space without a schema of its own answers the namespace's, saying so.
    assert schema(db, "s1") == shared
    declare(db, "s2", predicates=(LIVES_IN,), entity_types=("person",))
    own = schema(db, "s2")
    assert (own.version, own.scope) == (1, "space")
    assert own.predicates == (LIVES_IN,) and own.entity_types == ("person",)
    # The namespace's is unchanged by the space's put.
    assert schema(db) == shared


def test_a_put_that_declares_nothing_leaves_the_space_on_the_namespace_schema(
    db: Database,
) -> None:
    declare(db, predicates=(WORKS_AT,))
    before = db.applied_lsn
    assert declare(db, "s1") == 0
    assert db.applied_lsn == before
    assert schema(db, "s1").scope == "namespace"
    # A repeat of the namespace put changes nothing either.
    assert declare(db, predicates=(WORKS_AT,)) == 1
    assert db.applied_lsn == before


def test_the_namespace_schema_key_is_no_space_a_request_can_name() -> None:
    with pytest.raises(InvalidArgument):
        SchemaGet.from_wire({"space": NAMESPACE_SCHEMA_SPACE})
    key = schema_scope(NS, None).key()
    assert key == Scope(NS, NAMESPACE_SCHEMA_SPACE).prefix
    # Inside the namespace's key range, apart from every space's.
    assert key[:16] == Scope.of(NS, None).prefix[:16]
    assert key != Scope.of(NS, None).prefix
