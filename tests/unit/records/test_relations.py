"""Relations in the engine: chains, cardinality, the two time axes, listing, traversal."""

from __future__ import annotations

import time
from pathlib import Path

import lmdb
import pytest

import brain
from brain.engine.database import Database
from brain.engine.records import relations
from brain.engine.store.env import Store
from brain.engine.store.scope import Scope
from brain.errors import (
    AsOfInFuture,
    CardinalityViolation,
    Conflict,
    InvalidArgument,
    NotFound,
)
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.messages.records import Evidence, Relation
from brain.wire.messages.relation_ops import (
    RelationCreate,
    RelationCreateOk,
    RelationDraft,
    RelationGet,
    RelationGetOk,
    RelationList,
    RelationListOk,
    RelationSupersede,
    RelationSupersedeOk,
    RelationTombstone,
    RelationTombstoned,
    RelationTraverse,
    RelationTraverseOk,
)
from brain.wire.messages.txn_ops import TxnBegin, TxnBegun, TxnCommit, TxnCommitted
from brain.wire.messages.values import EntityRef, MemoryRef, NameRef
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.unit.common import NS, rid

FEB_1 = 1_706_745_600_000_000_000
JAN_15 = FEB_1 - 17 * 86_400 * 10**9
APR_1 = FEB_1 + 60 * 86_400 * 10**9


def run(db: Database, opcode: Opcode, request: Message, namespace: str = NS) -> Message:
    return db.execute(namespace, opcode, request)


def create(
    db: Database, type_: str, from_: str, to: str, *, namespace: str = NS, **kw: object
) -> RelationCreateOk:
    request = RelationCreate(
        request_id=rid(),
        type_=type_,
        from_=NameRef(name=from_),
        to=NameRef(name=to),
        **kw,  # type: ignore[arg-type]
    )
    answer = run(db, Opcode.RELATION_CREATE, request, namespace)
    assert isinstance(answer, RelationCreateOk)
    return answer


def supersede(
    db: Database, old: bytes, type_: str, from_: str, to: str, **kw: object
) -> RelationSupersedeOk:
    draft = RelationDraft(
        type_=type_,
        from_=NameRef(name=from_),
        to=NameRef(name=to),
        **kw,  # type: ignore[arg-type]
    )
    request = RelationSupersede(request_id=rid(), old=old, new=draft)
    answer = run(db, Opcode.RELATION_SUPERSEDE, request)
    assert isinstance(answer, RelationSupersedeOk)
    return answer


def tombstone(db: Database, relation_id: bytes, reason: str | None = None) -> RelationTombstoned:
    request = RelationTombstone(request_id=rid(), id=relation_id, reason=reason)
    answer = run(db, Opcode.RELATION_TOMBSTONE, request)
    assert isinstance(answer, RelationTombstoned)
    return answer


def get(db: Database, relation_id: bytes, namespace: str = NS) -> Relation:
    answer = run(db, Opcode.RELATION_GET, RelationGet(id=relation_id), namespace)
    assert isinstance(answer, RelationGetOk)
    return answer.relation


def ends(db: Database, relation_id: bytes) -> tuple[bytes, bytes]:
    """The entity ids at the from and to ends of a relation."""
    shown = get(db, relation_id)
    assert isinstance(shown.from_, EntityRef) and isinstance(shown.to, EntityRef)
    return shown.from_.entity, shown.to.entity


def listing(db: Database, entity_id: bytes, direction: str = "both", **kw: object) -> list[bytes]:
    request = RelationList(entity=entity_id, direction=direction, **kw)  # type: ignore[arg-type]
    answer = run(db, Opcode.RELATION_LIST, request)
    assert isinstance(answer, RelationListOk)
    return [r.id for r in answer.relations]


def traverse(db: Database, start: bytes, depth: int, **kw: object) -> RelationTraverseOk:
    request = RelationTraverse(from_=start, depth=depth, **kw)  # type: ignore[arg-type]
    answer = run(db, Opcode.RELATION_TRAVERSE, request)
    assert isinstance(answer, RelationTraverseOk)
    return answer


