"""An asyncio client: many tasks share one pipelined connection.

::

    client = await AsyncClient.connect("127.0.0.1", 9090, api_key=key)
    pongs = await asyncio.gather(*(client.ping(nonce=i) for i in range(100)))
    await client.close()

Each :meth:`AsyncClient.call` writes its frame at once and waits on a future;
one reader task feeds the bytes that arrive to the sans-IO
:class:`~brain.wire.client_session.ClientSession` and resolves the futures by
stream id, so answers may come back in any order. No more than the server's
``max_streams`` requests are put in flight: further callers wait for a slot
rather than collect ``STREAM_LIMIT`` errors.

A call that times out or whose task is cancelled abandons its stream: the
late answer is dropped when it comes. When the connection ends, every call
still waiting fails with :class:`~brain.errors.ConnectionClosed`, whose
``__cause__`` is the fault that ended it, if any.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncGenerator
from types import TracebackType
from typing import Final, Self

from brain.client.base import HandshakeInfo
from brain.client.sync import DEFAULT_CLIENT_NAME, DEFAULT_PORT, DEFAULT_TIMEOUT_S, RECV_CHUNK
from brain.errors import BrainError, ConnectionClosed, RequestTimeout
from brain.wire.client_session import STREAMING_OPCODES, ClientSession, Reply
from brain.wire.messages.control import Ping, Pong
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = ["AsyncClient"]

_CLIENT_CLOSED: Final = "the client closed the connection"


class AsyncClient(HandshakeInfo):
    """A pipelined asyncio connection to a Brain server; make one with :meth:`connect`."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        timeout: float | None = DEFAULT_TIMEOUT_S,
    ) -> None:
        """Wrap connected streams; :meth:`connect` also performs the handshake."""
        self._reader = reader
        self._writer = writer
        self._timeout = timeout
        self._session = ClientSession()
        self._waiters: dict[int, asyncio.Future[Reply]] = {}
        self._streams: dict[int, asyncio.Queue[Reply | BrainError]] = {}
        self._slot_waiters: list[asyncio.Future[None]] = []
        self._fault: BrainError | None = None
        self._closing = False
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def connect(
        cls,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        api_key: str,
        client_name: str = DEFAULT_CLIENT_NAME,
        timeout: float | None = DEFAULT_TIMEOUT_S,
    ) -> AsyncClient:
        """Open a connection and complete HELLO and AUTH, raising the server's error if any."""
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(host, port)
        except (OSError, TimeoutError) as exc:
            raise ConnectionClosed(f"cannot connect to {host}:{port}: {exc!r}") from exc
        sock = writer.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client = cls(reader, writer, timeout=timeout)
        try:
            await client._handshake(client_name, api_key)
        except BaseException:
            await client._shutdown(_CLIENT_CLOSED)
            raise
        return client

    # --- inspection -------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once the connection is over."""
        return self._fault is not None

    # --- requests ---------------------------------------------------------------------

    async def call(
        self, opcode: Opcode, message: Message, *, timeout: float | None = None
    ) -> Message:
        """Send one request and return its answer, or raise the error the server sent.

        Safe to await from many tasks at once: the requests share the connection.
        ``timeout`` overrides the connection's default for this call.
        """
        if opcode in STREAMING_OPCODES:
            raise ValueError(f"{opcode.name} answers with a stream; use stream()")
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        sid = await self._send(opcode, message, future)
        try:
            async with asyncio.timeout(self._timeout if timeout is None else timeout):
                reply = await future
        except TimeoutError:
            self._give_up(sid)
            raise RequestTimeout(f"no answer to {opcode.name} within the timeout") from None
        except BaseException:
            self._give_up(sid)
            raise
        return reply.result()

    async def stream(
        self, opcode: Opcode, message: Message, *, timeout: float | None = None
    ) -> AsyncGenerator[Message, None]:
        """Send a request whose answer is a stream (SUBSCRIBE); yield each message until EOS.

        ``timeout`` bounds the wait for each frame (None: wait as long as it
        takes). Leaving the loop early sends CANCEL_STREAM once the generator is
        closed (wrap it in ``contextlib.aclosing`` to make that prompt). Frames are queued
        without bound until consumed, so that a slow consumer never stalls the
        other calls sharing the connection.
        """
        queue: asyncio.Queue[Reply | BrainError] = asyncio.Queue()
        sid = await self._send(opcode, message, queue)
        ended = False
        try:
            while True:
                try:
                    async with asyncio.timeout(timeout):
                        item = await queue.get()
                except TimeoutError:
                    raise RequestTimeout(f"no {opcode.name} frame within the timeout") from None
                if isinstance(item, BrainError):
                    ended = True
                    raise item
                ended = item.eos
                yield item.result()
                if ended:
                    return
        finally:
            self._streams.pop(sid, None)
            if not ended:
                await self._cancel(sid)

    async def ping(self, nonce: object = None, *, timeout: float | None = None) -> Pong:
        """PING the server; the PONG echoes ``nonce`` and carries the server's clock."""
        pong = await self.call(Opcode.PING, Ping(nonce=nonce), timeout=timeout)
        assert isinstance(pong, Pong)
        return pong

    async def close(self) -> None:
        """Say BYE, let the server finish what is in flight, wait for BYE_OK, then close.

        Calls still waiting when the connection ends fail with ConnectionClosed.
        Never raises for a connection that is already broken.
        """
        if self._closing:
            await asyncio.wait([self._reader_task])
            return
        self._closing = True
        bye: tuple[int, asyncio.Future[Reply]] | None = None
        try:
            # Open answer streams never end by themselves, and BYE_OK waits for them.
            for sid, queue in list(self._streams.items()):
                queue.put_nowait(ConnectionClosed(_CLIENT_CLOSED))
                await self._cancel(sid)
            if self._fault is None and not self._session.closed:
                future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
                sid, data = self._session.bye()
                bye = sid, future
                self._waiters[sid] = future
                self._writer.write(data)
                async with asyncio.timeout(self._timeout):
                    await self._writer.drain()
                    await future
        except (BrainError, OSError, TimeoutError):
            pass  # a broken or slow goodbye still ends in a closed connection
        finally:
            if bye is not None:
                self._forget(*bye)
            await self._shutdown(_CLIENT_CLOSED)

    async def __aenter__(self) -> Self:
        """Use the client in an ``async with`` block that closes it."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the connection with BYE."""
        await self.close()

    # --- internals --------------------------------------------------------------------

    async def _handshake(self, client_name: str, api_key: str) -> None:
        loop = asyncio.get_running_loop()
        hello: asyncio.Future[Reply] = loop.create_future()
        auth: asyncio.Future[Reply] = loop.create_future()
        self._waiters[0] = hello
        self._writer.write(self._session.hello(client_name))
        # AUTH follows HELLO without waiting: the server reads frames in order.
        auth_sid, data = self._session.auth(api_key)
        self._waiters[auth_sid] = auth
        self._writer.write(data)
        try:
            async with asyncio.timeout(self._timeout):
                await self._writer.drain()
                (await hello).result()
                (await auth).result()
        except TimeoutError:
            raise RequestTimeout("the handshake did not complete within the timeout") from None
        finally:
            self._forget(0, hello)
            self._forget(auth_sid, auth)

    def _forget(self, sid: int, future: asyncio.Future[Reply]) -> None:
        """Drop a waiter nobody will await any more, so asyncio never logs it as unretrieved."""
        self._give_up(sid)
        if not future.done():
            future.cancel()
        elif not future.cancelled():
            future.exception()  # marks an exception as retrieved

    async def _send(
        self,
        opcode: Opcode,
        message: Message,
        sink: asyncio.Future[Reply] | asyncio.Queue[Reply | BrainError],
    ) -> int:
        """Wait for a free slot, register ``sink`` and write the request; return its stream."""
        await self._wait_for_slot()
        # No await from the slot check to write(): no other task can take the slot,
        # and write() only buffers, so frames of concurrent callers never interleave.
        self._raise_if_broken()
        sid, data = self._session.request(opcode, message)
        if isinstance(sink, asyncio.Queue):
            self._streams[sid] = sink
        else:
            self._waiters[sid] = sink
        self._writer.write(data)
        try:
            await self._writer.drain()
        except OSError as exc:
            self._give_up(sid)
            raise ConnectionClosed(f"the connection failed: {exc}") from exc
        except BaseException:
            self._give_up(sid)
            raise
        return sid

    async def _wait_for_slot(self) -> None:
        loop = asyncio.get_running_loop()
        while self._fault is None and self._session.in_flight >= self._session.max_streams:
            waiter: asyncio.Future[None] = loop.create_future()
            self._slot_waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._slot_waiters:
                    self._slot_waiters.remove(waiter)

    def _wake_slot_waiters(self) -> None:
        waiters, self._slot_waiters = self._slot_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _raise_if_broken(self) -> None:
        if self._fault is not None:
            raise ConnectionClosed(f"the connection is closed: {self._fault.message}") from (
                self._fault
            )
        if self._closing:
            raise ConnectionClosed("the client is closing")

    def _give_up(self, sid: int) -> None:
        self._waiters.pop(sid, None)
        self._streams.pop(sid, None)
        self._session.abandon(sid)

    async def _cancel(self, sid: int) -> None:
        self._give_up(sid)
        if self._fault is not None or self._session.closed:
            return
        try:
            cancel_sid, data = self._session.cancel(sid)
            self._session.abandon(cancel_sid)
            self._writer.write(data)
            await self._writer.drain()
        except (BrainError, OSError):
            pass  # best effort: the stream is abandoned whether or not the server hears

    async def _read_loop(self) -> None:
        fault: BrainError = ConnectionClosed(_CLIENT_CLOSED)
        try:
            while True:
                data = await self._reader.read(RECV_CHUNK)
                if not data:
                    reason = self._session.closed_reason or "the server closed the connection"
                    self._session.connection_lost(reason)
                    fault = ConnectionClosed(reason)
                    return
                replies = self._session.receive_data(data)
                for reply in replies:
                    self._dispatch(reply)
                if replies:
                    self._wake_slot_waiters()
        except BrainError as exc:  # the server broke the protocol
            fault = exc
        except OSError as exc:
            fault = ConnectionClosed(f"the connection failed: {exc}")
            fault.__cause__ = exc
        finally:
            self._fail_all(fault)
            self._writer.close()  # the connection is over; do not leave the transport open

    def _dispatch(self, reply: Reply) -> None:
        if reply.opcode is None:
            assert reply.error is not None
            self._fail_all(reply.error)  # a connection-level ERROR on stream 0
            return
        future = self._waiters.pop(reply.stream_id, None)
        if future is not None:
            if not reply.eos:
                self._session.abandon(reply.stream_id)  # call() takes one frame only
            if not future.done():
                future.set_result(reply)
            return
        queue = self._streams.get(reply.stream_id)
        if queue is not None:
            queue.put_nowait(reply)

    def _fail_all(self, fault: BrainError) -> None:
        if self._fault is None:
            self._fault = fault
        waiters, self._waiters = self._waiters, {}
        streams, self._streams = self._streams, {}
        for future in waiters.values():
            if not future.done():
                future.set_exception(_closed_by(fault))
        for queue in streams.values():
            queue.put_nowait(_closed_by(fault))
        self._wake_slot_waiters()  # so that they see the fault

    async def _shutdown(self, reason: str) -> None:
        self._closing = True
        self._fail_all(ConnectionClosed(reason))
        self._reader_task.cancel()
        await asyncio.wait([self._reader_task])
        self._writer.close()
        with contextlib.suppress(OSError):  # the peer may already have reset the connection
            await self._writer.wait_closed()


def _closed_by(fault: BrainError) -> ConnectionClosed:
    if isinstance(fault, ConnectionClosed):
        closed = ConnectionClosed(fault.message)
        closed.__cause__ = fault.__cause__
        return closed
    closed = ConnectionClosed(f"the connection is closed: {fault.wire_name}: {fault.message}")
    closed.__cause__ = fault
    return closed
