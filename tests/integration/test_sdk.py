"""The facade (spec/01-wire.md §10) against a real server process and an embedded
database: the same calls, the same answers; times exact from one answer to the next;
entity names in rendered hits; the escape hatch; and a write's ``request_id`` kept
across an OVERLOADED refusal and a lost connection."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from brain.engine.database import DatabaseOptions
from brain.errors import InvalidArgument, NotFound, Overloaded
from brain.sdk import Brain, EmbeddedTransport, Instant, WireTransport
from brain.sdk.results import Name, Ref
from brain.wire.messages.memory_ops import Encode, MemoryGet, MemoryGetOk
from brain.wire.messages.schema_ops import PredicateDecl, RelationTypeDecl
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.integration.conftest import ServerProcess, start_server

FAST: Final = {"BRAIN_RETRIEVAL__EMBEDDER": "hashing"}
"""The hashing embedder: what is under test is the facade, not the model."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(Path(tmp_path_factory.mktemp("sdk")) / "data", env=FAST)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(params=["wire", "embedded"])
def db(request: pytest.FixtureRequest, server: ServerProcess, tmp_path: Path) -> Iterator[Brain]:
    space = f"sdk-{request.node.name.split('[')[0][-40:].replace('_', '-')}"
    if request.param == "wire":
        facade = Brain.connect(
            server.host, server.wire_port, api_key=server.credentials["api_key"], space=space
        )
    else:
        facade = Brain.open(
            tmp_path / "embedded", space=space, options=DatabaseOptions(embedder="hashing")
        )
    with facade:
        yield facade


def test_memories_statements_and_both_time_axes(db: Brain) -> None:
    m = db.remember("Dan: I moved from Paris to Berlin in May.", occurred_at="2024-05-20T09:00:00Z")
    assert not m.deduplicated and isinstance(m.recorded_at, Instant) and len(m.id) == 16
    again = db.remember("Dan: I moved from Paris to Berlin in May.")
    assert again.deduplicated and again.id == m.id

    memory = db.get_memory(m.id)
    assert memory.text is not None and "Berlin" in memory.text
    assert memory.occurred_at == Instant(1_716_195_600 * 10**9)
    assert db.get_memory(str(m.id)).recorded_at == m.recorded_at  # hex works too

    paris = db.create_statement(
        "Dan", "lives_in", "Paris", subject_type="person", valid_from="2020-01-01"
    )
    berlin = db.supersede_statement(
        paris, "Dan", "lives_in", "Berlin", subject_type="person", evidence=[m],
        valid_from="2024-05-01",
    )  # fmt: skip
    assert berlin.superseded == paris.id and berlin.version == 2 and berlin.chain_root == paris.id

    now = db.get_statement(berlin.id)
    assert now.object_ == "Berlin" and now.evidence is not None and now.evidence[0].memory == m.id
    assert isinstance(now.subject, Ref) and now.subject.kind == "entity"
    # The record time of one answer, sent back as as_of, is exact to the nanosecond.
    then = db.list_statements(subject="Dan", predicate="lives_in", as_of=paris.recorded_at)
    assert [s.object_ for s in then.statements] == ["Paris"]
    current = db.list_statements(subject=now.subject.id.hex() and now.subject, predicate="lives_in")
    assert [s.id for s in current.statements] == [berlin.id]
    history = db.statement_history(paris)
    assert [s.version for s in history] == [1, 2]
    assert history[0].record_invalidated_at == berlin.recorded_at

    found = db.recall("where does Dan live", records=["statement"], as_of=berlin.recorded_at)
    assert berlin.id in [hit.id for hit in found.hits]
    text = db.render(found)
    assert "Dan lives_in Berlin" in text and "entity:" not in text

    gone = db.forget(m, hard=True)
    assert gone.id == m.id and not gone.already_forgotten and gone.statements_tombstoned == 1
    assert db.get_memory(m).text is None
    assert db.get_statement(berlin).tombstoned_at is not None