def hops(answer: RelationTraverseOk) -> dict[bytes, int]:
    return {n.entity_id: n.hop for n in answer.nodes}


@pytest.fixture
def cardinality(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Declared cardinalities by type, read through the module's hook."""
    declared: dict[str, str] = {}

    def hook(store: Store, txn: lmdb.Transaction, scope: Scope, type_: str) -> str:
        return declared.get(type_, relations.MANY_TO_MANY)

    monkeypatch.setattr(relations, "cardinality_of", hook)
    return declared


def test_create_and_get(db: Database) -> None:
    memory = run(db, Opcode.ENCODE, Encode(request_id=rid(), text="Ann met Ben"))
    assert isinstance(memory, EncodeOk)
    cited = (Evidence(memory=memory.memory_id, sha256=memory.sha256),)
    made = create(db, "knows", "Ann", "Ben", evidence=cited, valid_from=5, valid_to=9)
    assert made.superseded is None and made.recorded_at > 0
    r = get(db, made.relation_id)
    assert (r.type_, r.confidence, r.evidence) == ("knows", 1.0, cited)
    assert (r.valid_from, r.valid_to, r.recorded_at) == (5, 9, made.recorded_at)
    assert isinstance(r.from_, EntityRef) and isinstance(r.to, EntityRef)
    assert r.from_ != r.to and r.superseded_by is None and r.tombstoned_at is None
    # An explicit confidence is kept; an entity ref names the same entity as its name.
    again = run(
        db,
        Opcode.RELATION_CREATE,
        RelationCreate(request_id=rid(), type_="likes", from_=r.from_, to=r.to, confidence=0.25),
    )
    assert isinstance(again, RelationCreateOk)
    liked = get(db, again.relation_id)
    assert liked.confidence == 0.25 and (liked.from_, liked.to) == (r.from_, r.to)
    with pytest.raises(NotFound):
        get(db, rid())
    with pytest.raises(NotFound) as missing:
        create(db, "knows", "Ann", "Ben", evidence=(Evidence(memory=rid()),))
    assert missing.value.field == "evidence[0].memory"
    with pytest.raises(InvalidArgument) as wrong:
        bad = (Evidence(memory=memory.memory_id, sha256=bytes(32)),)
        create(db, "knows", "Ann", "Ben", evidence=bad)
    assert wrong.value.field == "evidence[0].sha256"


def test_names_resolve_and_create_entities(db: Database) -> None:
    first = get(db, create(db, "knows", "Carl  Jung", "Sigmund").relation_id)
    second = get(db, create(db, "knows", "carl jung", "SIGMUND").relation_id)
    assert (first.from_, first.to) == (second.from_, second.to)
    # The same new name at both ends is one new entity: a self-loop, not two entities.
    loop = get(db, create(db, "admires", "Narcissus", "narcissus").relation_id)
    assert loop.from_ == loop.to


def test_ends_must_be_entities(db: Database) -> None:
    memory = run(db, Opcode.ENCODE, Encode(request_id=rid(), text="a note"))
    assert isinstance(memory, EncodeOk)
    for end in ("from_", "to"):
        ends: dict[str, object] = {"from_": NameRef(name="X"), "to": NameRef(name="Y")}
        ends[end] = MemoryRef(memory=memory.memory_id)
        request = RelationCreate(request_id=rid(), type_="cites", **ends)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument) as info:
            run(db, Opcode.RELATION_CREATE, request)
        assert info.value.field == end.rstrip("_")
    with pytest.raises(NotFound) as unknown:
        run(
            db,
            Opcode.RELATION_CREATE,
            RelationCreate(
                request_id=rid(), type_="t", from_=EntityRef(entity=rid()), to=NameRef(name="Y")
            ),
        )
    assert unknown.value.field == "from"


