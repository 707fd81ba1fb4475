"""Entities in the engine: create, update, resolve, list, tombstone, merge and unmerge."""

from __future__ import annotations

import math

import pytest
from rapidfuzz import fuzz

from brain import cbor
from brain.engine.database import Database
from brain.engine.records import entities as entity_ops
from brain.engine.records import resolution
from brain.engine.records.entity_rows import NAME_KEY_BYTES, entity_versions
from brain.engine.store.scope import Scope
from brain.engine.write.tuning import AMBIGUITY_MARGIN, FUZZY_THRESHOLD
from brain.errors import BrainError, Conflict, InvalidArgument, NotFound
from brain.wire.messages.entity_ops import (
    EntityCreate,
    EntityCreateOk,
    EntityGet,
    EntityGetOk,
    EntityList,
    EntityListOk,
    EntityMerge,
    EntityMergeOk,
    EntityResolve,
    EntityResolveOk,
    EntityTombstone,
    EntityTombstoneOk,
    EntityUnmerge,
    EntityUnmergeOk,
    EntityUpdate,
    EntityUpdateOk,
)
from brain.wire.messages.records import Entity
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementGet,
    StatementGetOk,
)
from brain.wire.messages.txn_ops import TxnBegin, TxnBegun, TxnCommit
from brain.wire.messages.values import EntityRef, NameRef, TextValue
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.unit.common import NS, rid


def run(db: Database, opcode: Opcode, request: Message, ns: str = NS) -> Message:
    return db.execute(ns, opcode, request)


def create(db: Database, name: str, ns: str = NS, **kw: object) -> bytes:
    answer = run(
        db,
        Opcode.ENTITY_CREATE,
        EntityCreate(request_id=rid(), name=name, **kw),  # type: ignore[arg-type]
        ns,
    )
    assert isinstance(answer, EntityCreateOk)
    return answer.entity_id


def get(db: Database, entity_id: bytes, ns: str = NS, space: str | None = None) -> Entity:
    answer = run(db, Opcode.ENTITY_GET, EntityGet(id=entity_id, space=space), ns)
    assert isinstance(answer, EntityGetOk)
    return answer.entity


def update(db: Database, entity_id: bytes, **kw: object) -> Entity:
    request = EntityUpdate(request_id=rid(), id=entity_id, **kw)  # type: ignore[arg-type]
    answer = run(db, Opcode.ENTITY_UPDATE, request)
    assert isinstance(answer, EntityUpdateOk)
    return answer.entity


def resolve(db: Database, name: str, ns: str = NS, **kw: object) -> EntityResolveOk:
    answer = run(db, Opcode.ENTITY_RESOLVE, EntityResolve(name=name, **kw), ns)  # type: ignore[arg-type]
    assert isinstance(answer, EntityResolveOk)
    return answer


def listing(db: Database, ns: str = NS, **kw: object) -> EntityListOk:
    answer = run(db, Opcode.ENTITY_LIST, EntityList(**kw), ns)  # type: ignore[arg-type]
    assert isinstance(answer, EntityListOk)
    return answer


def tombstone(db: Database, entity_id: bytes) -> EntityTombstoneOk:
    answer = run(db, Opcode.ENTITY_TOMBSTONE, EntityTombstone(request_id=rid(), id=entity_id))
    assert isinstance(answer, EntityTombstoneOk)
    return answer


def merge(db: Database, keep: bytes, merged: bytes) -> bytes:
    request = EntityMerge(request_id=rid(), keep=keep, merge=merged)
    answer = run(db, Opcode.ENTITY_MERGE, request)
    assert isinstance(answer, EntityMergeOk)
    return answer.merge_id


def unmerge(db: Database, merge_id: bytes) -> EntityUnmergeOk:
    answer = run(db, Opcode.ENTITY_UNMERGE, EntityUnmerge(request_id=rid(), merge_id=merge_id))
    assert isinstance(answer, EntityUnmergeOk)
    return answer