def test_objects_of_every_value_type_and_the_escape_hatch(db: Brain) -> None:
    made = db.remember("a note")
    for value in ("text", 42, 2.5, True, Instant(1_700_000_000 * 10**9)):
        written = db.create_statement("thing", "has", value)
        assert db.get_statement(written).object_ == value
    cites = db.create_statement("thing", "cites", made)
    assert db.get_statement(cites).object_ == Ref("memory", made.id)

    answer = db.call(MemoryGet(id=made.id))  # the space filled in, the type known
    assert isinstance(answer, MemoryGetOk) and answer.memory.id == made.id
    with pytest.raises(NotFound):
        db.call(MemoryGet(id=bytes(16), space="elsewhere"))
    with pytest.raises(TypeError, match="call"):
        db.call(Message())  # type: ignore[call-overload]


def test_bad_arguments_are_named(db: Brain) -> None:
    with pytest.raises(InvalidArgument, match="as_of"):
        db.recall("x", as_of=1_714_521_600)  # seconds, not nanoseconds
    with pytest.raises(InvalidArgument, match="valid_from"):
        db.create_statement("a", "b", "c", valid_from="2024-05-01T10:00:00")
    with pytest.raises(TypeError, match="object"):
        db.create_statement("a", "b", [1, 2])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="memory"):
        db.get_memory(b"short")
    with pytest.raises(TypeError, match="evidence"):
        db.create_statement("a", "b", "c", evidence=b"x" * 16)  # type: ignore[arg-type]
    assert db.create_statement(Name("Zed", "person"), "is", "here").version == 1
    with pytest.raises(TypeError, match="aliases"):
        db.create_entity("Ada", aliases="Ada Lovelace")  # one name, not a list of letters
    with pytest.raises(InvalidArgument, match="merge"):
        db.merge_entities(b"x" * 16, b"x" * 16)  # an entity cannot be merged into itself


class Recording:
    """A transport that forwards to a real one and keeps what was sent and how it ended."""

    def __init__(self, inner: WireTransport | EmbeddedTransport) -> None:
        self.inner = inner
        self.sent: list[tuple[Opcode, Message, str]] = []

    def request(self, opcode: Opcode, message: Message) -> Message:
        try:
            answer = self.inner.request(opcode, message)
        except Exception as exc:
            self.sent.append((opcode, message, type(exc).__name__))
            raise
        self.sent.append((opcode, message, "ok"))
        return answer

    def reconnect(self) -> bool:
        return self.inner.reconnect()

    def close(self) -> None:
        self.inner.close()


def test_a_write_refused_overloaded_is_sent_again_with_its_request_id(tmp_path: Path) -> None:
    # A backlog limit of one document: while the indexer has a memory to embed, the
    # next ENCODE is refused with OVERLOADED and a retry_after_ms.
    database_options = DatabaseOptions(embedder="hashing", max_embed_backlog=1)
    opened = Brain.open(tmp_path / "db", options=database_options)
    assert isinstance(opened.transport, EmbeddedTransport)
    recording = Recording(opened.transport)
    with Brain(recording) as db:
        written = [db.remember(f"memory number {i}") for i in range(4)]
    encodes = [(msg, outcome) for _, msg, outcome in recording.sent if isinstance(msg, Encode)]
    refused = [msg.request_id for msg, outcome in encodes if outcome == Overloaded.__name__]
    assert refused, "the backlog limit refused nothing"
    accepted = {msg.request_id for msg, outcome in encodes if outcome == "ok"}
    assert set(refused) <= accepted  # each refused write later accepted under its own key
    assert len({w.id for w in written}) == 4


