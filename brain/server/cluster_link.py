"""Node-to-node requests over the cluster's NATS servers (spec/05-durability.md §14.7).

One connection per node, on the server's event loop. Two subjects per shard:

- ``brain.plan.<shard>``: answered only by the shard's current planner. A node
  subscribes while it plans the shard's writes and unsubscribes as soon as it stops
  (:meth:`ClusterLink.serve_plans`); the queue group ``plan.<shard>`` makes one node
  answer even if, for a moment around a takeover, two are subscribed.
- ``brain.read.<shard>``: answered by any one node of the shard (queue group
  ``read.<shard>``).

A request carries what the receiving node authenticated (:class:`Forwarded`): the
opcode, the request's payload exactly as the client sent it, the key's namespace, id
and permissions, and the connection's id (which owns its transactions). The answer is
the response payload or the error with its wire code, message and retry advice, so a
client sees what the answering node said. Every wait is bounded
(:data:`FORWARD_TIMEOUT_S`); a request nobody answers, or that times out, is answered
UNAVAILABLE with :data:`FORWARD_RETRY_MS` of retry advice. A request or answer larger
than one NATS message goes in parts (:mod:`brain.server.link_parts`).

The connection also serves as the shard map's and the shared key table's handle to
JetStream (:meth:`ClusterLink.jetstream`, :meth:`ClusterLink.run`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import secrets
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Final, Literal, TypeVar

import nats
import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext

from brain import cbor
from brain.engine.replication.jetstream_log import API_ATTEMPT_S, APPEND_DEADLINE_S, CALL_TIMEOUT_S
from brain.errors import BrainError, Internal, Overloaded, Unavailable, error_from_wire
from brain.server import link_parts
from brain.wire.messages.control import ErrorMessage

__all__ = [
    "FORWARD_RETRY_MS",
    "FORWARD_TIMEOUT_S",
    "ClusterLink",
    "Forwarded",
    "plan_subject",
    "read_subject",
]

log = logging.getLogger("brain.server")

NO_RESPONDERS_STATUS: Final = "503"
"""The status the servers send to a request's inbox when nobody subscribes to its
subject."""

_T = TypeVar("_T")

FORWARD_TIMEOUT_S: Final = APPEND_DEADLINE_S + CALL_TIMEOUT_S + 10.0
"""How long a forwarded request waits for its answer: longer than the answering node
may itself take (a write rides out a stream election for up to
``APPEND_DEADLINE_S`` plus the call's slack; a recall waits at most
``retrieval.index_wait_s``, 30 s by default), so a slow answer is still relayed, and
bounded, so a lost one becomes UNAVAILABLE rather than a hang."""

KEEPALIVE_S: Final = 0.5
"""How often a node working on a forwarded request tells the forwarder so
(:func:`~brain.server.link_parts.working`), once the request has run this long."""

SILENCE_S: Final = 3.0
"""A forwarder that hears nothing of its request for this long (no answer, no
keepalive) takes the node that took it for gone (killed, or cut off) and answers
UNAVAILABLE with retry advice, instead of waiting out :data:`FORWARD_TIMEOUT_S`:
the client's retry, under the same request id, reaches the planner that takes over
(spec/05-durability.md §14.7). Six keepalives' worth, so that a loaded node's slow
event loop is not taken for a dead one."""

FORWARD_RETRY_MS: Final = 500
"""The retry advice of a forwarded request nobody answered: a takeover (a term plus a
second, spec/05-durability.md §14.3) is over in a few such waits, and a client that
obeys it asks twice a second at most."""

CONNECT_DEADLINE_S: Final = 10.0
"""How long starting tries to reach a NATS server of the list before the node refuses
to start: as the log's own connect deadline."""

CONNECT_TIMEOUT_S: Final = 5.0
"""Time to reach one server of the list; a live one answers in milliseconds."""

MAX_ANSWERING: Final = 1024
"""Forwarded requests one node answers at once; past it they are answered OVERLOADED.
Each is a task and its request, so this bounds what other nodes can make it hold."""

OVERLOADED_RETRY_MS: Final = 100
"""Retry advice of a forwarded request refused past :data:`MAX_ANSWERING` or
:data:`MAX_UPLOADS`."""

MAX_UPLOADS: Final = 8
"""Requests in parts (:mod:`brain.server.link_parts`) one node takes at once; past it
they are answered OVERLOADED. Each may hold up to ``MAX_LINK_BYTES`` (16 MiB) until it
runs, so this bounds what large requests make a node hold to about 128 MiB."""

UPLOAD_TIMEOUT_S: Final = CALL_TIMEOUT_S
"""How long a node waits for the parts of a request it took: the forwarder sends them
at once, so only a lost forwarder takes this long."""

