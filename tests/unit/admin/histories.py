"""Random write histories for the export tests, and the reads that compare two databases.

:data:`HISTORIES` draws sequences of writes of every kind a namespace holds
(memories with mentions, client vectors and forgets of both strengths;
statements of every object kind, superseded, tombstoned, retracted, citing
memories; entities renamed, merged, unmerged, tombstoned; names left waiting for
review and decided; contradictions; relations superseded and tombstoned; schema
declarations) in two spaces. :func:`play` runs one against a database; a write the
database refuses (a CONFLICT, a NOT_FOUND of a record the history already
retracted) is simply one it did not make. :func:`answers` reads back everything a
client could ask about what was written, at every instant the history remembers.
"""

from __future__ import annotations

import contextlib
import os
import struct
from dataclasses import dataclass, field
from typing import Final

from hypothesis import strategies as st

from brain.engine.database import Database
from brain.errors import BrainError
from brain.wire.messages.entity_ops import (
    EntityCreate,
    EntityCreateOk,
    EntityGet,
    EntityList,
    EntityMerge,
    EntityMergeOk,
    EntityResolve,
    EntityTombstone,
    EntityUnmerge,
    EntityUpdate,
)
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget, MemoryGet
from brain.wire.messages.recall_ops import Recall, RecallOk
from brain.wire.messages.records import Evidence
from brain.wire.messages.relation_ops import (
    RelationCreate,
    RelationCreateOk,
    RelationDraft,
    RelationGet,
    RelationList,
    RelationSupersede,
    RelationSupersedeOk,
    RelationTombstone,
)
from brain.wire.messages.review_ops import ReviewDecide, ReviewList, ReviewListOk
from brain.wire.messages.schema_ops import PredicateDecl, RelationTypeDecl, SchemaGet, SchemaPut
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementGet,
    StatementHistory,
    StatementList,
    StatementRetract,
    StatementSupersede,
    StatementSupersedeOk,
    StatementTombstone,
)
from brain.wire.messages.values import (
    BoolValue,
    EntityRef,
    EntityValue,
    FloatValue,
    IntValue,
    MemoryRef,
    MemoryValue,
    NameRef,
    StatementValue,
    TextValue,
    TimeValue,
    Value,
)
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = ["EVERY_KIND", "HISTORIES", "NS", "Played", "answers", "play"]

NS: Final = "export"
"""The namespace the histories write in."""

SPACES: Final = ("default", "other")
TEXTS: Final = (
    "Alice: I moved to Paris in May.",
    "Bob met Alice at Acme Corp yesterday.",
    "Dan works with Alice Kim now.",
    "the weather was grey and cold",
    "Carol: NASA called about the launch.",
)
NAMES: Final = ("Alice", "Bob", "Dan", "Alice Kim", "Acme Corp")
PREDICATES: Final = ("lives_in", "likes", "works_at", "note")
"""``lives_in`` is declared stateful and ``likes`` a fact when the history says so."""
RELATION_TYPES: Final = ("knows", "manages")
VALID: Final = (None, 1_600_000_000_000_000_000, 1_700_000_000_000_000_000, -86_400 * 10**9)
DIMENSIONS: Final = 384
"""The hashing embedder's width, which a client vector must have."""