def test_supersede_splits_validity_and_as_of_restores(db: Database) -> None:
    old = create(db, "works_at", "Alice", "Acme", valid_from=FEB_1 - 400 * 86_400 * 10**9)
    early = create(db, "lives_in", "Alice", "Oslo")
    early_new = supersede(db, early.relation_id, "lives_in", "Alice", "Bergen")
    april = db.writer.clock.tick()  # "April 1" on the record axis
    new = supersede(db, old.relation_id, "works_at", "Alice", "Globex", valid_from=FEB_1)
    assert new.superseded == old.relation_id
    alice = ends(db, old.relation_id)[0]
    works = {"type_": "works_at", "direction": "out"}
    # What did we believe on April 1? The old job, superseded after then, is restored.
    assert listing(db, alice, **works, as_of=april) == [old.relation_id]
    # What was true on April 1 (as of now)?
    assert listing(db, alice, **works, valid_at=APR_1) == [new.relation_id]
    # On April 1, what did we believe was true then? The old job, still open then.
    assert listing(db, alice, **works, valid_at=APR_1, as_of=april) == [old.relation_id]
    request = RelationList(entity=alice, direction="out", type_="works_at", as_of=april)
    believed = run(db, Opcode.RELATION_LIST, request)
    assert isinstance(believed, RelationListOk) and believed.relations[0].valid_to is None
    # Now the old one is known to have ended on February 1; the rectangle is split.
    shown = get(db, old.relation_id)
    assert shown.valid_to == FEB_1 and shown.superseded_by == new.relation_id
    assert shown.record_invalidated_at == new.recorded_at
    assert get(db, new.relation_id).supersedes == old.relation_id
    # Superseded before "April 1": not restored; its replacement is what was believed.
    assert listing(db, alice, type_="lives_in", as_of=april) == [early_new.relation_id]
    assert listing(db, alice, type_="lives_in") == [early_new.relation_id]
    assert listing(db, alice, valid_at=JAN_15, type_="works_at") == []


def test_supersede_rules(db: Database) -> None:
    r = create(db, "city", "Carol", "Oslo")
    supersede(db, r.relation_id, "city", "Carol", "Bergen")
    with pytest.raises(Conflict):
        supersede(db, r.relation_id, "city", "Carol", "Tromsø")
    other = create(db, "city", "Dave", "Rome")
    with pytest.raises(InvalidArgument) as info:
        supersede(db, other.relation_id, "city", "Carol", "Milan")
    assert info.value.field == "new.from"
    # The type and the to end may change.
    moved = supersede(db, other.relation_id, "visited", "Dave", "Milan")
    assert get(db, moved.relation_id).type_ == "visited"
    with pytest.raises(NotFound):
        supersede(db, rid(), "city", "Carol", "x")


def test_tombstone(db: Database) -> None:
    keep = create(db, "pet", "Eve", "Cat")
    soft = create(db, "pet", "Eve", "Dog")
    before = db.writer.clock.tick()
    done = tombstone(db, soft.relation_id, reason="wrong dog")
    eve = ends(db, keep.relation_id)[0]
    assert listing(db, eve, type_="pet") == [keep.relation_id]
    assert listing(db, eve, type_="pet", as_of=before) == [keep.relation_id, soft.relation_id]
    shown = get(db, soft.relation_id)
    assert shown.tombstoned_at == done.tombstoned_at == shown.record_invalidated_at
    with pytest.raises(Conflict):
        tombstone(db, soft.relation_id)
    with pytest.raises(Conflict):
        supersede(db, soft.relation_id, "pet", "Eve", "Wolf")


