"""One wire connection: the asyncio shell around :class:`brain.wire.session.ServerSession`.

The read loop feeds bytes to the session and acts on its events: bytes are
written, AUTH is checked against the key store, a point read is answered there
and then (:meth:`Backend.answers_inline
<brain.server.backend.Backend.answers_inline>`), and every other data request
runs in its own task so that answers may come back in any order
(spec/01-wire.md §3). Nothing here parses bytes or decides protocol questions;
that is the session's job.

The timeouts of spec/01-wire.md §3 (the handshake's, a frame's, the idle one)
are one deadline per connection, worked out from its state when it is needed:
the read loop compares it with the clock before each read, and one timer per
connection looks while the loop waits, re-armed only when it fires early.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Final

from brain.engine.write.pacing import Pacing
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

__all__ = ["INLINE_SLICE_S", "READ_CHUNK", "Connection"]

log = logging.getLogger("brain.server")

SUBSCRIPTION_END_S: Final = 5.0
"""Longest a cancel waits for a subscription to send its last frame."""

READ_CHUNK: Final = 64 * 1024
"""Bytes asked of the socket per read: never more than this is buffered ahead of
the frame reader, whatever length a header claims."""

INLINE_SLICE_S: Final = 0.0001
"""Longest the event loop works on one connection's frames (decoding them,
answering its point reads) before it lets every other ready connection take its
turn: a client pipelining requests is served in slices this long, interleaved
with the others' work, so it delays each of them by about a slice. A point read
takes longer than this, so pipelined reads are served one per turn, round-robin
between the busy connections: under four connections pipelining 250 GETs each,
another client's GET waited twice as long with slices of 0.5 ms as with these,
and the flood's throughput was the same (spec/06-operations.md §11)."""


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
        pacing: Pacing | None = None,
    ) -> None:
        """``pacing`` meters each namespace's share of the event loop, shared by
        every connection of the server (None: no connection is ever held back)."""
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
        # The deadline's inputs (_deadline), in clock time.
        self._started = 0.0
        self._idle_since = 0.0
        self._frame_started: float | None = None
        self._reading = False
        """True while the read loop waits for the peer: only then may it time out."""
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._timed_out: str | None = None
        # When this turn of answering point reads began (perf_counter).
        self._slice_started = 0.0
        self._pacing = pacing
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
        self._started = self._idle_since = self._clock()
        self._arm(self._started + HANDSHAKE_TIMEOUT_S)
        try:
            while not self._closing:
                now = self._idle_since = self._clock()
                due = self._deadline()
                if due is not None and now >= due[0]:
                    self._time_out(due[1])
                    break
                self._reading = True
                try:
                    data = await self._reader.read(READ_CHUNK)
                finally:
                    self._reading = False
                if not data or self._timed_out is not None:
                    break
                completed = await self._receive(data)
                if not self._session.mid_frame:
                    self._frame_started = None
                elif completed or self._frame_started is None:
                    # The frame left unfinished began in these bytes; its time counts
                    # from now, when the server is done with them, not while it works.
                    self._frame_started = self._clock()
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

    async def _receive(self, data: bytes) -> int:
        """Act on each frame of ``data`` in turn; how many there were. Once this
        connection's turn has lasted :data:`INLINE_SLICE_S` (decoding its frames and
        answering its point reads), every other connection's ready work runs before
        its next frame."""
        self._slice_started = time.perf_counter()
        frames, events = self._session.frames(data)
        if events:
            await self._act(events)
        for number, frame in enumerate(frames):
            principal = self._session.principal
            namespace = None if principal is None else principal.namespace
            if namespace is not None and self._pacing is not None:
                await self._pace(namespace, self._pacing)
            if number and time.perf_counter() - self._slice_started >= INLINE_SLICE_S:
                await asyncio.sleep(0)
                self._slice_started = time.perf_counter()
            started = time.perf_counter()
            events = self._session.handle(frame)
            self._spend(time.perf_counter() - started)
            if events:
                await self._act(events)
        return len(frames)

    def _spend(self, seconds: float) -> None:
        """Count ``seconds`` of the event loop's own work (never a wait) against this
        connection's namespace."""
        principal = self._session.principal
        if principal is not None and self._pacing is not None:
            self._pacing.spent(principal.namespace, seconds, self._pacing.now())

    async def _pace(self, namespace: str, pacing: Pacing) -> None:
        """Hold this connection back while its namespace is over its share of the
        event loop and another namespace is active (spec/06-operations.md §11)."""
        pacing.activity.touch(namespace)
        while (wait := pacing.pause((namespace,), pacing.now())) > 0:
            await asyncio.sleep(wait)
            self._metrics.loop_paced.inc(wait)
            self._slice_started = time.perf_counter()  # the others had their turns

    def _deadline(self) -> tuple[float, str] | None:
        """When the connection times out if the peer sends nothing more, and why;
        None while it waits for an answer of ours."""
        if not self._session.handshake_done:
            return self._started + HANDSHAKE_TIMEOUT_S, "handshake timeout"
        if self._frame_started is not None:
            # A frame must arrive whole within the idle timeout of its first byte: a
            # client trickling bytes is not idle by the byte, but it holds a slot.
            return self._frame_started + self._idle_timeout_s, "frame not completed in time"
        if self._tasks:
            return None  # work in flight: the client is waiting on us, not idle
        return self._idle_since + self._idle_timeout_s, "idle timeout"

    def _arm(self, at: float) -> None:
        """Have :meth:`_on_timer` run by clock time ``at``. The timer is never later
        than the deadline: every deadline but the handshake's is at least an idle
        timeout after the moment the timer was last armed, and AUTH re-arms it."""
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer_at = at
        delay = max(0.0, at - self._clock())
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._closing or self._timed_out is not None:
            return
        now = self._clock()
        due = self._deadline()
        if due is not None and now >= due[0] and self._reading:
            self._time_out(due[1])
            return
        # Not due yet, or we are busy rather than waiting for the peer (the read loop
        # compares the deadline with the clock before it next waits): look again.
        self._arm(due[0] if due is not None and due[0] > now else now + self._idle_timeout_s)

    def _time_out(self, reason: str) -> None:
        """Close for ``reason``: wake the read loop, which then stops."""
        log.info("closing %s: %s", self._peer, reason)
        self._timed_out = reason
        self._stop_reading()

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
        elif self._backend.answers_inline(event.opcode, event.request) and (
            await self._answer_inline(event)
        ):
            return
        else:
            task = asyncio.create_task(self._run(event))
        self._tasks[event.stream_id] = task

    async def _answer_inline(self, event: RequestReceived) -> bool:
        """Answer a point read here, on the event loop: False, having done nothing,
        when the backend cannot do it now without waiting (then it runs as a task)."""
        started = time.perf_counter()
        principal = self._session.principal
        assert principal is not None
        try:
            answer = self._backend.execute_inline(principal, event.opcode, event.request)
        except BrainError as exc:
            outcome = exc.wire_name
            events = self._session.respond_error(event.stream_id, exc)
        except Exception:
            error = self._internal_error(event.opcode)
            outcome = error.wire_name
            events = self._session.respond_error(event.stream_id, error)
        else:
            if answer is None:
                return False
            outcome = "ok"
            events = self._session.respond(event.stream_id, event.opcode, answer)
        took = time.perf_counter() - started
        self._spend(took)
        self._metrics.observe(event.opcode.name, outcome, took)
        # Written at once; the read loop waits for the socket to take it before the
        # next frame, so a peer that does not read stops being read from.
        await self._act_now(events)
        return True

    def _internal_error(self, opcode: Opcode) -> Internal:
        """The error a bug of ours answers with; the log has the traceback."""
        log_id = new_id().hex()
        log.exception("internal error %s on %s", log_id, opcode.name)
        return Internal(f"internal error; see the server log for id {log_id}")

    def _task_done(self, stream_id: int) -> None:
        """The task answering ``stream_id`` ended; with none left, the idle time starts."""
        self._tasks.pop(stream_id, None)
        if not self._tasks:
            self._idle_since = self._clock()

    async def _authenticate(self, event: AuthRequested) -> None:
        # A hash and one lookup in the key store, whose LMDB map never grows: bounded
        # and never waiting, so answered here as a point read is (no thread to wait
        # for, however busy the others are).
        record = self._keys.authenticate(event.api_key)
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
        # From now on the idle timeout counts, which may come before the handshake's.
        self._arm(self._clock() + self._idle_timeout_s)
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
            self._task_done(stream_id)

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
                error = self._internal_error(event.opcode)
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
            self._task_done(event.stream_id)

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
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
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
