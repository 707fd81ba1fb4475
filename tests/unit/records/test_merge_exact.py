"""Merges answer as the kept entity, and an unmerge restores exactly (spec/02-data-model.md §4).

Each scenario runs twice, in two namespaces of one database: once with the
merges made before the writes and undone after them (newest first), once with
no merge at all. Every read of every record and entity must then answer the
same in both, record ids, entity ids and record times aside (they are mapped to
labels, or left out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import pytest

from brain.engine.database import Database
from brain.errors import Conflict
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
    EntityUnmerge,
)
from brain.wire.messages.recall_ops import ArmWeights, Recall, RecallOk
from brain.wire.messages.relation_ops import (
    RelationCreate,
    RelationCreateOk,
    RelationGet,
    RelationList,
    RelationTraverse,
)
from brain.wire.messages.review_ops import ReviewList, ReviewListOk
from brain.wire.messages.schema_ops import PredicateDecl, RelationTypeDecl, SchemaPut
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementGet,
    StatementGetOk,
    StatementHistory,
    StatementList,
    StatementListOk,
    StatementSupersede,
    StatementSupersedeOk,
)
from brain.wire.messages.values import EntityRef, EntityValue, NameRef, TextValue
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.unit.common import rid

WITH_MERGE: Final = "with-merge"
"""The namespace where the merges stand while the writes are made."""
NO_MERGE: Final = "no-merge"
"""The namespace where the same writes are made without any merge."""

TIMES: Final = frozenset(
    {"recorded_at", "created_at", "record_invalidated_at", "tombstoned_at", "closed_at", "lsn"}
)
"""Fields that hold record times or LSNs: the two namespaces are written at different ones."""

# A ref in a scenario: ("id", label) or ("name", text). An object: ("entity", label) or text.
Ref = tuple[str, str]
Obj = tuple[str, str] | str


@dataclass(frozen=True)
class Say:
    """STATEMENT_CREATE."""

    subject: Ref
    predicate: str
    object_: Obj


@dataclass(frozen=True)
class Revise:
    """STATEMENT_SUPERSEDE of the statement the ``old``-th write made."""

    old: int
    subject: Ref
    predicate: str
    object_: Obj


@dataclass(frozen=True)
class Relate:
    """RELATION_CREATE."""

    type_: str
    from_: Ref
    to: Ref


Write = Say | Revise | Relate


@dataclass(frozen=True)
class Scenario:
    """Entities (label, name, aliases), writes before the merges, merges (keep, merged)
    made in order, and writes while they stand."""

    entities: tuple[tuple[str, str, tuple[str, ...]], ...]
    merges: tuple[tuple[str, str], ...]
    during: tuple[Write, ...]
    before: tuple[Write, ...] = field(default=())


PAIR = (("K", "Kira", ("Kiki",)), ("B", "Bea", ("Beatrix", "bee")), ("X", "Xeno", ()))
CHAIN = (("A", "Alpha", ("Al",)), ("B", "Beta", ()), ("C", "Gamma", ("Gam",)), ("X", "Xeno", ()))

SCENARIOS: Final[dict[str, Scenario]] = {
    "subject by id": Scenario(
        PAIR, (("K", "B"),), (Say(("id", "B"), "likes", "tea"), Say(("id", "K"), "likes", "rum"))
    ),
    "subject by name and alias": Scenario(
        PAIR,
        (("K", "B"),),
        (
            Say(("name", "Bea"), "likes", "tea"),
            Say(("name", "BEATRIX"), "likes", "jam"),
            Say(("name", "bee"), "likes", "figs"),
            Say(("name", "kiki"), "likes", "rum"),
        ),
    ),
    "object values": Scenario(
        PAIR,
        (("K", "B"),),
        (Say(("id", "X"), "knows", ("entity", "B")), Say(("id", "X"), "knows", ("entity", "K"))),
        before=(Say(("id", "X"), "met", ("entity", "B")),),
    ),
    "relations": Scenario(
        PAIR,
        (("K", "B"),),
        (
            Relate("knows", ("id", "B"), ("id", "X")),
            Relate("knows", ("id", "X"), ("name", "Beatrix")),
            Relate("knows", ("id", "K"), ("id", "X")),
        ),
        before=(Relate("knows", ("id", "B"), ("id", "K")),),
    ),
    "stateful predicate": Scenario(
        PAIR,
        (("K", "B"),),
        (
            Say(("id", "B"), "home", "Oslo"),
            Say(("name", "Bea"), "home", "Rome"),
            Say(("id", "K"), "likes", "rum"),
        ),
        before=(Say(("id", "B"), "home", "Lima"),),
    ),
    "cardinality": Scenario(
        PAIR,
        (("K", "B"),),
        (
            Relate("works_at", ("id", "B"), ("id", "X")),
            Relate("works_at", ("name", "bee"), ("id", "K")),
        ),
    ),
    "supersede through the merged entity": Scenario(
        PAIR,
        (("K", "B"),),
        (Revise(0, ("name", "Bea"), "likes", "coffee"), Revise(1, ("id", "B"), "likes", "cocoa")),
        before=(Say(("id", "B"), "likes", "tea"),),
    ),
    "chain of merges": Scenario(
        CHAIN,
        (("B", "A"), ("C", "B")),
        (
            Say(("id", "A"), "likes", "tea"),
            Say(("name", "alpha"), "likes", "jam"),
            Say(("name", "Al"), "home", "Oslo"),
            Say(("id", "B"), "likes", "figs"),
            Say(("name", "beta"), "born", "Rome"),
            Say(("id", "X"), "knows", ("entity", "A")),
            Relate("knows", ("id", "A"), ("id", "X")),
            Relate("knows", ("id", "X"), ("name", "Beta")),
            Say(("name", "gam"), "likes", "rum"),
        ),
    ),
}


def _run(db: Database, ns: str, opcode: Opcode, request: Message) -> Message:
    return db.execute(ns, opcode, request)


class World:
    """One namespace's side of a scenario: its ids, labelled."""

    def __init__(self, db: Database, ns: str) -> None:
        self.db, self.ns = db, ns
        self.entities: dict[str, bytes] = {}
        self.records: list[bytes] = []
        self.statements: list[bytes] = []
        self.relations: list[bytes] = []

    def run(self, opcode: Opcode, request: Message) -> Message:
        return _run(self.db, self.ns, opcode, request)

    def ref(self, ref: Ref) -> EntityRef | NameRef:
        kind, value = ref
        return EntityRef(entity=self.entities[value]) if kind == "id" else NameRef(name=value)

    def obj(self, value: Obj) -> EntityValue | TextValue:
        if isinstance(value, tuple):
            return EntityValue(entity=self.entities[value[1]])
        return TextValue(text=value)

    def write(self, write: Write) -> None:
        if isinstance(write, Say):
            made = self.run(
                Opcode.STATEMENT_CREATE,
                StatementCreate(
                    request_id=rid(),
                    kind="fact",
                    subject=self.ref(write.subject),
                    predicate=write.predicate,
                    object_=self.obj(write.object_),
                ),
            )
            assert isinstance(made, StatementCreateOk)
            self.records.append(made.statement_id)
            self.statements.append(made.statement_id)
        elif isinstance(write, Revise):
            new = StatementDraft(
                kind="fact",
                subject=self.ref(write.subject),
                predicate=write.predicate,
                object_=self.obj(write.object_),
            )
            revised = self.run(
                Opcode.STATEMENT_SUPERSEDE,
                StatementSupersede(request_id=rid(), old=self.records[write.old], new=new),
            )
            assert isinstance(revised, StatementSupersedeOk)
            self.records.append(revised.statement_id)
            self.statements.append(revised.statement_id)
        else:
            related = self.run(
                Opcode.RELATION_CREATE,
                RelationCreate(
                    request_id=rid(),
                    type_=write.type_,
                    from_=self.ref(write.from_),
                    to=self.ref(write.to),
                ),
            )
            assert isinstance(related, RelationCreateOk)
            self.records.append(related.relation_id)
            self.relations.append(related.relation_id)

    def labels(self) -> dict[bytes, str]:
        named = {v: k for k, v in self.entities.items()}
        return named | {record: f"w{i}" for i, record in enumerate(self.records)}


