"""Hostile clients against one real server each, while a well-behaved client keeps working.

Every test starts a server with small limits (through ``BRAIN_SERVER__*``
variables), starts a :class:`GoodClient` thread that keeps doing PING and an
ENCODE followed by a MEMORY_GET of what it wrote, then plays one hostile pattern:
slowloris, half-open connections, a connection flood, frames at and past
``max_frame``, CBOR bombs, 10,000 pipelined streams, and 200 refused frames
that must add one metrics series, not 200. Each test then checks
that the good client never waited more than :data:`ANSWER_WITHIN_S` for an
answer, that the server closed what it had to close, and that the server's
resident memory grew by less than :data:`RSS_GROWTH_LIMIT_KB`.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import cbor2
import crc32c
import pytest

from brain.wire.session import HANDSHAKE_TIMEOUT_S, PRE_AUTH_MAX_FRAME
from tests.integration.conftest import ServerProcess, start_server
from tests.integration.rawwire import HEADER, RawClient, Reply, frame

HELLO, AUTH, PING = 0x0001, 0x0002, 0x0010
ENCODE, RECALL, MEMORY_GET = 0x0020, 0x0021, 0x0027
ERROR = 0x00FF
RESPONSE = 0x0080

ANSWER_WITHIN_S: Final = 2.0
"""Longest the good client may wait for any one answer while the server is under attack."""

RSS_GROWTH_LIMIT_KB: Final = 100 * 1024
"""Resident memory the server may gain over one test: hostile input must not be buffered."""

IDLE_TIMEOUT_S: Final = 1.5
"""The idle timeout the tests configure, so that idle closes happen within the test."""

TRICKLE_S: Final = 0.1
"""Gap between two bytes a slowloris client sends."""

MAX_FRAME: Final = 512 * 1024
"""A smaller max_frame than the default, so the at-limit frame is quick to send."""

BASE_ENV: Final = {
    "BRAIN_RETRIEVAL__EMBEDDER": "hashing",
    "BRAIN_SERVER__IDLE_TIMEOUT_S": str(IDLE_TIMEOUT_S),
    "BRAIN_SERVER__MAX_CONNECTIONS": "20",
}


def _rss_kb(pid: int) -> int:
    """The process's resident set size in KiB (VmRSS in /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def _connect(server: ServerProcess, timeout: float = 10.0) -> RawClient:
    """A new connection, closed when the server is stopped whatever the test did."""
    client = RawClient(server.host, server.wire_port, timeout=timeout)
    server.clients.append(client)
    return client


def _ready(server: ServerProcess, timeout: float = 10.0) -> RawClient:
    """A connection that completed HELLO and AUTH."""
    client = _connect(server, timeout)
    ok = client.handshake(server.credentials["api_key"])
    assert ok.opcode == AUTH | RESPONSE, ok
    return client


def _recv_until_closed(sock: socket.socket, within: float) -> tuple[bytes, float | None]:
    """Read until the server closes; the bytes read and the time of the close (None
    when it stayed open for ``within`` seconds)."""
    data = b""
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        except (ConnectionResetError, BrokenPipeError):
            return data, time.monotonic()
        if not chunk:
            return data, time.monotonic()
        data += chunk
    return data, None


def _decode_frames(data: bytes) -> list[tuple[int, int, int, Any]]:
    """(opcode, stream id, flags, body) of every whole frame in ``data``."""
    frames = []
    while len(data) >= HEADER:
        length = int.from_bytes(data[16:19], "big")
        payload = data[HEADER : HEADER + length]
        opcode = struct.unpack(">H", data[5:7])[0]
        stream = struct.unpack(">I", data[12:16])[0]
        frames.append((opcode, stream, data[7], cbor2.loads(payload) if payload else {}))
        data = data[HEADER + length :]
    return frames


