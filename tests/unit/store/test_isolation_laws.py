"""Scope isolation as a property (spec/05-durability.md §10).

The same names, texts, predicates and request ids are written into two
namespaces by two spaces: memories, entities, statements with name subjects
and relations between names, with a different schema in each scope. No read
in one scope may return or count a record of another: another scope's id is
NOT_FOUND, and every list, resolution, traversal, schema, review queue, RECALL
and EXPLAIN (through each arm alone and fused) answers and counts exactly its
own scope's records.

Then each scope forgets a memory hard, merges two entities, leaves a name
ambiguous and tombstones a statement with a reason, and every other scope
(another space, another namespace, or both) sends every write that names a
record by id with that scope's ids: statements, entities, relations,
memories, the merge and the review. Each is NOT_FOUND, and what every scope
answers for its own records is byte for byte what it answered before.

Last, with the database closed, every key of every LMDB table but ``meta``
must begin with one of the four scope prefixes (the forget ledger, the audit
log, merges and pending names included, each holding rows of every scope),
and every stored row that names its scope names that one.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import lmdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import brain
from brain import cbor
from brain.engine.database import Database, DatabaseOptions
from brain.engine.records.schema import schema_scope
from brain.engine.store.env import TABLES
from brain.engine.store.scope import DEFAULT_SPACE, Scope
from brain.errors import NotFound
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
    EntityUnmerge,
    EntityUpdate,
)
from brain.wire.messages.memory_ops import (
    Encode,
    EncodeOk,
    Forget,
    ForgetOk,
    MemoryGet,
    MemoryGetOk,
)
from brain.wire.messages.recall_ops import ArmWeights, ExplainOk, ExplainRequest, Recall, RecallOk
from brain.wire.messages.records import Evidence
from brain.wire.messages.relation_ops import (
    RelationCreate,
    RelationCreateOk,
    RelationDraft,
    RelationGet,
    RelationGetOk,
    RelationList,
    RelationListOk,
    RelationSupersede,
    RelationTombstone,
    RelationTraverse,
    RelationTraverseOk,
)
from brain.wire.messages.review_ops import ReviewDecide, ReviewList, ReviewListOk
from brain.wire.messages.schema_ops import PredicateDecl, Schema, SchemaGet, SchemaPut
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementGet,
    StatementGetOk,
    StatementHistory,
    StatementList,
    StatementListOk,
    StatementRetract,
    StatementSupersede,
    StatementTombstone,
)
from brain.wire.messages.values import (
    EntityRef,
    EntityValue,
    MemoryRef,
    MemoryValue,
    NameRef,
    StatementValue,
    TextValue,
    Value,
)
from brain.wire.opcodes import Opcode
from brain.wire.registry import request_class
from brain.wire.schema import Message, field_keys
from tests.request_ids import request_ids

NAMESPACES: Final = ("tenant-a", "tenant-b")
SPACES: Final = (None, "other")  # None: the default space
NAME_POOL: Final = ("Ada Lovelace", "Grace Hopper", "Alan Turing", "Edsger Dijkstra")
RELATION_TYPE: Final = "knows"
ROW_TABLES: Final = (b"memories", b"entities", b"statements", b"relations")
"""Tables whose rows carry ``namespace`` and ``space`` (a second lock on the key)."""
FILLED_TABLES: Final = (
    *ROW_TABLES,
    b"idempotency",
    b"statement_by_subject",
    b"relation_by_from",
    b"forget_ledger",
    b"audit",
    b"entity_merges",
    b"entity_absorbed",
    b"reviews_by_name",
)
"""Tables every scope has written rows to by the time of the key scan."""
TWIN_NAME: Final = "Twin Name"
"""A name two entities of each scope share, so a statement about it waits for review."""
WRITES_WITHOUT_IDS: Final = frozenset({Opcode.ENCODE, Opcode.ENTITY_CREATE})
"""Writes with a request_id that name no existing record, so no other scope's either."""