_index = st.integers(0, 50)
_space = st.sampled_from(SPACES)
_object = st.one_of(
    st.tuples(st.just("text"), st.sampled_from(("Paris", "Rome", "tea", "jazz", "Acme"))),
    st.tuples(st.just("int"), st.integers(-5, 5)),
    st.tuples(st.just("float"), st.sampled_from((0.5, -2.25, 1e300))),
    st.tuples(st.just("bool"), st.booleans()),
    st.tuples(st.just("time"), st.sampled_from(VALID[1:])),
    st.tuples(st.just("entity"), _index),
    st.tuples(st.just("memory"), _index),
    st.tuples(st.just("statement"), _index),
)
_subject = st.one_of(
    st.tuples(st.just("name"), st.sampled_from(NAMES)),
    st.tuples(st.just("entity"), _index),
    st.tuples(st.just("memory"), _index),
)
_draft = st.tuples(
    _subject,
    st.sampled_from(PREDICATES),
    _object,
    st.sampled_from(VALID),
    st.one_of(st.none(), _index),
    st.sampled_from((None, 0.25, 1.0)),
)
_step = st.one_of(
    st.tuples(
        st.just("encode"),
        _space,
        st.sampled_from(TEXTS),
        st.booleans(),
        st.sampled_from((None, 1_650_000_000_000_000_000)),
    ),
    st.tuples(st.just("create"), _space, _draft),
    st.tuples(st.just("supersede"), _index, _draft),
    st.tuples(st.just("tombstone"), _index),
    st.tuples(st.just("retract"), _index),
    st.tuples(st.just("forget"), _index, st.sampled_from(("soft", "hard"))),
    st.tuples(st.just("entity"), _space, st.sampled_from(NAMES), st.booleans()),
    st.tuples(st.just("rename"), _index, st.sampled_from(("Al", "Robert", "Acme"))),
    st.tuples(st.just("merge"), _index, _index),
    st.tuples(st.just("unmerge"), _index),
    st.tuples(st.just("entity_tombstone"), _index),
    st.tuples(st.just("relation"), _space, st.sampled_from(RELATION_TYPES), _subject, _subject),
    st.tuples(st.just("relation_supersede"), _index, st.sampled_from(NAMES)),
    st.tuples(st.just("relation_tombstone"), _index),
    st.tuples(st.just("schema"), st.sampled_from((None, "default"))),
    st.tuples(
        st.just("decide"),
        _space,
        st.sampled_from(("keep_both", "supersede", "reject_new", "merge", "distinct")),
    ),
)
HISTORIES: Final = st.lists(_step, min_size=10, max_size=60)
"""Write histories: each step a tuple naming the write and what it writes."""


EVERY_KIND: Final[list[tuple[object, ...]]] = [
    ("schema", None),
    ("schema", "default"),
    ("encode", "default", TEXTS[0], False, 1_650_000_000_000_000_000),
    ("encode", "default", TEXTS[1], True, None),
    ("encode", "other", TEXTS[4], False, None),
    ("create", "default", (("name", "Alice"), "lives_in", ("text", "Paris"), VALID[1], 0, None)),
    ("create", "default", (("name", "Alice"), "lives_in", ("text", "Rome"), VALID[2], 1, 0.25)),
    ("create", "default", (("name", "Bob"), "likes", ("text", "tea"), None, None, None)),
    ("create", "default", (("name", "Bob"), "likes", ("text", "jazz"), None, None, None)),
    ("create", "default", (("name", "Alice Kim"), "note", ("int", 3), None, None, None)),
    ("create", "default", (("memory", 0), "note", ("time", VALID[1]), None, None, None)),
    ("create", "other", (("name", "Carol"), "works_at", ("entity", 0), VALID[3], 0, 1.0)),
    ("supersede", 0, (("name", "Alice"), "works_at", ("float", 0.5), VALID[2], None, None)),
    ("tombstone", 3),
    ("entity", "default", "Dan", True),
    ("rename", 2, "Robert"),
    ("merge", 2, 3),
    ("entity", "default", "Robert", False),
    ("merge", 4, 5),
    ("unmerge", 1),
    ("relation", "default", "knows", ("name", "Dan"), ("name", "Bob")),
    ("relation", "default", "manages", ("name", "Dan"), ("entity", 0)),
    ("relation_supersede", 0, "Alice"),
    ("relation_tombstone", 1),
    ("decide", "default", "keep_both"),
    ("decide", "default", "distinct"),
    ("forget", 0, "hard"),
    ("forget", 1, "soft"),
    ("encode", "default", TEXTS[0], False, None),
    ("retract", 6),
    ("create", "default", (("name", "Bob"), "likes", ("bool", True), None, None, None)),
    # The last contradiction decided by supersession: one chain now holds both.
    ("decide", "default", "supersede"),
    ("create", "default", (("name", "Bob"), "likes", ("bool", False), None, None, None)),
    ("merge", 3, 0),
]
"""A history that writes every kind of record, so every line type has a line."""


@dataclass
class Played:
    """What a history wrote: the ids to read back, and the instants to ask about."""

    memories: list[tuple[str, bytes]] = field(default_factory=list)
    statements: list[tuple[str, bytes]] = field(default_factory=list)
    entities: list[tuple[str, bytes]] = field(default_factory=list)
    merges: list[tuple[str, bytes]] = field(default_factory=list)
    relations: list[tuple[str, bytes]] = field(default_factory=list)
    instants: list[int] = field(default_factory=list)


def _pick(items: list[tuple[str, bytes]], index: int) -> tuple[str, bytes] | None:
    return items[index % len(items)] if items else None


def _vector(seed: int) -> bytes:
    """A client vector: any non-zero values of the embedder's width."""
    return struct.pack(f"<{DIMENSIONS}f", *((seed + i) % 7 - 3.0 for i in range(DIMENSIONS)))