@dataclass
class GoodClient:
    """A well-behaved client in a thread: PING, ENCODE and MEMORY_GET in a loop.

    Records the slowest answer, any failure, and the server's peak RSS.
    """

    server: ServerProcess
    rounds: int = 0
    slowest_s: float = 0.0
    failures: list[str] = field(default_factory=list)
    baseline_rss_kb: int = 0
    peak_rss_kb: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _next_stream: int = 1

    def start(self) -> None:
        """Connect and authenticate now (so it is the first connection), then loop."""
        self._client = _ready(self.server, timeout=ANSWER_WITHIN_S)
        self._round()  # warm up before the baseline: the first write loads things once
        self.baseline_rss_kb = self.peak_rss_kb = _rss_kb(self.server.process.pid)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop and check it never failed or waited too long."""
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout=10)
        assert not self._failures_or_alive(), self.failures
        assert self.slowest_s < ANSWER_WITHIN_S, self.slowest_s
        growth = self.peak_rss_kb - self.baseline_rss_kb
        print(
            f"good client: {self.rounds} rounds, slowest answer {self.slowest_s * 1000:.0f} ms; "
            f"server RSS {self.baseline_rss_kb} -> peak {self.peak_rss_kb} KiB (+{growth})"
        )
        assert growth < RSS_GROWTH_LIMIT_KB, (
            f"server RSS grew by {growth} KiB ({self.baseline_rss_kb} -> {self.peak_rss_kb})"
        )

    def _failures_or_alive(self) -> bool:
        return bool(self.failures) or (self._thread is not None and self._thread.is_alive())

    def completes_a_round(self) -> None:
        """Wait until the good client finishes one more whole round from now."""
        target = self.rounds + 2  # the round in progress may have begun before the attack
        deadline = time.monotonic() + 3 * ANSWER_WITHIN_S * 2
        while self.rounds < target and not self.failures and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not self.failures, self.failures
        assert self.rounds >= target, f"the good client is stuck at round {self.rounds}"
        self.sample_rss()

    def sample_rss(self) -> None:
        """Note the server's RSS now (the test calls it at its own high points too)."""
        self.peak_rss_kb = max(self.peak_rss_kb, _rss_kb(self.server.process.pid))

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._round()
            except Exception as exc:  # any failure ends the loop and fails the test
                self.failures.append(f"round {self.rounds}: {exc!r}")
                return
            self.sample_rss()
            self._stop.wait(0.05)

    def _ask(self, opcode: int, body: dict[str, Any]) -> Reply:
        stream = self._next_stream
        self._next_stream += 2
        started = time.monotonic()
        self._client.send(opcode, stream, body)
        reply = self._client.recv()
        self.slowest_s = max(self.slowest_s, time.monotonic() - started)
        assert reply.stream_id == stream and reply.eos, reply
        assert reply.opcode == opcode | RESPONSE, reply
        return reply

    def _round(self) -> None:
        self._ask(PING, {"nonce": self.rounds})
        text = f"good client round {self.rounds} {os.urandom(4).hex()}"
        written = self._ask(ENCODE, {"request_id": os.urandom(16), "text": text})
        read = self._ask(MEMORY_GET, {"id": written.body["memory_id"]})
        assert read.body["memory"]["text"] == text, read.body
        self.rounds += 1


@contextmanager
def _hostile(tmp_path: Path, **extra_env: str) -> Iterator[tuple[ServerProcess, GoodClient]]:
    """A server with small limits (``extra_env`` on top of :data:`BASE_ENV`) and a
    good client already working against it; the good client is checked at the end."""
    server = start_server(tmp_path / "data", env={**BASE_ENV, **extra_env})
    good = GoodClient(server)
    try:
        good.start()
        yield server, good
        good.stop()
    finally:
        server.stop()


@dataclass
class Trickler:
    """A socket that sends ``data`` one byte every :data:`TRICKLE_S`."""

    sock: socket.socket
    data: bytes
    opened: float
    sent: int = 0
    last_sent: float = 0.0
    received: bytes = b""
    closed_at: float | None = None