def _no_fsync(fd: int) -> None:
    """Durability is not under test here; skipping the WAL's fdatasync saves time."""


@dataclass(slots=True)
class Written:
    """What one scope wrote, as its answers told it."""

    namespace: str
    space: str | None
    first_encode: Encode | None = None
    memories: dict[bytes, str] = field(default_factory=dict)
    entities: set[bytes] = field(default_factory=set)
    statements: set[bytes] = field(default_factory=set)
    relations: set[bytes] = field(default_factory=set)
    anchor: bytes = b""  # the entity of the first name
    # Written after the reads were checked (``_write_more``):
    forgotten: bytes = b""  # a memory forgotten hard
    merge_id: bytes = b""
    merged: tuple[bytes, bytes] = (b"", b"")  # (kept, merged away)
    review_id: bytes = b""  # the open review of TWIN_NAME
    pending: bytes = b""  # the statement waiting on it
    twins: tuple[bytes, ...] = ()

    @property
    def scope(self) -> Scope:
        return Scope.of(self.namespace, self.space)

    def run(self, db: Database, opcode: Opcode, request: Message) -> Message:
        return db.execute(self.namespace, opcode, request)


def _write_scope(
    db: Database,
    w: Written,
    *,
    index: int,
    names: list[str],
    texts: list[str],
    predicates: list[str],
) -> None:
    rid = request_ids(1).__next__  # the same request ids, in the same order, in every scope

    # A different vocabulary per scope: stateful here, kind fact there, open elsewhere.
    if index == 0:
        decls = tuple(PredicateDecl(name=p, kind="fact", stateful=True) for p in predicates)
        w.run(db, Opcode.SCHEMA_PUT, SchemaPut(space=w.space, predicates=decls))
    elif index == 1:
        decls = tuple(PredicateDecl(name=p, kind="fact", stateful=False) for p in predicates)
        w.run(db, Opcode.SCHEMA_PUT, SchemaPut(space=w.space, predicates=decls))
    for text in texts:
        request = Encode(space=w.space, request_id=rid(), text=text)
        w.first_encode = w.first_encode or request
        encoded = w.run(db, Opcode.ENCODE, request)
        assert isinstance(encoded, EncodeOk) and not encoded.deduplicated
        w.memories[encoded.memory_id] = text
    memory = next(iter(w.memories))
    for name in names[:-1]:  # the last name becomes an entity through a statement subject
        created = w.run(
            db, Opcode.ENTITY_CREATE, EntityCreate(space=w.space, request_id=rid(), name=name)
        )
        assert isinstance(created, EntityCreateOk)
        w.entities.add(created.entity_id)
    claims = [(name, p, texts[0]) for name in names for p in predicates]
    claims += [(names[0], p, "not " + texts[0]) for p in predicates]  # contradicts / supersedes
    for name, predicate, value in claims:
        said = w.run(
            db,
            Opcode.STATEMENT_CREATE,
            StatementCreate(
                space=w.space,
                request_id=rid(),
                kind="fact",
                subject=NameRef(name=name),
                predicate=predicate,
                object_=TextValue(text=value),
                evidence=(Evidence(memory=memory),),
            ),
        )
        assert isinstance(said, StatementCreateOk)
        w.statements.add(said.statement_id)
        shown = w.run(db, Opcode.STATEMENT_GET, StatementGet(space=w.space, id=said.statement_id))
        assert isinstance(shown, StatementGetOk)
        assert isinstance(shown.statement.subject, EntityRef)
        w.entities.add(shown.statement.subject.entity)
        if name == names[0]:
            w.anchor = shown.statement.subject.entity
    for name in names[1:]:
        related = w.run(
            db,
            Opcode.RELATION_CREATE,
            RelationCreate(
                space=w.space,
                request_id=rid(),
                type_=RELATION_TYPE,
                from_=NameRef(name=names[0]),
                to=NameRef(name=name),
            ),
        )
        assert isinstance(related, RelationCreateOk)
        w.relations.add(related.relation_id)


