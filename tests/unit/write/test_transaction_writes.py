"""Every write opcode in a transaction: seen inside it, by id and by LIST; applied by
the commit, also across a reopen; left without a trace by an abort or by closing
the database with the transaction still open (spec/05-durability.md §8)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

import brain
from brain.engine.database import Database
from brain.errors import Conflict, Forgotten, InvalidArgument, NotFound, TxnExpired
from brain.wire.messages.entity_ops import (
    EntityCreate,
    EntityCreateOk,
    EntityGet,
    EntityGetOk,
    EntityList,
    EntityListOk,
    EntityMerge,
    EntityMergeOk,
    EntityTombstone,
    EntityUnmerge,
    EntityUpdate,
)
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget, MemoryGet, MemoryGetOk
from brain.wire.messages.recall_ops import ExplainRequest, Recall, RecallOk
from brain.wire.messages.records import Evidence
from brain.wire.messages.relation_ops import (
    RelationCreate,
    RelationCreateOk,
    RelationDraft,
    RelationList,
    RelationListOk,
    RelationSupersede,
    RelationTombstone,
    RelationTraverse,
    RelationTraverseOk,
)
from brain.wire.messages.review_ops import ReviewDecide, ReviewList, ReviewListOk
from brain.wire.messages.schema_ops import PredicateDecl, SchemaPut
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementList,
    StatementListOk,
    StatementRetract,
    StatementSupersede,
    StatementTombstone,
)
from brain.wire.messages.txn_ops import TxnAbort, TxnBegin, TxnBegun, TxnCommit, TxnCommitted
from brain.wire.messages.values import EntityRef, NameRef, TextValue
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.unit.common import NS, rid

Ids = dict[str, bytes]
"""What a case's setup made, by name: the records its write and its view name."""

View = Callable[[Database, Ids, bytes | None], object]
"""What a case looks at, committed (``None``) or inside the transaction given: a value
free of times and LSNs, so that the buffered and the committed state compare equal."""


@dataclass(frozen=True)
class Case:
    """One write opcode: what it needs committed first, the write, and what shows it."""

    opcode: Opcode
    setup: Callable[[Database], Ids]
    write: Callable[[Ids], Message]
    view: View


def run(db: Database, opcode: Opcode, request: Message) -> Message:
    return db.execute(NS, opcode, request, owner=b"conn-1")


def entity(db: Database, name: str) -> bytes:
    answer = run(db, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name=name))
    assert isinstance(answer, EntityCreateOk)
    return answer.entity_id


def memory(db: Database, text: str) -> bytes:
    answer = run(db, Opcode.ENCODE, Encode(request_id=rid(), text=text))
    assert isinstance(answer, EncodeOk)
    return answer.memory_id


def say(db: Database, subject: str, value: str, *evidence: bytes) -> bytes:
    answer = run(db, Opcode.STATEMENT_CREATE, _statement(subject, value, *evidence))
    assert isinstance(answer, StatementCreateOk)
    return answer.statement_id


def _statement(subject: str, value: str, *evidence: bytes) -> StatementCreate:
    return StatementCreate(
        request_id=rid(),
        kind="fact",
        subject=NameRef(name=subject),
        predicate="likes",
        object_=TextValue(text=value),
        evidence=tuple(Evidence(memory=m) for m in evidence) or None,
    )


def relate(db: Database, from_: bytes, to: bytes) -> bytes:
    request = RelationCreate(
        request_id=rid(), type_="knows", from_=EntityRef(entity=from_), to=EntityRef(entity=to)
    )
    answer = run(db, Opcode.RELATION_CREATE, request)
    assert isinstance(answer, RelationCreateOk)
    return answer.relation_id


# --- what each case looks at -----------------------------------------------------------


def entities_listed(db: Database, ids: Ids, txn: bytes | None) -> object:
    answer = run(db, Opcode.ENTITY_LIST, EntityList(txn_id=txn))
    assert isinstance(answer, EntityListOk)
    return sorted((e.name, e.aliases) for e in answer.entities)


