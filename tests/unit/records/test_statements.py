"""Statements in the engine: chains, the two time axes, forgetting strengths, listing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import brain
from brain.engine.database import Database
from brain.errors import AsOfInFuture, Conflict, InvalidArgument, NotFound
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.messages.records import Statement
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
    StatementRetract,
    StatementSupersede,
    StatementSupersedeOk,
    StatementTombstone,
)
from brain.wire.messages.values import EntityRef, NameRef, TextValue
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.unit.common import NS, rid

FEB_1 = 1_706_745_600_000_000_000
JAN_15 = FEB_1 - 17 * 86_400 * 10**9
APR_1 = FEB_1 + 60 * 86_400 * 10**9


def run(db: Database, opcode: Opcode, request: Message) -> Message:
    return db.execute(NS, opcode, request)


def create(
    db: Database, subject: str, predicate: str, value: str, kind: str = "fact", **kw: object
) -> StatementCreateOk:
    answer = run(
        db,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            request_id=rid(),
            kind=kind,
            subject=NameRef(name=subject),
            predicate=predicate,
            object_=TextValue(text=value),
            **kw,  # type: ignore[arg-type]
        ),
    )
    assert isinstance(answer, StatementCreateOk)
    return answer


def supersede(
    db: Database, old: bytes, subject: str, predicate: str, value: str, **kw: object
) -> StatementSupersedeOk:
    draft = StatementDraft(
        kind="fact",
        subject=NameRef(name=subject),
        predicate=predicate,
        object_=TextValue(text=value),
        **kw,  # type: ignore[arg-type]
    )
    answer = run(
        db, Opcode.STATEMENT_SUPERSEDE, StatementSupersede(request_id=rid(), old=old, new=draft)
    )
    assert isinstance(answer, StatementSupersedeOk)
    return answer


def get(db: Database, statement_id: bytes) -> Statement:
    answer = run(db, Opcode.STATEMENT_GET, StatementGet(id=statement_id))
    assert isinstance(answer, StatementGetOk)
    return answer.statement


def listing(db: Database, **kw: object) -> list[Statement]:
    answer = run(db, Opcode.STATEMENT_LIST, StatementList(**kw))  # type: ignore[arg-type]
    assert isinstance(answer, StatementListOk)
    return list(answer.statements)


def texts(rows: list[Statement]) -> list[str]:
    return [r.object_.text for r in rows]  # type: ignore[union-attr]


def test_alice_changed_jobs(db: Database) -> None:
    old = create(db, "Alice", "works_at", "Acme", valid_from=FEB_1 - 400 * 86_400 * 10**9)
    april = db.writer.clock.tick()  # "April 1" on the record axis: after the first belief
    new = supersede(db, old.statement_id, "Alice", "works_at", "Globex", valid_from=FEB_1)
    assert new.version == 2 and new.chain_root == old.statement_id
    alice = {"subject": NameRef(name="alice"), "predicate": "works_at"}
    # What did we believe on April 1?
    assert texts(listing(db, **alice, as_of=april)) == ["Acme"]
    # What was true on April 1 (as of now)?
    assert texts(listing(db, **alice, valid_at=APR_1)) == ["Globex"]
    # On April 1, what did we believe was true on April 1?
    believed = listing(db, **alice, valid_at=APR_1, as_of=april)
    assert texts(believed) == ["Acme"] and believed[0].valid_to is None  # still open then
    # What was true on January 15, including superseded rows?
    jan = listing(db, **alice, valid_at=JAN_15, include_superseded=True)
    assert texts(jan) == ["Acme"] and jan[0].valid_to == FEB_1
    history = run(db, Opcode.STATEMENT_HISTORY, StatementHistory(id=new.statement_id))
    assert isinstance(history, StatementHistoryOk)
    first, second = history.versions
    assert (first.version, second.version) == (1, 2)
    assert first.superseded_by == second.id and second.supersedes == first.id
    assert first.record_invalidated_at == second.recorded_at
    assert first.chain_root == second.chain_root == first.id


def test_name_subjects_resolve_and_create_entities(db: Database) -> None:
    a = create(db, "Bob  Smith", "likes", "tea", kind="preference")
    b = create(db, "bob smith", "likes", "coffee", kind="preference")
    sa, sb = get(db, a.statement_id), get(db, b.statement_id)
    assert isinstance(sa.subject, EntityRef) and sa.subject == sb.subject
    assert texts(listing(db, subject=NameRef(name="BOB SMITH"))) == ["tea", "coffee"]
    assert listing(db, subject=NameRef(name="nobody")) == []
    assert get(db, a.statement_id).confidence == 1.0


def test_supersede_rules(db: Database) -> None:
    s = create(db, "Carol", "city", "Oslo")
    supersede(db, s.statement_id, "Carol", "city", "Bergen")
    with pytest.raises(Conflict):
        supersede(db, s.statement_id, "Carol", "city", "Tromsø")
    other = create(db, "Dave", "city", "Rome")
    with pytest.raises(InvalidArgument) as info:
        supersede(db, other.statement_id, "Carol", "city", "Milan")
    assert info.value.field == "new.subject"
    with pytest.raises(NotFound):
        supersede(db, rid(), "Carol", "city", "x")


def test_tombstone_and_retract(db: Database) -> None:
    keep = create(db, "Eve", "pet", "cat")
    soft = create(db, "Eve", "pet", "dog")
    gone = create(db, "Eve", "pet", "secret snake")
    before = db.writer.clock.tick()
    run(
        db,
        Opcode.STATEMENT_TOMBSTONE,
        StatementTombstone(request_id=rid(), id=soft.statement_id, reason="wrong"),
    )
    run(db, Opcode.STATEMENT_RETRACT, StatementRetract(request_id=rid(), id=gone.statement_id))
    eve = {"subject": NameRef(name="Eve")}
    assert texts(listing(db, **eve)) == ["cat"]
    assert texts(listing(db, **eve, include_tombstoned=True)) == ["cat", "dog"]
    # As of before both, the tombstoned one is restored; the retracted one never returns.
    assert texts(listing(db, **eve, as_of=before)) == ["cat", "dog"]
    assert texts(listing(db, as_of=before, include_tombstoned=True)) == ["cat", "dog"]
    husk = get(db, gone.statement_id)
    assert husk.tombstone_reason == "retracted" and husk.subject is None and husk.object_ is None
    assert get(db, soft.statement_id).tombstone_reason == "user_request"
    with pytest.raises(Conflict):
        run(db, Opcode.STATEMENT_RETRACT, StatementRetract(request_id=rid(), id=gone.statement_id))
    with pytest.raises(Conflict):
        run(
            db,
            Opcode.STATEMENT_TOMBSTONE,
            StatementTombstone(request_id=rid(), id=soft.statement_id),
        )
    with pytest.raises(Conflict):
        supersede(db, soft.statement_id, "Eve", "pet", "x")
    assert keep.statement_id in {r.id for r in listing(db)}


def test_as_of_truth_table_through_list(db: Database) -> None:
    # Rows of spec/04-retrieval.md §5: kept / restored / dropped by the as-of step.
    plain = create(db, "T", "p", "plain")
    t0 = db.writer.clock.tick()
    early = create(db, "T", "q", "superseded before t")
    supersede(db, early.statement_id, "T", "q", "replacement before t")
    late_super = create(db, "T", "r", "superseded after t")
    late_tomb = create(db, "T", "s", "tombstoned after t")
    late_retract = create(db, "T", "u", "retracted after t")
    t = db.writer.clock.tick()
    supersede(db, late_super.statement_id, "T", "r", "replacement after t")
    run(
        db,
        Opcode.STATEMENT_TOMBSTONE,
        StatementTombstone(request_id=rid(), id=late_tomb.statement_id),
    )
    run(
        db,
        Opcode.STATEMENT_RETRACT,
        StatementRetract(request_id=rid(), id=late_retract.statement_id),
    )
    create(db, "T", "v", "recorded after t")
    at_t = set(texts(listing(db, as_of=t)))
    assert at_t == {
        "plain",
        "replacement before t",
        "superseded after t",
        "tombstoned after t",
    }
    assert texts(listing(db, as_of=t0)) == ["plain"]
    assert plain.recorded_at <= t0
    with pytest.raises(AsOfInFuture):
        listing(db, as_of=time.time_ns() + 10**12)


def test_list_paging_and_filters(db: Database) -> None:
    for n in range(7):
        create(
            db,
            "Pager",
            "n",
            str(n),
            kind="event" if n % 2 else "fact",
            **({"event_at": n} if n % 2 else {}),
        )
    first = run(db, Opcode.STATEMENT_LIST, StatementList(limit=3))
    assert isinstance(first, StatementListOk) and first.cursor is not None
    seen = texts(list(first.statements))
    cursor: bytes | None = first.cursor
    while cursor is not None:
        page = run(db, Opcode.STATEMENT_LIST, StatementList(limit=3, cursor=cursor))
        assert isinstance(page, StatementListOk)
        seen += texts(list(page.statements))
        cursor = page.cursor
    assert seen == [str(n) for n in range(7)]
    assert texts(listing(db, kind="event")) == ["1", "3", "5"]
    assert texts(listing(db, kind="event", valid_at=3)) == ["1", "3"]


def test_evidence_must_exist_and_match(db: Database) -> None:
    memory = run(db, Opcode.ENCODE, Encode(request_id=rid(), text="I saw it"))
    assert isinstance(memory, EncodeOk)
    from brain.wire.messages.records import Evidence

    ok = create(
        db, "F", "saw", "it", evidence=(Evidence(memory=memory.memory_id, sha256=memory.sha256),)
    )
    assert get(db, ok.statement_id).evidence == (
        Evidence(memory=memory.memory_id, sha256=memory.sha256),
    )
    with pytest.raises(NotFound) as missing:
        create(db, "F", "saw", "x", evidence=(Evidence(memory=rid()),))
    assert missing.value.field == "evidence[0].memory"
    with pytest.raises(InvalidArgument) as wrong:
        create(db, "F", "saw", "y", evidence=(Evidence(memory=memory.memory_id, sha256=bytes(32)),))
    assert wrong.value.field == "evidence[0].sha256"


def test_statements_are_scoped(db: Database) -> None:
    mine = create(db, "G", "p", "mine")
    with pytest.raises(NotFound):
        db.execute("intruder", Opcode.STATEMENT_GET, StatementGet(id=mine.statement_id))
    with pytest.raises(NotFound):
        db.execute(NS, Opcode.STATEMENT_GET, StatementGet(id=mine.statement_id, space="other"))
    other = db.execute("intruder", Opcode.STATEMENT_LIST, StatementList())
    assert isinstance(other, StatementListOk) and other.statements == ()


def test_statements_survive_reopen(tmp_path: Path) -> None:
    with brain.open(tmp_path / "d") as db:
        s = create(db, "H", "p", "v")
        supersede(db, s.statement_id, "H", "p", "w", valid_from=5)
    with brain.open(tmp_path / "d") as db:
        rows = listing(db, include_superseded=True)
        assert texts(rows) == ["v", "w"] and rows[0].valid_to == 5


def test_statements_of_a_merged_entity_answer_as_the_kept_one(db: Database) -> None:
    from brain.wire.messages.entity_ops import EntityMerge, EntityMergeOk, EntityUnmerge

    a = create(db, "Alexandra", "likes", "chess")
    b = create(db, "Sasha", "likes", "tea")
    keep = get(db, a.statement_id).subject
    gone = get(db, b.statement_id).subject
    assert isinstance(keep, EntityRef) and isinstance(gone, EntityRef) and keep != gone
    merged = run(
        db, Opcode.ENTITY_MERGE, EntityMerge(request_id=rid(), keep=keep.entity, merge=gone.entity)
    )
    assert isinstance(merged, EntityMergeOk)
    assert get(db, b.statement_id).subject == keep
    assert sorted(texts(listing(db, subject=EntityRef(entity=keep.entity)))) == ["chess", "tea"]
    assert sorted(texts(listing(db, subject=NameRef(name="Sasha")))) == ["chess", "tea"]
    run(db, Opcode.ENTITY_UNMERGE, EntityUnmerge(request_id=rid(), merge_id=merged.merge_id))
    assert get(db, b.statement_id).subject == gone
    assert texts(listing(db, subject=EntityRef(entity=keep.entity))) == ["chess"]


def test_gone_records_cannot_be_written_against(db: Database) -> None:
    from brain.wire.messages.entity_ops import EntityTombstone
    from brain.wire.messages.memory_ops import Forget
    from brain.wire.messages.records import Evidence

    s = create(db, "Gone", "p", "v")
    entity = get(db, s.statement_id).subject
    assert isinstance(entity, EntityRef)
    run(db, Opcode.ENTITY_TOMBSTONE, EntityTombstone(request_id=rid(), id=entity.entity))
    with pytest.raises(Conflict) as info:
        run(
            db,
            Opcode.STATEMENT_CREATE,
            StatementCreate(
                request_id=rid(),
                kind="fact",
                subject=entity,
                predicate="p",
                object_=TextValue(text="w"),
            ),
        )
    assert info.value.field == "subject"
    memory = run(db, Opcode.ENCODE, Encode(request_id=rid(), text="to forget"))
    assert isinstance(memory, EncodeOk)
    run(db, Opcode.FORGET, Forget(request_id=rid(), memory=memory.memory_id, mode="hard"))
    with pytest.raises(Conflict) as cited:
        create(db, "Other", "p", "v", evidence=(Evidence(memory=memory.memory_id),))
    assert cited.value.field == "evidence[0].memory"


def test_a_version_valid_from_before_the_old_one_leaves_it_empty(db: Database) -> None:
    old = create(db, "Inv", "p", "old", valid_from=100)
    supersede(db, old.statement_id, "Inv", "p", "new", valid_from=50)
    shown = get(db, old.statement_id)
    assert (shown.valid_from, shown.valid_to) == (100, 100)


def test_merged_entities_share_stateful_values_and_chains(db: Database) -> None:
    from brain.wire.messages.entity_ops import EntityMerge
    from brain.wire.messages.schema_ops import PredicateDecl, SchemaPut

    run(db, Opcode.SCHEMA_PUT, SchemaPut(predicates=(PredicateDecl(name="home", stateful=True),)))
    a = create(db, "Kim", "home", "Oslo")
    b = create(db, "Kimberly", "home", "Rome")
    keep, gone = get(db, a.statement_id).subject, get(db, b.statement_id).subject
    assert isinstance(keep, EntityRef) and isinstance(gone, EntityRef)
    run(db, Opcode.ENTITY_MERGE, EntityMerge(request_id=rid(), keep=keep.entity, merge=gone.entity))
    # A statement stored under the merged entity can be superseded through the kept one.
    supersede(db, b.statement_id, "Kim", "home", "Paris")
    third = create(db, "Kim", "home", "Lima")
    assert third.superseded is not None
    assert texts(listing(db, subject=NameRef(name="Kim"), predicate="home")) == ["Lima"]


def test_every_statement_write_is_idempotent(db: Database) -> None:
    from brain.wire.messages.memory_ops import Forget
    from brain.wire.messages.records import Evidence

    memory = run(db, Opcode.ENCODE, Encode(request_id=rid(), text="seen"))
    assert isinstance(memory, EncodeOk)
    base = create(db, "Idem", "p", "v", evidence=(Evidence(memory=memory.memory_id),))
    other = create(db, "Idem", "q", "w")
    requests: list[tuple[Opcode, Message]] = [
        (
            Opcode.STATEMENT_CREATE,
            StatementCreate(
                request_id=rid(),
                kind="fact",
                subject=NameRef(name="Idem"),
                predicate="r",
                object_=TextValue(text="x"),
            ),
        ),
        (
            Opcode.STATEMENT_SUPERSEDE,
            StatementSupersede(
                request_id=rid(),
                old=base.statement_id,
                new=StatementDraft(
                    kind="fact",
                    subject=NameRef(name="Idem"),
                    predicate="p",
                    object_=TextValue(text="v2"),
                ),
            ),
        ),
        (Opcode.STATEMENT_TOMBSTONE, StatementTombstone(request_id=rid(), id=other.statement_id)),
        (Opcode.STATEMENT_RETRACT, StatementRetract(request_id=rid(), id=other.statement_id)),
        (Opcode.FORGET, Forget(request_id=rid(), memory=memory.memory_id, mode="soft")),
    ]
    for opcode, request in requests:
        first = db.submit(NS, opcode, request).result()
        assert db.wait_indexed()
        lsn = db.applied_lsn
        assert db.submit(NS, opcode, request).result() == first, opcode.name
        assert db.applied_lsn == lsn, f"a repeated {opcode.name} must change nothing"