def _not_found(w: Written, db: Database, opcode: Opcode, request: Message) -> None:
    with pytest.raises(NotFound):
        w.run(db, opcode, request)


def _check_reads(
    db: Database, w: Written, others: list[Written], names: list[str], predicates: list[str]
) -> None:
    _check_own_ids_found(db, w)
    for o in others:
        _check_foreign_ids_not_found(db, w, o)
    _check_scans(db, w, names, predicates)
    _check_schema_and_reviews(db, w, predicates)
    _check_recall_and_explain(db, w, names, predicates)
    # Idempotency is scoped: the same request id replays this scope's answer.
    assert w.first_encode is not None
    replay = w.run(db, Opcode.ENCODE, w.first_encode)
    assert isinstance(replay, EncodeOk) and replay.memory_id == next(iter(w.memories))


def _check_own_ids_found(db: Database, w: Written) -> None:
    """Primary reads by id: every record ``w`` wrote is found, and is its own."""
    space = w.space
    for memory_id, text in w.memories.items():
        got = w.run(db, Opcode.MEMORY_GET, MemoryGet(space=space, id=memory_id))
        assert isinstance(got, MemoryGetOk) and got.memory.text == text
    for statement_id in w.statements:
        got = w.run(db, Opcode.STATEMENT_GET, StatementGet(space=space, id=statement_id))
        assert isinstance(got, StatementGetOk) and got.statement.space == (space or DEFAULT_SPACE)
        assert isinstance(got.statement.subject, EntityRef)
        assert got.statement.subject.entity in w.entities
        assert {e.memory for e in got.statement.evidence or ()} <= set(w.memories)
    for entity_id in w.entities:
        got = w.run(db, Opcode.ENTITY_GET, EntityGet(space=space, id=entity_id))
        assert isinstance(got, EntityGetOk) and got.entity.id == entity_id
    for relation_id in w.relations:
        got = w.run(db, Opcode.RELATION_GET, RelationGet(space=space, id=relation_id))
        assert isinstance(got, RelationGetOk)
        assert {got.relation.from_, got.relation.to} <= {EntityRef(entity=e) for e in w.entities}


def _check_foreign_ids_not_found(db: Database, w: Written, o: Written) -> None:
    """Primary reads by id in ``w``'s scope of the records ``o`` wrote: NOT_FOUND, or
    (listing statements about a foreign entity) nothing."""
    space = w.space
    for memory_id in o.memories:
        _not_found(w, db, Opcode.MEMORY_GET, MemoryGet(space=space, id=memory_id))
    for statement_id in o.statements:
        _not_found(w, db, Opcode.STATEMENT_GET, StatementGet(space=space, id=statement_id))
        _not_found(w, db, Opcode.STATEMENT_HISTORY, StatementHistory(space=space, id=statement_id))
    for entity_id in o.entities:
        _not_found(w, db, Opcode.ENTITY_GET, EntityGet(space=space, id=entity_id))
        _not_found(
            w,
            db,
            Opcode.RELATION_LIST,
            RelationList(space=space, entity=entity_id, direction="both"),
        )
        _not_found(
            w,
            db,
            Opcode.RELATION_TRAVERSE,
            RelationTraverse(space=space, from_=entity_id, depth=2),
        )
        try:
            by_foreign = w.run(
                db,
                Opcode.STATEMENT_LIST,
                StatementList(
                    space=space,
                    subject=EntityRef(entity=entity_id),
                    include_tombstoned=True,
                    include_superseded=True,
                ),
            )
        except NotFound:
            pass
        else:
            assert isinstance(by_foreign, StatementListOk) and by_foreign.statements == ()
    for relation_id in o.relations:
        _not_found(w, db, Opcode.RELATION_GET, RelationGet(space=space, id=relation_id))