def statements_listed(db: Database, ids: Ids, txn: bytes | None) -> object:
    request = StatementList(subject=NameRef(name="Ann"), include_tombstoned=True, txn_id=txn)
    answer = run(db, Opcode.STATEMENT_LIST, request)
    assert isinstance(answer, StatementListOk)
    return sorted(
        (
            s.id,
            getattr(s.object_, "text", None),
            s.superseded_by is not None,
            s.tombstoned_at is not None,
        )
        for s in answer.statements
    )


def relations_listed(db: Database, ids: Ids, txn: bytes | None) -> object:
    request = RelationList(entity=ids["a"], direction="out", txn_id=txn)
    answer = run(db, Opcode.RELATION_LIST, request)
    assert isinstance(answer, RelationListOk)
    return sorted((r.id, r.type_, r.tombstoned_at is not None) for r in answer.relations)


def memory_seen(db: Database, ids: Ids, txn: bytes | None) -> object:
    key = "memory" if "memory" in ids else "new"
    if key not in ids:
        return None
    try:
        answer = run(db, Opcode.MEMORY_GET, MemoryGet(id=ids[key], txn_id=txn))
    except NotFound:
        return None
    assert isinstance(answer, MemoryGetOk)
    return answer.memory.text, answer.memory.forgotten


def forgotten_seen(db: Database, ids: Ids, txn: bytes | None) -> object:
    # The forgotten memory and the statement whose only evidence it was.
    return memory_seen(db, ids, txn), statements_listed(db, ids, txn)


def merged_seen(db: Database, ids: Ids, txn: bytes | None) -> object:
    answer = run(db, Opcode.ENTITY_GET, EntityGet(id=ids["b"], txn_id=txn))
    assert isinstance(answer, EntityGetOk)
    return answer.entity.merged_into, entities_listed(db, ids, txn)


def reviews_listed(db: Database, ids: Ids, txn: bytes | None) -> object:
    answer = run(db, Opcode.REVIEW_LIST, ReviewList(txn_id=txn))
    assert isinstance(answer, ReviewListOk)
    return [item.review_id for item in answer.items], statements_listed(db, ids, txn)


# --- what each case needs committed first -----------------------------------------------


def nothing(db: Database) -> Ids:
    return {}


def two_entities(db: Database) -> Ids:
    return {"a": entity(db, "Ann"), "b": entity(db, "Bob")}


def a_statement(db: Database) -> Ids:
    return {"statement": say(db, "Ann", "tea")}


def a_relation(db: Database) -> Ids:
    ids = two_entities(db)
    ids["relation"] = relate(db, ids["a"], ids["b"])
    return ids


def a_cited_memory(db: Database) -> Ids:
    cited = memory(db, "Ann likes tea, she said.")
    return {"memory": cited, "statement": say(db, "Ann", "tea", cited)}


def a_merge(db: Database) -> Ids:
    ids = two_entities(db)
    answer = run(
        db, Opcode.ENTITY_MERGE, EntityMerge(request_id=rid(), keep=ids["a"], merge=ids["b"])
    )
    assert isinstance(answer, EntityMergeOk)
    ids["merge"] = answer.merge_id
    return ids


def a_contradiction(db: Database) -> Ids:
    run(
        db,
        Opcode.SCHEMA_PUT,
        SchemaPut(predicates=(PredicateDecl(name="likes", kind="fact", stateful=False),)),
    )
    say(db, "Ann", "tea")
    say(db, "Ann", "coffee")
    answer = run(db, Opcode.REVIEW_LIST, ReviewList())
    assert isinstance(answer, ReviewListOk)
    (item,) = answer.items
    return {"review": item.review_id}