def test_a_lost_connection_is_made_again_and_the_write_replayed(server: ServerProcess) -> None:
    with Brain.connect(server.host, server.wire_port, api_key=server.credentials["api_key"]) as db:
        key = bytes(range(16))
        first = db.remember("written before the connection was lost", request_id=key)
        assert isinstance(db.transport, WireTransport)
        old = db.transport.client
        # Cut the connection under the client, as a network failure would.
        old._sock.shutdown(socket.SHUT_RDWR)
        replayed = db.remember("written before the connection was lost", request_id=key)
        assert db.transport.client is not old
        # The server's idempotency answered the first write's answer, not a new one.
        assert (replayed.id, replayed.lsn, replayed.recorded_at) == (
            first.id, first.lsn, first.recorded_at,
        )  # fmt: skip
        assert not replayed.deduplicated


def test_entities_from_creation_to_tombstone(db: Brain) -> None:
    ada = db.create_entity(
        "Ada Lovelace", type_="person", aliases=["Ada"], attributes={"born": 1815}
    )
    countess = db.create_entity("The Countess", type_="person")
    got = db.get_entity(ada)
    assert (got.name, got.type_, got.aliases, got.attributes) == (
        "Ada Lovelace", "person", ("Ada",), {"born": 1815},
    )  # fmt: skip
    renamed = db.update_entity(ada, name="Augusta Ada King", add_aliases=["Ada Lovelace"])
    assert renamed.name == "Augusta Ada King" and set(renamed.aliases) == {"Ada", "Ada Lovelace"}

    resolved = db.resolve_entity("Ada Lovelace", type_="person")
    assert resolved.resolved == ada.id and resolved.matches[0].tier == "alias"
    assert not resolved.ambiguous
    page = db.list_entities(prefix="Augusta")
    assert [e.id for e in page.entities] == [ada.id] and page.cursor is None
    first = db.list_entities(type_="person", limit=1)
    rest = db.list_entities(type_="person", cursor=first.cursor)
    assert {e.id for e in first.entities + rest.entities} == {ada.id, countess.id}

    merged = db.merge_entities(ada, countess)
    assert db.get_entity(countess).merged_into == ada.id
    assert db.unmerge_entities(merged) > merged.lsn
    assert db.get_entity(countess).merged_into is None

    gone = db.tombstone_entity(countess)
    assert gone.id == countess.id and db.get_entity(countess).tombstoned_at is not None


def test_relations_lists_and_traversal(db: Brain) -> None:
    ann, bob, cy = (db.create_entity(name) for name in ("Ann", "Bob", "Cy"))
    m = db.remember("Ann works with Bob; Bob works with Cy.")
    ab = db.create_relation("works_with", ann, bob, evidence=[m], valid_from="2023-01-01")
    bc = db.create_relation("works_with", bob, cy, confidence=0.5)
    got = db.get_relation(ab)
    assert got.from_ == Ref("entity", ann.id) and got.to == Ref("entity", bob.id)
    assert got.evidence[0].memory == m.id and got.valid_from == Instant(1_672_531_200 * 10**9)

    assert [r.id for r in db.list_relations(bob, direction="in").relations] == [ab.id]
    assert {r.id for r in db.list_relations(bob).relations} == {ab.id, bc.id}
    walked = db.traverse(ann, depth=2, types=["works_with"], direction="out")
    assert {(n.id, n.hop) for n in walked.nodes} == {(ann.id, 0), (bob.id, 1), (cy.id, 2)}
    assert {e.id for e in walked.edges} == {ab.id, bc.id}

    replaced = db.supersede_relation(bc, "works_with", bob, cy, confidence=0.9)
    assert replaced.superseded == bc.id
    assert db.get_relation(bc).superseded_by == replaced.id
    # What was believed before the supersession is still there to ask about.
    before = db.list_relations(bob, direction="out", as_of=bc.recorded_at).relations
    assert [r.id for r in before] == [bc.id]

    gone = db.tombstone_relation(replaced, reason="left the team")
    assert gone.id == replaced.id and db.get_relation(replaced).tombstoned_at is not None
    assert [r.id for r in db.list_relations(bob, direction="out").relations] == []