def _check_scans(db: Database, w: Written, names: list[str], predicates: list[str]) -> None:
    """Scans: exactly this scope's records, counted once."""
    space = w.space
    listed = w.run(
        db,
        Opcode.STATEMENT_LIST,
        StatementList(space=space, include_tombstoned=True, include_superseded=True, limit=1000),
    )
    assert isinstance(listed, StatementListOk) and listed.cursor is None
    assert sorted(s.id for s in listed.statements) == sorted(w.statements)
    for name in names:
        by_name = w.run(
            db,
            Opcode.STATEMENT_LIST,
            StatementList(
                space=space, subject=NameRef(name=name), include_superseded=True, limit=1000
            ),
        )
        assert isinstance(by_name, StatementListOk)
        expected = len(predicates) * (2 if name == names[0] else 1)
        assert len(by_name.statements) == expected
        assert {s.id for s in by_name.statements} <= w.statements
        resolved = w.run(db, Opcode.ENTITY_RESOLVE, EntityResolve(space=space, name=name))
        assert isinstance(resolved, EntityResolveOk)
        assert resolved.resolved in w.entities
        assert {m.entity_id for m in resolved.matches} <= w.entities
    entities = w.run(db, Opcode.ENTITY_LIST, EntityList(space=space, limit=1000))
    assert isinstance(entities, EntityListOk)
    assert sorted(e.id for e in entities.entities) == sorted(w.entities)
    relations = w.run(
        db, Opcode.RELATION_LIST, RelationList(space=space, entity=w.anchor, direction="both")
    )
    assert isinstance(relations, RelationListOk)
    assert sorted(r.id for r in relations.relations) == sorted(w.relations)
    walked = w.run(
        db, Opcode.RELATION_TRAVERSE, RelationTraverse(space=space, from_=w.anchor, depth=2)
    )
    assert isinstance(walked, RelationTraverseOk)
    assert len(walked.nodes) == len(names)  # the anchor and each name it knows
    assert {n.entity_id for n in walked.nodes} <= w.entities
    assert sorted(e.id for e in walked.edges) == sorted(w.relations)


def _check_schema_and_reviews(db: Database, w: Written, predicates: list[str]) -> None:
    """Vocabulary and review queue: each scope its own."""
    space = w.space
    schema = w.run(db, Opcode.SCHEMA_GET, SchemaGet(space=space))
    assert isinstance(schema, Schema)
    reviews = w.run(db, Opcode.REVIEW_LIST, ReviewList(space=space))
    assert isinstance(reviews, ReviewListOk)
    for item in reviews.items:
        assert set(item.records) <= w.statements
    index = _ALL.index((w.namespace, w.space))
    if index in (0, 1):
        assert schema.version == 1
        assert sorted(p.name for p in schema.predicates) == sorted(predicates)
        assert all(p.stateful == (index == 0) for p in schema.predicates)
    else:
        assert schema.version == 0 and schema.predicates == ()
    # Only the scope that declared its predicates kind fact, not stateful, has
    # contradictions: one per predicate for the first name.
    assert len(reviews.items) == (len(predicates) if index == 1 else 0)


def _check_recall_and_explain(
    db: Database, w: Written, names: list[str], predicates: list[str]
) -> None:
    """RECALL and EXPLAIN, through each arm alone and fused, over every text and name:
    only this scope's records come back, and only they are counted."""
    space = w.space
    cue = " ".join([*names, *predicates, *w.memories.values()])
    own = set(w.memories) | w.statements
    for arms in (*_ONE_ARM, None):
        found = w.run(
            db,
            Opcode.RECALL,
            Recall(
                space=space,
                cue=cue,
                arms=arms,
                top_k=1000,
                include_tombstoned=True,
                include_superseded=True,
                entity_anchor=w.anchor,
            ),
        )
        assert isinstance(found, RecallOk)
        assert {h.id for h in found.hits} <= own
        assert found.coverage.corpus == len(own)
        explained = w.run(db, Opcode.EXPLAIN, ExplainRequest(space=space, cue=cue, arms=arms))
        assert isinstance(explained, ExplainOk)
        assert explained.explain.survivors.fused <= len(own)
        assert {h.id for h in explained.hits} <= own