def _trickle(tricklers: list[Trickler], until: float, good: GoodClient) -> None:
    """Send one byte per trickler per tick, noting answers and closes, until all are
    closed or ``until`` (monotonic) passes."""
    while time.monotonic() < until and any(t.closed_at is None for t in tricklers):
        open_ones = [t for t in tricklers if t.closed_at is None]
        readable, _, _ = select.select([t.sock for t in open_ones], [], [], 0)
        for t in open_ones:
            if t.sock in readable:
                try:
                    chunk = t.sock.recv(65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    t.closed_at = time.monotonic()
                    continue
                t.received += chunk
            if t.sent < len(t.data):
                try:
                    t.sock.send(t.data[t.sent : t.sent + 1])
                except OSError:
                    t.closed_at = time.monotonic()
                    continue
                t.sent += 1
                t.last_sent = time.monotonic()
        good.sample_rss()
        time.sleep(TRICKLE_S)


def test_slowloris_is_closed_on_its_timeouts(tmp_path: Path) -> None:
    with _hostile(tmp_path) as (server, good):
        _slowloris_is_closed_on_its_timeouts(server, good)


def _slowloris_is_closed_on_its_timeouts(server: ServerProcess, good: GoodClient) -> None:
    # Before the handshake: a PING whose payload would take ~100 s to trickle. The
    # handshake deadline is absolute, so bytes arriving do not keep it open.
    ping = frame(PING, 1, cbor2.dumps({"nonce": b"x" * 1000}))
    early = [Trickler(_connect(server).sock, ping, time.monotonic()) for _ in range(4)]
    # After the handshake: a PING trickled at 10 bytes a second. Each byte comes
    # well within the idle timeout, but a frame must arrive whole within the idle
    # timeout of its first byte, so the connection is closed that long after it.
    late = []
    for _ in range(2):
        client = _ready(server)
        data = frame(PING, 1, cbor2.dumps({"nonce": 42}))
        late.append(Trickler(client.sock, data, time.monotonic()))
    tricklers = early + late
    _trickle(tricklers, time.monotonic() + HANDSHAKE_TIMEOUT_S + 4, good)

    for t in early:
        assert t.closed_at is not None, "a slowloris before AUTH outlived the handshake deadline"
        lived = t.closed_at - t.opened
        assert HANDSHAKE_TIMEOUT_S - 0.5 < lived < HANDSHAKE_TIMEOUT_S + 2, lived
        assert t.received == b""  # PING was never complete, so never answered
    for t in late:
        assert t.sent < len(t.data), "the trickled frame was allowed to finish"
        assert t.received == b""
        assert t.closed_at is not None, "a trickled frame outlived the idle timeout"
        lived = t.closed_at - t.opened
        assert IDLE_TIMEOUT_S - 0.3 < lived < IDLE_TIMEOUT_S + 2, lived


def test_half_open_connections_are_closed(tmp_path: Path) -> None:
    with _hostile(tmp_path) as (server, good):
        _half_open_connections_are_closed(server, good)


def _half_open_connections_are_closed(server: ServerProcess, good: GoodClient) -> None:
    opened = time.monotonic()
    # TCP only, never a byte.
    mute = [_connect(server).sock for _ in range(5)]
    # HELLO answered, then half an AUTH frame and silence.
    hello_only = []
    auth = frame(AUTH, 0, cbor2.dumps({"api_key": server.credentials["api_key"]}))
    for _ in range(3):
        client = _connect(server)
        client.send(HELLO, 0, {"client": "hostile/1", "versions": [1]})
        assert client.recv().opcode == HELLO | RESPONSE
        client.send_bytes(auth[: HEADER - 12])
        hello_only.append(client.sock)
    # Authenticated, then a header and part of its payload, and silence.
    mid_frame = []
    for _ in range(3):
        client = _ready(server)
        client.send_bytes(frame(PING, 1, cbor2.dumps({"nonce": "y" * 100}))[: HEADER + 10])
        mid_frame.append(client.sock)
    silent_since = time.monotonic()

    deadline = opened + HANDSHAKE_TIMEOUT_S + 3
    for sock in mid_frame:
        data, closed = _recv_until_closed(sock, deadline - time.monotonic())
        assert data == b"" and closed is not None, "authenticated half-frame was never closed"
        assert IDLE_TIMEOUT_S - 0.3 < closed - silent_since < IDLE_TIMEOUT_S + 2
    good.completes_a_round()
    for sock in mute + hello_only:
        data, closed = _recv_until_closed(sock, deadline - time.monotonic())
        assert data == b"" and closed is not None, "half-open connection outlived the handshake"
        assert closed - opened > HANDSHAKE_TIMEOUT_S - 0.5
        sock.close()


def test_connection_flood_is_refused_then_recovers(tmp_path: Path) -> None:
    with _hostile(tmp_path) as (server, good):
        _connection_flood_is_refused_then_recovers(server, good)


def _connection_flood_is_refused_then_recovers(server: ServerProcess, good: GoodClient) -> None:
    limit = int(BASE_ENV["BRAIN_SERVER__MAX_CONNECTIONS"])
    # The good client holds one slot; fill the rest with authenticated connections
    # (connections still waiting for AUTH would give way to newer ones instead).
    holders = [_ready(server) for _ in range(limit - 1)]
    flood = [_connect(server).sock for _ in range(100)]
    good.completes_a_round()
    for sock in flood:
        data, closed = _recv_until_closed(sock, 5.0)
        assert closed is not None, "a connection past max_connections was left open"
        ((opcode, stream, flags, body),) = _decode_frames(data)
        assert (opcode, stream, flags & 0x80) == (ERROR, 0, 0x80), (opcode, stream, flags)
        assert body["name"] == "OVERLOADED" and body["retryable"] is True, body
        assert body["retry_after_ms"] > 0
        sock.close()
    for n, holder in enumerate(holders):  # the admitted ones were never disturbed
        holder.send(PING, 3, {"nonce": n})
        assert holder.recv().body["nonce"] == n
        holder.close()

    # The slots free up as the server sees the holders leave.
    deadline = time.monotonic() + 5
    while True:
        late = _connect(server)
        late.send(PING, 1, {"nonce": "late"})
        reply = late.recv()
        late.close()
        if reply.opcode == PING | RESPONSE or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert reply.opcode == PING | RESPONSE, reply
    again = _ready(server)
    again.send(PING, 1, {})
    assert again.recv().opcode == PING | RESPONSE


def _told_overloaded(sock: socket.socket) -> bool:
    """True when the server closed ``sock`` after one ERROR OVERLOADED on stream 0;
    False when it is open, or was closed without a word (its handshake deadline)."""
    data, closed = _recv_until_closed(sock, 0.2)
    if closed is None or not data:
        return False
    ((opcode, stream, _flags, body),) = _decode_frames(data)
    assert (opcode, stream, body["name"], body["retryable"]) == (ERROR, 0, "OVERLOADED", True)
    return True


PEER_LIMIT: Final = 10
"""``server.max_connections_per_peer`` in the test of a flood from one address."""

FLOOD_SOCKETS: Final = 60
"""Silent sockets the flooding address tries to hold, reopening any that close."""

REOPEN_PER_TICK: Final = 5
"""Sockets the flooder reopens per tick of :data:`TRICKLE_S`: a steady churn that
does not starve the two cores the server and the test share."""

OTHER_PEERS: Final = ("127.0.0.2", "127.0.0.3")
"""Other addresses on the loopback: connections from them are other peers'."""

HOSTILE_PEER: Final = "127.0.0.4"
"""The address of the client that reconnects each time it is refused."""


@dataclass
class Flooder:
    """A thread that holds :data:`FLOOD_SOCKETS` silent sockets from 127.0.0.1,
    reopening each one the server closes or refuses."""

    server: ServerProcess
    opened: int = 0
    failures: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Flooder:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout=10)
        assert not self.failures, self.failures

    def _open(self) -> socket.socket:
        self.opened += 1
        return socket.create_connection((self.server.host, self.server.wire_port), timeout=5)

    def _loop(self) -> None:
        socks: list[socket.socket] = []
        try:
            while not self._stop.is_set():
                readable, _, _ = select.select(socks, [], [], 0)
                for sock in readable:  # only a refusal or a close is ever sent
                    try:
                        chunk = sock.recv(65536)
                    except OSError:
                        chunk = b""
                    if not chunk:
                        sock.close()
                        socks.remove(sock)
                for _ in range(min(REOPEN_PER_TICK, FLOOD_SOCKETS - len(socks))):
                    socks.append(self._open())
                self._stop.wait(TRICKLE_S / 5)
        except Exception as exc:  # noted and checked at the end of the test
            self.failures.append(repr(exc))
        finally:
            for sock in socks:
                sock.close()


