"""Schema declarations, stateful predicates, contradictions and their review, audit."""

from __future__ import annotations

from pathlib import Path

import lmdb
import pytest

import brain
from brain import cbor
from brain.engine.database import Database
from brain.errors import Conflict, InvalidArgument, NotFound
from brain.wire.messages.review_ops import ReviewDecide, ReviewList, ReviewListOk
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
    StatementDraft,
    StatementGet,
    StatementGetOk,
    StatementHistory,
    StatementHistoryOk,
    StatementList,
    StatementListOk,
    StatementSupersede,
    StatementSupersedeOk,
    StatementTombstone,
)
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid


def declare(db: Database, **kw: object) -> int:
    answer = db.execute(NS, Opcode.SCHEMA_PUT, SchemaPut(**kw))  # type: ignore[arg-type]
    assert isinstance(answer, SchemaPutOk)
    return answer.version


def say(db: Database, subject: str, predicate: str, value: str, **kw: object) -> StatementCreateOk:
    answer = db.execute(
        NS,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            request_id=rid(),
            kind="fact",
            subject=NameRef(name=subject),
            predicate=predicate,
            object_=TextValue(text=value),
            **kw,  # type: ignore[arg-type]
        ),
        actor=b"k" * 16,
    )
    assert isinstance(answer, StatementCreateOk)
    return answer


def current(db: Database, subject: str, predicate: str) -> list[str]:
    answer = db.execute(
        NS, Opcode.STATEMENT_LIST, StatementList(subject=NameRef(name=subject), predicate=predicate)
    )
    assert isinstance(answer, StatementListOk)
    return [s.object_.text for s in answer.statements]  # type: ignore[union-attr]


def reviews(db: Database) -> ReviewListOk:
    answer = db.execute(NS, Opcode.REVIEW_LIST, ReviewList())
    assert isinstance(answer, ReviewListOk)
    return answer


def test_schema_put_and_get(db: Database) -> None:
    empty = db.execute(NS, Opcode.SCHEMA_GET, SchemaGet())
    assert isinstance(empty, Schema) and empty.version == 0 and empty.predicates == ()
    assert declare(db, predicates=(PredicateDecl(name="lives_in", stateful=True),)) == 1
    assert (
        declare(
            db,
            relation_types=(RelationTypeDecl(name="manages", cardinality="one_to_many"),),
            entity_types=("person",),
        )
        == 2
    )
    got = db.execute(NS, Opcode.SCHEMA_GET, SchemaGet())
    assert isinstance(got, Schema) and got.version == 2
    assert got.predicates == (PredicateDecl(name="lives_in", stateful=True),)
    assert got.relation_types[0].cardinality == "one_to_many"
    assert got.entity_types == ("person",)
    # Declared without a space: the namespace's, in force in every space.
    other = db.execute(NS, Opcode.SCHEMA_GET, SchemaGet(space="elsewhere"))
    assert isinstance(other, Schema) and other == got and other.scope == "namespace"
    elsewhere = db.execute("elsewhere", Opcode.SCHEMA_GET, SchemaGet())
    assert isinstance(elsewhere, Schema) and elsewhere.version == 0


def test_schema_put_that_changes_nothing_writes_nothing(db: Database) -> None:
    """SCHEMA_PUT has no request_id: a repeat answers the version it left, takes no LSN."""
    full = {
        "predicates": (
            PredicateDecl(name="lives_in", stateful=True),
            PredicateDecl(name="born_in", kind="fact", stateful=False),
        ),
        "relation_types": (RelationTypeDecl(name="manages", cardinality="one_to_many"),),
        "entity_types": ("person", "city"),
    }
    assert declare(db, **full) == 1
    lsn = db.applied_lsn
    assert declare(db, **full) == 1
    # A part of what stands, an entity type already there, nothing at all: no change either.
    assert declare(db, predicates=(PredicateDecl(name="lives_in", stateful=True),)) == 1
    assert declare(db, entity_types=("city",)) == 1
    assert declare(db) == 1
    assert db.applied_lsn == lsn
    # Any real change is a new version and a write: a flag, a new name, a new type.
    assert declare(db, predicates=(PredicateDecl(name="lives_in", stateful=False),)) == 2
    assert (
        declare(
            db,
            relation_types=(
                RelationTypeDecl(name="manages", cardinality="one_to_many", symmetric=True),
            ),
        )
        == 3
    )
    assert declare(db, entity_types=("city", "company")) == 4
    assert db.applied_lsn == lsn + 3
    got = db.execute(NS, Opcode.SCHEMA_GET, SchemaGet())
    assert isinstance(got, Schema) and got.version == 4
    assert got.entity_types == ("person", "city", "company")
    # A fresh space stays at version 0 after an empty put.
    empty = db.execute(NS, Opcode.SCHEMA_PUT, SchemaPut(space="elsewhere"))
    assert isinstance(empty, SchemaPutOk) and empty.version == 0
    assert db.applied_lsn == lsn + 3


