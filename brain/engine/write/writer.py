"""The one writer: a thread that plans, logs, syncs and applies writes in batches.

Every write of the database goes through :meth:`Writer.submit`, which names
the namespace it is for. The thread draws a batch from what is queued and,
inside one LMDB write transaction, plans each job against the current state
(which includes the jobs before it in the batch), applies its changes, and
collects its WAL record. Then it appends the batch's records, makes them
durable with one fsync (group commit), records ``applied_lsn`` and commits
LMDB once. Only then are the jobs answered: an answer means the write is in
the WAL on disk.

Fairness between tenants (spec/05-durability.md §1): the jobs wait in one lane
per namespace (:mod:`brain.engine.write.lanes`) and a batch draws them
round-robin, so every namespace with a job waiting has one planned before any
has a second. A batch holds at most :data:`MAX_BATCH` jobs, and once its
planning has run :data:`MAX_BATCH_PLAN_S` while more than one namespace is in
it or waiting, it takes no more: a quiet namespace's job is planned in the
batch being drawn when it arrives or in the next, never behind hundreds of a
busy one's. Within a namespace, jobs are planned in the order submitted.

Round-robin shares the writer between the namespaces with writes waiting, but
planning holds the interpreter lock, which a tenant that only reads needs too.
So while another namespace is active, a namespace that planned more than half
the writer's recent time is held back (:mod:`brain.engine.write.pacing`): its
jobs are passed over, and when only held lanes have work the writer waits
between batches, never inside one's write transaction, with the lock released.

Failure rules (spec/05-durability.md §6): a failed WAL fsync aborts the LMDB
transaction, fails the batch with ``UNAVAILABLE`` and turns the writer
read-only until a restart; it never retries the fsync. ``MDB_MAP_FULL`` grows
the map and replans the batch, which is safe because nothing was logged yet.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Final

import lmdb

from brain.engine.extract import DEFAULT_EXTRACTORS, Extractor
from brain.engine.store.env import Store
from brain.engine.store.meta import put_progress
from brain.engine.wal import RecordLog, WalRecord, WalSyncFailed
from brain.engine.wal.parts import split_record
from brain.engine.write.activity import Activity
from brain.engine.write.clock import RecordClock
from brain.engine.write.frozen import frozen_namespaces, refusal, touches_freezes
from brain.engine.write.lanes import Lane, Lanes
from brain.engine.write.pacing import Pacing
from brain.engine.write.plan import PLAN_RECORD_KIND, Change, Plan, apply_changes, encode_plan
from brain.engine.write.transactions import IdSource
from brain.engine.write.tuning import DEFAULT_RESOLUTION, Resolution
from brain.errors import BrainError, Internal, StorageFault, Unavailable

__all__ = [
    "MAX_BATCH",
    "MAX_BATCH_PLAN_S",
    "Failed",
    "Outcome",
    "PlanContext",
    "Replay",
    "Writer",
    "staged",
]

log = logging.getLogger("brain.engine")

MAX_BATCH: Final = 512
"""Jobs per group commit: large enough to amortise an fsync over many clients,
small enough that one batch's LMDB transaction stays short."""

MAX_BATCH_PLAN_S: Final = 0.001
"""Planning time after which a batch that more than one namespace shares (in it or
waiting) takes no more jobs. Every namespace's writes wait for the whole batch
they are in to be planned and synced, so this bounds what a busy tenant adds to
a quiet one's latency: about the planning of one ordinary write, so that a quiet
write waits for little more than the fsyncs of the batch in hand and its own (0.1 s
let a busy tenant's batch multiply a quiet one's ENCODE latency twenty-five times;
5 ms still tripled it under a flood of ENCODEs). A batch of one namespace alone is
not cut: nobody waits on it, and its group commit still takes up to
:data:`MAX_BATCH` jobs per fsync."""

MAX_GROW_ATTEMPTS: Final = 8
"""Map doublings tried for one batch before giving up with UNAVAILABLE."""

CHECKPOINT_INTERVAL_S: Final = 30.0
"""At most this long between checkpoints while writes arrive."""