def raises(kind: type[BrainError], field: str, call: object) -> None:
    """Run ``call`` (a zero-argument callable) and check the error and its field."""
    assert callable(call)
    with pytest.raises(kind) as caught:
        call()
    assert caught.value.field == field, caught.value


def statement_subject(db: Database, subject: NameRef | EntityRef) -> object:
    request = StatementCreate(
        request_id=rid(),
        kind="fact",
        subject=subject,
        predicate="likes",
        object_=TextValue(text="tea"),
    )
    created = run(db, Opcode.STATEMENT_CREATE, request)
    assert isinstance(created, StatementCreateOk)
    answer = run(db, Opcode.STATEMENT_GET, StatementGet(id=created.statement_id))
    assert isinstance(answer, StatementGetOk)
    return answer.statement.subject


# --- create, get, update --------------------------------------------------------------


def test_create_and_get(db: Database) -> None:
    entity_id = create(
        db,
        "Ada  Lovelace",
        type_="person",
        aliases=("Ada", "ADA", "ada lovelace", "Countess"),
        attributes={"born": 1815, "tags": ["maths", None], "ratio": 0.5, "raw": b"\x01"},
    )
    entity = get(db, entity_id)
    assert entity.id == entity_id
    assert entity.name == "Ada  Lovelace"
    assert entity.type_ == "person"
    # Aliases equal to the name or to an earlier alias (normalised) are dropped.
    assert entity.aliases == ("Ada", "Countess")
    assert entity.attributes == {
        "born": 1815,
        "tags": ["maths", None],
        "ratio": 0.5,
        "raw": b"\x01",
    }
    assert entity.created_at > 0
    assert entity.merged_into is None and entity.tombstoned_at is None
    raises(NotFound, "id", lambda: get(db, b"\x07" * 16))


def test_a_name_may_be_created_twice(db: Database) -> None:
    first = create(db, "Paris", type_="city")
    second = create(db, "paris", type_="city")
    assert first != second
    answer = resolve(db, "PARIS")
    assert {m.entity_id for m in answer.matches} == {first, second}
    assert answer.ambiguous and answer.resolved is None


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"name": "   "}, "name"),
        ({"aliases": ("ok", " \t ")}, "aliases[1]"),
        ({"attributes": {"score": math.nan}}, "attributes.score"),
        ({"attributes": {"when": math.inf}}, "attributes.when"),
        ({"attributes": {"deep": {"b": {"c": {"d": {"e": 1}}}}}}, "attributes.deep.b.c.d"),
        ({"attributes": {"odd": cbor.Tag(1, 5)}}, "attributes.odd"),
        ({"attributes": {"list": [1, [2, cbor.UNDEFINED]]}}, "attributes.list[1][1]"),
        ({"attributes": {"m": {"k": cbor.Simple(16)}}}, "attributes.m.k"),
        ({"attributes": {"big": 1 << 70}}, "attributes.big"),
    ],
)
def test_create_rejects(db: Database, kw: dict[str, object], field: str) -> None:
    fields: dict[str, object] = {"name": "thing", **kw}
    request = EntityCreate(request_id=rid(), **fields)  # type: ignore[arg-type]
    raises(InvalidArgument, field, lambda: run(db, Opcode.ENTITY_CREATE, request))


def test_attributes_may_nest_to_the_limit(db: Database) -> None:
    attributes: dict[str, object] = {"a": {"b": {"c": [1, "x", None]}}}
    entity_id = create(db, "nested", attributes={"a": {"b": {"c": 1}}})
    assert update(db, entity_id, attributes=attributes).attributes == attributes