def test_silent_sockets_from_one_address_leave_room_for_others(tmp_path: Path) -> None:
    env = {
        "BRAIN_SERVER__MAX_CONNECTIONS": "40",
        "BRAIN_SERVER__MAX_CONNECTIONS_PER_PEER": str(PEER_LIMIT),
    }
    with _hostile(tmp_path, **env) as (server, good):
        _silent_sockets_leave_room_for_others(server, good)


def _silent_sockets_leave_room_for_others(server: ServerProcess, good: GoodClient) -> None:
    with Flooder(server) as flooder:
        deadline = time.monotonic() + 60
        while flooder.opened < 3 * FLOOD_SOCKETS:  # it has met the limit many times over
            assert not flooder.failures and time.monotonic() < deadline, flooder.failures
            time.sleep(0.05)
        # Clients from other addresses connect, authenticate and are served, as many as
        # each address may hold, and keep their connections while the flood goes on.
        others = []
        for n in range(len(OTHER_PEERS) * PEER_LIMIT):
            source = OTHER_PEERS[n % len(OTHER_PEERS)]
            client = RawClient(server.host, server.wire_port, source=source)
            server.clients.append(client)
            assert client.handshake(server.credentials["api_key"]).opcode == AUTH | RESPONSE
            client.send(PING, 1, {"nonce": n})
            assert client.recv().body["nonce"] == n
            others.append(client)
        good.completes_a_round()
        # The flooding address never held more than its share.
        assert server.metric("brain_connections_open") <= PEER_LIMIT + len(others)
    assert server.metric("brain_connections_refused_total") > 0