def setup(db: Database, ns: str, scenario: Scenario) -> World:
    world = World(db, ns)
    schema = SchemaPut(
        predicates=(PredicateDecl(name="home", stateful=True),),
        relation_types=(RelationTypeDecl(name="works_at", cardinality="many_to_one"),),
    )
    world.run(Opcode.SCHEMA_PUT, schema)
    for label, name, aliases in scenario.entities:
        made = world.run(
            Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name=name, aliases=aliases)
        )
        assert isinstance(made, EntityCreateOk)
        world.entities[label] = made.entity_id
    for write in scenario.before:
        world.write(write)
    return world


def merge_all(world: World, scenario: Scenario) -> list[bytes]:
    merge_ids = []
    for keep, merged in scenario.merges:
        request = EntityMerge(
            request_id=rid(), keep=world.entities[keep], merge=world.entities[merged]
        )
        answer = world.run(Opcode.ENTITY_MERGE, request)
        assert isinstance(answer, EntityMergeOk)
        merge_ids.append(answer.merge_id)
    return merge_ids


def _relabel(value: object, labels: dict[bytes, str]) -> object:
    if isinstance(value, bytes):
        return labels.get(value, f"unknown {value.hex()}")
    if isinstance(value, dict):
        return {k: _relabel(v, labels) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list | tuple):
        return [_relabel(v, labels) for v in value]
    return value