class _Player:
    def __init__(self, db: Database) -> None:
        self.db, self.played = db, Played()

    def run(self, request: Message, opcode: Opcode) -> Message | None:
        try:
            answer = self.db.execute(NS, opcode, request)
        except BrainError:
            return None  # a write the history asked for and the database refused
        recorded = getattr(answer, "recorded_at", None)
        if isinstance(recorded, int):
            self.played.instants.append(recorded)
        return answer

    def object_(self, space: str, spec: tuple[str, object]) -> Value | None:
        kind, value = spec
        if kind == "text":
            return TextValue(text=str(value))
        if kind == "int":
            assert isinstance(value, int)
            return IntValue(int_=value)
        if kind == "float":
            assert isinstance(value, float)
            return FloatValue(float_=value)
        if kind == "bool":
            assert isinstance(value, bool)
            return BoolValue(bool_=value)
        if kind == "time":
            assert isinstance(value, int)
            return TimeValue(time=value)
        assert isinstance(value, int)
        pool = {
            "entity": self.played.entities,
            "memory": self.played.memories,
            "statement": self.played.statements,
        }[kind]
        picked = _pick([p for p in pool if p[0] == space], value)
        if picked is None:
            return TextValue(text="nothing yet")
        if kind == "entity":
            return EntityValue(entity=picked[1])
        if kind == "memory":
            return MemoryValue(memory=picked[1])
        return StatementValue(statement=picked[1])

    def subject(self, space: str, spec: tuple[str, object]) -> EntityRef | MemoryRef | NameRef:
        kind, value = spec
        if kind == "name":
            return NameRef(name=str(value))
        assert isinstance(value, int)
        pool = self.played.entities if kind == "entity" else self.played.memories
        picked = _pick([p for p in pool if p[0] == space], value)
        if picked is None:
            return NameRef(name="Nobody")
        return EntityRef(entity=picked[1]) if kind == "entity" else MemoryRef(memory=picked[1])

    def draft(self, space: str, spec: tuple[object, ...]) -> StatementDraft | None:
        subject, predicate, obj, valid_from, cited, confidence = spec
        value = self.object_(space, obj)  # type: ignore[arg-type]
        if value is None:
            return None
        evidence: tuple[Evidence, ...] = ()
        if isinstance(cited, int):
            memory = _pick([m for m in self.played.memories if m[0] == space], cited)
            if memory is not None:
                evidence = (Evidence(memory=memory[1]),)
        return StatementDraft(
            kind="fact",
            subject=self.subject(space, subject),  # type: ignore[arg-type]
            predicate=str(predicate),
            object_=value,
            valid_from=valid_from if isinstance(valid_from, int) else None,
            evidence=evidence,
            confidence=confidence if isinstance(confidence, float) else None,
            source="history",
        )

    def step(self, step: tuple[object, ...]) -> None:
        # A request the message rules refuse (an entity merged into itself) is not made.
        with contextlib.suppress(BrainError):
            getattr(self, f"_{step[0]}")(*step[1:])

    def _encode(self, space: str, text: str, vector: bool, occurred: int | None) -> None:
        answer = self.run(
            Encode(
                request_id=os.urandom(16),
                text=text,
                space=space,
                occurred_at=occurred,
                context="channel=test" if occurred else None,
                vector=_vector(len(text)) if vector else None,
                override_forgotten=True,
            ),
            Opcode.ENCODE,
        )
        if isinstance(answer, EncodeOk) and not answer.deduplicated:
            self.played.memories.append((space, answer.memory_id))

    def _create(self, space: str, spec: tuple[object, ...]) -> None:
        draft = self.draft(space, spec)
        if draft is None:
            return
        request = StatementCreate(
            request_id=os.urandom(16),
            space=space,
            kind=draft.kind,
            subject=draft.subject,
            predicate=draft.predicate,
            object_=draft.object_,
            confidence=draft.confidence,
            evidence=draft.evidence,
            source=draft.source,
            valid_from=draft.valid_from,
        )
        answer = self.run(request, Opcode.STATEMENT_CREATE)
        if isinstance(answer, StatementCreateOk):
            self.played.statements.append((space, answer.statement_id))

    def _supersede(self, index: int, spec: tuple[object, ...]) -> None:
        picked = _pick(self.played.statements, index)
        if picked is None:
            return
        space, old = picked
        draft = self.draft(space, spec)
        if draft is None:
            return
        answer = self.run(
            StatementSupersede(request_id=os.urandom(16), space=space, old=old, new=draft),
            Opcode.STATEMENT_SUPERSEDE,
        )
        if isinstance(answer, StatementSupersedeOk):
            self.played.statements.append((space, answer.statement_id))

    def _tombstone(self, index: int) -> None:
        picked = _pick(self.played.statements, index)
        if picked is not None:
            self.run(
                StatementTombstone(
                    request_id=os.urandom(16), space=picked[0], id=picked[1], reason="history"
                ),
                Opcode.STATEMENT_TOMBSTONE,
            )

    def _retract(self, index: int) -> None:
        picked = _pick(self.played.statements, index)
        if picked is not None:
            self.run(
                StatementRetract(request_id=os.urandom(16), space=picked[0], id=picked[1]),
                Opcode.STATEMENT_RETRACT,
            )

    def _forget(self, index: int, mode: str) -> None:
        picked = _pick(self.played.memories, index)
        if picked is not None:
            self.run(
                Forget(request_id=os.urandom(16), space=picked[0], memory=picked[1], mode=mode),
                Opcode.FORGET,
            )

    def _entity(self, space: str, name: str, attributes: bool) -> None:
        answer = self.run(
            EntityCreate(
                request_id=os.urandom(16),
                space=space,
                name=name,
                type_="person" if attributes else None,
                aliases=(name.upper(),),
                attributes={"$odd": b"\x00\x01", "n": 1.5, "tags": ["a", None]}
                if attributes
                else None,
            ),
            Opcode.ENTITY_CREATE,
        )
        if isinstance(answer, EntityCreateOk):
            self.played.entities.append((space, answer.entity_id))

    def _rename(self, index: int, name: str) -> None:
        picked = _pick(self.played.entities, index)
        if picked is not None:
            self.run(
                EntityUpdate(request_id=os.urandom(16), space=picked[0], id=picked[1], name=name),
                Opcode.ENTITY_UPDATE,
            )

    def _merge(self, keep: int, merge: int) -> None:
        kept, merged = _pick(self.played.entities, keep), _pick(self.played.entities, merge)
        if kept is None or merged is None or kept[0] != merged[0]:
            return
        answer = self.run(
            EntityMerge(request_id=os.urandom(16), space=kept[0], keep=kept[1], merge=merged[1]),
            Opcode.ENTITY_MERGE,
        )
        if isinstance(answer, EntityMergeOk):
            self.played.merges.append((kept[0], answer.merge_id))

    def _unmerge(self, index: int) -> None:
        picked = _pick(self.played.merges, index)
        if picked is not None:
            self.run(
                EntityUnmerge(request_id=os.urandom(16), space=picked[0], merge_id=picked[1]),
                Opcode.ENTITY_UNMERGE,
            )

    def _entity_tombstone(self, index: int) -> None:
        picked = _pick(self.played.entities, index)
        if picked is not None:
            self.run(
                EntityTombstone(request_id=os.urandom(16), space=picked[0], id=picked[1]),
                Opcode.ENTITY_TOMBSTONE,
            )

    def _relation(
        self, space: str, type_: str, start: tuple[str, object], end: tuple[str, object]
    ) -> None:
        answer = self.run(
            RelationCreate(
                request_id=os.urandom(16),
                space=space,
                type_=type_,
                from_=self.subject(space, start),
                to=self.subject(space, end),
                valid_from=VALID[1],
            ),
            Opcode.RELATION_CREATE,
        )
        if isinstance(answer, RelationCreateOk):
            self.played.relations.append((space, answer.relation_id))

    def _relation_supersede(self, index: int, name: str) -> None:
        picked = _pick(self.played.relations, index)
        if picked is None:
            return
        new = RelationDraft(
            type_="knows", from_=NameRef(name=name), to=NameRef(name="Bob"), valid_from=VALID[2]
        )
        answer = self.run(
            RelationSupersede(request_id=os.urandom(16), space=picked[0], old=picked[1], new=new),
            Opcode.RELATION_SUPERSEDE,
        )
        if isinstance(answer, RelationSupersedeOk):
            self.played.relations.append((picked[0], answer.relation_id))

    def _relation_tombstone(self, index: int) -> None:
        picked = _pick(self.played.relations, index)
        if picked is not None:
            self.run(
                RelationTombstone(
                    request_id=os.urandom(16), space=picked[0], id=picked[1], reason="history"
                ),
                Opcode.RELATION_TOMBSTONE,
            )

    def _schema(self, space: str | None) -> None:
        self.run(
            SchemaPut(
                space=space,
                predicates=(
                    PredicateDecl(name="lives_in", kind="fact", stateful=True),
                    PredicateDecl(name="likes", kind="fact", stateful=False),
                ),
                relation_types=(RelationTypeDecl(name="manages", cardinality="one_to_many"),),
                entity_types=("person",),
            ),
            Opcode.SCHEMA_PUT,
        )

    def _decide(self, space: str, decision: str) -> None:
        listed = self.run(ReviewList(space=space), Opcode.REVIEW_LIST)
        if isinstance(listed, ReviewListOk) and listed.items:
            item = listed.items[0]
            # A merge names the candidate the name means: the first listed, the best.
            into = item.records[0] if decision == "merge" else None
            self.run(
                ReviewDecide(
                    request_id=os.urandom(16),
                    space=space,
                    review_id=item.review_id,
                    decision=decision,
                    into=into,
                ),
                Opcode.REVIEW_DECIDE,
            )


