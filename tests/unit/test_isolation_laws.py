"""Scope isolation as a property (SEMANTICS.md §5).

The same names, texts, predicates and request ids are written into two
namespaces by two spaces: memories, entities, statements with name subjects
and relations between names, with a different schema in each scope. No read
in one scope may return or count a record of another: another scope's id is
NOT_FOUND, and every list, resolution, traversal, schema, review queue, RECALL
and EXPLAIN (through each arm alone and fused) answers and counts exactly its
own scope's records. Then, with the database closed,
every key of every LMDB table but ``meta`` must begin with one of the four
scope prefixes, and every stored row that names its scope names that one.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import lmdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import brain
from brain.engine.database import Database, DatabaseOptions
from brain.engine.scope import DEFAULT_SPACE, Scope
from brain.engine.store.env import TABLES
from brain.errors import NotFound
from brain.wire import cbor
from brain.wire.messages.entity_ops import (
    EntityCreate,
    EntityCreateOk,
    EntityGet,
    EntityGetOk,
    EntityList,
    EntityListOk,
    EntityResolve,
    EntityResolveOk,
)
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.messages.recall_ops import ArmWeights, ExplainOk, ExplainRequest, Recall, RecallOk
from brain.wire.messages.records import Evidence
from brain.wire.messages.relation_ops import (
    RelationCreate,
    RelationCreateOk,
    RelationGet,
    RelationGetOk,
    RelationList,
    RelationListOk,
    RelationTraverse,
    RelationTraverseOk,
)
from brain.wire.messages.review_ops import ReviewList, ReviewListOk
from brain.wire.messages.schema_ops import PredicateDecl, Schema, SchemaGet, SchemaPut
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementGet,
    StatementGetOk,
    StatementHistory,
    StatementList,
    StatementListOk,
)
from brain.wire.messages.values import EntityRef, NameRef, TextValue
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

NAMESPACES: Final = ("tenant-a", "tenant-b")
SPACES: Final = (None, "other")  # None: the default space
NAME_POOL: Final = ("Ada Lovelace", "Grace Hopper", "Alan Turing", "Edsger Dijkstra")
RELATION_TYPE: Final = "knows"
ROW_TABLES: Final = (b"memories", b"entities", b"statements", b"relations")
"""Tables whose rows carry ``namespace`` and ``space`` (a second lock on the key)."""


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
    ids = iter(range(1, 1 << 20))

    def rid() -> bytes:
        # The same request ids, in the same order, in every scope.
        return next(ids).to_bytes(16, "big")

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
    space = w.space
    # Primary reads by id: own records found, everyone else's NOT_FOUND.
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
    for o in others:
        for memory_id in o.memories:
            _not_found(w, db, Opcode.MEMORY_GET, MemoryGet(space=space, id=memory_id))
        for statement_id in o.statements:
            _not_found(w, db, Opcode.STATEMENT_GET, StatementGet(space=space, id=statement_id))
            _not_found(
                w, db, Opcode.STATEMENT_HISTORY, StatementHistory(space=space, id=statement_id)
            )
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

    # Scans: exactly this scope's records, counted once.
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

    # Vocabulary and review queue: each scope its own.
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

    # RECALL and EXPLAIN, through each arm alone and fused, over every text and name:
    # only this scope's records come back, and only they are counted.
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

    # Idempotency is scoped: the same request id replays this scope's answer.
    assert w.first_encode is not None
    replay = w.run(db, Opcode.ENCODE, w.first_encode)
    assert isinstance(replay, EncodeOk) and replay.memory_id == next(iter(w.memories))


_ALL: Final = tuple((ns, space) for ns in NAMESPACES for space in SPACES)

_ONE_ARM: Final = (
    ArmWeights(semantic=1.0, lexical=0.0, graph=0.0),
    ArmWeights(semantic=0.0, lexical=1.0, graph=0.0),
    ArmWeights(semantic=0.0, lexical=0.0, graph=1.0),
)


def _scan_keys(path: Path, written: list[Written]) -> None:
    """Every key of every table but ``meta`` starts with one of the four prefixes."""
    prefixes = {w.scope.prefix: w.scope for w in written}
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
    for table in (*ROW_TABLES, b"idempotency", b"statement_by_subject", b"relation_by_from"):
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
        _scan_keys(directory / "d" / "lmdb", written)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