def test_stateful_predicate_supersedes_automatically(db: Database) -> None:
    declare(db, predicates=(PredicateDecl(name="lives_in", stateful=True),))
    first = say(db, "Ann", "lives_in", "Oslo")
    second = say(db, "Ann", "lives_in", "Bergen", valid_from=100)
    assert second.superseded == first.statement_id
    assert second.version == 2 and second.chain_root == first.statement_id
    assert current(db, "Ann", "lives_in") == ["Bergen"]
    old = db.execute(NS, Opcode.STATEMENT_GET, StatementGet(id=first.statement_id))
    assert isinstance(old, StatementGetOk)
    assert old.statement.superseded_by == second.statement_id and old.statement.valid_to == 100
    # Another subject keeps its own value.
    say(db, "Ben", "lives_in", "Rome")
    assert current(db, "Ann", "lives_in") == ["Bergen"] and current(db, "Ben", "lives_in") == [
        "Rome"
    ]


def test_open_predicates_accumulate_without_review(db: Database) -> None:
    say(db, "Cid", "likes", "tea")
    say(db, "Cid", "likes", "jazz")
    assert current(db, "Cid", "likes") == ["tea", "jazz"]
    assert reviews(db).items == ()


def _contradiction(db: Database) -> tuple[StatementCreateOk, StatementCreateOk, bytes]:
    declare(db, predicates=(PredicateDecl(name="born_in", kind="fact", stateful=False),))
    old = say(db, "Dee", "born_in", "Paris")
    say(db, "Dee", "born_in", "Paris")  # agreeing is not a contradiction
    assert reviews(db).items == ()
    new = say(db, "Dee", "born_in", "Lyon")
    (item,) = reviews(db).items
    assert item.kind == "contradiction" and item.records[-1] == new.statement_id
    assert old.statement_id in item.records
    return old, new, item.review_id


def test_contradiction_keep_both(db: Database) -> None:
    _, _, review = _contradiction(db)
    db.execute(
        NS,
        Opcode.REVIEW_DECIDE,
        ReviewDecide(request_id=rid(), review_id=review, decision="keep_both"),
    )
    assert sorted(current(db, "Dee", "born_in")) == ["Lyon", "Paris", "Paris"]
    assert reviews(db).items == ()
    with pytest.raises(Conflict):
        db.execute(
            NS,
            Opcode.REVIEW_DECIDE,
            ReviewDecide(request_id=rid(), review_id=review, decision="supersede"),
        )