Kind = Literal["request", "abort", "freeze", "thaw", "drop"]
"""What a forwarded message asks: run a request, abort a closed connection's
transactions, or a step of a namespace move on the source shard's planner
(:mod:`brain.server.namespace_move`)."""

KINDS: Final = ("request", "abort", "freeze", "thaw", "drop")


def plan_subject(shard: str) -> str:
    """The subject the planner of ``shard`` answers."""
    return f"brain.plan.{shard}"


def read_subject(shard: str) -> str:
    """The subject every node of ``shard`` answers (one of them per request)."""
    return f"brain.read.{shard}"


@dataclass(frozen=True, slots=True)
class Forwarded:
    """A request as the node that received it authenticated it.

    ``kind`` ``abort``: the connection ``owner`` closed on the forwarding node, so the
    planner aborts the transactions it opened (no opcode or payload then). ``freeze``,
    ``thaw``, ``drop``: a move's steps for ``namespace`` (the payload: CBOR
    ``{to_shard}`` for a freeze, an empty map otherwise)."""

    kind: Kind
    opcode: int
    payload: bytes
    namespace: str
    key_id: bytes
    permissions: tuple[str, ...]
    owner: bytes

    def encode(self) -> bytes:
        """The message's bytes (a CBOR map)."""
        return cbor.encode(
            {
                "kind": self.kind,
                "op": self.opcode,
                "payload": self.payload,
                "ns": self.namespace,
                "key": self.key_id,
                "perms": list(self.permissions),
                "owner": self.owner,
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> Forwarded:
        """Read a message :meth:`encode` made; ValueError for anything else."""
        try:
            row = cbor.decode(data)
        except BrainError as exc:
            raise ValueError(f"not a forwarded request: {exc}") from None
        if not isinstance(row, dict):
            row = {}  # every field is missing, which the check below reports
        kind, op, payload = row.get("kind"), row.get("op"), row.get("payload")
        namespace, key_id, perms, owner = (
            row.get("ns"),
            row.get("key"),
            row.get("perms"),
            row.get("owner"),
        )
        if (
            kind not in KINDS
            or not isinstance(op, int)
            or not isinstance(payload, bytes)
            or not isinstance(key_id, bytes)
            or not isinstance(namespace, str)
            or not isinstance(owner, bytes)
            or not isinstance(perms, list)
            or not all(isinstance(p, str) for p in perms)
        ):
            raise ValueError("not a forwarded request: a field is missing or of the wrong type")
        return cls(kind, op, payload, namespace, key_id, tuple(perms), owner)


Handler = Callable[[Forwarded], Awaitable[bytes]]
"""Answers a forwarded request with its response payload, or raises a BrainError."""


def _answer_ok(payload: bytes) -> bytes:
    return cbor.encode({"ok": payload})


def _answer_error(error: BrainError) -> bytes:
    return cbor.encode({"error": ErrorMessage.from_error(error).to_wire()})


def _read_answer(data: bytes) -> bytes:
    """The payload of an answer, or raise the error it carries (its wire code kept)."""
    row = cbor.decode(data)
    if isinstance(row, dict) and isinstance(row.get("ok"), bytes):
        payload = row["ok"]
        assert isinstance(payload, bytes)
        return payload
    if isinstance(row, dict) and "error" in row:
        error = ErrorMessage.from_wire(row["error"])
        raise error_from_wire(
            error.code,
            error.name,
            error.message,
            retryable=error.retryable,
            field=error.field,
            retry_after_ms=error.retry_after_ms,
        )
    raise Internal("a node answered a forwarded request with something unreadable")


class ClusterLink:
    """One node's connection for node-to-node requests. Build it with :meth:`connect`
    on the server's event loop; :meth:`close` on the same loop."""

    def __init__(self, client: Client, node: str, shard: str) -> None:
        """Private: use :meth:`ClusterLink.connect`."""
        self.node = node
        self.shard = shard
        self._client = client
        self._js = client.jetstream(timeout=API_ATTEMPT_S)
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._reads: Subscription | None = None
        self._plans: Subscription | None = None
        self._answering: set[asyncio.Task[None]] = set()
        self._uploads = 0
        # One subscription takes every answer and part sent to this node's inboxes
        # (subject ``<prefix>.<token>``), routed to the call waiting for that token:
        # no subscription is made and dropped per request.
        self._inbox_prefix = client.new_inbox()
        self._inboxes: dict[str, asyncio.Queue[Msg]] = {}
        self._inbox_subscription: Subscription | None = None

    @classmethod
    async def connect(cls, servers: tuple[str, ...], node: str, shard: str) -> ClusterLink:
        """Connect to the cluster's NATS servers; Unavailable when none answers within
        :data:`CONNECT_DEADLINE_S`."""

        async def on_error(error: Exception) -> None:
            log.warning("cluster link: %s", error)

        async def on_disconnected() -> None:
            log.warning("node %s lost its NATS server; reconnecting", node)

        async def on_reconnected() -> None:
            log.warning("node %s reconnected to NATS", node)

        try:
            client = await asyncio.wait_for(
                nats.connect(
                    servers=list(servers),
                    error_cb=on_error,
                    disconnected_cb=on_disconnected,
                    reconnected_cb=on_reconnected,
                    connect_timeout=int(CONNECT_TIMEOUT_S),
                    allow_reconnect=True,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=1,
                ),
                CONNECT_DEADLINE_S,
            )
        except (TimeoutError, OSError, nats.errors.Error) as exc:
            raise Unavailable(f"cannot reach the NATS servers {list(servers)}: {exc}") from exc
        link = cls(client, node, shard)
        try:
            link._inbox_subscription = await client.subscribe(
                f"{link._inbox_prefix}.*", cb=link._route
            )
        except nats.errors.Error as exc:
            await client.close()
            raise Unavailable(f"cannot subscribe on the NATS servers: {exc}") from exc
        return link

    async def _route(self, message: Msg) -> None:
        """Hand a message sent to one of this node's inboxes to the call waiting on it
        (one whose call is over is dropped)."""
        queue = self._inboxes.get(message.subject.rpartition(".")[2])
        if queue is not None:
            queue.put_nowait(message)

    @contextlib.contextmanager
    def _inbox(self) -> Iterator[tuple[str, asyncio.Queue[Msg]]]:
        """A fresh inbox of this node's and the queue its messages arrive on."""
        token = secrets.token_hex(8)
        queue: asyncio.Queue[Msg] = asyncio.Queue()
        self._inboxes[token] = queue
        try:
            yield f"{self._inbox_prefix}.{token}", queue
        finally:
            del self._inboxes[token]

    # --- a handle for the shard map and the key table (LogHandle) ------------------------

    @property
    def jetstream(self) -> JetStreamContext:
        """The connection's JetStream context."""
        return self._js

    def run(self, coro: Coroutine[object, object, _T], timeout: float) -> _T:
        """Run ``coro`` on the server's event loop from another thread; wait at most
        ``timeout`` seconds. Never from the loop itself (it would wait on itself)."""
        if threading.get_ident() == self._loop_thread:
            coro.close()
            raise RuntimeError("ClusterLink.run called on its own event loop")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout} s") from None

    @property
    def max_payload(self) -> int:
        """The largest message the servers take."""
        return int(self._client.max_payload)

    # --- answering --------------------------------------------------------------------

    async def serve_reads(self, handler: Handler) -> None:
        """Answer ``brain.read.<shard>`` from now on (one node of the shard per request)."""
        if self._reads is None:
            self._reads = await self._client.subscribe(
                read_subject(self.shard), queue=f"read.{self.shard}", cb=self._answerer(handler)
            )

    async def serve_plans(self, handler: Handler) -> None:
        """Answer ``brain.plan.<shard>``: this node plans the shard's writes now."""
        if self._plans is None:
            self._plans = await self._client.subscribe(
                plan_subject(self.shard), queue=f"plan.{self.shard}", cb=self._answerer(handler)
            )
            await self._client.flush(timeout=int(CALL_TIMEOUT_S))
            log.info("node %s answers the writes of shard %s", self.node, self.shard)

    async def stop_plans(self) -> None:
        """Stop answering ``brain.plan.<shard>``: this node no longer plans."""
        subscription, self._plans = self._plans, None
        if subscription is not None:
            await subscription.unsubscribe()
            log.info("node %s no longer answers the writes of shard %s", self.node, self.shard)

    @property
    def planning(self) -> bool:
        """Whether this node answers its shard's writes now."""
        return self._plans is not None

    def _answerer(self, handler: Handler) -> Callable[[Msg], Awaitable[None]]:
        async def received(message: Msg) -> None:
            # The client runs one callback at a time per subscription: each request
            # gets a task of its own, so a write waiting for its group commit does not
            # hold back the ones behind it (they commit together).
            if len(self._answering) >= MAX_ANSWERING:
                refused = Overloaded(
                    f"node {self.node} answers {MAX_ANSWERING} forwarded requests already",
                    retry_after_ms=OVERLOADED_RETRY_MS,
                )
                await self._reply(message, _answer_error(refused))
                return
            task = asyncio.ensure_future(self._answer(handler, message))
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)

        return received

    async def _answer(self, handler: Handler, message: Msg) -> None:
        try:
            offer = link_parts.read_upload(message.data)
            data = message.data if offer is None else await self._take_upload(message, *offer)
            if data is None:
                return
            forwarded = Forwarded.decode(data)
        except ValueError as exc:
            await self._reply(message, _answer_error(Internal(str(exc))))
            return
        keepalive = asyncio.ensure_future(self._keep_alive(message.reply))
        try:
            answer = _answer_ok(await handler(forwarded))
        except BrainError as exc:
            answer = _answer_error(exc)
        except Exception:
            log.exception("answering a forwarded request")
            answer = _answer_error(Internal(f"node {self.node} failed; see its log"))
        finally:
            # Stopped and awaited first, so no keepalive follows the answer.
            keepalive.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keepalive
        await self._reply(message, answer)

    async def _keep_alive(self, reply: str) -> None:
        """Tell the forwarder every :data:`KEEPALIVE_S` that its request still runs."""
        if not reply:
            return
        while True:
            await asyncio.sleep(KEEPALIVE_S)
            try:
                await self._client.publish(reply, link_parts.working())
            except nats.errors.Error as exc:
                log.debug("telling a forwarder its request still runs: %s", exc)
                return

    async def _take_upload(self, message: Msg, count: int, size: int) -> bytes | None:
        """The request whose parts the offer ``message`` announces: name an inbox to
        the forwarder and collect them there. None (the forwarder told why) when this
        node takes too many already or the parts do not come whole in time."""
        if not message.reply:
            return None
        if self._uploads >= MAX_UPLOADS:
            refused = Overloaded(
                f"node {self.node} takes {MAX_UPLOADS} requests in parts already",
                retry_after_ms=OVERLOADED_RETRY_MS,
            )
            await self._reply(message, _answer_error(refused))
            return None
        self._uploads += 1
        try:
            with self._inbox() as (inbox, queue):
                await self._reply(message, link_parts.send_to(inbox))
                received = await _collect(queue, count, size, UPLOAD_TIMEOUT_S)
        finally:
            self._uploads -= 1
        if received is None:
            failed = Unavailable(
                f"node {self.node} did not receive the request's {count} parts whole "
                f"within {UPLOAD_TIMEOUT_S:g} s",
                retry_after_ms=FORWARD_RETRY_MS,
            )
            await self._reply(message, _answer_error(failed))
        return received

    async def _reply(self, message: Msg, answer: bytes) -> None:
        """Send ``answer`` to the request's reply subject: in parts when it is larger
        than one message (:mod:`brain.server.link_parts`)."""
        if not message.reply:
            return
        if len(answer) > link_parts.MAX_LINK_BYTES:
            too_large = Internal(
                f"node {self.node}'s answer is {len(answer)} bytes, over the "
                f"{link_parts.MAX_LINK_BYTES} a forwarded answer may hold"
            )
            answer = _answer_error(too_large)
        try:
            if len(answer) <= link_parts.room(self.max_payload):
                await self._client.publish(message.reply, answer)
                return
            parts = link_parts.split(answer, self.max_payload)
            await self._client.publish(
                message.reply, link_parts.answer_parts(len(parts), len(answer))
            )
            for part in parts:
                await self._client.publish(message.reply, part)
        except nats.errors.Error as exc:
            log.warning("answering a forwarded request: %s", exc)

    # --- asking -----------------------------------------------------------------------

    async def forward(self, subject: str, forwarded: Forwarded, *, doing: str) -> bytes:
        """Send ``forwarded`` to ``subject`` and return the answer's payload, or raise
        the error the answering node gave (its wire code kept). Nobody answering, or no
        answer within :data:`FORWARD_TIMEOUT_S`, is UNAVAILABLE with retry advice;
        ``doing`` says to whom, for that message."""
        data = forwarded.encode()
        if len(data) > link_parts.MAX_LINK_BYTES:
            raise Unavailable(
                f"the request is {len(data)} bytes, over the {link_parts.MAX_LINK_BYTES} "
                f"a forwarded request may hold, so it cannot be forwarded to {doing}"
            )
        deadline = self._loop.time() + FORWARD_TIMEOUT_S
        try:
            with self._inbox() as (inbox, queue):
                if len(data) <= link_parts.room(self.max_payload):
                    await self._client.publish(subject, data, reply=inbox)
                else:
                    await self._upload(
                        subject, data, inbox=inbox, queue=queue, deadline=deadline, doing=doing
                    )
                first = await _next(queue, deadline, doing)
                announced = link_parts.read_answer_parts(first)
                if announced is None:
                    return _read_answer(first)
                whole = await _collect(queue, *announced, deadline - self._loop.time())
                if whole is None:
                    raise Unavailable(
                        f"{doing} did not send its answer's parts whole in time",
                        retry_after_ms=FORWARD_RETRY_MS,
                    )
                return _read_answer(whole)
        except ValueError as exc:  # parts announced out of bounds
            raise Internal(f"{doing} answered a forwarded request so: {exc}") from None
        except nats.errors.Error as exc:
            raise Unavailable(
                f"forwarding to {doing} failed: {exc}", retry_after_ms=FORWARD_RETRY_MS
            ) from exc

    async def _upload(
        self,
        subject: str,
        data: bytes,
        *,
        inbox: str,
        queue: asyncio.Queue[Msg],
        deadline: float,
        doing: str,
    ) -> None:
        """Send the request ``data`` in parts: offer it on ``subject``, then publish
        the parts to the inbox the node that took it names (or raise its refusal)."""
        parts = link_parts.split(data, self.max_payload)
        await self._client.publish(subject, link_parts.upload(len(parts), len(data)), reply=inbox)
        answer = await _next(queue, deadline, doing)
        target = link_parts.read_send_to(answer)
        if target is None:
            _read_answer(answer)  # the refusal it carries (OVERLOADED, say)
            raise Internal(f"{doing} answered an offer of a request in parts with an answer")
        for part in parts:
            await self._client.publish(target, part)

    async def tell(self, subject: str, forwarded: Forwarded) -> None:
        """Send ``forwarded`` without waiting for an answer (an abort of a closed
        connection's transactions: the planner's own expiry covers a lost one)."""
        try:
            await self._client.publish(subject, forwarded.encode())
        except nats.errors.Error as exc:
            log.warning("telling %s: %s", subject, exc)

    async def close(self) -> None:
        """Stop answering, finish the answers in flight, close the connection."""
        for subscription in (self._reads, self._plans, self._inbox_subscription):
            if subscription is not None:
                try:
                    await subscription.unsubscribe()
                except nats.errors.Error as exc:
                    log.debug("unsubscribing: %s", exc)
        self._reads = self._plans = self._inbox_subscription = None
        if self._answering:
            await asyncio.wait(set(self._answering), timeout=CALL_TIMEOUT_S)
        try:
            await asyncio.wait_for(self._client.close(), CALL_TIMEOUT_S)
        except (TimeoutError, nats.errors.Error) as exc:
            log.debug("closing the cluster link: %s", exc)