def test_update_renames_moves_aliases_and_replaces_attributes(db: Database) -> None:
    entity_id = create(
        db, "Acme", aliases=("Acme Inc", "ACME Corp"), attributes={"city": "Oslo", "size": 3}
    )
    entity = update(
        db,
        entity_id,
        name="Acme Group",
        add_aliases=("Acme", "acme  group", "AG"),
        remove_aliases=("acme inc", "not an alias"),
        attributes={"size": 4},
    )
    assert entity.name == "Acme Group"
    assert entity.aliases == ("ACME Corp", "Acme", "AG")
    assert entity.attributes == {"size": 4}  # replaced whole, not merged
    assert get(db, entity_id) == entity
    # The name index follows: the removed alias is gone, the new name and aliases resolve.
    assert resolve(db, "Acme Inc").matches == ()
    assert resolve(db, "acme group").matches[0].tier == "exact"
    assert resolve(db, "ag").resolved == entity_id
    assert resolve(db, "acme").matches[0].tier == "alias"
    # Renaming to an alias drops that alias.
    assert update(db, entity_id, name="AG").aliases == ("ACME Corp", "Acme")
    assert update(db, entity_id).aliases == ("ACME Corp", "Acme")


def test_update_errors(db: Database) -> None:
    entity_id = create(db, "Widget")
    raises(
        InvalidArgument,
        "add_aliases[1]",
        lambda: update(db, entity_id, add_aliases=("w", "Gadget"), remove_aliases=("gadget",)),
    )
    raises(InvalidArgument, "add_aliases[0]", lambda: update(db, entity_id, add_aliases=(" ",)))
    raises(InvalidArgument, "name", lambda: update(db, entity_id, name="  "))
    raises(
        InvalidArgument, "attributes.x", lambda: update(db, entity_id, attributes={"x": math.nan})
    )
    raises(NotFound, "id", lambda: update(db, b"\x09" * 16, name="x"))
    tombstone(db, entity_id)
    raises(Conflict, "id", lambda: update(db, entity_id, name="x"))


# --- list -----------------------------------------------------------------------------


def test_list_filters_and_pages(db: Database) -> None:
    people = [create(db, f"Person {i}", type_="person") for i in range(7)]
    places = [create(db, "Pune", type_="city"), create(db, "person-like place")]
    gone = create(db, "Person gone", type_="person")
    tombstone(db, gone)
    merged = create(db, "Person merged", type_="person")
    merge(db, people[0], merged)

    everything = listing(db)
    assert [e.id for e in everything.entities] == sorted(people + places)
    assert everything.cursor is None

    seen: list[bytes] = []
    cursor: bytes | None = None
    pages = 0
    while True:
        page = listing(db, type_="person", limit=3, cursor=cursor)
        seen += [e.id for e in page.entities]
        pages += 1
        if page.cursor is None:
            break
        cursor = page.cursor
    assert seen == people and pages == 3

    assert [e.id for e in listing(db, prefix="PERSON").entities] == sorted([*people, places[1]])
    assert [e.id for e in listing(db, prefix="person ", type_="person").entities] == people
    assert [e.id for e in listing(db, prefix="pu").entities] == [places[0]]
    assert listing(db, type_="planet").entities == ()
    raises(InvalidArgument, "cursor", lambda: listing(db, cursor=b"\x01\x02"))


# --- resolve --------------------------------------------------------------------------


def test_resolve_tiers(db: Database) -> None:
    robert = create(db, "Robert Smith", type_="person", aliases=("Bob",))
    bobby = create(db, "Bob", type_="dog")

    exact = resolve(db, "  BOB ")
    assert [(m.entity_id, m.tier, m.score) for m in exact.matches] == [(bobby, "exact", 1.0)]
    assert exact.resolved == bobby and not exact.ambiguous

    # The exact tier is filtered by type; then the alias tier answers.
    alias = resolve(db, "bob", type_="person")
    assert [(m.entity_id, m.name, m.tier) for m in alias.matches] == [
        (robert, "Robert Smith", "alias")
    ]
    assert alias.resolved == robert

    fuzzy = resolve(db, "Robert Smyth")
    assert [(m.entity_id, m.tier) for m in fuzzy.matches] == [(robert, "fuzzy")]
    assert fuzzy.matches[0].score == pytest.approx(fuzz.ratio("robert smyth", "robert smith") / 100)
    assert fuzzy.resolved == robert

    # Under the threshold nothing matches: "rob" is 0.67 from "bob".
    assert fuzz.ratio("rob", "bob") / 100 < FUZZY_THRESHOLD
    nothing = resolve(db, "Rob")
    assert nothing.matches == () and nothing.resolved is None and not nothing.ambiguous
    raises(InvalidArgument, "name", lambda: resolve(db, "   "))


