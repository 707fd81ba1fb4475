"""Ambiguous names in writes (spec/02-data-model.md §4): pending subjects, their review, and
what merged entities' and decided names' records answer as."""

from __future__ import annotations

from pathlib import Path

import pytest

import brain
from brain.engine.database import Database, DatabaseOptions
from brain.engine.write.tuning import Resolution
from brain.errors import Conflict, InvalidArgument
from brain.wire.messages.entity_ops import (
    EntityCreate,
    EntityCreateOk,
    EntityGet,
    EntityGetOk,
    EntityMerge,
    EntityMergeOk,
    EntityResolve,
    EntityResolveOk,
    EntityTombstone,
)
from brain.wire.messages.records import Entity
from brain.wire.messages.relation_ops import (
    RelationCreate,
    RelationCreateOk,
    RelationList,
    RelationListOk,
    RelationTraverse,
    RelationTraverseOk,
)
from brain.wire.messages.review_ops import ReviewDecide, ReviewItem, ReviewList, ReviewListOk
from brain.wire.messages.schema_ops import SchemaPut, SchemaPutOk
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementGet,
    StatementGetOk,
    StatementList,
    StatementListOk,
)
from brain.wire.messages.values import EntityRef, NameRef, PendingRef, Ref, TextValue
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.unit.common import NS, rid


def run(db: Database, opcode: Opcode, request: Message) -> Message:
    return db.execute(NS, opcode, request, actor=b"k" * 16)


def entity(db: Database, name: str, type_: str | None = None) -> bytes:
    made = run(db, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name=name, type_=type_))
    assert isinstance(made, EntityCreateOk)
    return made.entity_id


def get_entity(db: Database, entity_id: bytes) -> Entity:
    answer = run(db, Opcode.ENTITY_GET, EntityGet(id=entity_id))
    assert isinstance(answer, EntityGetOk)
    return answer.entity


def say(db: Database, subject: Ref, text: str = "tea") -> bytes:
    request = StatementCreate(
        request_id=rid(),
        kind="fact",
        subject=subject,
        predicate="likes",
        object_=TextValue(text=text),
    )
    made = run(db, Opcode.STATEMENT_CREATE, request)
    assert isinstance(made, StatementCreateOk)
    return made.statement_id


def subject_of(db: Database, statement_id: bytes) -> object:
    answer = run(db, Opcode.STATEMENT_GET, StatementGet(id=statement_id))
    assert isinstance(answer, StatementGetOk)
    return answer.statement.subject


def listed(db: Database, entity_id: bytes) -> list[bytes]:
    answer = run(db, Opcode.STATEMENT_LIST, StatementList(subject=EntityRef(entity=entity_id)))
    assert isinstance(answer, StatementListOk)
    return [s.id for s in answer.statements]


def items(db: Database) -> list[ReviewItem]:
    answer = run(db, Opcode.REVIEW_LIST, ReviewList())
    assert isinstance(answer, ReviewListOk)
    return list(answer.items)


def decide(db: Database, review_id: bytes, decision: str, into: bytes | None = None) -> None:
    run(
        db,
        Opcode.REVIEW_DECIDE,
        ReviewDecide(request_id=rid(), review_id=review_id, decision=decision, into=into),
    )


def relate(db: Database, from_: Ref, to: Ref, type_: str = "knows") -> bytes:
    request = RelationCreate(request_id=rid(), type_=type_, from_=from_, to=to)
    made = run(db, Opcode.RELATION_CREATE, request)
    assert isinstance(made, RelationCreateOk)
    return made.relation_id


def traverse(db: Database, start: bytes) -> set[bytes]:
    answer = run(db, Opcode.RELATION_TRAVERSE, RelationTraverse(from_=start, depth=2))
    assert isinstance(answer, RelationTraverseOk)
    return {n.entity_id for n in answer.nodes}


def resolved(db: Database, name: str) -> EntityResolveOk:
    answer = run(db, Opcode.ENTITY_RESOLVE, EntityResolve(name=name))
    assert isinstance(answer, EntityResolveOk)
    return answer


# --- what queues an item ------------------------------------------------------------------