def test_list_directions_types_and_paging(db: Database) -> None:
    out = [create(db, "knows" if n % 2 else "owes", "Hub", f"Out{n}").relation_id for n in range(5)]
    inn = [create(db, "knows", f"In{n}", "Hub").relation_id for n in range(3)]
    hub = ends(db, out[0])[0]
    assert listing(db, hub, "out", type_="knows") == out[1::2]
    assert listing(db, hub, "out", type_="owes") == out[0::2]
    assert listing(db, hub, "in") == inn
    assert listing(db, hub, "both", type_="knows") == sorted(
        out[1::2] + inn, key=lambda i: get(db, i).recorded_at
    )
    pages: list[bytes] = []
    cursor: bytes | None = None
    while True:
        request = RelationList(entity=hub, direction="both", limit=3, cursor=cursor)
        page = run(db, Opcode.RELATION_LIST, request)
        assert isinstance(page, RelationListOk)
        pages += [r.id for r in page.relations]
        cursor = page.cursor
        if cursor is None:
            break
    assert pages == out + inn  # record order: the outgoing ones were created first
    with pytest.raises(NotFound) as unknown:
        listing(db, rid())
    assert unknown.value.field == "entity"
    with pytest.raises(AsOfInFuture):
        listing(db, hub, as_of=time.time_ns() + 10**12)


def test_traverse_depth_types_direction(db: Database) -> None:
    # A -knows-> B -knows-> C -knows-> D, and A -owns-> Car, E -knows-> A.
    ab = create(db, "knows", "A", "B").relation_id
    bc = create(db, "knows", "B", "C").relation_id
    cd = create(db, "knows", "C", "D").relation_id
    car = create(db, "owns", "A", "Car").relation_id
    ea = create(db, "knows", "E", "A").relation_id
    (a, b), (c, d) = ends(db, ab), ends(db, cd)
    e, vehicle = ends(db, ea)[0], ends(db, car)[1]
    types = {"types": ("knows", "owns")}
    one = traverse(db, a, 1, **types)
    assert hops(one) == {a: 0, b: 1, vehicle: 1, e: 1}
    assert one.nodes[0].entity_id == a and {r.id for r in one.edges} == {ab, car, ea}
    two = traverse(db, a, 2, types=("knows",), direction="out")
    assert hops(two) == {a: 0, b: 1, c: 2} and [r.id for r in two.edges] == [ab, bc]
    three = traverse(db, a, 3, types=("knows",), direction="out")
    assert hops(three) == {a: 0, b: 1, c: 2, d: 3}
    back = traverse(db, b, 3, types=("knows",), direction="in")
    assert hops(back) == {b: 0, a: 1, e: 2}
    # The node limit counts the start; no node is visited twice in a cycle.
    create(db, "knows", "D", "A")
    limited = traverse(db, a, 5, **types, limit=3)
    assert len(limited.nodes) == 3
    reached = {EntityRef(entity=n) for n in hops(limited)}
    assert all({r.from_, r.to} <= reached for r in limited.edges)
    cycle = traverse(db, a, 5, types=("knows",), direction="out")
    assert sorted(hops(cycle).values()) == [0, 1, 2, 3]
    with pytest.raises(NotFound):
        traverse(db, rid(), 1)


