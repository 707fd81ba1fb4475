"""Client and AsyncClient over real loopback sockets, against a ServerSession in threads.

The fake server speaks only the control opcodes the session handles itself
(HELLO, AUTH, PING, BYE) plus CANCEL_STREAM, which the fake answers with as
many frames as a test asks for: enough to exercise every client path without
the storage engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Final

import pytest

from brain.client import AsyncClient, Client
from brain.errors import (
    BrainError,
    ConnectionClosed,
    InvalidArgument,
    RequestTimeout,
    Unauthenticated,
)
from brain.wire.client_session import ClientSession
from brain.wire.messages.control import CancelStream, CancelStreamOk, Ping, Pong
from brain.wire.opcodes import Opcode, Permission
from brain.wire.schema import Message
from brain.wire.session import (
    AuthRequested,
    ByeRequested,
    CancelRequested,
    CloseConnection,
    Event,
    Outgoing,
    Principal,
    ServerSession,
)

API_KEY: Final = "brn_" + "t" * 43
POLL_S: Final = 0.05
"""How often the fake server's blocking calls wake to check whether to stop."""

SHORT_TIMEOUT_S: Final = 0.3
"""A timeout tests expect to expire: short, but far above loopback round trips."""

SLOW_ANSWER_S: Final = 1.0
"""How long a delayed answer takes: well past SHORT_TIMEOUT_S."""