def _write_more(db: Database, w: Written, predicates: list[str]) -> None:
    """A hard forget, a merge, an ambiguous name and an audited tombstone, so the
    key scan and the foreign writes meet every kind of record and row."""
    rid = request_ids(1 << 32).__next__

    space = w.space
    dropped = w.run(db, Opcode.ENCODE, Encode(space=space, request_id=rid(), text="Forget me: 1"))
    assert isinstance(dropped, EncodeOk) and not dropped.deduplicated
    w.forgotten = dropped.memory_id
    forgot = w.run(
        db,
        Opcode.FORGET,
        Forget(space=space, request_id=rid(), memory=dropped.memory_id, mode="hard"),
    )
    assert isinstance(forgot, ForgetOk) and not forgot.already_forgotten
    made = []
    for name in ("Merge Keeper", "Merge Absorbed", TWIN_NAME, TWIN_NAME):
        created = w.run(
            db, Opcode.ENTITY_CREATE, EntityCreate(space=space, request_id=rid(), name=name)
        )
        assert isinstance(created, EntityCreateOk)
        made.append(created.entity_id)
    w.merged, w.twins = (made[0], made[1]), (made[2], made[3])
    merged = w.run(
        db,
        Opcode.ENTITY_MERGE,
        EntityMerge(space=space, request_id=rid(), keep=made[0], merge=made[1]),
    )
    assert isinstance(merged, EntityMergeOk)
    w.merge_id = merged.merge_id
    waiting = w.run(
        db,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            space=space,
            request_id=rid(),
            kind="fact",
            subject=NameRef(name=TWIN_NAME),
            predicate=predicates[0],
            object_=TextValue(text="twin"),
        ),
    )
    assert isinstance(waiting, StatementCreateOk)
    w.pending = waiting.statement_id
    reviews = w.run(db, Opcode.REVIEW_LIST, ReviewList(space=space))
    assert isinstance(reviews, ReviewListOk)
    (review,) = [item for item in reviews.items if item.kind == "ambiguous_entity"]
    assert review.name == TWIN_NAME
    w.review_id = review.review_id
    w.run(
        db,
        Opcode.STATEMENT_TOMBSTONE,
        StatementTombstone(space=space, request_id=rid(), id=min(w.statements), reason="why"),
    )


def _snapshot(db: Database, w: Written) -> list[bytes]:
    """What the scope answers about each of its records, as the wire would carry it."""
    space = w.space
    requests: list[tuple[Opcode, Message]] = [
        *((Opcode.MEMORY_GET, MemoryGet(space=space, id=i)) for i in (*w.memories, w.forgotten)),
        *(
            (Opcode.STATEMENT_GET, StatementGet(space=space, id=i))
            for i in sorted((*w.statements, w.pending))
        ),
        *(
            (Opcode.ENTITY_GET, EntityGet(space=space, id=i))
            for i in sorted((*w.entities, *w.merged, *w.twins))
        ),
        *((Opcode.RELATION_GET, RelationGet(space=space, id=i)) for i in sorted(w.relations)),
        (Opcode.REVIEW_LIST, ReviewList(space=space)),
        (Opcode.SCHEMA_GET, SchemaGet(space=space)),
        (Opcode.ENTITY_LIST, EntityList(space=space, limit=1000)),
        (
            Opcode.STATEMENT_LIST,
            StatementList(
                space=space, include_superseded=True, include_tombstoned=True, limit=1000
            ),
        ),
        (Opcode.RELATION_LIST, RelationList(space=space, entity=w.anchor, direction="both")),
    ]
    return [cbor.encode(w.run(db, opcode, request).to_wire()) for opcode, request in requests]


