"""One wire connection: the asyncio shell around :class:`brain.wire.session.ServerSession`.

The read loop feeds bytes to the session and acts on its events: bytes are
written, AUTH is checked against the key store in a worker thread, and every
data request runs in its own task so that answers may come back in any order
(spec/01-wire.md §3). Nothing here parses bytes or decides protocol questions; that is
the session's job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Final

from brain.errors import BrainError, Internal, Overloaded, Unauthenticated
from brain.ids import new_id
from brain.server.admission import Slot
from brain.server.backend import Backend, RawAnswer
from brain.server.keys import KeyStore
from brain.server.metrics import ServerMetrics
from brain.wire.messages.control import CancelStreamOk
from brain.wire.messages.subscribe_ops import (
    ChangeEvent,
    Subscribe,
    SubscriptionEnded,
    Unsubscribe,
)
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from brain.wire.session import (
    HANDSHAKE_TIMEOUT_S,
    AuthRequested,
    ByeRequested,
    CancelRequested,
    CloseConnection,
    Event,
    Outgoing,
    Principal,
    RequestReceived,
    ServerSession,
    encode_error_frame,
)

__all__ = ["READ_CHUNK", "Connection"]

log = logging.getLogger("brain.server")

SUBSCRIPTION_END_S: Final = 5.0
"""Longest a cancel waits for a subscription to send its last frame."""

READ_CHUNK: Final = 64 * 1024
"""Bytes asked of the socket per read: never more than this is buffered ahead of
the frame reader, whatever length a header claims."""


class Connection:
    """Serves one accepted TCP connection until it closes."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        session: ServerSession,
        backend: Backend,
        keys: KeyStore,
        metrics: ServerMetrics,
        idle_timeout_s: float,
        subscriber_stall_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._session = session
        self._backend = backend
        self._keys = keys
        self._metrics = metrics
        self._idle_timeout_s = idle_timeout_s
        self._stall_s = subscriber_stall_s
        self._subscriptions: dict[int, asyncio.Task[None]] = {}
        # Subscriptions being ended with an ERROR rather than SubscriptionEnded.
        self._end_errors: dict[int, BrainError] = {}
        self.slot: Slot | None = None
        """The connection's place in the server's count of connections
        (:mod:`brain.server.admission`), told when AUTH succeeds."""
        self._draining = False
        self._clock = clock
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._closing = False
        peer = writer.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    def close_for(self, error: BrainError) -> None:
        """Close the connection now, telling the peer why on stream 0 (it had to
        give way to a newer connection)."""
        if self._closing:
            return
        self._writer.write(encode_error_frame(0, error))
        self._closing = True
        self._stop_reading()

    def drain(self) -> None:
        """Stop serving for a shutdown: read no more requests, end every subscription
        as BYE does, answer what is in flight, then close."""
        self._draining = True
        self._closing = True
        self._stop_reading()

    def _stop_reading(self) -> None:
        """Read nothing more, and wake the read loop if it is parked in read()."""
        transport = self._writer.transport
        if isinstance(transport, asyncio.ReadTransport) and not transport.is_closing():
            # Bytes the peer sends after the EOF below would be fed past it.
            transport.pause_reading()
        self._reader.feed_eof()

    def key_revoked(self, key_id: bytes) -> None:
        """Key ``key_id`` was revoked: if it is this connection's, end its subscriptions
        with UNAUTHENTICATED (each later request is refused the same way)."""
        principal = self._session.principal
        if principal is None or principal.key_id != key_id:
            return
        for stream_id, task in list(self._subscriptions.items()):
            if not task.done():
                self._end_errors[stream_id] = _revoked()
                task.cancel()

    async def serve(self) -> None:
        """Run until the peer leaves, the protocol closes the connection, or a timeout."""
        started = self._clock()
        frame_started: float | None = None
        try:
            while not self._closing:
                timeout = self._read_timeout(started, frame_started)
                try:
                    data = await asyncio.wait_for(self._reader.read(READ_CHUNK), timeout)
                except TimeoutError:
                    reason = (
                        "handshake timeout"
                        if not self._session.handshake_done
                        else "frame not completed in time"
                        if frame_started is not None
                        else "idle timeout"
                    )
                    log.info("closing %s: %s", self._peer, reason)
                    break
                if not data:
                    break
                await self._act(self._session.receive_data(data))
                if not self._session.mid_frame:
                    frame_started = None
                elif frame_started is None:
                    frame_started = self._clock()
        except (ConnectionError, OSError) as exc:
            log.debug("connection %s dropped: %s", self._peer, exc)
        except Exception:
            # A bug in our own handling: say so on stream 0 rather than leave the peer hanging.
            log_id = new_id().hex()
            log.exception("internal error %s on connection %s", log_id, self._peer)
            error = Internal(f"internal error; see the server log for id {log_id}")
            self._writer.write(encode_error_frame(0, error))
        finally:
            await self._shutdown()

    def _read_timeout(self, started: float, frame_started: float | None) -> float | None:
        now = self._clock()
        if not self._session.handshake_done:
            return max(0.0, started + HANDSHAKE_TIMEOUT_S - now)
        if frame_started is not None:
            # A frame must arrive whole within the idle timeout of its first byte: a
            # client trickling bytes is not idle by the byte, but it holds a slot.
            return max(0.0, frame_started + self._idle_timeout_s - now)
        if self._tasks:
            return None  # work in flight: the client is waiting on us, not idle
        return self._idle_timeout_s

    async def _act(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, Outgoing):
                self._writer.write(event.data)
            elif isinstance(event, CloseConnection):
                self._closing = True
                self._stop_reading()
                if event.error is not None:
                    # Labelled by the error's wire name, never by its message: a
                    # message may quote the peer's bytes, and every distinct label
                    # value is a series kept for the life of the process.
                    self._metrics.protocol_errors.labels(error=event.error).inc()
            elif isinstance(event, RequestReceived):
                await self._start(event)
            elif isinstance(event, AuthRequested):
                await self._authenticate(event)
            elif isinstance(event, CancelRequested):
                cancelled = await self._end_subscription(event.target)
                await self._act(
                    self._session.respond(
                        event.stream_id, Opcode.CANCEL_STREAM, CancelStreamOk(cancelled=cancelled)
                    )
                )
            elif isinstance(event, ByeRequested):
                log.debug("%s said BYE with %d in flight", self._peer, len(self._tasks))
                # Subscriptions never finish on their own: end them so BYE can.
                for stream_id in list(self._subscriptions):
                    await self._end_subscription(stream_id)
        if events:
            await self._writer.drain()

    async def _start(self, event: RequestReceived) -> None:
        """Run a data request in a task of its own, unless its key was revoked since
        AUTH: then it is refused at once (spec/01-wire.md §4)."""
        principal = self._session.principal
        if principal is not None and self._keys.is_revoked(principal.key_id):
            self._metrics.observe(event.opcode.name, "UNAUTHENTICATED", 0.0)
            await self._act(self._session.respond_error(event.stream_id, _revoked()))
            return
        if event.opcode is Opcode.SUBSCRIBE:
            assert isinstance(event.request, Subscribe)
            task = asyncio.create_task(self._subscription(event.stream_id, event.request))
            self._subscriptions[event.stream_id] = task
        else:
            task = asyncio.create_task(self._run(event))
        self._tasks[event.stream_id] = task

    async def _authenticate(self, event: AuthRequested) -> None:
        record = await asyncio.to_thread(self._keys.authenticate, event.api_key)
        if record is None:
            await self._act(
                self._session.auth_failed(event.stream_id, Unauthenticated("unknown API key"))
            )
            return
        principal = Principal(
            record.namespace, record.key_id, record.permissions, self._session.session_id
        )
        if self.slot is not None:
            self.slot.authenticate()
        await self._act(self._session.auth_succeeded(event.stream_id, principal))

    async def _end_subscription(self, stream_id: int) -> bool:
        """End the subscription answering on ``stream_id`` (it sends its last frame);
        False when there is none open."""
        task = self._subscriptions.get(stream_id)
        if task is None or task.done():
            return False
        task.cancel()
        # Bounded: the connection's other streams wait while this one ends.
        done, _ = await asyncio.wait({task}, timeout=SUBSCRIPTION_END_S)
        if not done:
            log.warning("subscription on stream %d did not end in time", stream_id)
        return True

    async def _subscription(self, stream_id: int, request: Subscribe) -> None:
        """Stream a subscription's changes, one LSN's frames at a time, until cancelled,
        the subscriber stalls, or the connection goes."""
        principal = self._session.principal
        assert principal is not None
        next_lsn = request.from_lsn or 0
        started = time.perf_counter()
        self._metrics.subscriptions_open.inc()
        try:
            subscription = self._backend.subscribe(principal, request)
            # aclosing: the subscription leaves the fan-out as soon as the stream ends.
            async with contextlib.aclosing(subscription) as changes:
                async for lsn, events in changes:
                    if not await self._send_changes(stream_id, lsn, events):
                        return
                    next_lsn = lsn + 1
        except asyncio.CancelledError:
            error = self._end_errors.pop(stream_id, None)
            if not self._session.closed:
                with contextlib.suppress(ConnectionError, OSError):
                    if error is not None:
                        self._metrics.observe("SUBSCRIBE", error.wire_name, 0.0)
                        await self._act(self._session.respond_error(stream_id, error))
                    else:
                        ended = SubscriptionEnded(next_lsn=max(next_lsn, 0))
                        await self._act(self._session.respond(stream_id, Opcode.SUBSCRIBE, ended))
            raise
        except BrainError as exc:
            self._metrics.observe("SUBSCRIBE", exc.wire_name, time.perf_counter() - started)
            with contextlib.suppress(ConnectionError, OSError):
                await self._act(self._session.respond_error(stream_id, exc))
        except (ConnectionError, OSError):
            self._closing = True
        finally:
            self._metrics.subscriptions_open.dec()
            self._subscriptions.pop(stream_id, None)
            self._tasks.pop(stream_id, None)

    async def _send_changes(self, stream_id: int, lsn: int, events: list[ChangeEvent]) -> bool:
        """Send one LSN's changes and wait for the socket to take them; False (after
        telling the subscriber) when it left them unread for the stall timeout."""
        for change in events:
            await self._act_now(
                self._session.respond(stream_id, Opcode.SUBSCRIBE, change, eos=False)
            )
        if not events:
            return True
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that
            # lands as the drain completes, and the stream would never end.
            async with asyncio.timeout(self._stall_s):
                await self._writer.drain()
        except TimeoutError:
            self._metrics.observe("SUBSCRIBE", "OVERLOADED", 0.0)
            too_slow = Overloaded(
                f"the subscriber left its frames unread for {self._stall_s:g} s; "
                f"subscribe again with from_lsn {lsn + 1}"
            )
            await self._act(self._session.respond_error(stream_id, too_slow))
            return False
        return True

    async def _act_now(self, events: list[Event]) -> None:
        """Queue ``events`` without waiting for the socket (the caller drains)."""
        for event in events:
            if isinstance(event, Outgoing):
                self._writer.write(event.data)
            else:
                await self._act([event])

    async def _run(self, event: RequestReceived) -> None:
        started = time.perf_counter()
        principal = self._session.principal
        assert principal is not None
        try:
            try:
                answer: Message | RawAnswer
                if isinstance(event.request, Unsubscribe):
                    cancelled = await self._end_subscription(event.request.stream)
                    answer = CancelStreamOk(cancelled=cancelled)
                else:
                    answer = await self._backend.execute(principal, event.opcode, event.request)
            except BrainError as exc:
                outcome = exc.wire_name
                events = self._session.respond_error(event.stream_id, exc)
            except asyncio.CancelledError:
                raise
            except Exception:
                log_id = new_id().hex()
                log.exception("internal error %s on %s", log_id, event.opcode.name)
                error = Internal(f"internal error; see the server log for id {log_id}")
                outcome = error.wire_name
                events = self._session.respond_error(event.stream_id, error)
            else:
                outcome = "ok"
                if isinstance(answer, RawAnswer):
                    events = self._session.respond_raw(
                        event.stream_id, event.opcode, answer.payload
                    )
                else:
                    events = self._session.respond(event.stream_id, event.opcode, answer)
            self._metrics.observe(event.opcode.name, outcome, time.perf_counter() - started)
            await self._act(events)
        except (ConnectionError, OSError):
            self._closing = True
        finally:
            self._tasks.pop(event.stream_id, None)

    async def _shutdown(self) -> None:
        try:
            if self._draining:
                await self._finish_in_flight()
        finally:
            await self._close()

    async def _finish_in_flight(self) -> None:
        """End the subscriptions (each sends its SubscriptionEnded), then wait for the
        other requests in flight to be answered."""
        for task in list(self._subscriptions.values()):
            task.cancel()
        if self._subscriptions:
            await asyncio.wait(set(self._subscriptions.values()), timeout=SUBSCRIPTION_END_S)
        requests = {t for sid, t in self._tasks.items() if sid not in self._subscriptions}
        if requests:
            await asyncio.wait(requests)
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.drain()

    async def _close(self) -> None:
        principal = self._session.principal
        self._session.close()
        if principal is not None:
            # A closed connection aborts the transactions it left open (spec/05-durability.md §8).
            self._backend.connection_closed(principal)
        for task in list(self._tasks.values()):
            task.cancel()
        for task in list(self._tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.drain()
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()


def _revoked() -> Unauthenticated:
    return Unauthenticated("the API key of this connection was revoked")