def test_connections_waiting_for_auth_give_way_to_clients_with_a_key(tmp_path: Path) -> None:
    with _hostile(tmp_path) as (server, good):
        _waiting_connections_give_way(server, good)


def _waiting_connections_give_way(server: ServerProcess, good: GoodClient) -> None:
    limit = int(BASE_ENV["BRAIN_SERVER__MAX_CONNECTIONS"])
    # Twice max_connections of silent sockets, from the good client's own address.
    silent = [_connect(server).sock for _ in range(2 * limit)]
    clients = []
    for n in range(limit - 5):
        client = _ready(server)
        client.send(PING, 1, {"nonce": n})
        assert client.recv().body["nonce"] == n
        clients.append(client)
    good.completes_a_round()
    told = [sock for sock in silent if _told_overloaded(sock)]
    # At most half the slots may wait for AUTH: every silent socket past that gave way.
    assert len(told) >= len(silent) - limit // 2
    assert server.metric("brain_connections_displaced_total") == len(told)
    assert server.metric("brain_connections_open") <= limit
    for n, client in enumerate(clients):  # the authenticated ones were never disturbed
        client.send(PING, 3, {"nonce": n})
        assert client.recv().body["nonce"] == n


def test_frames_at_and_past_max_frame(tmp_path: Path) -> None:
    with _hostile(tmp_path, BRAIN_SERVER__MAX_FRAME=str(MAX_FRAME)) as (server, good):
        _frames_at_and_past_max_frame(server, good)


