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