def _foreign_writes(
    w: Written, o: Written, names: list[str], predicates: list[str], rid: Callable[[], bytes]
) -> list[tuple[Opcode, Message]]:
    """Every write naming a record by id, sent in ``w``'s scope with ``o``'s ids."""
    space = w.space
    statement, relation = min(o.statements), min(o.relations)
    memory, entity = next(iter(o.memories)), o.anchor

    def claim(subject: EntityRef | MemoryRef | NameRef, value: Value, **kw: object) -> Message:
        return StatementCreate(
            space=space,
            request_id=rid(),
            kind="fact",
            subject=subject,
            predicate=predicates[0],
            object_=value,
            **kw,  # type: ignore[arg-type]
        )

    own, text = NameRef(name=names[0]), TextValue(text="x")
    return [
        (Opcode.STATEMENT_CREATE, claim(EntityRef(entity=entity), text)),
        (Opcode.STATEMENT_CREATE, claim(MemoryRef(memory=memory), text)),
        (Opcode.STATEMENT_CREATE, claim(own, text, evidence=(Evidence(memory=memory),))),
        (Opcode.STATEMENT_CREATE, claim(own, EntityValue(entity=entity))),
        (Opcode.STATEMENT_CREATE, claim(own, MemoryValue(memory=o.forgotten))),
        (Opcode.STATEMENT_CREATE, claim(own, StatementValue(statement=o.pending))),
        (
            Opcode.STATEMENT_SUPERSEDE,
            StatementSupersede(
                space=space,
                request_id=rid(),
                old=statement,
                new=StatementDraft(kind="fact", subject=own, predicate=predicates[0], object_=text),
            ),
        ),
        (
            Opcode.STATEMENT_TOMBSTONE,
            StatementTombstone(space=space, request_id=rid(), id=statement),
        ),
        (Opcode.STATEMENT_RETRACT, StatementRetract(space=space, request_id=rid(), id=o.pending)),
        (
            Opcode.RELATION_CREATE,
            RelationCreate(
                space=space,
                request_id=rid(),
                type_=RELATION_TYPE,
                from_=own,
                to=EntityRef(entity=o.merged[1]),
            ),
        ),
        (
            Opcode.RELATION_SUPERSEDE,
            RelationSupersede(
                space=space,
                request_id=rid(),
                old=relation,
                new=RelationDraft(type_=RELATION_TYPE, from_=own, to=NameRef(name=names[1])),
            ),
        ),
        (Opcode.RELATION_TOMBSTONE, RelationTombstone(space=space, request_id=rid(), id=relation)),
        (
            Opcode.ENTITY_UPDATE,
            EntityUpdate(space=space, request_id=rid(), id=entity, add_aliases=("taken",)),
        ),
        (Opcode.ENTITY_TOMBSTONE, EntityTombstone(space=space, request_id=rid(), id=o.twins[0])),
        (
            Opcode.ENTITY_MERGE,
            EntityMerge(space=space, request_id=rid(), keep=w.anchor, merge=o.merged[0]),
        ),
        (
            Opcode.ENTITY_MERGE,
            EntityMerge(space=space, request_id=rid(), keep=o.twins[1], merge=w.anchor),
        ),
        (Opcode.ENTITY_UNMERGE, EntityUnmerge(space=space, request_id=rid(), merge_id=o.merge_id)),
        (Opcode.FORGET, Forget(space=space, request_id=rid(), memory=memory, mode="soft")),
        (Opcode.FORGET, Forget(space=space, request_id=rid(), memory=memory, mode="hard")),
        (Opcode.FORGET, Forget(space=space, request_id=rid(), memory=o.forgotten, mode="hard")),
        (
            Opcode.REVIEW_DECIDE,
            ReviewDecide(
                space=space,
                request_id=rid(),
                review_id=o.review_id,
                decision="merge",
                into=o.twins[1],
            ),
        ),
    ]