def test_a_tie_between_exact_names_queues_one_item_for_every_write(db: Database) -> None:
    first, second = entity(db, "Paris", "city"), entity(db, "paris", "city")
    s1 = say(db, NameRef(name="PARIS"))
    s2 = say(db, NameRef(name="Paris"), "coffee")
    (item,) = items(db)
    assert item.kind == "ambiguous_entity" and item.name == "PARIS" and item.type_ is None
    # The candidates, best first (ties by id), then the records waiting on the name.
    assert item.records == (first, second, s1, s2)
    assert subject_of(db, s1) == subject_of(db, s2) == PendingRef(pending=item.review_id)
    # Another type is another question.
    s3 = say(db, NameRef(name="Paris", type_="city"))
    assert [i.type_ for i in items(db)] == [None, "city"]
    assert items(db)[1].records == (first, second, s3)
    # Nothing was created, and neither candidate holds the pending statements.
    assert listed(db, first) == listed(db, second) == []


def test_a_fuzzy_tie_queues_an_item_and_a_clear_name_does_not(db: Database) -> None:
    smith, smyth = entity(db, "Alice Smith"), entity(db, "Alice Smyth")
    pending = say(db, NameRef(name="Alice Smoth"))
    (item,) = items(db)
    assert item.records == (smith, smyth, pending)
    # An exact name never waits, and a name with one fuzzy match (or none) is a
    # new entity, as spec/01-wire.md §9 says of a name no entity has.
    assert subject_of(db, say(db, NameRef(name="alice smith"))) == EntityRef(entity=smith)
    made = subject_of(db, say(db, NameRef(name="Bob Jones")))
    assert isinstance(made, EntityRef) and made.entity not in (smith, smyth)
    assert len(items(db)) == 1


def test_a_tie_of_an_undeclared_entity_type_is_refused_not_queued(db: Database) -> None:
    """A pending name becomes an entity of its type when decided ``distinct``, so once
    entity types are declared it needs one of them, as a new entity does."""
    entity(db, "Paris", "town"), entity(db, "paris", "town")
    declared = run(db, Opcode.SCHEMA_PUT, SchemaPut(entity_types=("city",)))
    assert isinstance(declared, SchemaPutOk)
    with pytest.raises(InvalidArgument) as refused:
        say(db, NameRef(name="Paris", type_="town"))
    assert refused.value.field == "subject.type"
    assert items(db) == []
    # Untyped, the same tie is queued as before.
    say(db, NameRef(name="Paris"))
    assert [i.kind for i in items(db)] == ["ambiguous_entity"]


def test_numbered_names_are_never_fuzzy_neighbours(db: Database) -> None:
    """``Server 12`` beside ``Server 11`` and ``Server 13`` (ratio 0.89 to each) is a new
    entity, not a tie waiting for review: numbers in names are identifiers."""
    eleven, thirteen = entity(db, "Server 11"), entity(db, "Server 13")
    made = subject_of(db, say(db, NameRef(name="Server 12")))
    assert isinstance(made, EntityRef) and made.entity not in (eleven, thirteen)
    assert items(db) == []
    # The same numbers still allow for a misspelling around them.
    assert [m.entity_id for m in resolved(db, "Sever 11").matches] == [eleven]
    assert [m.entity_id for m in resolved(db, "Servr 13").matches] == [thirteen]
    assert resolved(db, "Server 14").matches == ()
    assert resolved(db, "Server 1").matches == ()  # "1" is not "11"


def test_the_fuzzy_threshold_is_configurable(tmp_path: Path) -> None:
    strict = DatabaseOptions(resolution=Resolution(fuzzy_threshold=0.95))
    db = brain.open(tmp_path / "d", strict)
    try:
        entity(db, "Alice Smith")
        entity(db, "Alice Smyth")
        assert isinstance(subject_of(db, say(db, NameRef(name="Alice Smoth"))), EntityRef)
        assert items(db) == []
        assert resolved(db, "Alice Smuth").matches == ()
    finally:
        db.close()
    with pytest.raises(ValueError, match="fuzzy_threshold"):
        Resolution(fuzzy_threshold=0.0)


# --- decisions ----------------------------------------------------------------------------