class FakeServer:
    """A threaded TCP server: one ServerSession per connection, answers per test settings."""

    def __init__(self, *, max_streams: int = 256) -> None:
        self.max_streams = max_streams
        self.reverse = False  # send each batch of answers in reverse order
        self.delay_s = 0.0  # wait before sending each batch of answers
        self.mute = False  # drop answers instead of sending them
        self.deaf = False  # ignore whatever arrives, as a hung server would
        self.cancel_frames = 1  # frames answering CANCEL_STREAM, the last flagged EOS
        self.cancel_error: BrainError | None = None  # answer CANCEL_STREAM with this instead
        self.seen: list[Event] = []
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(POLL_S)
        self.port: int = self._listener.getsockname()[1]
        self._connections: list[socket.socket] = []
        self._threads = [threading.Thread(target=self._accept_loop, daemon=True)]
        self._threads[0].start()

    def kill_connections(self) -> None:
        """Cut every open connection without a word, as a crashed server would."""
        for conn in list(self._connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Stop accepting, close every connection and wait for the threads."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._listener.close()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        self._connections.append(conn)
        conn.settimeout(POLL_S)
        session = ServerSession(
            server_name="fake",
            session_id=bytes(range(16)),
            clock=time.time_ns,
            max_streams=self.max_streams,
        )
        with conn:
            while not self._stop.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                if self.deaf:
                    continue
                out, close = self._play(session, session.receive_data(data))
                if self.delay_s:
                    time.sleep(self.delay_s)
                if out and not self.mute:
                    try:
                        conn.sendall(b"".join(reversed(out) if self.reverse else out))
                    except OSError:
                        return
                if close:
                    return

    def _play(self, session: ServerSession, events: list[Event]) -> tuple[list[bytes], bool]:
        out: list[bytes] = []
        close = False
        queue = list(events)
        while queue:
            event = queue.pop(0)
            self.seen.append(event)
            if isinstance(event, Outgoing):
                out.append(event.data)
            elif isinstance(event, CloseConnection):
                close = True
            elif isinstance(event, AuthRequested):
                if event.api_key == API_KEY:
                    principal = Principal("default", bytes(16), frozenset(Permission))
                    queue += session.auth_succeeded(event.stream_id, principal)
                else:
                    queue += session.auth_failed(event.stream_id, Unauthenticated("unknown key"))
            elif isinstance(event, CancelRequested):
                if self.cancel_error is not None:
                    queue += session.respond_error(event.stream_id, self.cancel_error)
                    continue
                for i in range(self.cancel_frames):
                    last = i == self.cancel_frames - 1
                    ok = CancelStreamOk(cancelled=not last)
                    queue += session.respond(event.stream_id, Opcode.CANCEL_STREAM, ok, eos=last)
        return out, close


@pytest.fixture
def server() -> Iterator[FakeServer]:
    """A fake server for one test."""
    fake = FakeServer()
    yield fake
    fake.close()


@pytest.fixture
def client(server: FakeServer) -> Iterator[Client]:
    """A blocking client connected and authenticated to the fake server."""
    with Client.connect("127.0.0.1", server.port, api_key=API_KEY, timeout=5.0) as connected:
        yield connected


@pytest.fixture
def peak(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records, for every request a client frames, how many streams it then has in flight."""
    seen: list[int] = []
    real_request = ClientSession.request

    def counting(self: ClientSession, opcode: Opcode, message: Message) -> tuple[int, bytes]:
        framed = real_request(self, opcode, message)
        seen.append(self.in_flight)
        return framed

    monkeypatch.setattr(ClientSession, "request", counting)
    return seen


def nonce_of(message: Message | BrainError) -> object:
    """The nonce of a PONG."""
    assert isinstance(message, Pong)
    return message.nonce


# --- blocking client -----------------------------------------------------------------


def test_connect_performs_the_handshake(client: Client) -> None:
    assert client.welcome.server == "fake"
    assert client.welcome.session_id == bytes(range(16))
    assert client.auth_ok.namespace == "default"
    assert set(client.auth_ok.permissions) == {"read", "write", "admin"}


def test_ping_echoes_the_nonce(client: Client) -> None:
    pong = client.ping(nonce={"n": [1, 2]})
    assert pong.nonce == {"n": [1, 2]}
    assert pong.server_time > 0


def test_close_says_bye_and_waits_for_bye_ok(server: FakeServer) -> None:
    client = Client.connect("127.0.0.1", server.port, api_key=API_KEY)
    client.close()
    assert client.closed
    assert any(isinstance(e, ByeRequested) for e in server.seen)
    with pytest.raises(ConnectionClosed):
        client.ping()
    client.close()  # closing twice is harmless


def test_wrong_key_raises_unauthenticated(server: FakeServer) -> None:
    with pytest.raises(Unauthenticated, match="unknown key"):
        Client.connect("127.0.0.1", server.port, api_key="brn_wrong")


def test_connection_refused_is_connection_closed() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with pytest.raises(ConnectionClosed, match="cannot connect"):
        Client.connect("127.0.0.1", port, api_key=API_KEY, timeout=2.0)


def test_handshake_against_a_silent_peer_times_out() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent, pytest.raises(RequestTimeout):
        Client.connect(
            "127.0.0.1", silent.getsockname()[1], api_key=API_KEY, timeout=SHORT_TIMEOUT_S
        )


def test_pipeline_returns_answers_in_request_order(peak: list[int]) -> None:
    fake = FakeServer(max_streams=16)
    fake.reverse = True
    try:
        with Client.connect("127.0.0.1", fake.port, api_key=API_KEY) as client:
            assert client.welcome.max_streams == 16
            requests = [(Opcode.PING, Ping(nonce=i)) for i in range(600)]
            answers = client.pipeline(requests)
    finally:
        fake.close()
    assert [nonce_of(a) for a in answers] == list(range(600))
    assert max(peak) == 16  # the window was used, and never exceeded


def test_call_raises_the_typed_error_with_its_field(server: FakeServer, client: Client) -> None:
    server.cancel_error = InvalidArgument("no such stream", field="stream")
    with pytest.raises(InvalidArgument, match="no such stream") as caught:
        client.call(Opcode.CANCEL_STREAM, CancelStream(stream=5))
    assert caught.value.field == "stream"
    assert client.ping(1).nonce == 1  # the connection stays usable


def test_pipeline_returns_errors_in_place(server: FakeServer, client: Client) -> None:
    server.cancel_error = InvalidArgument("no such stream", field="stream")
    answers = client.pipeline(
        [(Opcode.PING, Ping(nonce=1)), (Opcode.CANCEL_STREAM, CancelStream(stream=5))]
    )
    assert nonce_of(answers[0]) == 1
    assert isinstance(answers[1], InvalidArgument)
    assert answers[1].field == "stream"


def test_a_late_answer_after_a_timeout_is_dropped(server: FakeServer, client: Client) -> None:
    server.delay_s = SLOW_ANSWER_S
    with pytest.raises(RequestTimeout):
        client.ping("late", timeout=SHORT_TIMEOUT_S)
    server.delay_s = 0.0
    # The late PONG arrives first and must not be taken for this one.
    assert client.ping("fresh").nonce == "fresh"


def test_stream_yields_every_frame_until_eos(server: FakeServer, client: Client) -> None:
    server.cancel_frames = 3
    messages = list(client.stream(Opcode.CANCEL_STREAM, CancelStream(stream=9)))
    assert messages == [
        CancelStreamOk(cancelled=True),
        CancelStreamOk(cancelled=True),
        CancelStreamOk(cancelled=False),
    ]


def test_leaving_a_stream_early_cancels_it(server: FakeServer, client: Client) -> None:
    server.cancel_frames = 4
    frames = client.stream(Opcode.CANCEL_STREAM, CancelStream(stream=9))
    assert len(list(itertools.islice(frames, 2))) == 2
    frames.close()
    assert client.ping("after").nonce == "after"
    cancels = [e for e in server.seen if isinstance(e, CancelRequested)]
    # The first request, then the client's CANCEL_STREAM naming the first one's stream.
    assert [c.target for c in cancels] == [9, cancels[0].stream_id]


def test_call_refuses_streaming_opcodes(client: Client) -> None:
    with pytest.raises(ValueError, match="stream"):
        client.call(Opcode.SUBSCRIBE, CancelStream(stream=1))


def test_server_dying_mid_call_is_connection_closed(server: FakeServer, client: Client) -> None:
    server.mute = True
    threading.Timer(SHORT_TIMEOUT_S, server.kill_connections).start()
    with pytest.raises(ConnectionClosed):
        client.ping("lost")
    with pytest.raises(ConnectionClosed):
        client.ping("after")


def test_threads_share_one_client(client: Client) -> None:
    errors: list[BaseException] = []

    def work(base: int) -> None:
        try:
            for i in range(50):
                assert client.ping(base + i).nonce == base + i
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t * 1000,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


# --- asyncio client ------------------------------------------------------------------


async def _connect(server: FakeServer, timeout: float = 5.0) -> AsyncClient:
    return await AsyncClient.connect("127.0.0.1", server.port, api_key=API_KEY, timeout=timeout)


def test_async_concurrent_calls_share_one_connection(peak: list[int]) -> None:
    fake = FakeServer(max_streams=16)
    fake.reverse = True

    async def main() -> list[object]:
        async with await _connect(fake) as client:
            assert client.welcome.max_streams == 16
            pongs = await asyncio.gather(*(client.ping(i) for i in range(1000)))
            return [p.nonce for p in pongs]

    try:
        assert asyncio.run(main()) == list(range(1000))
    finally:
        fake.close()
    assert max(peak) == 16  # later callers waited for a slot instead of overrunning


def test_async_wrong_key_raises_unauthenticated(server: FakeServer) -> None:
    async def main() -> None:
        await AsyncClient.connect("127.0.0.1", server.port, api_key="brn_wrong")

    with pytest.raises(Unauthenticated):
        asyncio.run(main())


def test_async_connection_refused_is_connection_closed() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]

    async def main() -> None:
        await AsyncClient.connect("127.0.0.1", port, api_key=API_KEY)

    with pytest.raises(ConnectionClosed, match="cannot connect"):
        asyncio.run(main())


def test_async_typed_error_with_field(server: FakeServer) -> None:
    server.cancel_error = InvalidArgument("no such stream", field="stream")

    async def main() -> None:
        async with await _connect(server) as client:
            with pytest.raises(InvalidArgument) as caught:
                await client.call(Opcode.CANCEL_STREAM, CancelStream(stream=5))
            assert caught.value.field == "stream"
            assert (await client.ping(2)).nonce == 2

    asyncio.run(main())


def test_async_timeout_then_the_late_answer_is_dropped(server: FakeServer) -> None:
    async def main() -> None:
        async with await _connect(server) as client:
            server.delay_s = SLOW_ANSWER_S
            with pytest.raises(RequestTimeout):
                await client.ping("late", timeout=SHORT_TIMEOUT_S)
            server.delay_s = 0.0
            assert (await client.ping("fresh")).nonce == "fresh"

    asyncio.run(main())


def test_async_cancelled_call_abandons_its_stream(server: FakeServer) -> None:
    async def main() -> None:
        async with await _connect(server) as client:
            server.delay_s = SLOW_ANSWER_S
            task = asyncio.create_task(client.ping("cancelled"))
            await asyncio.sleep(SHORT_TIMEOUT_S)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            server.delay_s = 0.0
            assert (await client.ping("fresh")).nonce == "fresh"

    asyncio.run(main())


def test_async_close_fails_pending_calls_clearly(server: FakeServer) -> None:
    async def main() -> None:
        client = await _connect(server, timeout=SHORT_TIMEOUT_S)
        server.deaf = True  # neither the PONGs nor BYE_OK will come
        calls = [asyncio.create_task(client.ping(i, timeout=10.0)) for i in range(3)]
        await asyncio.sleep(0.05)
        await client.close()
        results = await asyncio.gather(*calls, return_exceptions=True)
        for result in results:
            assert isinstance(result, ConnectionClosed)
            assert "client closed" in result.message
        with pytest.raises(ConnectionClosed):
            await client.ping("after close")
        assert client.closed

    asyncio.run(main())


def test_async_server_dying_fails_pending_calls(server: FakeServer) -> None:
    async def main() -> None:
        client = await _connect(server)
        server.mute = True
        calls = [asyncio.create_task(client.ping(i)) for i in range(3)]
        await asyncio.sleep(0.05)
        server.kill_connections()
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(r, ConnectionClosed) for r in results)
        with pytest.raises(ConnectionClosed):
            await client.ping("after")
        await client.close()

    asyncio.run(main())


def test_async_stream_yields_every_frame_and_cancels_when_left(server: FakeServer) -> None:
    async def main() -> None:
        async with await _connect(server) as client:
            server.cancel_frames = 3
            got = [m async for m in client.stream(Opcode.CANCEL_STREAM, CancelStream(stream=9))]
            assert len(got) == 3
            server.cancel_frames = 5
            frames = client.stream(Opcode.CANCEL_STREAM, CancelStream(stream=9))
            async with contextlib.aclosing(frames):
                async for _ in frames:
                    break
            assert (await client.ping("after")).nonce == "after"

    asyncio.run(main())
    cancels = [e for e in server.seen if isinstance(e, CancelRequested)]
    assert [c.target for c in cancels][:2] == [9, 9]
    assert cancels[-1].target == cancels[1].stream_id


def test_async_handshake_timeout_leaves_no_unretrieved_futures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main(port: int) -> None:
        with pytest.raises(RequestTimeout):
            await AsyncClient.connect("127.0.0.1", port, api_key=API_KEY, timeout=SHORT_TIMEOUT_S)

    with (
        socket.create_server(("127.0.0.1", 0)) as silent,
        caplog.at_level(logging.ERROR, logger="asyncio"),
    ):
        asyncio.run(main(silent.getsockname()[1]))
        gc.collect()  # an unretrieved future exception is logged when it is collected
    assert caplog.records == []


def test_async_close_ends_open_streams(server: FakeServer) -> None:
    async def main() -> None:
        client = await _connect(server)
        server.cancel_frames = 5
        server.delay_s = SHORT_TIMEOUT_S  # the frames come after close() began
        frames = client.stream(Opcode.CANCEL_STREAM, CancelStream(stream=9))
        consumer = asyncio.create_task(anext(frames))
        await asyncio.sleep(0.05)
        await client.close()
        with pytest.raises(ConnectionClosed, match="client closed"):
            await consumer
        await frames.aclose()

    asyncio.run(main())
