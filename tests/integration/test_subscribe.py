"""SUBSCRIBE over the wire: a follower sees exactly the writer's changes, in order,
from a past LSN through the switch to live, and cancelling ends the stream with
the LSN to resume from; a subscriber that stops reading is told and dropped."""

from __future__ import annotations

import os
import threading
import time
import urllib.request
from pathlib import Path

from brain.client import Client
from brain.errors import Overloaded, RequestTimeout
from brain.wire.messages.control import CancelStreamOk
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementTombstone,
    StatementTombstoned,
)
from brain.wire.messages.subscribe_ops import (
    ChangeEvent,
    Subscribe,
    SubscriptionEnded,
    Unsubscribe,
)
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.integration.conftest import ServerProcess, start_server
from tests.integration.rawwire import RawClient

WRITES = 120
"""Writes the writer makes: some before the follower subscribes, most after."""

STALL_WRITES = 30_000
"""Changes replayed to a reader that never reads: far more frames than the socket
buffers between it and the server hold."""


def _connect(server: ServerProcess) -> Client:
    return Client.connect(server.host, server.wire_port, api_key=server.credentials["api_key"])


def _write_feed(
    server: ServerProcess,
    acked: list[tuple[int, str, bytes]],
    early_done: threading.Event,
    writer_done: threading.Event,
) -> None:
    """Make :data:`WRITES` writes to space ``feed``, memories and statements, and a
    few to other spaces; note each one's (LSN, record kind, id) in ``acked``. Sets
    ``early_done`` after the first 21 and ``writer_done`` after all."""
    with _connect(server) as client:
        for i in range(WRITES):
            if i % 3 == 2:
                made = client.call(
                    Opcode.STATEMENT_CREATE,
                    StatementCreate(
                        request_id=os.urandom(16),
                        space="feed",
                        kind="fact",
                        subject=NameRef(name=f"Person {i % 7}"),
                        predicate="noted",
                        object_=TextValue(text=f"fact {i}"),
                    ),
                )
                assert isinstance(made, StatementCreateOk)
                acked.append((made.lsn, "statement", made.statement_id))
            else:
                memory = client.call(
                    Opcode.ENCODE,
                    Encode(request_id=os.urandom(16), text=f"note {i}", space="feed"),
                )
                assert isinstance(memory, EncodeOk)
                acked.append((memory.lsn, "memory", memory.memory_id))
            # Other spaces write too: the follower must see none of it.
            if i % 10 == 0:
                client.call(Opcode.ENCODE, Encode(request_id=os.urandom(16), text=f"x {i}"))
            if i == 20:
                early_done.set()
    writer_done.set()


def _follow_until_caught_up(
    follower: RawClient, acked: list[tuple[int, str, bytes]], writer_done: threading.Event
) -> list[ChangeEvent]:
    """The changes stream 1 of ``follower`` delivers until the writer is done and the
    last LSN it was acknowledged has arrived (or 90 seconds passed)."""
    seen: list[ChangeEvent] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            reply = follower.recv()
        except TimeoutError:
            reply = None
        if reply is not None:
            assert reply.stream_id == 1 and not reply.eos, reply
            seen.append(ChangeEvent.from_wire(reply.body))
        if writer_done.is_set() and seen and seen[-1].lsn >= max(a[0] for a in acked):
            break
    return seen


def _unsubscribe(follower: RawClient, seen: list[ChangeEvent]) -> None:
    """End stream 1 with UNSUBSCRIBE, adding the changes sent before it arrived to
    ``seen``; the ending frame must name the LSN after the last change."""
    follower.sock.settimeout(10.0)
    follower.send(Opcode.UNSUBSCRIBE, 3, {"space": "feed", "stream": 1})
    end = follower.recv()
    while not end.eos:  # frames sent before the cancel arrived
        seen.append(ChangeEvent.from_wire(end.body))
        end = follower.recv()
    ended = SubscriptionEnded.from_wire(end.body)
    assert ended.next_lsn == seen[-1].lsn + 1
    assert follower.recv().body == {"cancelled": True}


def test_follower_sees_exactly_the_writers_sequence(server: ServerProcess) -> None:
    acked: list[tuple[int, str, bytes]] = []
    early_done = threading.Event()
    writer_done = threading.Event()
    thread = threading.Thread(target=_write_feed, args=(server, acked, early_done, writer_done))
    thread.start()
    assert early_done.wait(60)
    follower = server.client()
    follower.sock.settimeout(1.0)
    hello_and_auth(follower, server)
    follower.send(Opcode.SUBSCRIBE, 1, {"space": "feed", "from_lsn": 1})
    seen = _follow_until_caught_up(follower, acked, writer_done)
    _unsubscribe(follower, seen)
    thread.join()
    writer_lsns = sorted({lsn for lsn, _, _ in acked})
    follower_lsns = sorted({e.lsn for e in seen})
    assert follower_lsns == writer_lsns
    # In log order, nothing twice, every acknowledged record created where it was said.
    assert [e.lsn for e in seen] == sorted(e.lsn for e in seen)
    keys = [(e.lsn, e.record, e.id) for e in seen]
    assert len(keys) == len(set(keys))
    created = {(e.lsn, e.record, e.id) for e in seen if e.op == "create"}
    assert {(lsn, record, rid) for lsn, record, rid in acked} <= created