def view(world: World, names: list[str]) -> object:
    """Every read of the scenario's records and entities, ids as labels, times left out."""
    answers: list[tuple[str, Message]] = []
    for statement in world.statements:
        answers.append(("get", world.run(Opcode.STATEMENT_GET, StatementGet(id=statement))))
        answers.append(
            ("history", world.run(Opcode.STATEMENT_HISTORY, StatementHistory(id=statement)))
        )
    for relation in world.relations:
        answers.append(("relation", world.run(Opcode.RELATION_GET, RelationGet(id=relation))))
    for label, entity in sorted(world.entities.items()):
        answers.append((label, world.run(Opcode.ENTITY_GET, EntityGet(id=entity))))
        for include in (False, True):
            listed = StatementList(subject=EntityRef(entity=entity), include_superseded=include)
            answers.append((label, world.run(Opcode.STATEMENT_LIST, listed)))
        for direction in ("out", "in", "both"):
            request = RelationList(entity=entity, direction=direction)
            answers.append((label, world.run(Opcode.RELATION_LIST, request)))
        walk = RelationTraverse(from_=entity, depth=2)
        answers.append((label, world.run(Opcode.RELATION_TRAVERSE, walk)))
    for name in names:
        answers.append((name, world.run(Opcode.ENTITY_RESOLVE, EntityResolve(name=name))))
        by_name = StatementList(subject=NameRef(name=name), include_superseded=True)
        answers.append((name, world.run(Opcode.STATEMENT_LIST, by_name)))
    labels = world.labels()
    return [(what, _relabel(answer.to_wire(), labels)) for what, answer in answers]


def _names(scenario: Scenario) -> list[str]:
    return [n for _, name, aliases in scenario.entities for n in (name, *aliases)]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_unmerge_restores_what_the_writes_named(db: Database, name: str) -> None:
    scenario = SCENARIOS[name]
    merged = setup(db, WITH_MERGE, scenario)
    plain = setup(db, NO_MERGE, scenario)
    merge_ids = merge_all(merged, scenario)
    for write in scenario.during:
        merged.write(write)
        plain.write(write)
    for merge_id in reversed(merge_ids):
        merged.run(Opcode.ENTITY_UNMERGE, EntityUnmerge(request_id=rid(), merge_id=merge_id))
    assert view(merged, _names(scenario)) == view(plain, _names(scenario))


def _statement(world: World, index: int) -> StatementGetOk:
    answer = world.run(Opcode.STATEMENT_GET, StatementGet(id=world.records[index]))
    assert isinstance(answer, StatementGetOk)
    return answer


def test_while_merged_writes_through_the_merged_entity_answer_as_the_kept_one(
    db: Database,
) -> None:
    world = setup(db, WITH_MERGE, SCENARIOS["subject by id"])
    keep, gone, other = (world.entities[label] for label in "KBX")
    (merge_id,) = merge_all(world, SCENARIOS["subject by id"])
    for write in (
        Say(("id", "B"), "likes", "tea"),
        Say(("name", "Beatrix"), "likes", "jam"),
        Say(("id", "X"), "knows", ("entity", "B")),
        Relate("knows", ("name", "bee"), ("id", "X")),
    ):
        world.write(write)
    for index in (0, 1):
        assert _statement(world, index).statement.subject == EntityRef(entity=keep)
    assert _statement(world, 2).statement.object_ == EntityValue(entity=keep)
    listed = world.run(Opcode.STATEMENT_LIST, StatementList(subject=EntityRef(entity=keep)))
    assert isinstance(listed, StatementListOk)
    assert {s.id for s in listed.statements} == set(world.records[:2])
    relation = world.run(Opcode.RELATION_GET, RelationGet(id=world.records[3]))
    assert relation.to_wire()["relation"]["from"] == {"entity": keep}  # type: ignore[index]
    # After the unmerge the same records answer as the entity they named.
    world.run(Opcode.ENTITY_UNMERGE, EntityUnmerge(request_id=rid(), merge_id=merge_id))
    for index in (0, 1):
        assert _statement(world, index).statement.subject == EntityRef(entity=gone)
    assert _statement(world, 2).statement.object_ == EntityValue(entity=gone)
    assert _statement(world, 2).statement.subject == EntityRef(entity=other)


def test_a_write_naming_a_merged_entity_needs_a_live_end(db: Database) -> None:
    world = setup(db, WITH_MERGE, SCENARIOS["subject by id"])
    merge_all(world, SCENARIOS["subject by id"])
    world.run(Opcode.ENTITY_TOMBSTONE, EntityTombstone(request_id=rid(), id=world.entities["K"]))
    with pytest.raises(Conflict) as caught:
        world.write(Say(("id", "B"), "likes", "tea"))
    assert caught.value.field == "subject"