CASES = [
    Case(
        Opcode.ENCODE,
        nothing,
        lambda ids: Encode(request_id=rid(), text="Ann was here."),
        memory_seen,
    ),
    Case(
        Opcode.ENTITY_CREATE,
        nothing,
        lambda ids: EntityCreate(request_id=rid(), name="Cy"),
        entities_listed,
    ),
    Case(Opcode.STATEMENT_CREATE, nothing, lambda ids: _statement("Ann", "tea"), statements_listed),
    Case(
        Opcode.STATEMENT_SUPERSEDE,
        a_statement,
        lambda ids: StatementSupersede(
            request_id=rid(),
            old=ids["statement"],
            new=StatementDraft(
                kind="fact",
                subject=NameRef(name="Ann"),
                predicate="likes",
                object_=TextValue(text="coffee"),
            ),
        ),
        statements_listed,
    ),
    Case(
        Opcode.STATEMENT_TOMBSTONE,
        a_statement,
        lambda ids: StatementTombstone(request_id=rid(), id=ids["statement"]),
        statements_listed,
    ),
    Case(
        Opcode.STATEMENT_RETRACT,
        a_statement,
        lambda ids: StatementRetract(request_id=rid(), id=ids["statement"]),
        statements_listed,
    ),
    Case(
        Opcode.RELATION_CREATE,
        two_entities,
        lambda ids: RelationCreate(
            request_id=rid(),
            type_="likes",
            from_=EntityRef(entity=ids["a"]),
            to=EntityRef(entity=ids["b"]),
        ),
        relations_listed,
    ),
    Case(
        Opcode.RELATION_SUPERSEDE,
        a_relation,
        lambda ids: RelationSupersede(
            request_id=rid(),
            old=ids["relation"],
            new=RelationDraft(
                type_="knows", from_=EntityRef(entity=ids["a"]), to=NameRef(name="Cy")
            ),
        ),
        relations_listed,
    ),
    Case(
        Opcode.RELATION_TOMBSTONE,
        a_relation,
        lambda ids: RelationTombstone(request_id=rid(), id=ids["relation"]),
        relations_listed,
    ),
    Case(
        Opcode.FORGET,
        a_cited_memory,
        lambda ids: Forget(request_id=rid(), memory=ids["memory"], mode="hard"),
        forgotten_seen,
    ),
    Case(
        Opcode.ENTITY_UPDATE,
        two_entities,
        lambda ids: EntityUpdate(request_id=rid(), id=ids["a"], name="Anne", add_aliases=("A",)),
        entities_listed,
    ),
    Case(
        Opcode.ENTITY_MERGE,
        two_entities,
        lambda ids: EntityMerge(request_id=rid(), keep=ids["a"], merge=ids["b"]),
        merged_seen,
    ),
    Case(
        Opcode.ENTITY_UNMERGE,
        a_merge,
        lambda ids: EntityUnmerge(request_id=rid(), merge_id=ids["merge"]),
        merged_seen,
    ),
    Case(
        Opcode.ENTITY_TOMBSTONE,
        two_entities,
        lambda ids: EntityTombstone(request_id=rid(), id=ids["b"]),
        entities_listed,
    ),
    Case(
        Opcode.REVIEW_DECIDE,
        a_contradiction,
        lambda ids: ReviewDecide(request_id=rid(), review_id=ids["review"], decision="reject_new"),
        reviews_listed,
    ),
]


def begin(db: Database) -> bytes:
    answer = run(db, Opcode.TXN_BEGIN, TxnBegin())
    assert isinstance(answer, TxnBegun)
    return answer.txn_id