def play(db: Database, history: list[tuple[object, ...]]) -> Played:
    """Run ``history`` against ``db``; what it wrote."""
    player = _Player(db)
    # Two same-named entities make a name ambiguous: writes naming it wait for review.
    player.step(("entity", "default", "Alice Kim", False))
    player.step(("entity", "default", "Alice Kim", True))
    for step in history:
        player.step(step)
    return player.played


def answers(db: Database, played: Played) -> list[object]:
    """Every answer a client could be given about what ``played`` wrote: GET and
    HISTORY of each record, LIST and RELATION_LIST ``as_of`` each remembered instant
    and ``valid_at`` each valid time, entity resolution, reviews, schemas, RECALL."""
    found: list[object] = []

    def ask(opcode: Opcode, request: Message) -> None:
        try:
            found.append(db.execute(NS, opcode, request))
        except BrainError as exc:
            found.append((type(exc).__name__, str(exc)))

    instants = [None, *sorted(set(played.instants))]
    for space, memory_id in played.memories:
        ask(Opcode.MEMORY_GET, MemoryGet(space=space, id=memory_id))
    for space, statement_id in played.statements:
        ask(Opcode.STATEMENT_GET, StatementGet(space=space, id=statement_id))
        ask(Opcode.STATEMENT_HISTORY, StatementHistory(space=space, id=statement_id))
    for space, entity_id in played.entities:
        ask(Opcode.ENTITY_GET, EntityGet(space=space, id=entity_id))
        for as_of in instants[::3]:
            ask(
                Opcode.RELATION_LIST,
                RelationList(space=space, entity=entity_id, direction="both", as_of=as_of),
            )
    for space, relation_id in played.relations:
        ask(Opcode.RELATION_GET, RelationGet(space=space, id=relation_id))
    for space in SPACES:
        for as_of in instants:
            for valid_at in VALID:
                ask(
                    Opcode.STATEMENT_LIST,
                    StatementList(
                        space=space,
                        as_of=as_of,
                        valid_at=valid_at,
                        include_superseded=True,
                        include_tombstoned=True,
                        limit=1000,
                    ),
                )
            ask(Opcode.STATEMENT_LIST, StatementList(space=space, as_of=as_of, limit=1000))
        for name in (*NAMES, "Robert"):
            ask(Opcode.ENTITY_RESOLVE, EntityResolve(space=space, name=name))
            ask(Opcode.STATEMENT_LIST, StatementList(space=space, subject=NameRef(name=name)))
        ask(Opcode.ENTITY_LIST, EntityList(space=space, limit=1000))
        ask(Opcode.REVIEW_LIST, ReviewList(space=space, limit=1000))
        ask(Opcode.SCHEMA_GET, SchemaGet(space=space))
        for cue in ("where does Alice live", "Acme", "NASA launch", "grey weather"):
            for as_of in (None, *instants[1::4]):
                ask(Opcode.RECALL, _recall(space, cue, as_of))
    ask(Opcode.SCHEMA_GET, SchemaGet())
    return [_recalled(a) if isinstance(a, RecallOk) else a for a in found]


def _recall(space: str, cue: str, as_of: int | None) -> Recall:
    return Recall(
        space=space,
        cue=cue,
        as_of=as_of,
        top_k=50,
        min_relevance=-1.0,
        include_tombstoned=True,
        include_superseded=True,
    )


def _recalled(answer: RecallOk) -> object:
    """What a RECALL answered: the set of statements and memories it found, each as
    shown (an index's labels and the order of equal scores are no answer)."""
    return sorted(repr((hit.id, hit.statement, hit.memory)) for hit in answer.hits)