def test_kinds_filter_live_tail_and_unsubscribe(server: ServerProcess) -> None:
    with _connect(server) as client:
        before = client.call(Opcode.ENCODE, Encode(request_id=os.urandom(16), text="old news"))
        assert isinstance(before, EncodeOk)
    raw = server.client()
    hello_and_auth(raw, server)
    # From now (no from_lsn), statements only.
    raw.send(Opcode.SUBSCRIBE, 1, {"records": ["statement"]})
    with _connect(server) as client:
        client.call(Opcode.ENCODE, Encode(request_id=os.urandom(16), text="a memory"))
        made = client.call(
            Opcode.STATEMENT_CREATE,
            StatementCreate(
                request_id=os.urandom(16),
                kind="fact",
                subject=NameRef(name="Zed"),
                predicate="likes",
                object_=TextValue(text="jazz"),
            ),
        )
        assert isinstance(made, StatementCreateOk)
        gone = client.call(
            Opcode.STATEMENT_TOMBSTONE,
            StatementTombstone(request_id=os.urandom(16), id=made.statement_id),
        )
        assert isinstance(gone, StatementTombstoned)
    first, second = raw.recv(), raw.recv()
    assert not first.eos and not second.eos
    assert (first.body["op"], first.body["record"], first.body["id"]) == (
        "create",
        "statement",
        made.statement_id,
    )
    assert (second.body["op"], second.body["lsn"]) == ("tombstone", gone.lsn)
    raw.send(Opcode.UNSUBSCRIBE, 3, {"stream": 1})
    end, answer = raw.recv(), raw.recv()
    assert end.stream_id == 1 and end.eos and end.body == {"next_lsn": gone.lsn + 1}
    assert answer.stream_id == 3 and answer.body == {"cancelled": True}
    raw.send(Opcode.CANCEL_STREAM, 5, {"stream": 1})
    assert raw.recv().body == {"cancelled": False}
    # Resuming from next_lsn repeats nothing.
    with _connect(server) as client:
        resumed = client.stream(
            Opcode.SUBSCRIBE, Subscribe(from_lsn=end.body["next_lsn"]), timeout=1.0
        )
        try:
            extra = next(resumed)
        except RequestTimeout:
            pass  # nothing was there to repeat
        else:
            assert isinstance(extra, ChangeEvent) and extra.lsn > gone.lsn
        finally:
            resumed.close()
        nothing = client.call(Opcode.UNSUBSCRIBE, Unsubscribe(stream=99))
        assert nothing == CancelStreamOk(cancelled=False)


def hello_and_auth(raw: RawClient, server: ServerProcess) -> None:
    raw.send(Opcode.HELLO, 0, {"client": "test/1", "versions": [1]})
    assert raw.recv().opcode == Opcode.HELLO | 0x80
    raw.send(Opcode.AUTH, 1, {"api_key": server.credentials["api_key"]})
    assert raw.recv().opcode == Opcode.AUTH | 0x80


def _stalled_subscribers(server: ServerProcess) -> float:
    """How many subscriptions the server has ended for a stall (``/metrics``)."""
    url = f"http://{server.host}:{server.public_port}/metrics"
    series = 'brain_requests_total{opcode="SUBSCRIBE",outcome="OVERLOADED"} '
    with urllib.request.urlopen(url, timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(series):
                return float(line.split()[-1])
    return 0.0


def test_a_subscriber_that_stops_reading_is_dropped(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "BRAIN_SERVER__SUBSCRIBER_STALL_S": "1",
        "BRAIN_RETRIEVAL__EMBEDDER": "hashing",  # thousands of writes; meaning is not tested
    }
    server = start_server(tmp_path / "data", env=env)
    try:
        with _connect(server) as client:
            for start in range(0, STALL_WRITES, 500):
                batch = [
                    (Opcode.ENCODE, Encode(request_id=os.urandom(16), text=f"entry {i}"))
                    for i in range(start, start + 500)
                ]
                client.pipeline(batch)
        # A reader with a tiny receive buffer that never reads.
        raw = RawClient(server.host, server.wire_port, rcvbuf=2048)
        server.clients.append(raw)
        hello_and_auth(raw, server)
        raw.send(Opcode.SUBSCRIBE, 1, {"from_lsn": 1})
        # The server cannot hand over a replay this size: it stalls, and says so. (A
        # fixed pause could end, on a slow machine, before the buffers are full.)
        deadline = time.monotonic() + 90
        while _stalled_subscribers(server) < 1:
            assert time.monotonic() < deadline, "the subscriber was never found stalled"
            time.sleep(0.2)
        error = None
        for _ in range(STALL_WRITES + 1):
            reply = raw.recv()
            if reply.eos:
                error = reply
                break
        assert error is not None and error.error_name == "OVERLOADED"
        assert "from_lsn" in error.body["message"]
        # The server is fine, and so are other clients.
        with _connect(server) as client:
            assert client.ping().nonce is None
        assert Overloaded.retryable
    finally:
        server.stop()