def buffer(db: Database, case: Case, ids: Ids, txn: bytes) -> Ids:
    """Buffer the case's write in ``txn``; the ids its answer names join ``ids``."""
    answer = run(db, case.opcode, replace(case.write(ids), txn_id=txn))  # type: ignore[type-var]
    made = getattr(answer, "memory_id", None) or getattr(answer, "entity_id", None)
    return {**ids, "new": made} if isinstance(made, bytes) and "memory" not in ids else ids


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.opcode.name)
def test_every_write_joins_a_transaction(tmp_path: Path, case: Case) -> None:
    path = tmp_path / "d"
    with brain.open(path) as db:
        ids = case.setup(db)
        before = case.view(db, ids, None)
        # Embedding what the setup wrote takes LSNs of its own: let it finish first.
        assert db.wait_indexed()
        settled = db.applied_lsn
        # Aborted: seen inside the transaction only, then nowhere, and nothing logged.
        txn = begin(db)
        inside_ids = buffer(db, case, ids, txn)
        inside = case.view(db, inside_ids, txn)
        assert inside != before
        assert case.view(db, inside_ids, None) == before
        run(db, Opcode.TXN_ABORT, TxnAbort(txn_id=txn))
        with pytest.raises(TxnExpired):
            case.view(db, inside_ids, txn)
        assert case.view(db, inside_ids, None) == before
        assert db.wait_indexed() and db.applied_lsn == settled
        # Left open when the database closes: it is gone after the reopen.
        buffer(db, case, ids, begin(db))
    with brain.open(path) as db:
        assert db.applied_lsn == settled
        assert case.view(db, inside_ids, None) == before
        # Committed: what the transaction saw is what everyone sees, after a reopen too.
        txn = begin(db)
        committed_ids = buffer(db, case, ids, txn)
        inside = case.view(db, committed_ids, txn)
        answer = run(db, Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))
        assert isinstance(answer, TxnCommitted) and answer.lsn == settled + 1
        assert case.view(db, committed_ids, None) == inside
    with brain.open(path) as db:
        assert case.view(db, committed_ids, None) == inside


def test_an_aborted_hard_forget_leaves_no_trace(db: Database) -> None:
    ids = a_cited_memory(db)
    text = "Ann likes tea, she said."
    txn = begin(db)
    run(db, Opcode.FORGET, Forget(request_id=rid(), memory=ids["memory"], mode="hard", txn_id=txn))
    # Inside the transaction the text is gone and in the forget ledger ...
    with pytest.raises(Forgotten):
        run(db, Opcode.ENCODE, Encode(request_id=rid(), text=text, txn_id=txn))
    run(db, Opcode.TXN_ABORT, TxnAbort(txn_id=txn))
    # ... but nothing of it reached the store: no ledger entry, no purge queued, the text
    # and its vector and index postings are where they were.
    assert db.purge() == 0
    again = run(db, Opcode.ENCODE, Encode(request_id=rid(), text=text))
    assert isinstance(again, EncodeOk) and again.deduplicated
    assert again.memory_id == ids["memory"]
    found = run(db, Opcode.RECALL, Recall(cue="Ann likes tea", min_relevance=-1.0))
    assert isinstance(found, RecallOk) and ids["memory"] in {hit.id for hit in found.hits}


def test_a_committed_hard_forget_is_purged(db: Database) -> None:
    ids = a_cited_memory(db)
    txn = begin(db)
    run(db, Opcode.FORGET, Forget(request_id=rid(), memory=ids["memory"], mode="hard", txn_id=txn))
    run(db, Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))
    # The memory and the statement whose only evidence it was both leave the indexes.
    assert db.purge() == 2
    with pytest.raises(Forgotten):
        run(db, Opcode.ENCODE, Encode(request_id=rid(), text="Ann likes tea, she said."))