def _frames_at_and_past_max_frame(server: ServerProcess, good: GoodClient) -> None:
    client = _ready(server)
    # Exactly max_frame: an ENCODE whose text fills the frame.
    body = {"request_id": os.urandom(16), "text": "the at-limit frame " + "z" * MAX_FRAME}
    body["text"] = body["text"][: len(body["text"]) - (len(cbor2.dumps(body)) - MAX_FRAME)]
    payload = cbor2.dumps(body)
    assert len(payload) == MAX_FRAME
    client.send(ENCODE, 1, raw=payload)
    written = client.recv()
    assert written.opcode == ENCODE | RESPONSE and written.stream_id == 1, written
    client.send(MEMORY_GET, 3, {"id": written.body["memory_id"]})
    assert len(client.recv().body["memory"]["text"]) == len(body["text"])
    good.completes_a_round()

    # One past max_frame, and the largest length a header can claim: only the header
    # is sent, so an answer at all proves the server refused before reading a payload.
    for claimed in (MAX_FRAME + 1, (1 << 24) - 1):
        hostile_client = _ready(server)
        header = bytearray(frame(PING, 1, b"\x00"))[:HEADER]
        header[16:19] = claimed.to_bytes(3, "big")
        header[8:12] = b"\x00" * 4
        header[8:12] = _header_crc(bytes(header)).to_bytes(4, "big")
        started = time.monotonic()
        hostile_client.send_bytes(bytes(header))
        data, closed = _recv_until_closed(hostile_client.sock, ANSWER_WITHIN_S)
        assert closed is not None and closed - started < ANSWER_WITHIN_S
        ((opcode, stream, _flags, error),) = _decode_frames(data)
        assert (opcode, stream, error["name"]) == (ERROR, 0, "FRAME_TOO_LARGE"), error
        good.completes_a_round()
    # The connection that sent the at-limit frame is still fine.
    client.send(PING, 5, {"nonce": 1})
    assert client.recv().body["nonce"] == 1


def _header_crc(header: bytes) -> int:
    return int(crc32c.crc32c(header[:8] + header[12:32]))


def _nonce(item: bytes) -> bytes:
    """A PING payload ``{"nonce": <item>}`` with ``item`` given as raw CBOR."""
    return b"\xa1\x65nonce" + item


def _by_id(item: bytes) -> bytes:
    """A MEMORY_GET payload ``{"id": <item>}`` with ``item`` given as raw CBOR."""
    return b"\xa1\x62id" + item


CBOR_BOMBS: Final = {
    "deep definite arrays": b"\x81" * 100_000 + b"\x00",
    "deep indefinite arrays": b"\x9f" * 100_000,
    "deep maps": b"\xa1\x61a" * 50_000 + b"\x00",
    "deep tags": b"\xc6" * 100_000 + b"\x00",
    "array of 2^32 items": b"\x9b" + (1 << 32).to_bytes(8, "big") + b"\x00\x00",
    "array of 2^64-1 items": b"\x9b" + b"\xff" * 8 + b"\x00",
    "array of 99,999 items, none sent": b"\x9a" + (99_999).to_bytes(4, "big"),
    "map of 2^32 pairs": b"\xbb" + (1 << 32).to_bytes(8, "big") + b"\x61a\x00",
    "bytes of 2^32": b"\x5b" + (1 << 32).to_bytes(8, "big") + b"abc",
    "text of 2^40": b"\x7b" + (1 << 40).to_bytes(8, "big") + b"abc",
    "text of 2^32-1": b"\x7a" + b"\xff" * 4 + b"abc",
}


def test_cbor_bombs_are_refused_quickly(tmp_path: Path) -> None:
    with _hostile(tmp_path) as (server, good):
        _cbor_bombs_are_refused_quickly(server, good)