def test_distinct_makes_the_name_a_new_entity(db: Database) -> None:
    first, second = entity(db, "Mercury"), entity(db, "Mercury")
    waiting = say(db, NameRef(name="Mercury"))
    (item,) = items(db)
    decide(db, item.review_id, "distinct")
    assert items(db) == []
    chosen = subject_of(db, waiting)
    assert isinstance(chosen, EntityRef) and chosen.entity not in (first, second)
    assert get_entity(db, chosen.entity).name == "Mercury"
    assert listed(db, chosen.entity) == [waiting]
    # The candidates are untouched; the name now has three exact owners, so the next
    # write asks again, in a new item.
    assert get_entity(db, first).merged_into is None
    later = say(db, NameRef(name="Mercury"))
    (again,) = items(db)
    assert again.review_id != item.review_id and again.records[-1] == later
    with pytest.raises(Conflict):
        decide(db, item.review_id, "merge")


def test_merge_points_the_name_at_the_chosen_candidate_alone(db: Database) -> None:
    smith, smyth = entity(db, "Alice Smith"), entity(db, "Alice Smyth")
    on_smith = say(db, EntityRef(entity=smith), "jazz")
    waiting = say(db, NameRef(name="Alice Smoth"))
    (item,) = items(db)
    # The name means Smyth, the second candidate: the tie is settled as the person says.
    decide(db, item.review_id, "merge", into=smyth)
    assert subject_of(db, waiting) == EntityRef(entity=smyth)
    assert listed(db, smyth) == [waiting]
    assert get_entity(db, smyth).aliases == ("Alice Smoth",)
    # The other candidate is left alone: not merged, its records its own.
    assert get_entity(db, smith).merged_into is None
    assert get_entity(db, smith).aliases == ()
    assert subject_of(db, on_smith) == EntityRef(entity=smith)
    assert listed(db, smith) == [on_smith]
    # The next write with the name resolves by the alias, without a review.
    assert subject_of(db, say(db, NameRef(name="alice smoth"))) == EntityRef(entity=smyth)
    assert items(db) == []
    audit = db.audit(NS)
    assert not any(e["operation"] == "entity_merge" for e in audit)
    review_entry = next(e for e in audit if e["operation"] == "review_merge")
    assert review_entry["records"] == [item.review_id, smyth, *item.records[:2]]


def test_merge_follows_the_chosen_candidate_and_refuses_a_tombstoned_one(
    db: Database,
) -> None:
    a, b, c = entity(db, "Orion"), entity(db, "Orion"), entity(db, "Hunter")
    waiting = say(db, NameRef(name="Orion"))
    (item,) = items(db)
    # The chosen candidate was merged away meanwhile: the name means what it answers as.
    merged = run(db, Opcode.ENTITY_MERGE, EntityMerge(request_id=rid(), keep=c, merge=a))
    assert isinstance(merged, EntityMergeOk)
    decide(db, item.review_id, "merge", into=a)
    assert subject_of(db, waiting) == EntityRef(entity=c)
    assert get_entity(db, b).merged_into is None
    assert "Orion" in get_entity(db, c).aliases
    # A tombstoned choice is refused; another candidate, or 'distinct', settles it.
    x, y = entity(db, "Vega"), entity(db, "Vega")
    on_vega = say(db, NameRef(name="Vega"))
    (vega,) = items(db)
    run(db, Opcode.ENTITY_TOMBSTONE, EntityTombstone(request_id=rid(), id=x))
    with pytest.raises(Conflict) as caught:
        decide(db, vega.review_id, "merge", into=x)
    assert caught.value.field == "into" and "distinct" in caught.value.message
    decide(db, vega.review_id, "merge", into=y)
    assert subject_of(db, on_vega) == EntityRef(entity=y)


def test_into_is_required_by_merge_and_refused_elsewhere(db: Database) -> None:
    first, second = entity(db, "Rigel"), entity(db, "Rigel")
    stranger = entity(db, "Deneb")
    say(db, NameRef(name="Rigel"))
    (item,) = items(db)
    for into in (None, stranger):
        with pytest.raises(InvalidArgument) as caught:
            decide(db, item.review_id, "merge", into=into)
        assert caught.value.field == "into"
    with pytest.raises(InvalidArgument) as caught:
        decide(db, item.review_id, "distinct", into=first)
    assert caught.value.field == "into"
    assert [i.review_id for i in items(db)] == [item.review_id]  # nothing was decided
    decide(db, item.review_id, "merge", into=second)
    assert items(db) == []


