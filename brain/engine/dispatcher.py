"""The opcodes of one open database, run: writes through the writer, reads in a snapshot.

:class:`Dispatcher` takes a validated request and runs it where its opcode
belongs (:mod:`brain.engine.dispatch` says which planner or reader serves it):
a write is planned on the writer thread (:mod:`brain.engine.planner` wraps it
with idempotency and the change log); a read runs on the caller's thread in a
read-only LMDB transaction; the transaction opcodes keep their open
transactions in a :class:`~brain.engine.write.transactions.TxnRegistry`.
A point read (:data:`~brain.engine.dispatch.POINT_READS`) can also be run by
a caller that must never wait (:meth:`Dispatcher.read_point`).

It lives beside :mod:`brain.engine.dispatch` rather than in it because the
planner reads that module's tables, and the dispatcher calls the planner.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Final

import lmdb

from brain import cbor
from brain.engine.dispatch import POINT_READS, READS, WRITES, ReadHandler
from brain.engine.index.service import Retrieval
from brain.engine.planner import answer_key, plan_buffered, plan_commit, plan_single, read_in_txn
from brain.engine.store.env import Store
from brain.engine.store.scope import Scope
from brain.engine.write import budget
from brain.engine.write.activity import Activity
from brain.engine.write.change_log import LoggedChange, read_changes
from brain.engine.write.reads import ReadContext
from brain.engine.write.transactions import TxnRegistry
from brain.engine.write.tuning import Resolution
from brain.engine.write.writer import Outcome, PlanContext, Writer
from brain.errors import BrainError, InvalidArgument, Unavailable
from brain.wire.messages.txn_ops import TxnAbort, TxnAborted, TxnBegin, TxnBegun, TxnCommit
from brain.wire.opcodes import Opcode
from brain.wire.registry import response_class
from brain.wire.schema import Message, built_answers

__all__ = ["Dispatcher"]

log = logging.getLogger("brain.engine")

_TXN_OPCODES: Final = frozenset({Opcode.TXN_BEGIN, Opcode.TXN_COMMIT, Opcode.TXN_ABORT})

_NOT_IN_TXN: Final = (
    "cannot run inside a transaction: it searches the lexical and vector indexes, "
    "which are derived from a write when it commits, so the transaction's buffered "
    "writes are in neither and its answer would leave them out; send it without "
    "txn_id after TXN_COMMIT"
)
"""Why RECALL and EXPLAIN refuse ``txn_id`` (spec/05-durability.md §8)."""

_OUTSIDE_TXN: Final = frozenset({Opcode.RECALL, Opcode.EXPLAIN})
"""Reads whose message has ``txn_id`` only to refuse it with :data:`_NOT_IN_TXN`."""

Listener = Callable[[object], None]
"""Called on the writer thread with the plans of each batch it committed."""


class Dispatcher:
    """Runs the requests of one open database."""

    def __init__(
        self,
        store: Store,
        writer: Writer,
        retrieval: Retrieval,
        *,
        txns: TxnRegistry,
        resolution: Resolution,
        listeners: list[Listener],
        activity: Activity,
    ) -> None:
        """``listeners`` is the list the writer's ``on_applied`` hook calls in turn;
        :meth:`on_applied` adds to it. Every request touches its namespace in
        ``activity``, which the writer paces by (spec/05-durability.md §1)."""
        self._activity = activity
        self._store = store
        self._writer = writer
        self._retrieval = retrieval
        self._txns = txns
        self._resolution = resolution
        self._listeners = listeners

    @staticmethod
    def handles(opcode: Opcode) -> bool:
        """True when this build implements ``opcode``."""
        return opcode in WRITES or opcode in READS or opcode in _TXN_OPCODES

    @staticmethod
    def is_write(opcode: Opcode) -> bool:
        """True for opcodes that go through the writer."""
        return opcode in WRITES or opcode is Opcode.TXN_COMMIT

    @staticmethod
    def is_point_read(opcode: Opcode, request: Message) -> bool:
        """True for a point read (:data:`~brain.engine.dispatch.POINT_READS`) outside
        a transaction: one :meth:`read_point` may run. A read inside a transaction
        waits for the writer, which replays the transaction's writes first."""
        return opcode in POINT_READS and getattr(request, "txn_id", None) is None

    def submit(
        self,
        namespace: str,
        opcode: Opcode,
        request: Message,
        *,
        owner: bytes = b"",
        actor: bytes = b"",
    ) -> Future[bytes]:
        """Queue a write; the future gives the encoded answer payload or raises a BrainError.

        ``owner`` names the connection, which owns the transactions it opens;
        ``actor`` is the key id the audit log records.
        """
        self._activity.touch(namespace)

        def submit(plan: Callable[[PlanContext], Outcome]) -> Future[bytes]:
            # Every planner sees who asked, for the audit log; the namespace names the
            # writer's lane, which keeps its jobs in order and takes turns with others.
            return self._writer.submit(
                lambda ctx: plan(dataclasses.replace(ctx, actor=actor)), namespace
            )

        # Before anything is queued: a refused write leaves no trace to retry around.
        self._retrieval.pressure.check(namespace, opcode, answer_key(namespace, opcode, request))
        if opcode is Opcode.TXN_COMMIT:
            assert isinstance(request, TxnCommit)
            return submit(lambda ctx: plan_commit(ctx, self._txns, namespace, request))
        if opcode not in WRITES:
            raise Unavailable(f"{opcode.name} is not available in this build")
        budget.check_write(opcode, request, budget=budget.WRITE_BUDGET)
        txn_id: bytes | None = getattr(request, "txn_id", None)
        if txn_id is not None:
            return submit(
                lambda ctx: plan_buffered(
                    ctx, self._txns, namespace, txn_id=txn_id, opcode=opcode, request=request
                )
            )
        return submit(lambda ctx: plan_single(ctx, namespace, opcode, request))

    def read(self, namespace: str, opcode: Opcode, request: Message, owner: bytes = b"") -> Message:
        """Run a read in a consistent snapshot (TXN_BEGIN and TXN_ABORT come here too)."""
        # A reader has no job in the writer, but it waits for the interpreter lock
        # the writer's planning holds: while it is active, no other namespace may
        # take more than its share of the writer.
        self._activity.touch(namespace)
        if opcode is Opcode.TXN_BEGIN:
            assert isinstance(request, TxnBegin)
            return TxnBegun(txn_id=self._txns.begin(namespace, owner, request.timeout_ms))
        if opcode is Opcode.TXN_ABORT:
            assert isinstance(request, TxnAbort)
            self._txns.take(request.txn_id, namespace)
            return TxnAborted()
        handler = READS.get(opcode)
        if handler is None:
            raise Unavailable(f"{opcode.name} is not available in this build")
        txn_id: bytes | None = getattr(request, "txn_id", None)
        if txn_id is not None and opcode in _OUTSIDE_TXN:
            raise InvalidArgument(f"{opcode.name} {_NOT_IN_TXN}", field="txn_id")
        if txn_id is not None:
            # Through the writer: the buffered writes are replayed in a nested
            # transaction of its batch, so the read sees them (and nothing leaks).
            future = self._writer.submit(
                lambda ctx: read_in_txn(
                    ctx, self._txns, namespace, txn_id=txn_id, opcode=opcode, request=request
                ),
                namespace,
            )
            return response_class(opcode).from_wire(cbor.decode(future.result()))
        space: str | None = getattr(request, "space", None)
        scope = Scope.of(namespace, space)
        if opcode in (Opcode.RECALL, Opcode.EXPLAIN):
            # A recall sees every write of its scope acknowledged before it: wait for
            # their vectors, not for other scopes' (spec/04-retrieval.md §3).
            retrieval = self._retrieval
            started = time.monotonic()
            indexed = retrieval.indexer.wait_for_scope(scope.prefix, retrieval.index_wait_s)
            waited_ms = int((time.monotonic() - started) * 1000)
            if not indexed and not self._writer.read_only:
                # Read-only, the indexer cannot write: the coverage says what is missing.
                log.warning("a recall in space %r ran before its writes were indexed", scope.space)
        else:
            waited_ms = 0
        try:
            return self._read_snapshot(handler, scope, request, waited_ms or None)
        except BrainError as exc:
            raise _bare(exc) from None

    def read_point(self, namespace: str, opcode: Opcode, request: Message) -> Message | None:
        """Run a point read (:meth:`is_point_read`) on the calling thread without ever
        waiting for the store: None, having done nothing, when the store is held for
        a map resize or a compaction; then :meth:`read` on a thread that may wait."""
        self._activity.touch(namespace)
        handler = READS[opcode]
        scope = Scope.of(namespace, getattr(request, "space", None))
        try:
            return self._read_snapshot_nowait(handler, scope, request)
        except BrainError as exc:
            raise _bare(exc) from None

    # The transaction is a local of these two and not of their callers: the frames
    # a refusal's traceback keeps from here on hold no transaction (see _bare).

    def _read_snapshot(
        self,
        handler: ReadHandler,
        scope: Scope,
        request: Message,
        index_wait_ms: int | None = None,
    ) -> Message:
        with self._store.read() as txn:
            return self._answer(handler, txn, scope, request, index_wait_ms)

    def _read_snapshot_nowait(
        self, handler: ReadHandler, scope: Scope, request: Message
    ) -> Message | None:
        with self._store.try_read() as txn:
            if txn is None:
                return None
            return self._answer(handler, txn, scope, request)

    def _answer(
        self,
        handler: ReadHandler,
        txn: lmdb.Transaction,
        scope: Scope,
        request: Message,
        index_wait_ms: int | None = None,
    ) -> Message:
        now = self._writer.clock.now()
        context = ReadContext(
            self._store, txn, now, self._resolution, self._retrieval, index_wait_ms
        )
        # The answer is made of stored rows, each checked when it was written: it is
        # converted into messages, not validated again (brain.wire.schema).
        with built_answers():
            return handler(context, scope, request)

    def execute(
        self,
        namespace: str,
        opcode: Opcode,
        request: Message,
        *,
        owner: bytes = b"",
        actor: bytes = b"",
    ) -> Message:
        """Run any operation and wait for its answer."""
        if self.is_write(opcode):
            payload = self.submit(namespace, opcode, request, owner=owner, actor=actor).result()
            return response_class(opcode).from_wire(cbor.decode(payload))
        return self.read(namespace, opcode, request, owner)

    def abort_owner(self, owner: bytes) -> int:
        """Abort every transaction ``owner`` (a connection) left open."""
        return self._txns.abort_owner(owner)

    def on_applied(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` (on the writer thread; it must not block) after every batch
        the writer commits; return the function that stops it."""
        self._listeners.append(listener)

        def stop() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return stop

    def changes(
        self, namespace: str, space: str | None, after: bytes, limit: int
    ) -> list[tuple[bytes, LoggedChange]]:
        """Change-log entries of a scope after position ``after`` (``b""``: from the
        start), in log order, each with its position (``spec/06-operations.md``)."""
        with self._store.read() as txn:
            return read_changes(self._store, txn, Scope.of(namespace, space), after, limit)


def _bare(exc: BrainError) -> BrainError:
    """``exc`` without its traceback or context. The traceback of a refused read holds
    its frames, and through them its LMDB transaction, whose reader slot is freed only
    when that object dies. The answers of a burst of refusals (NOT_FOUND for unknown
    ids) wait for the event loop, up to one per open stream, and would hold as many
    slots (MDB_READERS_FULL). The caller needs the error, not where it arose."""
    exc.__context__ = None
    return exc.with_traceback(None)
