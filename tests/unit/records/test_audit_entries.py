"""The audit log (spec/02-data-model.md §3): the entry each audited write leaves, read the way
``GET /v1/audit`` reads them (:meth:`Database.audit`)."""

from __future__ import annotations

import hashlib

from brain.engine.database import Database
from brain.wire.messages.entity_ops import (
    EntityCreate,
    EntityCreateOk,
    EntityMerge,
    EntityMergeOk,
    EntityTombstone,
    EntityUnmerge,
)
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget, ForgetOk
from brain.wire.messages.records import Evidence
from brain.wire.messages.relation_ops import RelationCreate, RelationCreateOk, RelationTombstone
from brain.wire.messages.review_ops import ReviewDecide, ReviewList, ReviewListOk
from brain.wire.messages.schema_ops import PredicateDecl, SchemaPut
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementRetract,
)
from brain.wire.messages.values import EntityRef, NameRef, TextValue
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.unit.common import NS, rid


def run(db: Database, opcode: Opcode, request: Message) -> Message:
    return db.execute(NS, opcode, request)


def newest(db: Database) -> dict[str, object]:
    """The newest audit entry of the test namespace."""
    entries = db.audit(NS, 1)
    assert entries, "no audit entry was written"
    return entries[0]


def remember(db: Database, text: str) -> bytes:
    answer = run(db, Opcode.ENCODE, Encode(request_id=rid(), text=text))
    assert isinstance(answer, EncodeOk)
    return answer.memory_id


def claim(db: Database, value: str, *memories: bytes, predicate: str = "said") -> bytes:
    answer = run(
        db,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            request_id=rid(),
            kind="fact",
            subject=NameRef(name="Zoe"),
            predicate=predicate,
            object_=TextValue(text=value),
            evidence=tuple(Evidence(memory=m) for m in memories) or None,
        ),
    )
    assert isinstance(answer, StatementCreateOk)
    return answer.statement_id


def entity(db: Database, name: str) -> bytes:
    answer = run(db, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name=name))
    assert isinstance(answer, EntityCreateOk)
    return answer.entity_id


def forget(db: Database, memory: bytes, mode: str) -> ForgetOk:
    answer = run(db, Opcode.FORGET, Forget(request_id=rid(), memory=memory, mode=mode))
    assert isinstance(answer, ForgetOk)
    return answer


def test_retract(db: Database) -> None:
    statement = claim(db, "v")
    run(db, Opcode.STATEMENT_RETRACT, StatementRetract(request_id=rid(), id=statement))
    entry = newest(db)
    assert entry["operation"] == "statement_retract" and entry["records"] == [statement]
    assert "cascaded" not in entry


def test_soft_forget_names_the_statements_it_tombstoned(db: Database) -> None:
    memory, other = remember(db, "the sky is green"), remember(db, "grass is blue")
    only_cited = claim(db, "green", memory)
    claim(db, "still cited elsewhere", memory, other)  # another memory still stands
    claim(db, "unrelated", other)
    assert forget(db, memory, "soft").statements_tombstoned == 1
    entry = newest(db)
    assert entry["operation"] == "forget_soft"
    assert entry["records"] == [memory] and entry["cascaded"] == [only_cited]


def test_hard_forget_names_every_memory_and_the_statements_it_retracted(db: Database) -> None:
    memory = remember(db, "a secret")
    first, second = claim(db, "one", memory), claim(db, "two", memory)
    forget(db, memory, "soft")  # tombstones both, and frees the text to be stored again
    again = remember(db, "a secret")
    third = claim(db, "three", again)
    assert forget(db, again, "hard").statements_tombstoned == 3
    entry = newest(db)
    assert entry["operation"] == "forget_hard"
    assert entry["records"] == [again, memory]
    cascaded = entry["cascaded"]
    assert isinstance(cascaded, list) and sorted(cascaded) == sorted([first, second, third])


def test_a_forget_that_changes_no_statement_has_no_cascade(db: Database) -> None:
    memory = remember(db, "nothing cites this")
    forget(db, memory, "soft")
    entry = newest(db)
    assert entry["operation"] == "forget_soft" and entry["records"] == [memory]
    assert "cascaded" not in entry


def test_override_forgotten(db: Database) -> None:
    memory = remember(db, "said once")
    forget(db, memory, "hard")
    run(db, Opcode.ENCODE, Encode(request_id=rid(), text="said once", override_forgotten=True))
    entries = db.audit(NS, 2)
    operations = [e["operation"] for e in entries]
    assert "override_forgotten" in operations
    override = entries[operations.index("override_forgotten")]
    assert override["records"] == [hashlib.sha256(b"said once").digest()]


def test_entity_tombstone_and_unmerge(db: Database) -> None:
    keep, gone, doomed = entity(db, "Keep"), entity(db, "Gone"), entity(db, "Doomed")
    run(db, Opcode.ENTITY_TOMBSTONE, EntityTombstone(request_id=rid(), id=doomed))
    entry = newest(db)
    assert entry["operation"] == "entity_tombstone" and entry["records"] == [doomed]
    merged = run(db, Opcode.ENTITY_MERGE, EntityMerge(request_id=rid(), keep=keep, merge=gone))
    assert isinstance(merged, EntityMergeOk)
    entry = newest(db)
    assert entry["operation"] == "entity_merge"
    assert entry["records"] == [merged.merge_id, keep, gone]
    run(db, Opcode.ENTITY_UNMERGE, EntityUnmerge(request_id=rid(), merge_id=merged.merge_id))
    entry = newest(db)
    assert entry["operation"] == "entity_unmerge"
    assert entry["records"] == [merged.merge_id, keep, gone]


def test_relation_tombstone_keeps_the_reason(db: Database) -> None:
    a, b = entity(db, "A"), entity(db, "B")
    made = run(
        db,
        Opcode.RELATION_CREATE,
        RelationCreate(
            request_id=rid(), type_="knows", from_=EntityRef(entity=a), to=EntityRef(entity=b)
        ),
    )
    assert isinstance(made, RelationCreateOk)
    request = RelationTombstone(request_id=rid(), id=made.relation_id, reason="met by mistake")
    run(db, Opcode.RELATION_TOMBSTONE, request)
    entry = newest(db)
    assert entry["operation"] == "relation_tombstone"
    assert entry["records"] == [made.relation_id] and entry["reason"] == "met by mistake"


def test_contradiction_decision(db: Database) -> None:
    run(
        db,
        Opcode.SCHEMA_PUT,
        SchemaPut(predicates=(PredicateDecl(name="born", kind="fact", stateful=False),)),
    )
    old = claim(db, "Oslo", predicate="born")
    new = claim(db, "Rome", predicate="born")
    listed = run(db, Opcode.REVIEW_LIST, ReviewList())
    assert isinstance(listed, ReviewListOk)
    (item,) = listed.items
    assert item.kind == "contradiction"
    decision = ReviewDecide(request_id=rid(), review_id=item.review_id, decision="reject_new")
    run(db, Opcode.REVIEW_DECIDE, decision)
    entry = newest(db)
    assert entry["operation"] == "review_reject_new"
    assert entry["records"] == [item.review_id, old, new]
