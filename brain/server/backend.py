"""What the server serves: the boundary between the wire shell and the database.

The shell hands every decoded, authorised data request to a :class:`Backend`
and sends back whatever message it returns or error it raises.
:class:`EngineBackend` serves an open :class:`~brain.engine.database.Database`:
writes go to its writer thread, and reads run in a thread pool, except point
reads (a record by id: a few key lookups), which the event loop answers itself
(:meth:`Backend.execute_inline`; spec/06-operations.md §11): the hop to
a thread and back cost more than the read. A write answers with the exact bytes
the engine stored (:class:`RawAnswer`), so a retried request gets its first
answer byte for byte.
:class:`UnbuiltBackend` refuses everything; it serves tests of the shell alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from brain import cbor
from brain.engine.store.scope import Scope
from brain.engine.write.frozen import FROZEN_RETRY_MS
from brain.errors import InvalidArgument, PermissionDenied, Unavailable
from brain.server.completions import Completions
from brain.server.fanout import ChangeFanout
from brain.server.min_lsn import LsnWaits
from brain.wire.messages.subscribe_ops import RECORD_KINDS, ChangeEvent, Subscribe
from brain.wire.opcodes import Opcode, Permission, required_permission
from brain.wire.registry import request_class
from brain.wire.schema import Message
from brain.wire.session import Principal

if TYPE_CHECKING:
    from brain.engine.database import Database
    from brain.server.cluster_link import Forwarded
    from brain.server.forwarding import Forwarding

__all__ = ["Backend", "BackendStatus", "EngineBackend", "RawAnswer", "UnbuiltBackend"]

READ_THREADS: Final = 8
"""Threads for read transactions: LMDB reads scale across threads, and a few
more than the cores keep the pool busy while some wait on page faults."""

RECALL_THREADS: Final = 4
"""Threads for RECALL and EXPLAIN, apart from the other reads: a recall costs
milliseconds of Python, a MEMORY_GET microseconds, and in one queue the cheap
reads would wait behind every recall ahead of them."""

_RECALLS: Final = frozenset({Opcode.RECALL, Opcode.EXPLAIN})

CHANGE_BATCH: Final = 1024
"""Change-log entries a subscription reads at a time: a replay from LSN 1 streams in
steps this size, and nothing more is held for a subscriber than one step."""


@dataclass(frozen=True, slots=True)
class RawAnswer:
    """An answer payload already encoded (a write's stored answer)."""

    payload: bytes


@dataclass(frozen=True, slots=True)
class BackendStatus:
    """Readiness as ``/readyz`` reports it."""

    ready: bool
    applied_lsn: int
    reason: str | None = None


class Backend(Protocol):
    """The operations the server exposes over the wire."""

    async def execute(
        self, principal: Principal, opcode: Opcode, request: Message
    ) -> Message | RawAnswer:
        """Run one data request for ``principal``; raise a BrainError to refuse it."""
        ...

    def answers_inline(self, opcode: Opcode, request: Message) -> bool:
        """True when :meth:`execute_inline` may answer the request: its work is
        bounded, and small enough to be done on the event loop."""
        ...

    def execute_inline(
        self, principal: Principal, opcode: Opcode, request: Message
    ) -> Message | None:
        """Answer a request :meth:`answers_inline` accepted, here and now, never
        blocking; None, having done nothing, when that cannot be done now (then
        :meth:`execute`). Raise a BrainError to refuse it."""
        ...

    def status(self) -> BackendStatus:
        """Whether the backend can take writes now, and how far it has applied."""
        ...

    def connection_closed(self, principal: Principal) -> None:
        """The connection of ``principal`` closed: drop what it owned."""
        ...

    def subscribe(
        self, principal: Principal, request: Subscribe
    ) -> AsyncGenerator[tuple[int, list[ChangeEvent]], None]:
        """The changes of the request's scope, one LSN at a time ``(lsn, events)``:
        replayed from ``from_lsn`` (absent: from now), then live, without end."""
        ...

    async def close(self) -> None:
        """Finish in-flight work and release resources."""
        ...


class EngineBackend:
    """Serves an open database; in a cluster, with :attr:`forwarding`, it sends what
    another node must answer to that node (:mod:`brain.server.forwarding`)."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.forwarding: Forwarding | None = None
        """Set once the node's cluster link and shard map are up (``brain serve
        --cluster``); None on a single node."""
        self._telling: set[asyncio.Task[None]] = set()
        self._readers = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="brain-read")
        self._recallers = ThreadPoolExecutor(RECALL_THREADS, thread_name_prefix="brain-recall")
        # One listener for every subscription: each commit costs the event loop at
        # most one callback, and none when no subscription follows what it wrote.
        self.fanout = ChangeFanout()
        self._stop_listening = database.on_applied(self.fanout.applied)
        self.lsn_waits = LsnWaits(database)
        """Reads waiting for their ``min_lsn`` (:mod:`.min_lsn`)."""
        self._completions: Completions | None = None
        """Made on the first write, for the loop that serves the backend."""

    async def execute(
        self, principal: Principal, opcode: Opcode, request: Message
    ) -> Message | RawAnswer:
        """Writes through the writer thread; reads on the read pool. In a cluster, a
        request another node must answer is forwarded there and its answer relayed."""
        db = self.database
        if not db.handles(opcode):
            raise Unavailable(f"{opcode.name} is not available in this build")
        forwarding = self.forwarding
        if forwarding is not None:
            is_write = db.is_write(opcode)
            route = forwarding.route(principal.namespace, opcode, request, is_write)
            if route is not None:
                subject, doing = route
                return RawAnswer(
                    await forwarding.forward(subject, doing, principal, opcode, request)
                )
            forwarding.check_here(principal.namespace, is_write)
        return await self._execute_here(principal, opcode, request)

    async def _execute_here(
        self, principal: Principal, opcode: Opcode, request: Message
    ) -> Message | RawAnswer:
        db = self.database
        if db.is_write(opcode):
            future = db.submit(
                principal.namespace,
                opcode,
                request,
                owner=principal.session_id,
                actor=principal.key_id,
            )
            return RawAnswer(await self._completions_of(asyncio.get_running_loop()).wait(future))
        await self.lsn_waits.reach(principal, request)
        loop = asyncio.get_running_loop()
        pool = self._recallers if opcode in _RECALLS else self._readers
        return await loop.run_in_executor(
            pool, db.read, principal.namespace, opcode, request, principal.session_id
        )

    def _completions_of(self, loop: asyncio.AbstractEventLoop) -> Completions:
        completions = self._completions
        if completions is None or completions.loop is not loop:
            completions = self._completions = Completions(loop)
        return completions

    def answers_inline(self, opcode: Opcode, request: Message) -> bool:
        """Point reads outside a transaction (:meth:`Database.is_point_read
        <brain.engine.database.Database.is_point_read>`)."""
        return self.database.is_point_read(opcode, request)

    def execute_inline(
        self, principal: Principal, opcode: Opcode, request: Message
    ) -> Message | None:
        """The point read, in a snapshot taken without waiting; None while the store
        is held for a map resize or a compaction, until its ``min_lsn`` is applied, or
        when another node must answer it (then :meth:`execute` forwards it)."""
        forwarding = self.forwarding
        if forwarding is not None and forwarding.route(principal.namespace, opcode, request, False):
            return None
        if not self.lsn_waits.met(request):
            return None
        return self.database.read_point(principal.namespace, opcode, request)

    def connection_closed(self, principal: Principal) -> None:
        """Abort the transactions the connection left open, here and on the planners
        it forwarded transactions to."""
        self.database.abort_owner(principal.session_id)
        forwarding = self.forwarding
        if forwarding is not None:
            task = asyncio.get_running_loop().create_task(forwarding.connection_closed(principal))
            self._telling.add(task)
            task.add_done_callback(self._telling.discard)

    def planning(self) -> bool:
        """Whether this node plans its shard's writes now: it holds the planner lease
        and its writer takes writes."""
        lease = self.database.lease
        return lease is not None and lease.held and self.database.read_only_reason is None

    async def answer_forwarded(self, forwarded: Forwarded) -> bytes:
        """Answer a request another node forwarded (:mod:`brain.server.cluster_link`):
        checked again as that node checked it, run here, never forwarded again."""
        if forwarded.kind == "abort":
            self.database.abort_owner(forwarded.owner)
            return b""
        if forwarded.kind != "request":
            return await self._move_step(forwarded)
        try:
            opcode = Opcode(forwarded.opcode)
            permissions = frozenset(Permission(p) for p in forwarded.permissions)
        except ValueError:
            raise InvalidArgument(f"forwarded opcode {forwarded.opcode:#06x} is unknown") from None
        request = request_class(opcode).from_wire(
            cbor.decode(forwarded.payload) if forwarded.payload else {}
        )
        needed = required_permission(opcode)
        if needed is not None and needed not in permissions:
            raise PermissionDenied(f"{opcode.name} needs the {needed.value} permission")
        principal = Principal(forwarded.namespace, forwarded.key_id, permissions, forwarded.owner)
        db = self.database
        if not db.handles(opcode):
            raise Unavailable(f"{opcode.name} is not available in this build")
        forwarding = self.forwarding
        if forwarding is not None:
            # Here, not at the top: a single node never loads the NATS client.
            from brain.server.cluster_link import FORWARD_RETRY_MS
            from brain.server.forwarding import binds_to_planner

            is_write = db.is_write(opcode)
            if binds_to_planner(opcode, request, is_write) and not self.planning():
                raise Unavailable(
                    f"node {forwarding.link.node} no longer plans the writes of shard "
                    f"{forwarding.shard}",
                    retry_after_ms=FORWARD_RETRY_MS,
                )
            forwarding.check_here(principal.namespace, is_write)
        answer = await self._execute_here(principal, opcode, request)
        if isinstance(answer, RawAnswer):
            return answer.payload
        return cbor.encode(answer.to_wire())

    async def _move_step(self, forwarded: Forwarded) -> bytes:
        """A step of a namespace's move off this shard, asked by the target's planner
        (:mod:`brain.server.namespace_move`): run only by this shard's planner."""
        forwarding = self.forwarding
        if forwarding is None or not self.planning():
            raise Unavailable(
                "a move's steps run on the source shard's planner",
                retry_after_ms=FROZEN_RETRY_MS,
            )
        db, namespace = self.database, forwarded.namespace
        body = cbor.decode(forwarded.payload) if forwarded.payload else {}
        if forwarded.kind == "freeze":
            to_shard = body.get("to_shard") if isinstance(body, dict) else None
            if not isinstance(to_shard, str):
                raise InvalidArgument("a freeze names the shard it moves to")
            lsn = await asyncio.to_thread(db.freeze_namespace, namespace, to_shard)
            return cbor.encode({"lsn": lsn})
        if forwarded.kind == "thaw":
            return cbor.encode({"lsn": await asyncio.to_thread(db.thaw_namespace, namespace)})
        # "drop": the move cut over, so the map routes the namespace elsewhere: its rows
        # go, then the freeze, which held its writes until the last delete.
        deleted = await asyncio.to_thread(db.drop_namespace, namespace)
        await asyncio.to_thread(db.thaw_namespace, namespace)
        return cbor.encode({"deleted": deleted})

    async def subscribe(
        self, principal: Principal, request: Subscribe
    ) -> AsyncGenerator[tuple[int, list[ChangeEvent]], None]:
        """Read the change log of the scope in steps, waking up after each commit that
        wrote to it; OVERLOADED past the key's subscription limit (:mod:`.fanout`). In a
        cluster it is served here, from this node's store, never forwarded: a namespace
        the shard map puts on another shard is refused UNAVAILABLE naming that shard."""
        db = self.database
        if self.forwarding is not None:
            self.forwarding.check_subscribe(principal.namespace)
        loop = asyncio.get_running_loop()
        watch = self.fanout.add(
            Scope.of(principal.namespace, request.space).prefix, principal.key_id
        )
        woken = watch.event
        first = db.applied_lsn + 1 if request.from_lsn is None else request.from_lsn
        after = first.to_bytes(8, "big")  # sorts before every entry of LSN ``first``
        kinds = set(request.records or RECORD_KINDS)
        try:
            while True:
                woken.clear()
                batch = await loop.run_in_executor(
                    self._readers,
                    db.changes,
                    principal.namespace,
                    request.space,
                    after,
                    CHANGE_BATCH,
                )
                if not batch:
                    await woken.wait()
                    continue
                if len(batch) == CHANGE_BATCH and batch[0][1].lsn != batch[-1][1].lsn:
                    # The step may have cut the last LSN short: read it whole next time.
                    last = batch[-1][1].lsn
                    batch = [item for item in batch if item[1].lsn != last]
                groups: dict[int, list[ChangeEvent]] = {}
                for tail, change in batch:
                    after = tail
                    events = groups.setdefault(change.lsn, [])
                    if change.record in kinds:
                        events.append(
                            ChangeEvent(
                                lsn=change.lsn,
                                op=change.op,
                                record=change.record,
                                id=change.id,
                                recorded_at=change.recorded_at,
                            )
                        )
                for lsn, events in groups.items():
                    yield lsn, events
        finally:
            self.fanout.remove(watch)

    def status(self) -> BackendStatus:
        """Ready unless the database is read-only (a storage fault, a lost planner
        lease); a follower, which refuses writes but serves reads of the log it
        follows, is ready."""
        reason = self.database.read_only_reason
        if reason is not None and self.database.replication_status().role != "follower":
            return BackendStatus(False, self.database.applied_lsn, f"read-only: {reason}")
        return BackendStatus(True, self.database.applied_lsn)

    async def close(self) -> None:
        """Stop the read pool, then close the database (checkpointing it)."""
        self._stop_listening()
        self.lsn_waits.close()
        self._readers.shutdown(wait=True)
        self._recallers.shutdown(wait=True)
        await asyncio.to_thread(self.database.close)