def _cbor_bombs_are_refused_quickly(server: ServerProcess, good: GoodClient) -> None:
    before_hello = _connect(server, ANSWER_WITHIN_S)
    ready = _ready(server, timeout=ANSWER_WITHIN_S)
    stream = 1
    for name, item in CBOR_BOMBS.items():
        cases = [(before_hello, PING, _nonce(item)), (ready, PING, _nonce(item))]
        cases.append((ready, MEMORY_GET, _by_id(item)))
        for client, opcode, payload in cases:
            if client is before_hello and len(payload) > PRE_AUTH_MAX_FRAME:
                continue  # refused by size before AUTH: tested below, on its own
            started = time.monotonic()
            client.send(opcode, stream, raw=payload)
            reply = client.recv()
            took = time.monotonic() - started
            assert took < ANSWER_WITHIN_S, (name, took)
            assert reply.opcode == ERROR and reply.stream_id == stream, (name, reply)
            assert reply.error_name == "INVALID_ARGUMENT", (name, reply.body)
            stream += 2
        good.completes_a_round()
    # Before AUTH a peer may not make the server buffer more than a handshake.
    stranger = _connect(server, ANSWER_WITHIN_S)
    stranger.send(PING, 1, raw=_nonce(b"\x80" * (PRE_AUTH_MAX_FRAME + 1)))
    refused = stranger.recv()
    assert refused.error_name == "FRAME_TOO_LARGE" and refused.stream_id == 0
    assert stranger.closed_by_server()
    for client in (before_hello, ready):  # refusals on a stream leave the connection open
        client.send(PING, stream, {"nonce": "still here"})
        assert client.recv().body["nonce"] == "still here"


@pytest.mark.parametrize("opcode", [MEMORY_GET, RECALL], ids=["point reads", "recalls"])
def test_ten_thousand_pipelined_streams(tmp_path: Path, opcode: int) -> None:
    with _hostile(tmp_path) as (server, good):
        _ten_thousand_pipelined_streams(server, good, opcode)


def _ten_thousand_pipelined_streams(server: ServerProcess, good: GoodClient, opcode: int) -> None:
    client = _connect(server, ANSWER_WITHIN_S * 5)
    server.clients.append(client)
    client.send(HELLO, 0, {"client": "hostile/1", "versions": [1]})
    max_streams = client.recv().body["max_streams"]
    client.send(AUTH, 0, {"api_key": server.credentials["api_key"]})
    assert client.recv().opcode == AUTH | RESPONSE
    count = 10_000
    streams = [2 * n + 1 for n in range(count)]
    # Reads of ids that do not exist, or recalls of a word the store does not hold:
    # small, and each one is a data request that takes a place in max_streams until
    # it is answered. A point read is answered by the event loop as soon as it is
    # decoded, so it gives its place back at once; a recall waits for a recall
    # thread, longer than decoding takes, so the limit is reached.
    # (In a space of their own, so they wait for none of the good client's writes.)
    body = {"id": os.urandom(16)} if opcode == MEMORY_GET else {"cue": "nothing", "space": "idle"}
    burst = b"".join(frame(opcode, sid, cbor2.dumps(body)) for sid in streams)
    sender = threading.Thread(target=client.send_bytes, args=(burst,), daemon=True)
    started = time.monotonic()
    sender.start()
    answers: dict[int, Reply] = {}
    for _ in range(count):
        reply = client.recv()
        assert reply.stream_id not in answers, f"stream {reply.stream_id} answered twice"
        assert reply.eos, reply
        answers[reply.stream_id] = reply
    took = time.monotonic() - started
    sender.join(timeout=5)
    good.completes_a_round()
    assert sorted(answers) == streams
    names = [r.error_name for r in answers.values()]
    answered = "NOT_FOUND" if opcode == MEMORY_GET else None
    assert set(names) <= {answered, "STREAM_LIMIT"}, set(names)
    limited = names.count("STREAM_LIMIT")
    assert limited < count, (limited, max_streams)
    if opcode == RECALL:
        assert limited > 0, (limited, max_streams)
    assert all(r.body["retryable"] for r in answers.values() if r.error_name == "STREAM_LIMIT")
    assert took < 30, took
    # Nothing left over, and the connection still serves.
    client.send(PING, 2 * count + 1, {"nonce": "after"})
    last = client.recv()
    assert (last.opcode, last.body["nonce"]) == (PING | RESPONSE, "after"), last
    print(f"10,000 streams in {took:.2f} s; {limited} STREAM_LIMIT (max_streams {max_streams})")