async def _next(queue: asyncio.Queue[Msg], deadline: float, doing: str) -> bytes:
    """The next message on the forwarder's inbox, by ``deadline`` (the loop's clock),
    keepalives skipped: UNAVAILABLE with retry advice when nobody answers the subject,
    nothing comes in time, or nothing at all for :data:`SILENCE_S`."""
    loop = asyncio.get_running_loop()
    while True:
        # A deadline already past still looks once, briefly, at what has come.
        remaining = max(deadline - loop.time(), 0.001)
        try:
            message = await asyncio.wait_for(queue.get(), min(remaining, SILENCE_S))
        except TimeoutError:
            if remaining > SILENCE_S:
                raise Unavailable(
                    f"{doing} went silent for {SILENCE_S:g} s with the request "
                    "(the node that took it stopped?); it may have run: retry it",
                    retry_after_ms=FORWARD_RETRY_MS,
                ) from None
            raise Unavailable(
                f"{doing} did not answer within {FORWARD_TIMEOUT_S:g} s",
                retry_after_ms=FORWARD_RETRY_MS,
            ) from None
        if not link_parts.is_working(message.data):
            break
    if message.headers and message.headers.get("Status") == NO_RESPONDERS_STATUS:
        raise Unavailable(
            f"nobody answers for {doing} just now (a takeover in progress?)",
            retry_after_ms=FORWARD_RETRY_MS,
        )
    return bytes(message.data)


async def _collect(
    queue: asyncio.Queue[Msg], count: int, size: int, timeout: float
) -> bytes | None:
    """``count`` parts of ``size`` bytes in all from ``queue`` within
    ``timeout`` seconds, joined; None when they do not come whole in time."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    parts: list[bytes] = []
    held = 0
    while len(parts) < count:
        remaining = deadline - loop.time()
        if remaining <= 0:
            return None
        try:
            message = await asyncio.wait_for(queue.get(), remaining)
        except TimeoutError:
            return None
        held += len(message.data)
        if held > size:
            return None
        parts.append(bytes(message.data))
    return b"".join(parts) if held == size else None
