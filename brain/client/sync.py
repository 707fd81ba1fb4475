"""A blocking client: one TCP connection driven by a sans-IO ``ClientSession``.

::

    with Client.connect("127.0.0.1", 9090, api_key=key) as client:
        pong = client.ping(nonce=7)
        answers = client.pipeline([(Opcode.PING, Ping(nonce=1)), (Opcode.PING, Ping(nonce=2))])

The socket is non-blocking and every wait goes through one selector loop that
writes queued bytes and reads answers at the same time. A long pipeline can
therefore never deadlock with a server whose answers fill the socket buffers
while we are still sending. Bytes of a frame that could not be written before
a timeout stay queued and go out first next time, so the byte stream never
carries half a frame.

Errors: the typed :class:`~brain.errors.BrainError` the server sent;
:class:`~brain.errors.RequestTimeout` when no answer came in time;
:class:`~brain.errors.ConnectionClosed` when the connection could not be made
or ended first.
"""

from __future__ import annotations

import collections
import selectors
import socket
import threading
import time
from collections.abc import Generator, Sequence
from types import TracebackType
from typing import Final, Self

from brain.client.base import HandshakeInfo
from brain.errors import BrainError, ConnectionClosed, RequestTimeout
from brain.version import __version__
from brain.wire.client_session import STREAMING_OPCODES, ClientSession, Reply
from brain.wire.messages.control import Ping, Pong
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = ["DEFAULT_CLIENT_NAME", "DEFAULT_PORT", "DEFAULT_TIMEOUT_S", "Client"]

DEFAULT_PORT: Final = 9090
"""The wire protocol's TCP port (spec/01-wire.md §1)."""

DEFAULT_TIMEOUT_S: Final = 30.0
"""Per-call wait: well above a heavy RECALL under load, short enough to notice a dead peer."""

DEFAULT_CLIENT_NAME: Final = f"brain-python/{__version__}"
"""What HELLO calls this client, so server logs can tell client builds apart."""

RECV_CHUNK: Final = 256 * 1024
"""Bytes asked of the socket per read: a few typical answers, without large idle buffers."""