def test_statement_tombstone_retract_explain_and_ping(db: Brain) -> None:
    kept = db.create_statement("Eve", "likes", "tea")
    dropped = db.tombstone_statement(kept, reason="a mistake")
    assert dropped.id == kept.id
    assert db.get_statement(kept).tombstoned_at == dropped.tombstoned_at
    assert db.get_statement(kept).tombstone_reason == "user_request"  # the note is audited

    withdrawn = db.create_statement("Eve", "likes", "coffee")
    assert db.retract_statement(withdrawn).id == withdrawn.id
    erased = db.get_statement(withdrawn)
    assert erased.predicate is None and erased.object_ is None and erased.tombstoned_at is not None

    db.create_statement("Eve", "drinks", "water")
    account = db.explain("what does Eve drink", records=["statement"])
    assert account.hits and account.coverage.space == db.space
    assert account.explain.fusion and account.explain.timings_us is not None

    pong = db.ping(nonce="hello")
    assert pong.nonce == "hello" and isinstance(pong.server_time, Instant)


def test_schema_and_the_review_queue(db: Brain) -> None:
    version = db.put_schema(
        predicates=[PredicateDecl(name="born_in", kind="fact", stateful=False)],
        relation_types=[RelationTypeDecl(name="married_to", cardinality="one_to_one")],
        entity_types=["person"],
        space=db.space,
    )
    schema = db.get_schema(space=db.space)
    assert schema.version == version and schema.scope == "space"
    assert [p.name for p in schema.predicates] == ["born_in"]
    assert schema.entity_types == ("person",)

    paris = db.create_statement("Dee", "born_in", "Paris")
    lyon = db.create_statement("Dee", "born_in", "Lyon")
    (item,) = db.list_reviews()
    assert item.kind == "contradiction" and item.records == (paris.id, lyon.id)
    assert db.decide_review(item, "keep_both") > lyon.lsn
    assert db.list_reviews() == ()

    # A name two entities share: merge names the one it means, by its entity.
    first, second = db.create_entity("Jo March"), db.create_entity("Jo March")
    waiting = db.create_statement("Jo March", "writes", "novels")
    (name,) = db.list_reviews()
    with pytest.raises(InvalidArgument, match="into"):
        db.decide_review(name, "merge")
    db.decide_review(name, "merge", into=second)
    assert db.get_statement(waiting).subject == Ref(kind="entity", id=second.id)
    assert db.get_entity(first).merged_into is None

    # A contradiction decided supersede: one chain holds both statements.
    nice = db.create_statement("Dee", "born_in", "Nice")
    (contradiction,) = db.list_reviews()
    db.decide_review(contradiction, "supersede")
    chain = db.statement_history(nice)
    assert [v.id for v in chain] == [lyon.id, nice.id]
    assert chain[-1].chain_root == chain[-2].chain_root and chain[-1].supersedes == lyon.id


def test_a_transaction_commits_on_exit_and_aborts_on_an_exception(db: Brain) -> None:
    committing = db.transaction()
    with committing as tx:
        m = tx.remember("Fay: I joined Initech.")
        s = tx.create_statement("Fay", "works_at", "Initech", evidence=[m])
        assert s.lsn == 0  # buffered: the commit gives it its LSN
        assert tx.get_statement(s).object_ == "Initech"  # the transaction sees its writes
        with pytest.raises(NotFound):
            db.get_statement(s)  # nobody else does yet
        # A schema is what every write is checked against: it never joins one.
        with pytest.raises(InvalidArgument, match="SCHEMA_PUT"):
            tx.put_schema(entity_types=["person"])
        with pytest.raises(InvalidArgument, match="nest"):
            tx.transaction()
    assert committing.committed is not None and len(committing.committed.results) == 2
    assert db.get_statement(s).object_ == "Initech" and db.get_memory(m).text

    with pytest.raises(RuntimeError, match="changed my mind"), db.transaction() as tx:
        dropped = tx.create_statement("Fay", "works_at", "Globex")
        raise RuntimeError("changed my mind")
    with pytest.raises(NotFound):
        db.get_statement(dropped)
    current = db.list_statements(subject="Fay", predicate="works_at").statements
    assert [st.object_ for st in current] == ["Initech"]
