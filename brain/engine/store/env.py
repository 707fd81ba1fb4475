"""The LMDB environment of one data directory: named tables, checkpoints, map growth.

Sync settings (the power-loss argument is in ``spec/05-durability.md`` §5): the
environment is opened with ``sync=False``. A commit makes its changes visible
and writes its pages, but flushes nothing: the WAL's fsync is what makes a write
durable. LMDB is made durable by checkpoints (:meth:`Store.checkpoint`): a forced
sync, after which the synced state's pages are pinned by a read transaction held
until the next checkpoint and its meta pages are saved beside the data file
(:mod:`brain.engine.store.checkpoint`). Opening a store returns it to that state
when it moved on since (:func:`~brain.engine.store.checkpoint.restore_checkpoint`),
whatever a power loss left of the commits after it, and recovery replays those
from the WAL. WAL segments are deleted only after a checkpoint covers their last LSN.

Readers and the writer share a reader/writer gate so that the map can be
grown (which LMDB allows only while no transaction is open in this process)
when a write hits ``MDB_MAP_FULL``.

Before LMDB maps a data file, :func:`check_data_file` reads its two meta pages
with plain file reads (:mod:`brain.engine.store.datafile`). The key store opens
its own environment through it too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import lmdb

from brain.engine.store.checkpoint import (
    checkpointed_txnid,
    forget_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)
from brain.engine.store.datafile import (
    DATA_FILE,
    DEFAULT_REMEDY,
    DataFileMeta,
    check_data_file,
    data_file_problem,
    read_data_file_meta,
)
from brain.engine.store.rebuild import copy_rebuilt
from brain.engine.store.tables import TABLES
from brain.errors import Unavailable

log = logging.getLogger("brain.engine")

__all__ = [
    "DATA_FILE",
    "DEFAULT_MAP_SIZE",
    "DEFAULT_REMEDY",
    "MAX_MAP_SIZE",
    "STORE_FILE_MODE",
    "TABLES",
    "DataFileMeta",
    "Store",
    "check_data_file",
    "data_file_problem",
    "read_data_file_meta",
]

DEFAULT_MAP_SIZE: Final = 1 << 30
"""Initial map: 1 GiB of address space; LMDB's file grows only as pages are used."""

MAX_MAP_SIZE: Final = 1 << 40
"""Growth stops at 1 TiB of address space; past it writes answer UNAVAILABLE."""

STORE_FILE_MODE: Final = 0o600
"""Mode of the files LMDB creates (``data.mdb``, ``lock.mdb``): they hold every
tenant's records, so only the server's user may read them."""

MAX_READERS: Final = 256
"""Concurrent read transactions: the reader thread pool plus headroom."""