class UnbuiltBackend:
    """The backend of a build without a database engine: every data request is refused."""

    async def execute(
        self, principal: Principal, opcode: Opcode, request: Message
    ) -> Message | RawAnswer:
        """Refuse with UNAVAILABLE; the request was already fully validated."""
        raise Unavailable(f"{opcode.name} is not available in this build")

    def answers_inline(self, opcode: Opcode, request: Message) -> bool:
        """Nothing is answered inline: every request is refused by :meth:`execute`."""
        return False

    def execute_inline(
        self, principal: Principal, opcode: Opcode, request: Message
    ) -> Message | None:
        """Never called (:meth:`answers_inline` accepts nothing); refuses as execute."""
        raise Unavailable(f"{opcode.name} is not available in this build")

    def status(self) -> BackendStatus:
        """Always ready: there is no recovery to wait for."""
        return BackendStatus(ready=True, applied_lsn=0)

    def connection_closed(self, principal: Principal) -> None:
        """Nothing is owned by connections here."""

    async def subscribe(
        self, principal: Principal, request: Subscribe
    ) -> AsyncGenerator[tuple[int, list[ChangeEvent]], None]:
        """Refuse with UNAVAILABLE, as every data request."""
        raise Unavailable("SUBSCRIBE is not available in this build")
        yield  # pragma: no cover - makes this an async generator

    async def close(self) -> None:
        """Nothing to release."""