def test_traverse_and_later_writes_see_the_buffered_ones(db: Database) -> None:
    ids = two_entities(db)
    txn = begin(db)
    made = run(db, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name="Cy", txn_id=txn))
    assert isinstance(made, EntityCreateOk)
    for from_, to in ((ids["a"], ids["b"]), (ids["b"], made.entity_id)):
        request = RelationCreate(
            request_id=rid(),
            type_="knows",
            from_=EntityRef(entity=from_),
            to=EntityRef(entity=to),
            txn_id=txn,
        )
        run(db, Opcode.RELATION_CREATE, request)

    def reached(txn_id: bytes | None) -> list[tuple[bytes, int]]:
        request = RelationTraverse(from_=ids["a"], depth=3, direction="out", txn_id=txn_id)
        answer = run(db, Opcode.RELATION_TRAVERSE, request)
        assert isinstance(answer, RelationTraverseOk)
        return sorted((node.entity_id, node.hop) for node in answer.nodes)

    assert reached(None) == [(ids["a"], 0)]
    assert reached(txn) == sorted([(ids["a"], 0), (ids["b"], 1), (made.entity_id, 2)])
    # A merge planned on the buffered entity, then an update of the one that absorbed
    # it: Cy now answers as Bob, so the walk ends there.
    merge = EntityMerge(request_id=rid(), keep=ids["b"], merge=made.entity_id, txn_id=txn)
    run(db, Opcode.ENTITY_MERGE, merge)
    update = EntityUpdate(request_id=rid(), id=ids["b"], name="Bo", txn_id=txn)
    run(db, Opcode.ENTITY_UPDATE, update)
    inside = reached(txn)
    assert inside == sorted([(ids["a"], 0), (ids["b"], 1)])
    run(db, Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))
    assert reached(None) == inside
    got = run(db, Opcode.ENTITY_GET, EntityGet(id=made.entity_id))
    assert isinstance(got, EntityGetOk) and got.entity.merged_into == ids["b"]
    assert "Bo" in [name for name, _ in entities_listed(db, ids, None)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("opcode", [Opcode.RECALL, Opcode.EXPLAIN], ids=lambda o: o.name)
def test_recall_refuses_a_transaction(db: Database, opcode: Opcode) -> None:
    txn = begin(db)
    request = (ExplainRequest if opcode is Opcode.EXPLAIN else Recall)(cue="tea", txn_id=txn)
    with pytest.raises(InvalidArgument) as info:
        run(db, opcode, request)
    assert info.value.field == "txn_id"
    assert "derived from a write when it commits" in info.value.message


def test_a_merge_undone_in_its_own_transaction(db: Database) -> None:
    ids = two_entities(db)
    before = merged_seen(db, ids, None)
    txn = begin(db)
    merged = run(
        db,
        Opcode.ENTITY_MERGE,
        EntityMerge(request_id=rid(), keep=ids["a"], merge=ids["b"], txn_id=txn),
    )
    assert isinstance(merged, EntityMergeOk) and merged.lsn == 0
    assert merged_seen(db, ids, txn) == (ids["a"], [("Ann", ("Bob",))])
    # The merge id the buffered answer named is the one the commit makes.
    run(
        db,
        Opcode.ENTITY_UNMERGE,
        EntityUnmerge(request_id=rid(), merge_id=merged.merge_id, txn_id=txn),
    )
    assert merged_seen(db, ids, txn) == before
    answer = run(db, Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))
    assert isinstance(answer, TxnCommitted)
    assert EntityMergeOk.from_wire(answer.results[0]).merge_id == merged.merge_id
    assert merged_seen(db, ids, None) == before
    with pytest.raises(Conflict):  # undone once, by the transaction
        run(db, Opcode.ENTITY_UNMERGE, EntityUnmerge(request_id=rid(), merge_id=merged.merge_id))


def test_a_buffered_write_is_planned_again_at_commit(db: Database) -> None:
    ids = two_entities(db)
    txn = begin(db)
    update = EntityUpdate(request_id=rid(), id=ids["b"], name="Bo", txn_id=txn)
    run(db, Opcode.ENTITY_UPDATE, update)
    run(db, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name="Cy", txn_id=txn))
    # Meanwhile, outside the transaction, the entity it renames is tombstoned.
    run(db, Opcode.ENTITY_TOMBSTONE, EntityTombstone(request_id=rid(), id=ids["b"]))
    assert db.wait_indexed()
    settled = db.applied_lsn
    with pytest.raises(Conflict) as refused:
        run(db, Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))
    assert refused.value.message.startswith("write 0 of the transaction (ENTITY_UPDATE): ")
    assert db.applied_lsn == settled
    assert entities_listed(db, ids, None) == [("Ann", ())]  # no Cy either: all or none