def test_a_logged_in_client_trickling_one_frame_is_closed(tmp_path: Path) -> None:
    """Each byte is within the idle timeout of the last, but the frame never ends: a
    frame must arrive whole within the idle timeout of its first byte."""
    with _hostile(tmp_path) as (server, good):
        client = _ready(server)
        payload = cbor2.dumps({"nonce": "x" * 200})
        data = frame(0x0010, 1, payload)
        started = time.monotonic()
        closed_at = None
        for byte in data[:-1]:
            try:
                client.sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed_at = time.monotonic()
                break
            _, closed_at = _recv_until_closed(client.sock, 0.5)  # under the 1.5 s idle timeout
            if closed_at is not None:
                break
        assert closed_at is not None, "a frame trickled for ever kept its connection"
        assert closed_at - started < 6.0
        good.completes_a_round()


BAD_MAGIC_CONNECTIONS: Final = 200
"""Connections that each send a frame with a magic of their own: far more distinct
refusals than there are error names, so one series per refusal would show."""


def test_refused_frames_add_one_metrics_series_per_error_name(tmp_path: Path) -> None:
    with _hostile(tmp_path) as (server, good):
        _refused_frames_add_one_series_per_error_name(server, good)


def _refused_frames_add_one_series_per_error_name(server: ServerProcess, good: GoodClient) -> None:
    for index in range(BAD_MAGIC_CONNECTIONS):
        header = bytearray(frame(PING, 1, b"\xa0"))
        header[0:4] = b"X" + index.to_bytes(3, "big")  # the peer's bytes, in the error's words
        with socket.create_connection((server.host, server.wire_port), timeout=10) as sock:
            sock.sendall(bytes(header))
            data, closed = _recv_until_closed(sock, ANSWER_WITHIN_S)
        assert closed is not None
        ((opcode, _stream, _flags, error),) = _decode_frames(data)
        assert (opcode, error["name"]) == (ERROR, "BAD_FRAME"), error
    good.completes_a_round()
    url = f"http://{server.host}:{server.public_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        exposition = answer.read().decode()
    series = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in exposition.splitlines()
        if line.startswith("brain_protocol_errors_total{")
    }
    assert list(series) == ['brain_protocol_errors_total{error="BAD_FRAME"}'], sorted(series)[:5]
    assert series['brain_protocol_errors_total{error="BAD_FRAME"}'] >= BAD_MAGIC_CONNECTIONS


def test_a_peer_reconnecting_at_its_limit_is_refused_once_a_second(tmp_path: Path) -> None:
    """A refused connection is held, unread, for its ``retry_after_ms`` before the
    server tells it OVERLOADED, so a loop that reconnects the moment it is refused
    costs the server one accept a second, not thousands."""
    env = {"BRAIN_SERVER__MAX_CONNECTIONS_PER_PEER": "4"}
    with _hostile(tmp_path, **env) as (server, good):
        for _ in range(4):  # the address's every slot, held silent
            server.clients.append(RawClient(server.host, server.wire_port, source=HOSTILE_PEER))
        refusals = 0
        started = time.monotonic()
        while time.monotonic() - started < 3:
            sock = socket.create_connection(
                (server.host, server.wire_port), timeout=10, source_address=(HOSTILE_PEER, 0)
            )
            with sock:
                data, closed = _recv_until_closed(sock, 10)
            assert closed is not None
            ((opcode, stream, _flags, body),) = _decode_frames(data)
            assert (opcode, stream, body["name"]) == (ERROR, 0, "OVERLOADED")
            refusals += 1
        # About one a second (refused at once, this loop made hundreds).
        assert refusals <= 4, refusals
        good.completes_a_round()
