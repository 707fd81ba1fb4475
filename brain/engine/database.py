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

import logging
import os
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

import lmdb

from brain.engine import idempotency
from brain.engine.clock import RecordClock
from brain.engine.memories import plan_encode, read_memory_get
from brain.engine.plan import Change, Plan, apply_changes, decode_plan
from brain.engine.scope import Scope
from brain.engine.store.env import DEFAULT_MAP_SIZE, Store
from brain.engine.store.meta import check_format, get_progress, put_progress
from brain.engine.wal import DEFAULT_SEGMENT_BYTES, WalRecord, WriteAheadLog
from brain.engine.writer import MAX_GROW_ATTEMPTS, PlanContext, Replay, Writer
from brain.errors import StorageFault, Unavailable
from brain.wire import cbor
from brain.wire.opcodes import Opcode
from brain.wire.registry import response_class
from brain.wire.schema import Message

__all__ = ["Database", "DatabaseOptions", "open_database"]

log = logging.getLogger("brain.engine")

RECOVERY_BATCH: Final = 1000
"""WAL records applied per LMDB transaction during recovery."""


class _WriteRequest(Protocol):
    request_id: bytes
    space: str | None


# Each planner takes (context, scope, request) and each reader (store, txn, scope,
# request) for its own request class; the registry maps opcodes to them, so the
# request parameter is loose here.
WritePlanner = Callable[..., tuple[list[Change], Message]]
ReadHandler = Callable[..., Message]

_WRITES: Final[dict[Opcode, WritePlanner]] = {
    Opcode.ENCODE: plan_encode,
}
_READS: Final[dict[Opcode, ReadHandler]] = {
    Opcode.MEMORY_GET: read_memory_get,
}


@dataclass(frozen=True, slots=True)
class DatabaseOptions:
    """Tuning and test hooks for :meth:`Database.open`."""

    wal_segment_bytes: int = DEFAULT_SEGMENT_BYTES
    map_size: int = DEFAULT_MAP_SIZE
    fsync: Callable[[int], None] = os.fdatasync
    idempotency_retention_ns: int = idempotency.DEFAULT_RETENTION_NS


class Database:
    """One open data directory."""

    def __init__(self, path: Path, wal: WriteAheadLog, store: Store, writer: Writer) -> None:
        """Private: use :meth:`open` (or :func:`brain.open`)."""
        self.path = path
        self._wal = wal
        self._store = store
        self._writer = writer
        self._closed = False

    @classmethod
    def open(cls, path: Path | str, options: DatabaseOptions | None = None) -> Database:
        """Open (creating if needed) and recover the database in directory ``path``."""
        opts = options or DatabaseOptions()
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
            writer = Writer(store, wal, clock, applied_lsn=applied)
            writer.start()
        except BaseException:
            store.close()
            wal.close()
            raise
        return cls(root, wal, store, writer)

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

    @staticmethod
    def handles(opcode: Opcode) -> bool:
        """True when this build implements ``opcode``."""
        return opcode in _WRITES or opcode in _READS

    @staticmethod
    def is_write(opcode: Opcode) -> bool:
        """True for opcodes that go through the writer."""
        return opcode in _WRITES

    # --- operations ------------------------------------------------------------------------

    def submit(self, namespace: str, opcode: Opcode, request: Message) -> Future[bytes]:
        """Queue a write; the future gives the encoded answer payload or raises a BrainError."""
        planner = _WRITES.get(opcode)
        if planner is None:
            raise Unavailable(f"{opcode.name} is not available in this build")
        self._check_open()
        write: _WriteRequest = request  # type: ignore[assignment]  # every write has both
        scope = Scope.of(namespace, write.space)
        digest = idempotency.request_digest(opcode, request)

        def plan(ctx: PlanContext) -> Plan | Replay:
            stored = idempotency.lookup(ctx.store, ctx.txn, scope, write.request_id, digest)
            if stored is not None:
                return Replay(stored)
            changes, answer = planner(ctx, scope, request)
            payload = cbor.encode(answer.to_wire())
            changes = changes + idempotency.row_changes(
                scope, write.request_id, digest, payload, ctx.record_time
            )
            return Plan(tuple(changes), (payload,))

        return self._writer.submit(plan)

    def read(self, namespace: str, opcode: Opcode, request: Message) -> Message:
        """Run a read in a consistent snapshot."""
        handler = _READS.get(opcode)
        if handler is None:
            raise Unavailable(f"{opcode.name} is not available in this build")
        self._check_open()
        space: str | None = getattr(request, "space", None)
        scope = Scope.of(namespace, space)
        with self._store.read() as txn:
            return handler(self._store, txn, scope, request)

    def execute(self, namespace: str, opcode: Opcode, request: Message) -> Message:
        """Run any operation and wait for its answer (the embedded API)."""
        if self.is_write(opcode):
            payload = self.submit(namespace, opcode, request).result()
            return response_class(opcode).from_wire(cbor.decode(payload))
        return self.read(namespace, opcode, request)

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