def test_a_name_both_entities_had_stays_the_kept_ones(db: Database) -> None:
    scenario = Scenario((("K", "Kira", ("Kit",)), ("B", "Bea", ("kit",))), (("K", "B"),), ())
    world = setup(db, WITH_MERGE, scenario)
    (merge_id,) = merge_all(world, scenario)
    world.write(Say(("name", "Kit"), "likes", "tea"))
    world.run(Opcode.ENTITY_UNMERGE, EntityUnmerge(request_id=rid(), merge_id=merge_id))
    # The kept entity answered to it before the merge: the merge did not move it.
    assert _statement(world, 0).statement.subject == EntityRef(entity=world.entities["K"])


def test_supersessions_made_while_merged_stand_after_the_unmerge(db: Database) -> None:
    """A stateful predicate sees through the merge when the write is made; undoing the
    merge later does not undo that supersession, a write of its own."""
    scenario = Scenario(PAIR, (("K", "B"),), (), before=(Say(("id", "K"), "home", "Oslo"),))
    world = setup(db, WITH_MERGE, scenario)
    (merge_id,) = merge_all(world, scenario)
    world.write(Say(("id", "B"), "home", "Rome"))
    assert _statement(world, 0).statement.superseded_by == world.records[1]
    world.run(Opcode.ENTITY_UNMERGE, EntityUnmerge(request_id=rid(), merge_id=merge_id))
    assert _statement(world, 0).statement.superseded_by == world.records[1]
    assert _statement(world, 1).statement.subject == EntityRef(entity=world.entities["B"])


def test_objects_naming_merged_entities_agree_with_the_kept_one(db: Database) -> None:
    """A fact naming the kept entity and one naming the merged one say the same thing:
    no contradiction is queued while the merge stands."""
    scenario = Scenario(
        PAIR, (("K", "B"),), (), before=(Say(("id", "X"), "born", ("entity", "B")),)
    )
    world = setup(db, WITH_MERGE, scenario)
    world.run(
        Opcode.SCHEMA_PUT,
        SchemaPut(predicates=(PredicateDecl(name="born", kind="fact", stateful=False),)),
    )
    merge_all(world, scenario)
    world.write(Say(("id", "X"), "born", ("entity", "K")))
    items = world.run(Opcode.REVIEW_LIST, ReviewList())
    assert isinstance(items, ReviewListOk) and items.items == ()
    world.write(Say(("id", "X"), "born", ("entity", "X")))
    items = world.run(Opcode.REVIEW_LIST, ReviewList())
    assert isinstance(items, ReviewListOk) and len(items.items) == 1


def test_a_merged_entity_shows_no_aliases(db: Database) -> None:
    world = setup(db, WITH_MERGE, SCENARIOS["subject by id"])
    merge_all(world, SCENARIOS["subject by id"])
    shown = world.run(Opcode.ENTITY_GET, EntityGet(id=world.entities["B"]))
    assert isinstance(shown, EntityGetOk)
    assert shown.entity.aliases == () and shown.entity.merged_into == world.entities["K"]
    resolved = world.run(Opcode.ENTITY_RESOLVE, EntityResolve(name="Beatrix"))
    assert isinstance(resolved, EntityResolveOk)
    assert resolved.resolved == world.entities["K"]


def test_recall_finds_and_shows_objects_through_the_merge(db: Database) -> None:
    """The graph arm walks from the kept entity to a statement naming the merged one as
    its object, and the hit shows that object as the kept entity; after the unmerge
    the walk from the merged entity finds it, shown as itself."""
    world = setup(db, WITH_MERGE, SCENARIOS["subject by id"])
    keep, gone = world.entities["K"], world.entities["B"]
    (merge_id,) = merge_all(world, SCENARIOS["subject by id"])
    world.write(Say(("id", "X"), "admires", ("entity", "B")))
    graph_only = ArmWeights(semantic=0.0, lexical=0.0, graph=1.0)

    def hit_object(anchor: bytes) -> object:
        found = world.run(Opcode.RECALL, Recall(cue="", arms=graph_only, entity_anchor=anchor))
        assert isinstance(found, RecallOk)
        shown = [h.statement for h in found.hits if h.id == world.records[0]]
        assert len(shown) == 1 and shown[0] is not None
        return shown[0].object_

    assert hit_object(keep) == EntityValue(entity=keep)
    world.run(Opcode.ENTITY_UNMERGE, EntityUnmerge(request_id=rid(), merge_id=merge_id))
    assert hit_object(gone) == EntityValue(entity=gone)