def test_resolve_ambiguity_on_a_near_tie(db: Database) -> None:
    john = create(db, "John Smith")
    jon = create(db, "Jon Smithe")
    scores = [fuzz.ratio("jon smith", n) / 100 for n in ("john smith", "jon smithe")]
    assert abs(scores[0] - scores[1]) <= AMBIGUITY_MARGIN
    tie = resolve(db, "Jon Smith")
    assert {m.entity_id for m in tie.matches} == {john, jon}
    assert tie.ambiguous and tie.resolved is None

    # An exact match wins outright, however close the fuzzy neighbours are.
    close = create(db, "John Smithy")
    clear = resolve(db, "john smithy ")
    assert clear.matches[0].entity_id == close and clear.matches[0].tier == "exact"
    assert not clear.ambiguous and clear.resolved == close

    # Sorted by score, then id; limit cuts the list after the ambiguity is judged.
    ranked = resolve(db, "Jon Smith", limit=1)
    assert len(ranked.matches) == 1 and ranked.ambiguous
    full = resolve(db, "Jon Smith")
    keys = [(-m.score, m.entity_id) for m in full.matches]
    assert keys == sorted(keys)


def test_resolve_skips_tombstoned_entities(db: Database) -> None:
    old = create(db, "Globex")
    new = create(db, "Globex")
    assert resolve(db, "globex").ambiguous
    tombstone(db, old)
    answer = resolve(db, "globex")
    assert [m.entity_id for m in answer.matches] == [new] and answer.resolved == new
    tombstone(db, new)
    assert resolve(db, "globex").matches == ()
    assert resolve(db, "globez").matches == ()