def test_buffered_records_have_record_time_zero_in_their_transaction(db: Database) -> None:
    say(db, "Ann", "tea")
    listed = run(db, Opcode.STATEMENT_LIST, StatementList(subject=NameRef(name="Ann")))
    assert isinstance(listed, StatementListOk)
    stored_at = listed.statements[0].recorded_at
    txn = begin(db)
    run(db, Opcode.STATEMENT_CREATE, replace(_statement("Ann", "coffee"), txn_id=txn))

    def seen(as_of: int | None) -> list[tuple[object, int]]:
        request = StatementList(subject=NameRef(name="Ann"), as_of=as_of, txn_id=txn)
        answer = run(db, Opcode.STATEMENT_LIST, request)
        assert isinstance(answer, StatementListOk)
        return [(getattr(s.object_, "text", None), s.recorded_at) for s in answer.statements]

    # Until the commit gives it its time, the buffered statement comes first by
    # recorded_at and is seen as of any time its subject's name named the entity
    # (spec/05-durability.md §8); before the entity was made, the name named nothing.
    assert seen(None) == [("coffee", 0), ("tea", stored_at)]
    assert seen(stored_at) == [("coffee", 0), ("tea", stored_at)]
    assert seen(stored_at - 1) == []
    answer = run(db, Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))
    assert isinstance(answer, TxnCommitted)
    listed = run(db, Opcode.STATEMENT_LIST, StatementList(subject=NameRef(name="Ann")))
    assert isinstance(listed, StatementListOk)
    assert [getattr(s.object_, "text", None) for s in listed.statements] == ["tea", "coffee"]


def test_a_name_queued_and_decided_in_one_transaction(db: Database) -> None:
    first = run(db, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name="Paris"))
    second = run(db, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name="paris"))
    assert isinstance(first, EntityCreateOk) and isinstance(second, EntityCreateOk)
    txn = begin(db)
    # The name ties between the two: the write waits on a review item of the transaction.
    run(db, Opcode.STATEMENT_CREATE, replace(_statement("PARIS", "rain"), txn_id=txn))

    def open_items(txn_id: bytes | None) -> list[bytes]:
        answer = run(db, Opcode.REVIEW_LIST, ReviewList(txn_id=txn_id))
        assert isinstance(answer, ReviewListOk)
        return [item.review_id for item in answer.items]

    (review,) = open_items(txn)
    assert open_items(None) == []
    decide = ReviewDecide(
        request_id=rid(), review_id=review, decision="merge", into=first.entity_id, txn_id=txn
    )
    run(db, Opcode.REVIEW_DECIDE, decide)
    assert open_items(txn) == []

    def about_first(txn_id: bytes | None) -> list[object]:
        request = StatementList(subject=EntityRef(entity=first.entity_id), txn_id=txn_id)
        answer = run(db, Opcode.STATEMENT_LIST, request)
        assert isinstance(answer, StatementListOk)
        return [getattr(s.object_, "text", None) for s in answer.statements]

    # The decision gives the name to the candidate it names, inside the transaction only.
    assert about_first(txn) == ["rain"] and about_first(None) == []
    answer = run(db, Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))
    assert isinstance(answer, TxnCommitted) and len(answer.results) == 2
    assert open_items(None) == []
    assert about_first(None) == ["rain"]
    after = run(db, Opcode.ENTITY_GET, EntityGet(id=second.entity_id))
    assert isinstance(after, EntityGetOk) and after.entity.merged_into is None