def test_traverse_time_axes_and_branching_cap(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = create(db, "knows", "P", "Q", valid_to=100)
    t = db.writer.clock.tick()
    tombstone(db, old.relation_id)
    new = create(db, "knows", "P", "R", valid_from=100)
    (p, q), r = ends(db, old.relation_id), ends(db, new.relation_id)[1]
    knows = {"types": ("knows",)}
    assert hops(traverse(db, p, 1, **knows)) == {p: 0, r: 1}
    assert hops(traverse(db, p, 1, **knows, as_of=t)) == {p: 0, q: 1}
    assert hops(traverse(db, p, 1, **knows, valid_at=150)) == {p: 0, r: 1}
    assert hops(traverse(db, p, 1, **knows, valid_at=50)) == {p: 0}
    with pytest.raises(AsOfInFuture):
        traverse(db, p, 1, as_of=time.time_ns() + 10**12)
    for n in range(4):
        create(db, "fan", "P", f"Fan{n}")
    monkeypatch.setattr(relations, "MAX_EDGES_PER_NODE", 2)
    capped = traverse(db, p, 1, types=("fan",))
    assert len(capped.edges) == 2 and len(capped.nodes) == 3


def test_many_to_one(db: Database, cardinality: dict[str, str]) -> None:
    cardinality["works_at"] = "many_to_one"
    first = create(db, "works_at", "Ida", "Acme")
    mate = create(db, "works_at", "Jon", "Acme")  # another from: no conflict
    second = create(db, "works_at", "Ida", "Globex", valid_from=FEB_1)
    assert second.superseded == first.relation_id and mate.superseded is None
    old = get(db, first.relation_id)
    assert old.superseded_by == second.relation_id and old.valid_to == FEB_1
    assert listing(db, ends(db, first.relation_id)[0], type_="works_at") == [second.relation_id]


def test_one_to_many(db: Database, cardinality: dict[str, str]) -> None:
    cardinality["parent_of"] = "one_to_many"
    first = create(db, "parent_of", "Kim", "Lea")
    sibling = create(db, "parent_of", "Kim", "Max")  # another to: no conflict
    second = create(db, "parent_of", "Ned", "Lea")
    assert second.superseded == first.relation_id and sibling.superseded is None
    assert get(db, sibling.relation_id).superseded_by is None


def test_one_to_one(db: Database, cardinality: dict[str, str]) -> None:
    cardinality["married_to"] = "one_to_one"
    first = create(db, "married_to", "Ola", "Pia")
    rob = create(db, "married_to", "Rob", "Sue")
    # Only the from end conflicts: that one is superseded.
    moved = create(db, "married_to", "Ola", "Tea")
    assert moved.superseded == first.relation_id
    # The same pair again: one relation conflicts on both ends, and is superseded.
    same = create(db, "married_to", "Ola", "Tea")
    assert same.superseded == moved.relation_id
    # Both ends taken by two different relations: refused, nothing written.
    with pytest.raises(CardinalityViolation):
        create(db, "married_to", "Ola", "Sue")
    assert listing(db, ends(db, rob.relation_id)[1]) == [rob.relation_id]
    # A supersession that would collide with another current relation is refused too.
    with pytest.raises(CardinalityViolation):
        supersede(db, same.relation_id, "married_to", "Ola", "Sue")


def test_many_current_conflicts_are_a_violation(db: Database, cardinality: dict[str, str]) -> None:
    create(db, "owns", "Uma", "Boat")
    create(db, "owns", "Uma", "Bike")
    cardinality["owns"] = "many_to_one"  # declared after two current relations exist
    with pytest.raises(CardinalityViolation):
        create(db, "owns", "Uma", "Car")


def test_scope_isolation(db: Database) -> None:
    mine = create(db, "knows", "Vic", "Wes")
    theirs = create(db, "knows", "Vic", "Wes", namespace="intruder")
    with pytest.raises(NotFound):
        get(db, mine.relation_id, namespace="intruder")
    with pytest.raises(NotFound):
        run(db, Opcode.RELATION_GET, RelationGet(id=mine.relation_id, space="other"))
    mine_from, theirs_from = (
        get(db, mine.relation_id).from_,
        get(db, theirs.relation_id, "intruder").from_,
    )
    assert isinstance(mine_from, EntityRef) and isinstance(theirs_from, EntityRef)
    assert mine_from != theirs_from  # the same name is a different entity per scope
    with pytest.raises(NotFound):
        run(db, Opcode.RELATION_LIST, RelationList(entity=mine_from.entity, direction="both"), "x")
    other_space = RelationCreate(
        request_id=rid(), space="other", type_="knows", from_=NameRef(name="Vic"), to=mine_from
    )
    with pytest.raises(NotFound):  # an entity id of another space is not found here
        run(db, Opcode.RELATION_CREATE, other_space)
    assert listing(db, mine_from.entity) == [mine.relation_id]


def test_idempotent_repeats(db: Database) -> None:
    request = RelationCreate(
        request_id=rid(), type_="knows", from_=NameRef(name="Xu"), to=NameRef(name="Yan")
    )
    first = run(db, Opcode.RELATION_CREATE, request)
    assert run(db, Opcode.RELATION_CREATE, request) == first
    assert isinstance(first, RelationCreateOk)
    xu = ends(db, first.relation_id)[0]
    assert listing(db, xu, type_="knows") == [first.relation_id]
    stone = RelationTombstone(request_id=rid(), id=first.relation_id)
    assert run(db, Opcode.RELATION_TOMBSTONE, stone) == run(db, Opcode.RELATION_TOMBSTONE, stone)


def test_relations_in_a_transaction(db: Database) -> None:
    begun = run(db, Opcode.TXN_BEGIN, TxnBegin())
    assert isinstance(begun, TxnBegun)
    request = RelationCreate(
        request_id=rid(),
        txn_id=begun.txn_id,
        type_="knows",
        from_=NameRef(name="Zed"),
        to=NameRef(name="zed"),
    )
    buffered = run(db, Opcode.RELATION_CREATE, request)
    assert isinstance(buffered, RelationCreateOk)
    done = run(db, Opcode.TXN_COMMIT, TxnCommit(txn_id=begun.txn_id))
    assert isinstance(done, TxnCommitted)
    committed = RelationCreateOk.from_wire(done.results[0])
    assert committed.relation_id == buffered.relation_id
    loop = get(db, committed.relation_id)
    assert loop.from_ == loop.to


def test_relations_survive_reopen(tmp_path: Path) -> None:
    with brain.open(tmp_path / "d") as db:
        r = create(db, "knows", "Old", "Friend")
        new = supersede(db, r.relation_id, "knows", "Old", "Pal", valid_from=5)
    with brain.open(tmp_path / "d") as db:
        assert get(db, r.relation_id).valid_to == 5
        assert get(db, new.relation_id).supersedes == r.relation_id


def test_declared_cardinality_comes_from_the_schema(tmp_path: Path) -> None:
    from brain.wire.messages.schema_ops import RelationTypeDecl, SchemaPut

    with brain.open(tmp_path / "schema") as db:
        db.execute(
            "default",
            Opcode.SCHEMA_PUT,
            SchemaPut(
                relation_types=(RelationTypeDecl(name="reports_to", cardinality="many_to_one"),)
            ),
        )

        def reports(n: int, who: str, boss: str) -> RelationCreateOk:
            answer = db.execute(
                "default",
                Opcode.RELATION_CREATE,
                RelationCreate(
                    request_id=n.to_bytes(16, "big"),
                    type_="reports_to",
                    from_=NameRef(name=who),
                    to=NameRef(name=boss),
                ),
            )
            assert isinstance(answer, RelationCreateOk)
            return answer

        first = reports(1, "Ann", "Bo")
        second = reports(2, "Ann", "Cy")
        assert second.superseded == first.relation_id
        assert reports(3, "Dee", "Cy").superseded is None


def test_statements_rules_hold_for_relations_too(db: Database) -> None:
    # The supersession close and the citation rules are shared with statements.
    from brain.wire.messages.memory_ops import Forget

    old = create(db, "knows", "Una", "Vic", valid_from=100)
    supersede(db, old.relation_id, "knows", "Una", "Wes", valid_from=50)
    shown = get(db, old.relation_id)
    assert (shown.valid_from, shown.valid_to) == (100, 100)
    memory = run(db, Opcode.ENCODE, Encode(request_id=rid(), text="heard it"))
    assert isinstance(memory, EncodeOk)
    run(db, Opcode.FORGET, Forget(request_id=rid(), memory=memory.memory_id, mode="soft"))
    with pytest.raises(Conflict) as info:
        create(db, "knows", "Una", "Xan", evidence=(Evidence(memory=memory.memory_id),))
    assert info.value.field == "evidence[0].memory"