class _Gate:
    """Many readers or one map resize at a time."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._resizing = False

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def try_shared(self) -> Iterator[bool]:
        """Enter as a reader only if that needs no wait (no resize in or waiting, the
        lock free at once); yields whether it entered."""
        if not self._cond.acquire(blocking=False):
            yield False
            return
        try:
            entered = not self._resizing
            if entered:
                self._readers += 1
        finally:
            self._cond.release()
        if not entered:
            yield False
            return
        try:
            yield True
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._resizing = True
            while self._readers:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._resizing = False
                self._cond.notify_all()


class Store:
    """The LMDB environment and its named tables.

    Opening it refuses a damaged data file with a
    :class:`~brain.errors.StorageFault` (:func:`check_data_file`) whose message
    ends with ``remedy``: the caller says what the operator can do.
    """

    def __init__(
        self,
        path: Path,
        *,
        map_size: int = DEFAULT_MAP_SIZE,
        remedy: str = DEFAULT_REMEDY,
        fsync: Callable[[int], None] = os.fsync,
    ) -> None:
        """``fsync`` syncs the checkpoint file and its directory (LMDB syncs its own
        data file); tests that do not measure durability pass a cheaper one."""
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.tables: dict[bytes, lmdb._Database] = {}
        self._remedy = remedy
        self._fsync = fsync
        self._pin: lmdb.Transaction | None = None
        self._held: list[lmdb.Transaction] = []
        self._checkpointed: int | None = None
        """The transaction the checkpoint on disk describes (None: no checkpoint)."""
        self.restored = False
        """Whether opening returned the data file to its last checkpoint (the server
        had stopped without one): recovery then replays the WAL from there."""
        self.checkpoints = 0
        """Checkpoints taken since the store was opened."""
        self._pages_at_checkpoint = 0
        """The data file's page count at the last checkpoint (see :meth:`growth`)."""
        self._page_size = 4096
        """LMDB's page size, read at open (the writer asks for it after every batch)."""
        self._gate = _Gate()
        self.env = self._open(map_size)

    def _open(self, map_size: int) -> lmdb.Environment:
        if restore_checkpoint(self.path, self._remedy, self._fsync):
            self.restored = True
            log.info("the store in %s was returned to its last checkpoint", self.path)
        self._checkpointed = checkpointed_txnid(self.path)
        check_data_file(self.path, remedy=self._remedy)
        env = lmdb.open(
            str(self.path),
            map_size=map_size,
            max_dbs=len(TABLES) + 4,
            max_readers=MAX_READERS,
            # Commits are not flushed: the WAL makes writes durable, checkpoints LMDB.
            sync=False,
            metasync=False,
            readahead=False,
            subdir=True,
            mode=STORE_FILE_MODE,
        )
        try:
            self._page_size = int(env.stat()["psize"])
            with env.begin(write=True) as txn:
                for name in TABLES:
                    self.tables[name] = env.open_db(name, txn=txn)
            self._checkpoint(env)
        except BaseException:
            env.close()
            raise
        return env

    def table(self, name: bytes) -> lmdb._Database:
        """The handle of a named table."""
        return self.tables[name]

    @contextlib.contextmanager
    def read(self) -> Iterator[lmdb.Transaction]:
        """A read-only transaction (a consistent snapshot of the store)."""
        with self._gate.shared(), self.env.begin(buffers=False) as txn:
            yield txn

    @contextlib.contextmanager
    def try_read(self) -> Iterator[lmdb.Transaction | None]:
        """Like :meth:`read`, for a caller that must never block (the event loop):
        None instead of waiting while the map is resized or the file compacted."""
        with self._gate.try_shared() as entered:
            if not entered:
                yield None
                return
            with self.env.begin(buffers=False) as txn:
                yield txn

    def write(self) -> lmdb.Transaction:
        """Begin the write transaction; only the writer thread calls this."""
        return self.env.begin(write=True)

    def grow(self) -> None:
        """Double the map after ``MDB_MAP_FULL``; Unavailable when it cannot grow.

        Called with no write transaction open. Resizing ends every transaction of
        the environment, the checkpoint's pin among them, so it is followed by a
        checkpoint: nothing was committed in between, so the old checkpoint's pages
        were still whole until the new one replaced it."""
        current = int(self.env.info()["map_size"])
        if current >= MAX_MAP_SIZE:
            raise Unavailable(
                f"the store is full: its map reached {MAX_MAP_SIZE} bytes; "
                "free disk space or raise the limit, then restart"
            )
        with self._gate.exclusive():
            self.env.set_mapsize(min(current * 2, MAX_MAP_SIZE))
            self._pin, self._held = None, []
            self._checkpoint(self.env)

    def compact(self) -> tuple[int, int]:
        """Rewrite the data file from its live rows only, so that pages freed by
        earlier writes (a forgotten text's old versions among them) and keys of
        deleted rows left in branch pages leave the disk.

        Runs with every reader held off; the caller (the writer thread, between
        batches) has no write open. The compacted copy is synced, then renamed over
        the data file, which is atomic: a crash leaves the old file or the new one,
        each complete. Returns the file's size before and after."""
        data = self.path / DATA_FILE
        with self._gate.exclusive():
            # The old file is made whole before its checkpoint goes: until the rename,
            # a restart opens it without one, as it is.
            self.env.sync(True)
            forget_checkpoint(self.path, self._fsync)
            self._checkpointed = None
            staging = self.path.with_name(self.path.name + ".compacting")
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir()
            before = data.stat().st_size
            with self.env.begin(buffers=False) as txn:
                # Rebuilt from the rows, not LMDB's page copy: its branch pages keep
                # keys of deleted rows (a forgotten word's term hash among them).
                copy_rebuilt(self.env, staging, txn, mode=STORE_FILE_MODE)
            fresh = staging / DATA_FILE
            with fresh.open("rb+") as fh:
                os.fsync(fh.fileno())
            map_size = int(self.env.info()["map_size"])
            self._release_all()
            self.env.close()
            os.replace(fresh, data)
            directory = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
            shutil.rmtree(staging, ignore_errors=True)
            self.env = self._open(map_size)
            return before, data.stat().st_size

    def checkpoint(self) -> None:
        """Force everything committed so far onto the disk and make it the state a
        restart returns to (:mod:`brain.engine.store.checkpoint`). Called with no
        write transaction open (the writer thread, between batches)."""
        self._checkpoint(self.env)

    def _checkpoint(self, env: lmdb.Environment) -> None:
        # No commit can come between the sync and the pin: the caller has no write open.
        pin = env.begin(buffers=False)
        if pin.id() == self._checkpointed:
            # Nothing was committed since the checkpoint on disk: it stands as it is.
            if self._pin is None:
                self._pin = pin
                self._pages_at_checkpoint = int(env.info()["last_pgno"])
            else:
                pin.abort()
            return
        try:
            env.sync(True)
        except BaseException:
            pin.abort()
            raise
        try:
            save_checkpoint(self.path, pin.id(), self._fsync)
        except BaseException:
            # The new checkpoint may have reached the disk or not: its pages stay
            # pinned beside the old one's until the store is closed.
            self._held.append(pin)
            raise
        self._checkpointed = pin.id()
        self._release_pin()
        self._pin = pin
        self.checkpoints += 1
        self._pages_at_checkpoint = int(env.info()["last_pgno"])

    def _release_pin(self) -> None:
        pin, self._pin = self._pin, None
        if pin is not None:
            with contextlib.suppress(lmdb.Error):  # already ended by a resize
                pin.abort()

    def _release_all(self) -> None:
        self._release_pin()
        held, self._held = self._held, []
        for pin in held:
            with contextlib.suppress(lmdb.Error):
                pin.abort()

    def growth(self) -> int:
        """Bytes the data file has grown into since the last checkpoint.

        The checkpoint's pin keeps every page freed after it from being reused, so
        between checkpoints each commit's copied pages extend the file: the writer
        checkpoints when this passes a bound, which bounds that growth."""
        pages = int(self.env.info()["last_pgno"]) - self._pages_at_checkpoint
        return max(0, pages) * self._page_size

    def live_bytes(self) -> int:
        """Bytes of the pages every table's rows fill now (no free page, no page a
        checkpoint's pin keeps): about what a copy of the rows takes, which a
        replicated log's trim weighs its stream against."""
        with self.read() as txn:
            stats = [txn.stat(self.table(name)) for name in TABLES]
        return sum(
            (int(s["branch_pages"]) + int(s["leaf_pages"]) + int(s["overflow_pages"]))
            * int(s["psize"])
            for s in stats
        )

    def usage(self) -> tuple[int, int]:
        """(map size, bytes in use) for metrics and stats."""
        info = self.env.info()
        stat = self.env.stat()
        used = (int(info["last_pgno"]) + 1) * int(stat["psize"])
        return int(info["map_size"]), used

    def close(self) -> None:
        """Close the environment (without a checkpoint: the writer takes its last one)."""
        self._release_all()
        self.env.close()