class Client(HandshakeInfo):
    """A blocking connection to a Brain server; make one with :meth:`connect`.

    Thread-safe: a lock serialises the I/O of concurrent callers, and answers
    that arrive for another caller's stream wait in an inbox until it looks.
    """

    def __init__(self, sock: socket.socket, *, timeout: float | None = DEFAULT_TIMEOUT_S) -> None:
        """Wrap a connected socket; :meth:`connect` also performs the handshake."""
        sock.setblocking(False)
        self._sock = sock
        self._timeout = timeout
        self._session = ClientSession()
        # Re-entrant: a stream() generator collected while this thread holds the
        # lock runs its cancel under the same lock.
        self._lock = threading.RLock()
        self._selector = selectors.DefaultSelector()
        self._selector.register(sock, selectors.EVENT_READ)
        self._outbox = bytearray()
        self._inbox: dict[int, collections.deque[Reply]] = {}
        self._fault: BrainError | None = None
        self._sock_closed = False

    @classmethod
    def connect(
        cls,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        api_key: str,
        client_name: str = DEFAULT_CLIENT_NAME,
        timeout: float | None = DEFAULT_TIMEOUT_S,
    ) -> Client:
        """Open a connection and complete HELLO and AUTH, raising the server's error if any."""
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ConnectionClosed(f"cannot connect to {host}:{port}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client = cls(sock, timeout=timeout)
        try:
            client._handshake(client_name, api_key)
        except BaseException:
            client._close_socket()
            raise
        return client

    # --- inspection -------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once the connection is over."""
        return self._sock_closed

    def open_streams(self) -> dict[int, Opcode]:
        """The requests whose answer has not ended, by stream id: UNSUBSCRIBE names an
        open SUBSCRIBE by its id, to end it with the LSN it reached."""
        with self._lock:
            return dict(self._session.pending)

    # --- requests ---------------------------------------------------------------------

    def call(self, opcode: Opcode, message: Message, *, timeout: float | None = None) -> Message:
        """Send one request and return its answer, or raise the error the server sent.

        ``timeout`` overrides the connection's default for this call.
        """
        if opcode in STREAMING_OPCODES:
            raise ValueError(f"{opcode.name} answers with a stream; use stream()")
        with self._lock:
            deadline = self._deadline(timeout)
            sid = self._start(opcode, message)
            return self._wait(sid, deadline).result()

    def pipeline(
        self, requests: Sequence[tuple[Opcode, Message]], *, timeout: float | None = None
    ) -> list[Message | BrainError]:
        """Send every request before reading answers; return answers or errors, in order.

        At most the server's ``max_streams`` requests are in flight at once; the
        next one goes out as soon as an answer frees a slot. ``timeout`` bounds
        the whole pipeline.
        """
        for opcode, _ in requests:
            if opcode in STREAMING_OPCODES:
                raise ValueError(f"{opcode.name} answers with a stream; use stream()")
        results: list[Message | BrainError | None] = [None] * len(requests)
        with self._lock:
            deadline = self._deadline(timeout)
            waiting: dict[int, int] = {}  # stream id -> index in requests
            next_index = 0
            try:
                while next_index < len(requests) or waiting:
                    while (
                        next_index < len(requests)
                        and self._session.in_flight < self._session.max_streams
                    ):
                        opcode, message = requests[next_index]
                        waiting[self._start(opcode, message)] = next_index
                        next_index += 1
                    answered = [sid for sid in waiting if self._inbox.get(sid)]
                    for sid in answered:
                        reply = self._take(sid)
                        results[waiting.pop(sid)] = (
                            reply.error if reply.error is not None else reply.message
                        )
                    if not answered:
                        self._pump(deadline)
            except BaseException:
                for sid in waiting:
                    self._give_up(sid)
                raise
        return [result for result in results if result is not None]  # all are set by now

    def stream(
        self, opcode: Opcode, message: Message, *, timeout: float | None = None
    ) -> Generator[Message, None, None]:
        """Send a request whose answer is a stream (SUBSCRIBE); yield each message until EOS.

        ``timeout`` bounds the wait for each frame (None: wait as long as it
        takes, as a quiet subscription may). Leaving the loop early sends
        CANCEL_STREAM so the server stops sending.
        """
        with self._lock:
            sid = self._start(opcode, message)
        ended = False
        try:
            while True:
                deadline = None if timeout is None else time.monotonic() + timeout
                with self._lock:
                    reply = self._wait(sid, deadline)
                ended = reply.eos
                yield reply.result()
                if ended:
                    return
        finally:
            if not ended:
                self._cancel(sid)

    def ping(self, nonce: object = None, *, timeout: float | None = None) -> Pong:
        """PING the server; the PONG echoes ``nonce`` and carries the server's clock."""
        pong = self.call(Opcode.PING, Ping(nonce=nonce), timeout=timeout)
        assert isinstance(pong, Pong)
        return pong

    def close(self) -> None:
        """Say BYE, let the server finish what is in flight, wait for BYE_OK, then close.

        Never raises for a connection that is already broken: it is gone either way.
        """
        with self._lock:
            if self._sock_closed:
                return
            try:
                if self._fault is None and not self._session.closed:
                    sid, data = self._session.bye()
                    self._outbox += data
                    self._wait(sid, self._deadline(None))
            except BrainError:
                pass  # a broken or slow goodbye still ends in a closed socket
            finally:
                self._close_socket()

    def __enter__(self) -> Self:
        """Use the client in a ``with`` block that closes it."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the connection with BYE."""
        self.close()

    # --- internals (called with the lock held) -----------------------------------------

    def _handshake(self, client_name: str, api_key: str) -> None:
        deadline = self._deadline(None)
        # AUTH follows HELLO without waiting: the server reads frames in order.
        self._outbox += self._session.hello(client_name)
        auth_sid, data = self._session.auth(api_key)
        self._outbox += data
        self._wait(0, deadline).result()
        self._wait(auth_sid, deadline).result()

    def _deadline(self, timeout: float | None) -> float | None:
        chosen = timeout if timeout is not None else self._timeout
        return None if chosen is None else time.monotonic() + chosen

    def _start(self, opcode: Opcode, message: Message) -> int:
        self._raise_if_broken()
        sid, data = self._session.request(opcode, message)
        self._outbox += data
        return sid

    def _take(self, sid: int) -> Reply:
        queue = self._inbox[sid]
        reply = queue.popleft()
        if not queue:
            del self._inbox[sid]
        return reply

    def _wait(self, sid: int, deadline: float | None) -> Reply:
        try:
            while not self._inbox.get(sid):
                self._pump(deadline)
        except BaseException:
            self._give_up(sid)
            raise
        return self._take(sid)

    def _give_up(self, sid: int) -> None:
        self._session.abandon(sid)
        self._inbox.pop(sid, None)

    def _cancel(self, sid: int) -> None:
        with self._lock:
            self._give_up(sid)
            if self._fault is not None or self._session.closed or self._sock_closed:
                return
            try:
                cancel_sid, data = self._session.cancel(sid)
                self._session.abandon(cancel_sid)
                self._outbox += data
                deadline = self._deadline(None)
                while self._outbox:
                    self._pump(deadline)
            except BrainError:
                pass  # best effort: the stream is abandoned whether or not the server hears

    def _raise_if_broken(self) -> None:
        if self._fault is not None:
            raise ConnectionClosed(f"the connection is broken: {self._fault.message}") from (
                self._fault
            )
        if self._sock_closed:
            raise ConnectionClosed("the client is closed")

    def _pump(self, deadline: float | None) -> None:
        """Write what is queued and read what arrived, waiting at most until ``deadline``.

        Raises once the connection is broken; callers look in the inbox first, so
        answers that arrived before the break are still delivered.
        """
        self._raise_if_broken()
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise RequestTimeout("no answer from the server within the timeout")
        interest = selectors.EVENT_READ | (selectors.EVENT_WRITE if self._outbox else 0)
        self._selector.modify(self._sock, interest)
        for _, mask in self._selector.select(remaining):
            try:
                if mask & selectors.EVENT_WRITE:
                    sent = self._sock.send(self._outbox)
                    del self._outbox[:sent]
                if mask & selectors.EVENT_READ:
                    self._receive(self._sock.recv(RECV_CHUNK))
            except (BlockingIOError, InterruptedError):
                pass  # spurious readiness; the next select says again
            except OSError as exc:
                self._break(ConnectionClosed(f"the connection failed: {exc}"), exc)

    def _receive(self, data: bytes) -> None:
        if not data:
            reason = self._session.closed_reason or "the server closed the connection"
            self._session.connection_lost(reason)
            self._break(ConnectionClosed(reason))
            return
        try:
            replies = self._session.receive_data(data)
        except BrainError as exc:
            self._break(exc)
            return
        for reply in replies:
            if reply.opcode is None:
                assert reply.error is not None
                self._break(reply.error)
            else:
                self._inbox.setdefault(reply.stream_id, collections.deque()).append(reply)

    def _break(self, fault: BrainError, cause: BaseException | None = None) -> None:
        if cause is not None:
            fault.__cause__ = cause
        if self._fault is None:
            self._fault = fault

    def _close_socket(self) -> None:
        if self._sock_closed:
            return
        self._sock_closed = True
        self._session.connection_lost("the client closed the connection")
        self._selector.close()
        self._sock.close()