CHECKPOINT_RECORDS: Final = 50_000
"""Also checkpoint after this many records, bounding WAL replay after a crash."""

CHECKPOINT_GROWTH_BYTES: Final = 32 * 2**20
"""Also checkpoint once the data file has grown this much since the last one. Pages
freed after a checkpoint cannot be reused until the next (its pin holds them), so
without this bound a fast writer would grow the file by everything it rewrote in
:data:`CHECKPOINT_INTERVAL_S`: hundreds of MiB at a thousand writes per second. A
checkpoint then costs one data-file sync of at most this much and three small fsyncs."""

GROWTH_CHECK_S: Final = 0.05
"""How often the writer asks LMDB how far the data file has grown: at a thousand
writes a second that is 20 times a second, each asking costing the writer a wait
for the interpreter lock, and the file grows by a few MiB between two askings."""


@dataclass(frozen=True, slots=True)
class PlanContext:
    """What a planning function may use: the write transaction, its stamps, an id source.

    Planners take new record ids from ``ids`` rather than minting them, so that
    planning the same write again (a transaction's commit) names the same records.
    """

    store: Store
    txn: lmdb.Transaction
    lsn: int
    record_time: int
    ids: IdSource = field(default_factory=IdSource)
    actor: bytes = b""
    """The key id of whoever sent the write (for the audit log)."""
    resolution: Resolution = DEFAULT_RESOLUTION
    """How names resolve (the operator's ``[entities]`` settings)."""
    extractors: tuple[Extractor, ...] = DEFAULT_EXTRACTORS
    """What ENCODE runs on a new memory's text (spec/02-data-model.md §3.1)."""
    planning: int = 0
    """Which planning of a batch this is: numbered afresh each time a batch is planned
    (again after the map grew too), so a planner that keeps state for its batch until
    the batch is final (a transaction's buffered writes) tells its own from that of
    a planning that was thrown away."""


@contextlib.contextmanager
def staged(ctx: PlanContext, changes: Sequence[Change]) -> Iterator[PlanContext]:
    """A planning context that sees ``changes`` as if applied, for a planner that must
    plan a second step on top of its first (the same new name at both ends of a
    relation, several merges in one decision). The changes go into a nested
    transaction that is thrown away on exit; the planner still returns them all."""
    child = ctx.store.env.begin(write=True, parent=ctx.txn)
    try:
        apply_changes(ctx.store, child, changes)
        yield replace(ctx, txn=child)
    finally:
        child.abort()


@dataclass(frozen=True, slots=True)
class Replay:
    """A planning result that needs no write: the stored answer of a repeated request.

    ``after`` (like :attr:`Plan.after`) runs once the batch is final.
    """

    answer: bytes
    after: Callable[[], None] | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    """A planning result that refuses the write, with a side effect to run once final."""

    error: BrainError
    after: Callable[[], None] | None = None


Outcome = Plan | Replay | Failed
PlanFn = Callable[[PlanContext], Outcome]


@dataclass(slots=True)
class _Job:
    plan: PlanFn
    future: Future[bytes]
    lane: Lane
    past_freeze: bool = False
    """A move's copy, which fills a namespace frozen here until its cut-over."""


@dataclass(slots=True)
class _Maintenance:
    """Work for the writer thread between batches (a checkpoint, a purge)."""

    run: Callable[[], object]
    future: Future[object]


_STOP: Final = object()

_Planning = tuple[
    list[bytes | BrainError], list[WalRecord], list[tuple[int, Plan]], list[Callable[[], None]]
]
"""A batch planned: each job's answer or error, the WAL records, the plans by LSN,
and the side effects to run once the batch is final."""