def test_fuzzy_scan_is_bounded(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    create(db, "aaaa one")
    create(db, "aaaa two")
    late = create(db, "zzzz three")
    assert resolve(db, "zzzz thre").resolved == late
    monkeypatch.setattr(resolution, "FUZZY_SCAN_ROWS", 2)
    assert resolve(db, "zzzz thre").matches == ()


def test_long_names_are_indexed(db: Database) -> None:
    long_name = "x" * 1000
    other = "x" * 999 + "y"
    first = create(db, long_name, aliases=("é" * 900,))
    second = create(db, other)
    assert len(long_name.encode()) > NAME_KEY_BYTES
    assert resolve(db, long_name.upper()).resolved == first
    assert resolve(db, other).resolved == second
    assert resolve(db, "É" * 900).matches[0].tier == "alias"


# --- tombstone ------------------------------------------------------------------------


def test_tombstone(db: Database) -> None:
    entity_id = create(db, "Initech")
    answer = tombstone(db, entity_id)
    assert answer.id == entity_id and answer.lsn > 0
    assert get(db, entity_id).tombstoned_at is not None
    raises(Conflict, "id", lambda: tombstone(db, entity_id))
    raises(NotFound, "id", lambda: tombstone(db, b"\x05" * 16))
    # A write naming it by name creates a new entity rather than reviving it.
    subject = statement_subject(db, NameRef(name="initech"))
    assert isinstance(subject, EntityRef) and subject.entity != entity_id


# --- merge and unmerge ----------------------------------------------------------------


def _state(db: Database, ids: list[bytes], names: list[str]) -> object:
    """What reads show of ``ids`` and ``names``, but the record interval of each entity's
    version (an unmerge restores the rows in a version of its own)."""
    shown = []
    for entity_id in ids:
        wire = get(db, entity_id).to_wire()
        wire.pop("recorded_at")
        wire.pop("record_invalidated_at", None)
        shown.append(wire)
    return shown, [resolve(db, n) for n in names]


def test_merge_then_unmerge_restores_exactly(db: Database) -> None:
    keep = create(db, "Robert Smith", type_="person", aliases=("Bob",), attributes={"a": 1})
    gone = create(db, "R. Smith", type_="person", aliases=("Bobby", "bob"), attributes={"b": 2})
    names = ["Robert Smith", "R. Smith", "Bobby", "bob", "Robert Smyth"]
    before = _state(db, [keep, gone], names)
    rows_before = _dump(db)

    merge_id = merge(db, keep, gone)
    kept, merged = get(db, keep), get(db, gone)
    assert kept.aliases == ("Bob", "R. Smith", "Bobby")
    assert kept.attributes == {"a": 1}
    assert merged.merged_into == keep and merged.aliases == () and merged.name == "R. Smith"
    for name in ("R. Smith", "Bobby", "bob"):
        answer = resolve(db, name)
        assert [m.entity_id for m in answer.matches] == [keep], name
    # Refs to the merged entity, by name or by id, answer as the kept one.
    assert statement_subject(db, NameRef(name="r. smith")) == EntityRef(entity=keep)
    assert statement_subject(db, EntityRef(entity=gone)) == EntityRef(entity=keep)
    # The merged entity cannot be changed, and is not listed.
    raises(Conflict, "id", lambda: update(db, gone, name="x"))
    raises(Conflict, "id", lambda: tombstone(db, gone))
    assert [e.id for e in listing(db).entities] == [keep]

    assert unmerge(db, merge_id).lsn > 0
    assert _state(db, [keep, gone], names) == before
    assert _dump(db) == rows_before
    # The merge stays on the record axis: created, merged, unmerged.
    with db._store.read() as txn:
        history = entity_versions(db._store, txn, Scope.of(NS, None), gone)
    assert [v.merged_into for v in history] == [None, keep, None]
    raises(Conflict, "merge_id", lambda: unmerge(db, merge_id))
    raises(NotFound, "merge_id", lambda: unmerge(db, b"\x03" * 16))


def _dump(db: Database) -> dict[bytes, list[tuple[bytes, bytes]]]:
    """The raw entity and name-index rows (the merge must leave no trace after unmerge)."""
    store = db._store
    out: dict[bytes, list[tuple[bytes, bytes]]] = {}
    with store.read() as txn:
        for table in (b"entities", b"entity_by_name"):
            cursor = txn.cursor(db=store.table(table))
            out[table] = [(bytes(k), bytes(v)) for k, v in cursor]
    return out


def test_merge_errors(db: Database) -> None:
    a, b, c = create(db, "A"), create(db, "B"), create(db, "C")
    with pytest.raises(InvalidArgument) as caught:
        EntityMerge(request_id=rid(), keep=a, merge=a)
    assert caught.value.field == "merge"
    raises(NotFound, "keep", lambda: merge(db, b"\x04" * 16, a))
    raises(NotFound, "merge", lambda: merge(db, a, b"\x04" * 16))
    tombstone(db, c)
    raises(Conflict, "merge", lambda: merge(db, a, c))
    raises(Conflict, "keep", lambda: merge(db, c, a))
    merge(db, a, b)
    raises(Conflict, "keep", lambda: merge(db, b, a))
    raises(Conflict, "merge", lambda: merge(db, a, b))


def test_chains_of_merges_and_their_undo_order(db: Database) -> None:
    a, b, c = create(db, "Alpha"), create(db, "Beta"), create(db, "Gamma")
    first = merge(db, b, a)
    second = merge(db, c, b)
    assert statement_subject(db, EntityRef(entity=a)) == EntityRef(entity=c)
    assert resolve(db, "alpha").resolved == c
    # The older merge cannot be undone while the newer one depends on its result.
    raises(Conflict, "merge_id", lambda: unmerge(db, first))
    unmerge(db, second)
    assert resolve(db, "alpha").resolved == b
    unmerge(db, first)
    assert [resolve(db, n).resolved for n in ("alpha", "beta", "gamma")] == [a, b, c]


def test_unmerge_refuses_when_the_kept_entity_changed(db: Database) -> None:
    keep, gone = create(db, "Keep"), create(db, "Gone")
    merge_id = merge(db, keep, gone)
    update(db, keep, attributes={"later": True})
    raises(Conflict, "merge_id", lambda: unmerge(db, merge_id))
    update(db, keep, attributes={})
    unmerge(db, merge_id)
    assert get(db, gone).merged_into is None


def test_merge_chain_is_bounded(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entity_ops, "MAX_MERGE_HOPS", 2)
    ids = [create(db, f"link {i}") for i in range(4)]
    merge(db, ids[1], ids[0])
    merge(db, ids[2], ids[1])
    raises(Conflict, "merge", lambda: merge(db, ids[3], ids[2]))


# --- scope, idempotency, transactions -------------------------------------------------


def test_scopes_never_see_each_other(db: Database) -> None:
    scopes = [("alpha", None), ("beta", None), ("alpha", "work")]
    ids: dict[tuple[str, str | None], bytes] = {}
    for ns, space in scopes:
        request = EntityCreate(request_id=rid(), name="Shared Name", space=space)
        answer = run(db, Opcode.ENTITY_CREATE, request, ns)
        assert isinstance(answer, EntityCreateOk)
        ids[(ns, space)] = answer.entity_id
    for (ns, space), entity_id in ids.items():
        found = resolve(db, "shared name", ns=ns, space=space)
        assert [m.entity_id for m in found.matches] == [entity_id]
        assert found.resolved == entity_id
        fuzzy = resolve(db, "shared nam", ns=ns, space=space)
        assert [m.entity_id for m in fuzzy.matches] == [entity_id]
        assert [e.id for e in listing(db, ns=ns, space=space).entities] == [entity_id]
        for other_scope, other in ids.items():
            if other_scope != (ns, space):
                raises(NotFound, "id", lambda o=other, n=ns, s=space: get(db, o, n, s))
    a, b = ids[("alpha", None)], ids[("beta", None)]
    across = EntityMerge(request_id=rid(), keep=a, merge=b)
    raises(NotFound, "merge", lambda: run(db, Opcode.ENTITY_MERGE, across, "alpha"))
    rename = EntityUpdate(request_id=rid(), id=b, name="Stolen")
    raises(NotFound, "id", lambda: run(db, Opcode.ENTITY_UPDATE, rename, "alpha"))
    assert get(db, b, "beta").name == "Shared Name"


def test_every_write_repeats_idempotently(db: Database) -> None:
    def twice(opcode: Opcode, request: Message) -> Message:
        first = run(db, opcode, request)
        assert run(db, opcode, request) == first
        return first

    created = twice(Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name="Once"))
    assert isinstance(created, EntityCreateOk)
    assert len(listing(db).entities) == 1
    other = create(db, "Twice")
    twice(Opcode.ENTITY_UPDATE, EntityUpdate(request_id=rid(), id=other, add_aliases=("2x",)))
    merged = twice(
        Opcode.ENTITY_MERGE, EntityMerge(request_id=rid(), keep=created.entity_id, merge=other)
    )
    assert isinstance(merged, EntityMergeOk)
    twice(Opcode.ENTITY_UNMERGE, EntityUnmerge(request_id=rid(), merge_id=merged.merge_id))
    assert get(db, other).merged_into is None
    twice(Opcode.ENTITY_TOMBSTONE, EntityTombstone(request_id=rid(), id=other))
    assert [e.id for e in listing(db).entities] == [created.entity_id]


def test_create_inside_a_transaction(db: Database) -> None:
    begun = run(db, Opcode.TXN_BEGIN, TxnBegin())
    assert isinstance(begun, TxnBegun)
    request = EntityCreate(request_id=rid(), name="Buffered", txn_id=begun.txn_id)
    buffered = run(db, Opcode.ENTITY_CREATE, request)
    assert isinstance(buffered, EntityCreateOk)
    assert resolve(db, "buffered").matches == ()
    run(db, Opcode.TXN_COMMIT, TxnCommit(txn_id=begun.txn_id))
    assert resolve(db, "buffered").resolved == buffered.entity_id