def test_decisions_of_the_wrong_kind_are_refused(db: Database) -> None:
    entity(db, "Lyra")
    entity(db, "Lyra")
    say(db, NameRef(name="Lyra"))
    (item,) = items(db)
    for wrong in ("keep_both", "supersede", "reject_new"):
        with pytest.raises(InvalidArgument) as caught:
            decide(db, item.review_id, wrong)
        assert caught.value.field == "decision" and "merge" in caught.value.message


# --- relations ----------------------------------------------------------------------------


def test_a_pending_end_stays_out_of_the_graph_until_decided(db: Database) -> None:
    hub = entity(db, "Hub")
    entity(db, "Node")
    entity(db, "Node")
    edge = relate(db, EntityRef(entity=hub), NameRef(name="Node"))
    (item,) = items(db)
    assert item.records[-1] == edge
    assert traverse(db, hub) == {hub}
    decide(db, item.review_id, "distinct")
    answer = run(db, Opcode.RELATION_LIST, RelationList(entity=hub, direction="out"))
    assert isinstance(answer, RelationListOk)
    (shown,) = answer.relations
    assert isinstance(shown.to, EntityRef)
    assert traverse(db, hub) == {hub, shown.to.entity}
    assert listed(db, shown.to.entity) == []


def test_relations_of_a_merged_entity_answer_as_the_kept_one(db: Database) -> None:
    kept, gone, friend, far = (entity(db, n) for n in ("Ann", "Anne", "Ben", "Cy"))
    to_friend = relate(db, EntityRef(entity=gone), EntityRef(entity=friend))
    relate(db, EntityRef(entity=friend), EntityRef(entity=far))
    run(db, Opcode.ENTITY_MERGE, EntityMerge(request_id=rid(), keep=kept, merge=gone))
    answer = run(db, Opcode.RELATION_LIST, RelationList(entity=kept, direction="both"))
    assert isinstance(answer, RelationListOk)
    (shown,) = answer.relations
    assert shown.id == to_friend and shown.from_ == EntityRef(entity=kept)
    assert traverse(db, kept) == {kept, friend, far}
    # From the merged id, the traversal starts at the kept entity.
    walk = run(db, Opcode.RELATION_TRAVERSE, RelationTraverse(from_=gone, depth=1))
    assert isinstance(walk, RelationTraverseOk)
    assert [n.entity_id for n in walk.nodes] == [kept, friend]
    seen_from_friend = run(db, Opcode.RELATION_LIST, RelationList(entity=friend, direction="in"))
    assert isinstance(seen_from_friend, RelationListOk)
    assert [r.from_ for r in seen_from_friend.relations] == [EntityRef(entity=kept)]


def test_cardinality_counts_the_relations_of_merged_entities(db: Database) -> None:
    from brain.wire.messages.schema_ops import RelationTypeDecl, SchemaPut

    run(
        db,
        Opcode.SCHEMA_PUT,
        SchemaPut(relation_types=(RelationTypeDecl(name="works_at", cardinality="many_to_one"),)),
    )
    kept, gone, acme, initech = (entity(db, n) for n in ("Dee", "Dee2", "Acme", "Initech"))
    old = relate(db, EntityRef(entity=gone), EntityRef(entity=acme), "works_at")
    run(db, Opcode.ENTITY_MERGE, EntityMerge(request_id=rid(), keep=kept, merge=gone))
    request = RelationCreate(
        request_id=rid(),
        type_="works_at",
        from_=EntityRef(entity=kept),
        to=EntityRef(entity=initech),
    )
    made = run(db, Opcode.RELATION_CREATE, request)
    assert isinstance(made, RelationCreateOk) and made.superseded == old


def test_decisions_survive_a_restart(tmp_path: Path) -> None:
    db = brain.open(tmp_path / "d")
    entity(db, "Rigel")
    entity(db, "Rigel")
    waiting = say(db, NameRef(name="Rigel"))
    (item,) = items(db)
    decide(db, item.review_id, "distinct")
    chosen = subject_of(db, waiting)
    db.close()
    db = brain.open(tmp_path / "d")
    try:
        assert subject_of(db, waiting) == chosen
        assert items(db) == []
    finally:
        db.close()