def _check_foreign_writes(
    db: Database, written: list[Written], names: list[str], predicates: list[str]
) -> None:
    """Each scope sends every write naming ids with each other scope's ids: all NOT_FOUND,
    and no scope answers one byte differently afterwards."""
    rid = request_ids(1 << 40).__next__

    before = [_snapshot(db, w) for w in written]
    sent: set[Opcode] = set()
    for w in written:
        for o in written:
            if o is w:
                continue
            for opcode, request in _foreign_writes(w, o, names, predicates, rid):
                sent.add(opcode)
                with pytest.raises(NotFound):
                    w.run(db, opcode, request)
    writes = {
        opcode
        for opcode in Opcode
        if "request_id" in {key for key, _ in field_keys(request_class(opcode))}
    }
    assert sent == writes - WRITES_WITHOUT_IDS
    assert [_snapshot(db, w) for w in written] == before


_ALL: Final = tuple((ns, space) for ns in NAMESPACES for space in SPACES)

_ONE_ARM: Final = (
    ArmWeights(semantic=1.0, lexical=0.0, graph=0.0),
    ArmWeights(semantic=0.0, lexical=1.0, graph=0.0),
    ArmWeights(semantic=0.0, lexical=0.0, graph=1.0),
)


def _scan_keys(path: Path, written: list[Written]) -> None:
    """Every key of every table but ``meta`` starts with one of the four prefixes."""
    prefixes = {w.scope.prefix: w.scope for w in written}
    namespace_schemas = {schema_scope(w.namespace, None).prefix for w in written}
    seen: dict[bytes, set[bytes]] = {table: set() for table in TABLES}
    env = lmdb.open(str(path), max_dbs=64, readonly=True, lock=False)
    try:
        for table in TABLES:
            if table == b"meta":
                continue
            db = env.open_db(table, create=False)
            with env.begin(db=db) as txn:
                for key, value in txn.cursor():
                    raw = bytes(key)
                    prefix = raw[:32]
                    if table == b"schema" and prefix in namespace_schemas:
                        continue  # a namespace's schema, in force in its spaces
                    assert prefix in prefixes, (table, raw.hex())
                    seen[table].add(prefix)
                    if table in ROW_TABLES:
                        row = cbor.decode(bytes(value))
                        assert isinstance(row, dict)
                        owner = prefixes[prefix]
                        assert (row.get("namespace"), row.get("space")) == (
                            owner.namespace,
                            owner.space,
                        ), (table, raw.hex())
    finally:
        env.close()
    for table in FILLED_TABLES:
        assert seen[table] == set(prefixes), table


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    names=st.lists(st.sampled_from(NAME_POOL), min_size=2, max_size=3, unique=True),
    texts=st.lists(
        st.text(alphabet="abcdefghij ", min_size=1, max_size=24).filter(str.strip),
        min_size=1,
        max_size=3,
        unique=True,
    ),
    predicates=st.lists(
        st.text(alphabet="abcxyz_", min_size=1, max_size=8), min_size=1, max_size=2, unique=True
    ),
)
def test_no_read_crosses_a_scope(names: list[str], texts: list[str], predicates: list[str]) -> None:
    directory = Path(tempfile.mkdtemp(prefix="brain-isolation-"))
    try:
        written = [Written(ns, space) for ns, space in _ALL]
        with brain.open(directory / "d", DatabaseOptions(fsync=_no_fsync)) as db:
            for index, w in enumerate(written):
                _write_scope(db, w, index=index, names=names, texts=texts, predicates=predicates)
            # Ids are fresh per scope: nothing written twice came back as a replay.
            for kind in ("memories", "entities", "statements", "relations"):
                every = [i for w in written for i in getattr(w, kind)]
                assert len(every) == len(set(every)), kind
            assert db.wait_indexed()
            for w in written:
                _check_reads(db, w, [o for o in written if o is not w], names, predicates)
            for w in written:
                _write_more(db, w, predicates)
            _check_foreign_writes(db, written, names, predicates)
        _scan_keys(directory / "d" / "lmdb", written)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