class Writer:
    """Owns the log (the local WAL or a replicated one) and every LMDB write transaction."""

    def __init__(
        self,
        store: Store,
        wal: RecordLog,
        clock: RecordClock,
        *,
        applied_lsn: int,
        on_applied: Callable[[list[tuple[int, Plan]]], None] | None = None,
        on_checkpoint: Callable[[], None] | None = None,
        on_idle: Callable[[], None] | None = None,
        resolution: Resolution = DEFAULT_RESOLUTION,
        extractors: tuple[Extractor, ...] = DEFAULT_EXTRACTORS,
        activity: Activity | None = None,
    ) -> None:
        """``on_checkpoint`` runs on the writer thread at each checkpoint (housekeeping
        such as the idempotency sweep), when no write transaction is open.
        ``activity`` is the record of active namespaces the writer paces by (its
        requests touch it); None: a record of its own, which only the writer's
        users can touch (:attr:`activity`)."""
        self._pacing = Pacing(Activity() if activity is None else activity)
        self._watch_pause: Callable[[], None] | None = None
        self._on_checkpoint = on_checkpoint
        self._on_idle = on_idle
        self._resolution = resolution
        self._extractors = extractors
        self._store = store
        self._wal = wal
        self._clock = clock
        self._on_applied = on_applied
        # Submissions arrive here from any thread; the writer thread moves them into
        # its lanes (jobs) and its maintenance list as it draws batches.
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._lanes: Lanes[_Job] = Lanes()
        self._maintenance: list[_Maintenance] = []
        self._stopping = False
        self._plannings = 0
        self._thread = threading.Thread(target=self._loop, name="brain-writer", daemon=True)
        self.applied_lsn = applied_lsn
        self.durable_lsn = applied_lsn
        self.fault_reason: str | None = None
        """Why the writer turned read-only after a storage fault (until a restart)."""
        self.standby_reason: str | None = None
        """Why this node plans no write although its storage is sound: it follows
        another planner of a replicated log, or lost its planner lease
        (spec/05-durability.md §14.3). Set and cleared by the replication code."""
        self.on_log_failed: Callable[[str], None] | None = None
        """Set by a node of a replicated log: a failed append (fenced by another
        writer, or unacknowledged) makes the writer stand by instead of turning
        read-only, and this is told why (on the writer thread; it must not block).
        The node then follows the shard again (spec/05-durability.md §14.3)."""
        self.on_checkpoint: Callable[[], None] | None = None
        """Set by a node of a replicated log: run on the writer thread after each
        checkpoint the writer makes while it plans (a stream's trim is weighed then,
        spec/05-durability.md §14.10); it may take a while, as a checkpoint does."""
        self.batches = 0
        self.batched_jobs = 0
        self.last_batch_size = 0
        # batch_sizes[n]: committed batches of n writes (a list: safe to copy while
        # the writer thread counts, for metrics).
        self.batch_sizes = [0] * (MAX_BATCH + 1)
        self.records_appended = 0
        self.storage_faults = 0
        self.pauses = 0
        """Times the writer waited because every lane with work was over its share."""
        self.paced_seconds = 0.0
        """Seconds the writer spent in those waits."""
        self._last_checkpoint = time.monotonic()
        self._records_since_checkpoint = 0
        self._growth_checked = 0.0
        self._fault_before_commit: Callable[[], None] | None = None
        # Held by snapshots while they copy WAL segments, so none is deleted under them.
        self._checkpoint_lock = threading.Lock()

    @property
    def clock(self) -> RecordClock:
        """The record clock writes are stamped with."""
        return self._clock

    @property
    def activity(self) -> Activity:
        """The record of active namespaces the writer paces by: every request of a
        namespace, read or write, touches it."""
        return self._pacing.activity

    @property
    def read_only_reason(self) -> str | None:
        """Why writes are refused (a storage fault, or this node is not the planner),
        or None while they are accepted."""
        return self.fault_reason or self.standby_reason

    @property
    def read_only(self) -> bool:
        """True after a storage fault (writes answer UNAVAILABLE until a restart), or
        while this node is not its replicated log's planner."""
        return self.fault_reason is not None or self.standby_reason is not None

    def start(self) -> None:
        """Start the writer thread."""
        self._thread.start()

    def submit(
        self, plan: PlanFn, namespace: str | None = None, *, past_freeze: bool = False
    ) -> Future[bytes]:
        """Queue a write of ``namespace`` (None: the engine's own work); the future
        resolves to its answer payload or a BrainError. Jobs of one namespace are
        planned in the order submitted. ``past_freeze``: the plan may put keys of a
        frozen namespace (a move's copy into this shard)."""
        future: Future[bytes] = Future()
        if self.read_only:
            future.set_exception(self._read_only_error())
        else:
            self._queue.put(_Job(plan, future, namespace, past_freeze))
        return future

    def request_checkpoint(self) -> Future[object]:
        """Ask the writer thread to checkpoint between batches (and run
        :attr:`on_checkpoint` after it, as the writer's own checkpoints do)."""
        return self.between_batches(self._checkpoint_and_after)

    def between_batches(self, work: Callable[[], object]) -> Future[object]:
        """Run ``work`` on the writer thread between two batches (no write transaction
        open, no write interleaving), after the batch drawn when it arrives; the
        future holds its result or exception."""
        future: Future[object] = Future()
        self._queue.put(_Maintenance(work, future))
        return future

    def force_checkpoint(self) -> None:
        """On the writer thread: start a new WAL segment and checkpoint, so that every
        record logged so far leaves the log (a purge)."""
        with self._checkpoint_lock:
            self._wal.rotate()
            self._checkpoint_locked()

    def stop(self) -> None:
        """Finish the writes queued before it, checkpoint, and stop the thread (later
        ones answer UNAVAILABLE)."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()

    def inject_fault_before_commit(self, hook: Callable[[], None] | None) -> None:
        """Test hook: run ``hook`` after the WAL fsync and before the LMDB commit."""
        self._fault_before_commit = hook

    def watch_pauses(self, hook: Callable[[], None] | None) -> None:
        """Test hook: run ``hook`` on the writer thread as each pacing pause begins."""
        self._watch_pause = hook

    # --- the thread ---------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            if not self._lanes and not self._maintenance:
                if self._stopping:
                    break
                try:
                    # Wake up now and then even when idle, so checkpoints and sweeps still run.
                    item = self._queue.get(timeout=CHECKPOINT_INTERVAL_S)
                except queue.Empty:
                    self._maybe_checkpoint()
                    self._idle()
                    continue
                self._accept(item)
                continue
            pause = 0.0 if self._maintenance else self._pause_due()
            if pause > 0.0:
                self._pause(pause)
                continue
            self._serve()
            self._maybe_checkpoint()
            self._idle()
        self._drain_after_stop()
        if not self.read_only:
            self.checkpoint()

    def _accept(self, item: object) -> None:
        """Take one submission into the lanes or the maintenance list; a stop ends
        the intake (what was submitted before it is still served)."""
        if item is _STOP:
            self._stopping = True
        elif isinstance(item, _Job):
            self._lanes.add(item.lane, item)
        elif isinstance(item, _Maintenance):
            self._maintenance.append(item)

    def _held(self, lane: Lane) -> bool:
        """True when ``lane``'s jobs wait: it is over its share of the writer while
        another namespace is active. Never while stopping (what was queued is
        served at once) or read-only (it is answered at once)."""
        if self._stopping or self.read_only:
            return False
        return self._pacing.held(lane, self._pacing.now())

    def _pause_due(self) -> float:
        """How long to wait before the next batch: 0 unless every lane with work is
        held (:meth:`Pacing.pause <brain.engine.write.pacing.Pacing.pause>`)."""
        if self._stopping or self.read_only or not self._lanes:
            return 0.0
        return self._pacing.pause(self._lanes.waiting(), self._pacing.now())

    def _pause(self, seconds: float) -> None:
        """Wait up to ``seconds`` between batches, no write transaction open and the
        interpreter lock free; a submission (a job of another lane, a stop) ends
        the wait at once."""
        started = time.monotonic()
        if self._watch_pause is not None:
            self._watch_pause()
        try:
            item = self._queue.get(timeout=seconds)
        except queue.Empty:
            pass
        else:
            self._accept(item)
        self.pauses += 1
        self.paced_seconds += time.monotonic() - started

    def _pull(self) -> None:
        """Take in everything submitted so far, up to a stop."""
        while not self._stopping:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            self._accept(item)

    def _draw(self, jobs: list[_Job]) -> Generator[_Job, None, None]:
        """The batch's jobs, round-robin across the lanes, each appended to ``jobs``
        as it is handed out; it ends at :data:`MAX_BATCH` jobs, when no job waits but
        held lanes' (:meth:`_held`), or once planning has run
        :data:`MAX_BATCH_PLAN_S` in a batch lanes share or while another namespace
        is active (:meth:`_others_active`). Lazy, so that what
        arrives while the batch is planned can still join it; the time from
        handing a job out to the next draw is its planning, which the pacing
        counts to its lane."""
        started = time.monotonic()
        served: set[Lane] = set()
        pacing = self._pacing
        while len(jobs) < MAX_BATCH:
            self._pull()
            if (
                jobs
                and time.monotonic() - started >= MAX_BATCH_PLAN_S
                and (self._lanes.shared(served) or self._others_active(served))
            ):
                return
            picked = self._lanes.take(self._held)
            if picked is None:
                return
            lane, job = picked
            if not job.future.set_running_or_notify_cancel():
                # Its caller gave up (a connection closed) before it was planned:
                # nothing was acknowledged, so it is dropped. Once running, its
                # future cannot be cancelled, so answering the batch cannot fail.
                continue
            served.add(lane)
            jobs.append(job)
            handed = pacing.now()
            yield job
            done = pacing.now()
            pacing.spent(lane, done - handed, done)

    def _others_active(self, served: set[Lane]) -> bool:
        """Whether a namespace other than the batch's is active (it sent a request in
        the last moments): its next write may come while this batch is planned, and
        then waits for the whole of it, so the batch is cut as if it were shared."""
        activity = self._pacing.activity
        return any(lane is not None and activity.others_active(lane) for lane in served)

    def _serve(self) -> None:
        """One batch of writes as one group commit, then the maintenance work taken
        in by the end of its draw, run with no write transaction open."""
        jobs: list[_Job] = []
        self._pull()
        try:
            if self._lanes and self._pause_due() == 0.0:
                self._run(jobs)
        except Exception:  # a bug: fail the batch, keep serving
            log.exception("writer batch failed")
            for job in jobs:
                if not job.future.done():
                    job.future.set_exception(Internal("the writer failed; see the server log"))
        maintenance, self._maintenance = self._maintenance, []
        for item in maintenance:
            try:
                item.future.set_result(item.run())
            except Exception as exc:
                item.future.set_exception(exc)

    def _idle(self) -> None:
        """Run the idle hook (periodic maintenance) when nothing is queued."""
        if self._on_idle is None or self.read_only:
            return
        try:
            self._on_idle()
        except Exception:
            log.exception("idle maintenance failed")

    def _drain_after_stop(self) -> None:
        waiting: list[_Job | _Maintenance] = [*self._lanes.drain(), *self._maintenance]
        self._maintenance = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, _Job | _Maintenance):
                waiting.append(item)
        for item in waiting:
            item.future.set_exception(Unavailable("the database is closing"))

    def _read_only_error(self) -> Unavailable:
        if self.fault_reason is None and self.standby_reason is not None:
            return Unavailable(f"this node takes no writes: {self.standby_reason}")
        return Unavailable(f"the server is read-only after a storage fault: {self.fault_reason}")

    def _fail_all(self, jobs: list[_Job], error: BrainError) -> None:
        for job in jobs:
            if not job.future.done():
                job.future.set_exception(error)

    def _run(self, jobs: list[_Job]) -> None:
        """Draw a batch into ``jobs``, plan, log, sync, apply and answer it."""
        if self.read_only:
            jobs += self._lanes.drain()
            self._fail_all(jobs, self._read_only_error())
            return
        planned = self._plan_batch(jobs)
        if planned is None:
            return
        txn, (results, records, plans, afters) = planned
        if not records:
            txn.abort()
            self._finish(jobs, results, afters)
            return
        try:
            self._wal.append(records)
            self._wal.sync()
        except WalSyncFailed as exc:
            txn.abort()
            if self.on_log_failed is not None:
                # Nothing is wrong with this node's storage: another writer appended,
                # or the stream did not answer in time (the records may be stored; the
                # node reads them back as it follows).
                self.standby_reason = f"its last append failed ({exc}); it follows again"
                self.on_log_failed(str(exc))
            else:
                self._enter_read_only(f"WAL write failed: {exc}")
            self._fail_all(jobs, self._read_only_error())
            return
        self.records_appended += len(records)
        last = records[-1]
        try:
            if self._fault_before_commit is not None:
                self._fault_before_commit()
            self._commit(txn, plans, last)
        except lmdb.Error as exc:
            # The batch is durable in the WAL; a restart replays it. Until then, no writes.
            self._enter_read_only(f"LMDB commit failed after the WAL sync: {exc}")
            self._fail_all(jobs, self._read_only_error())
            return
        self.applied_lsn = last.lsn
        self.batches += 1
        self.batched_jobs += len(jobs)
        self.last_batch_size = len(jobs)
        self.batch_sizes[len(jobs)] += 1
        self._records_since_checkpoint += len(records)
        if self._on_applied is not None:
            try:
                self._on_applied(plans)
            except Exception:
                log.exception("updating derived indexes failed")
        self._finish(jobs, results, afters)

    def _plan_batch(self, jobs: list[_Job]) -> tuple[lmdb.Transaction, _Planning] | None:
        """Draw the batch into ``jobs`` and plan it in a new write transaction; None
        when the map could not grow enough for it (its jobs are then answered)."""
        draw = self._draw(jobs)
        # Planning is free of side effects (they wait in ``after``), so after
        # MDB_MAP_FULL the whole batch can be planned again on a bigger map: the
        # jobs drawn so far, the batch from then on.
        for attempt in range(MAX_GROW_ATTEMPTS):
            txn = self._store.write()
            try:
                return txn, self._plan(txn, draw if attempt == 0 else list(jobs))
            except lmdb.MapFullError:
                draw.close()
                txn.abort()
                try:
                    self._store.grow()
                except Unavailable as exc:
                    self._fail_all(jobs, exc)
                    return None
            except BaseException:
                txn.abort()
                raise
        self._fail_all(jobs, Unavailable("the store's map could not grow enough for a batch"))
        return None

    def _commit(
        self, txn: lmdb.Transaction, plans: list[tuple[int, Plan]], last: WalRecord
    ) -> None:
        """Record progress and commit; on MDB_MAP_FULL, grow and apply the batch again."""
        try:
            put_progress(self._store, txn, last.lsn, last.record_time)
            txn.commit()
            return
        except lmdb.MapFullError:
            txn.abort()
        for _ in range(MAX_GROW_ATTEMPTS):
            self._store.grow()
            retry = self._store.write()
            try:
                for _, plan in plans:
                    apply_changes(self._store, retry, plan.changes)
                put_progress(self._store, retry, last.lsn, last.record_time)
                retry.commit()
                return
            except lmdb.MapFullError:
                retry.abort()
        raise lmdb.MapFullError("the map could not grow enough for a logged batch")

    def _plan(self, txn: lmdb.Transaction, jobs: Iterable[_Job]) -> _Planning:
        """Plan ``jobs`` in order in ``txn``, applying each plan so the next sees it."""
        results: list[bytes | BrainError] = []
        records: list[WalRecord] = []
        plans: list[tuple[int, Plan]] = []
        afters: list[Callable[[], None]] = []
        next_lsn = self._wal.next_lsn
        limit = self._wal.max_record_payload
        self._plannings += 1
        # A namespace moving to another shard takes no new keys (spec/05 §14.9).
        frozen = frozen_namespaces(self._store, txn)
        for job in jobs:
            record_time = self._clock.tick()
            context = PlanContext(
                self._store,
                txn,
                next_lsn,
                record_time,
                resolution=self._resolution,
                extractors=self._extractors,
                planning=self._plannings,
            )
            try:
                outcome = job.plan(context)
            except BrainError as exc:
                results.append(exc)
                continue
            if isinstance(outcome, Plan) and frozen and not job.past_freeze:
                refused = refusal(outcome.changes, frozen)
                if refused is not None:
                    results.append(refused)
                    continue
            if outcome.after is not None:
                afters.append(outcome.after)
            if isinstance(outcome, Failed):
                results.append(outcome.error)
                continue
            if isinstance(outcome, Replay):
                results.append(outcome.answer)
                continue
            apply_changes(self._store, txn, outcome.changes)
            if touches_freezes(outcome.changes):
                frozen = frozen_namespaces(self._store, txn)
            # A plan larger than one record of the log is logged as its parts; its LSN
            # (which its rows and answer carry) is its first part's.
            logged = split_record(
                next_lsn, record_time, PLAN_RECORD_KIND, encode_plan(outcome), limit
            )
            records += logged
            plans.append((next_lsn, outcome))
            results.append(outcome.answers[-1] if outcome.answers else b"")
            next_lsn += len(logged)
        return results, records, plans, afters

    @staticmethod
    def _finish(
        jobs: list[_Job], results: list[bytes | BrainError], afters: list[Callable[[], None]]
    ) -> None:
        """The batch is final: run the deferred side effects, then answer."""
        for after in afters:
            after()
        for job, result in zip(jobs, results, strict=True):
            if isinstance(result, BrainError):
                job.future.set_exception(result)
            else:
                job.future.set_result(result)

    def _enter_read_only(self, reason: str) -> None:
        log.error("turning read-only: %s", reason)
        self.fault_reason = reason
        self.storage_faults += 1

    # --- checkpoints ----------------------------------------------------------------------

    def _maybe_checkpoint(self) -> None:
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            return  # only the writer thread checkpoints while it runs
        now = time.monotonic()
        due = (
            self._records_since_checkpoint >= CHECKPOINT_RECORDS
            or now - self._last_checkpoint >= CHECKPOINT_INTERVAL_S
            or self._growth_due(now)
        )
        if due and not self.read_only:
            self._checkpoint_and_after()

    def _checkpoint_and_after(self) -> None:
        self.checkpoint()
        if self.on_checkpoint is not None and not self.read_only:
            self.on_checkpoint()

    def _growth_due(self, now: float) -> bool:
        """Whether the data file grew :data:`CHECKPOINT_GROWTH_BYTES` since the last
        checkpoint, asked at most every :data:`GROWTH_CHECK_S`: asking LMDB lets go of
        the interpreter lock, which the writer then waits to take back."""
        if now - self._growth_checked < GROWTH_CHECK_S:
            return False
        self._growth_checked = now
        return self._store.growth() >= CHECKPOINT_GROWTH_BYTES

    def checkpoint(self) -> None:
        """Make LMDB durable up to ``applied_lsn``, then drop WAL segments it covers.

        Runs on the writer thread (or after it stopped), so no write interleaves.
        Skipped while a snapshot holds checkpoints off; the next trigger retries.
        """
        if not self._checkpoint_lock.acquire(blocking=False):
            return
        try:
            self._checkpoint_locked()
        except WalSyncFailed as exc:
            self._enter_read_only(f"WAL checkpoint failed: {exc}")
        except StorageFault as exc:
            # A segment that cannot be deleted now is retried at the next checkpoint.
            log.warning("checkpoint incomplete: %s", exc)
        finally:
            self._checkpoint_lock.release()

    @contextlib.contextmanager
    def checkpoints_held(self) -> Iterator[None]:
        """Hold checkpoints off (no WAL segment is deleted) for the duration."""
        with self._checkpoint_lock:
            yield

    def _checkpoint_locked(self) -> None:
        # Housekeeping writes LMDB outside the log, so it runs first: the checkpoint
        # below then makes it durable, where after it a reopen would not see it.
        if self._on_checkpoint is not None:
            try:
                self._on_checkpoint()
            except lmdb.Error:
                log.exception("housekeeping at checkpoint failed")
        try:
            self._store.checkpoint()
        except (lmdb.Error, StorageFault) as exc:
            # Which checkpoint the disk holds is not known: both stay pinned, and a
            # restart returns to whichever it finds.
            self._enter_read_only(f"LMDB checkpoint failed: {exc}")
            return
        self.durable_lsn = self.applied_lsn
        self._wal.checkpoint(self.durable_lsn)
        self._last_checkpoint = time.monotonic()
        self._records_since_checkpoint = 0
