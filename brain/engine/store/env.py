"""The LMDB environment of one data directory: named tables, sync settings, map growth.

Sync settings (the power-loss argument is in ``spec/05-durability.md``): the
environment is opened with ``sync=True`` and ``metasync=False``. Each commit
flushes its data pages; the meta page it writes is flushed by the next
commit's flush. A power loss can therefore roll back at most the last
committed transaction, never tear the tree, and the rolled-back transaction
also rolls back ``applied_lsn``, so recovery replays it from the WAL. WAL
segments are deleted only after a forced ``sync`` made everything up to their
last LSN durable in LMDB.

Readers and the writer share a reader/writer gate so that the map can be
grown (which LMDB allows only while no transaction is open in this process)
when a write hits ``MDB_MAP_FULL``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import lmdb

from brain.engine.store.tables import TABLES
from brain.errors import Unavailable

__all__ = [
    "DEFAULT_MAP_SIZE",
    "MAX_MAP_SIZE",
    "STORE_FILE_MODE",
    "TABLES",
    "Store",
]

DEFAULT_MAP_SIZE: Final = 1 << 30
"""Initial map: 1 GiB of address space; LMDB's file grows only as pages are used."""

MAX_MAP_SIZE: Final = 1 << 40
"""Growth stops at 1 TiB of address space; past it writes answer UNAVAILABLE."""

STORE_FILE_MODE: Final = 0o600
"""Mode of the files LMDB creates (``data.mdb``, ``lock.mdb``): they hold every
tenant's records, so only the server's user may read them."""
_DATA_FILE: Final = "data.mdb"

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
    """The LMDB environment and its named tables."""

    def __init__(self, path: Path, *, map_size: int = DEFAULT_MAP_SIZE) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.tables: dict[bytes, lmdb._Database] = {}
        self.env = self._open(map_size)
        self._gate = _Gate()

    def _open(self, map_size: int) -> lmdb.Environment:
        env = lmdb.open(
            str(self.path),
            map_size=map_size,
            max_dbs=len(TABLES) + 4,
            max_readers=MAX_READERS,
            sync=True,
            metasync=False,
            readahead=False,
            subdir=True,
            mode=STORE_FILE_MODE,
        )
        with env.begin(write=True) as txn:
            for name in TABLES:
                self.tables[name] = env.open_db(name, txn=txn)
        return env

    def table(self, name: bytes) -> lmdb._Database:
        """The handle of a named table."""
        return self.tables[name]

    @contextlib.contextmanager
    def read(self) -> Iterator[lmdb.Transaction]:
        """A read-only transaction (a consistent snapshot of the store)."""
        with self._gate.shared(), self.env.begin(buffers=False) as txn:
            yield txn

    def write(self) -> lmdb.Transaction:
        """Begin the write transaction; only the writer thread calls this."""
        return self.env.begin(write=True)

    def grow(self) -> None:
        """Double the map after ``MDB_MAP_FULL``; Unavailable when it cannot grow."""
        current = int(self.env.info()["map_size"])
        if current >= MAX_MAP_SIZE:
            raise Unavailable(
                f"the store is full: its map reached {MAX_MAP_SIZE} bytes; "
                "free disk space or raise the limit, then restart"
            )
        with self._gate.exclusive():
            self.env.set_mapsize(min(current * 2, MAX_MAP_SIZE))

    def compact(self) -> tuple[int, int]:
        """Rewrite the data file with its live pages only, so that pages freed by
        earlier writes (a forgotten text's old versions among them) leave the disk.

        Runs with every reader held off; the caller (the writer thread, between
        batches) has no write open. The compacted copy is synced, then renamed over
        the data file, which is atomic: a crash leaves the old file or the new one,
        each complete. Returns the file's size before and after."""
        data = self.path / _DATA_FILE
        with self._gate.exclusive():
            staging = self.path.with_name(self.path.name + ".compacting")
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir()
            before = data.stat().st_size
            self.env.copy(str(staging), compact=True)
            fresh = staging / _DATA_FILE
            with fresh.open("rb+") as fh:
                os.fsync(fh.fileno())
            map_size = int(self.env.info()["map_size"])
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

    def sync(self) -> None:
        """Force everything committed so far onto the disk."""
        self.env.sync(True)

    def usage(self) -> tuple[int, int]:
        """(map size, bytes in use) for metrics and stats."""
        info = self.env.info()
        stat = self.env.stat()
        used = (int(info["last_pgno"]) + 1) * int(stat["psize"])
        return int(info["map_size"]), used

    def close(self) -> None:
        """Close the environment."""
        self.env.close()