def test_contradiction_supersede(db: Database) -> None:
    old, new, review = _contradiction(db)
    db.execute(
        NS,
        Opcode.REVIEW_DECIDE,
        ReviewDecide(request_id=rid(), review_id=review, decision="supersede"),
    )
    assert current(db, "Dee", "born_in") == ["Lyon"]  # both statements of Paris were named
    got = db.execute(NS, Opcode.STATEMENT_GET, StatementGet(id=old.statement_id))
    assert isinstance(got, StatementGetOk) and got.statement.superseded_by == new.statement_id
    newest = db.execute(NS, Opcode.STATEMENT_GET, StatementGet(id=new.statement_id))
    assert isinstance(newest, StatementGetOk) and newest.statement.supersedes is not None
    linked = db.execute(NS, Opcode.STATEMENT_GET, StatementGet(id=newest.statement.supersedes))
    assert isinstance(linked, StatementGetOk)
    assert linked.statement.superseded_by == new.statement_id
    # The newest continues the chain of the statement recorded last (the second Paris):
    # one history, read from either end, and the next version follows on from it.
    chain = [linked.statement.id, new.statement_id]
    assert newest.statement.chain_root == linked.statement.chain_root == chain[0]
    assert newest.statement.version == linked.statement.version + 1 == 2
    for either in chain:
        history = db.execute(NS, Opcode.STATEMENT_HISTORY, StatementHistory(id=either))
        assert isinstance(history, StatementHistoryOk)
        assert [v.id for v in history.versions] == chain
    draft = StatementDraft(
        kind="fact",
        subject=NameRef(name="Dee"),
        predicate="born_in",
        object_=TextValue(text="Nice"),
    )
    third = db.execute(
        NS,
        Opcode.STATEMENT_SUPERSEDE,
        StatementSupersede(request_id=rid(), old=new.statement_id, new=draft),
    )
    assert isinstance(third, StatementSupersedeOk)
    assert (third.chain_root, third.version) == (chain[0], 3)
    history = db.execute(NS, Opcode.STATEMENT_HISTORY, StatementHistory(id=chain[0]))
    assert isinstance(history, StatementHistoryOk)
    assert [v.id for v in history.versions] == [*chain, third.statement_id]


def test_contradiction_reject_new_and_bad_decisions(db: Database) -> None:
    _, new, review = _contradiction(db)
    with pytest.raises(InvalidArgument) as info:
        db.execute(
            NS,
            Opcode.REVIEW_DECIDE,
            ReviewDecide(request_id=rid(), review_id=review, decision="merge"),
        )
    assert info.value.field == "decision"
    with pytest.raises(InvalidArgument) as info:  # into belongs to a merge of a name only
        db.execute(
            NS,
            Opcode.REVIEW_DECIDE,
            ReviewDecide(
                request_id=rid(), review_id=review, decision="reject_new", into=new.statement_id
            ),
        )
    assert info.value.field == "into"
    db.execute(
        NS,
        Opcode.REVIEW_DECIDE,
        ReviewDecide(request_id=rid(), review_id=review, decision="reject_new"),
    )
    assert current(db, "Dee", "born_in") == ["Paris", "Paris"]
    got = db.execute(NS, Opcode.STATEMENT_GET, StatementGet(id=new.statement_id))
    assert isinstance(got, StatementGetOk) and got.statement.tombstone_reason == "user_request"
    with pytest.raises(NotFound):
        db.execute(
            NS,
            Opcode.REVIEW_DECIDE,
            ReviewDecide(request_id=rid(), review_id=rid(), decision="keep_both"),
        )


def test_audit_entries_are_written(tmp_path: Path) -> None:
    with brain.open(tmp_path / "d") as db:
        s = say(db, "Eli", "p", "v")
        db.execute(
            NS,
            Opcode.STATEMENT_TOMBSTONE,
            StatementTombstone(request_id=rid(), id=s.statement_id, reason="typo"),
            actor=b"a" * 16,
        )
    env = lmdb.open(str(tmp_path / "d" / "lmdb"), max_dbs=64, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            rows = [
                cbor.decode(bytes(v))
                for _, v in txn.cursor(db=env.open_db(b"audit", txn=txn, create=False))
            ]
    finally:
        env.close()
    # The statement's name made an entity (audited), then the tombstone.
    assert [r["operation"] for r in rows if isinstance(r, dict)] == [
        "entity_create",
        "statement_tombstone",
    ]
    made, entry = rows
    assert isinstance(made, dict) and made["reason"] == "named by a write"
    assert isinstance(entry, dict)
    assert entry["operation"] == "statement_tombstone" and entry["reason"] == "typo"
    assert entry["key_id"] == b"a" * 16 and entry["records"] == [s.statement_id]
