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

Before LMDB maps a data file, :func:`check_data_file` reads its two meta pages
with plain file reads: LMDB reads its pages straight from the map, so a page
past the end of a truncated file would kill the process with SIGBUS instead of
raising an error. The key store opens its own environment through it too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import lmdb

from brain.engine.store.rebuild import copy_rebuilt
from brain.engine.store.tables import TABLES
from brain.errors import StorageFault, Unavailable

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

DATA_FILE: Final = "data.mdb"
"""The file of an LMDB environment that holds its pages (``lock.mdb`` is the other)."""

DEFAULT_REMEDY: Final = (
    "restore a snapshot with `brain snapshot restore BUNDLE --data NEW_DIR` "
    "(spec/05-durability.md §4)"
)
"""What the error about a damaged data file advises when the caller knows no better way."""

MAX_READERS: Final = 256
"""Concurrent read transactions: the reader thread pool plus headroom."""

# LMDB 0.9's meta pages, as its 64-bit builds lay them out in native byte order:
# a 16-byte page header (page number 8, pad 2, flags 2, bounds 4), then MDB_meta
# (magic 4, version 4, map address 8, map size 8, two 48-byte MDB_db records, the
# first holding the page size in its first 4 bytes, last page number 8, txnid 8).
_PAGE_FLAGS: Final = struct.Struct("=H")
_PAGE_FLAGS_AT: Final = 10
_META_IDENTITY: Final = struct.Struct("=II")
_META_IDENTITY_AT: Final = 16
_PAGE_SIZE_FIELD: Final = struct.Struct("=I")
_PAGE_SIZE_AT: Final = 40
_LAST_PAGE_AND_TXNID: Final = struct.Struct("=QQ")
_LAST_PAGE_AT: Final = 136
_META_BYTES: Final = _LAST_PAGE_AT + _LAST_PAGE_AND_TXNID.size
"""Bytes read from the start of each meta page: everything up to its txnid."""

_P_META: Final = 0x08
"""The page flag LMDB sets on its two meta pages."""

LMDB_MAGIC: Final = 0xBEEFC0DE
"""``MDB_MAGIC``, the first word of every meta page."""

LMDB_DATA_VERSION: Final = 1
"""``MDB_DATA_VERSION`` of LMDB 0.9, the file layout the bundled LMDB reads."""

MIN_PAGE_SIZE: Final = 512
"""Smallest page size taken as plausible: LMDB uses the OS page size (4 KiB here);
a meta page naming less is damaged."""

MAX_PAGE_SIZE: Final = 1 << 16
"""Largest page size taken as plausible (64 KiB, the largest OS page in use)."""


@dataclass(frozen=True, slots=True)
class DataFileMeta:
    """What the meta page LMDB would use (the valid one with the higher txnid) says."""

    page: int
    """Which of the two meta pages it is, 0 or 1."""
    page_size: int
    last_page: int
    """``mm_last_pg``: the highest page number in use."""
    txnid: int

    @property
    def used_bytes(self) -> int:
        """How long the file must at least be: every page up to the last one used."""
        return (self.last_page + 1) * self.page_size


def _parse_meta(head: bytes, page: int) -> DataFileMeta | str:
    """The meta page whose first bytes are ``head``, or what is wrong with it."""
    if len(head) < _META_BYTES:
        return f"meta page {page} is cut short ({len(head)} of its first {_META_BYTES} bytes)"
    (flags,) = _PAGE_FLAGS.unpack_from(head, _PAGE_FLAGS_AT)
    magic, version = _META_IDENTITY.unpack_from(head, _META_IDENTITY_AT)
    (page_size,) = _PAGE_SIZE_FIELD.unpack_from(head, _PAGE_SIZE_AT)
    last_page, txnid = _LAST_PAGE_AND_TXNID.unpack_from(head, _LAST_PAGE_AT)
    if not flags & _P_META or magic != LMDB_MAGIC:
        return f"meta page {page} is not an LMDB meta page (flags {flags:#06x}, magic {magic:#x})"
    if version != LMDB_DATA_VERSION:
        return f"meta page {page} has LMDB data version {version}, not {LMDB_DATA_VERSION}"
    if not MIN_PAGE_SIZE <= page_size <= MAX_PAGE_SIZE or page_size & (page_size - 1):
        return f"meta page {page} names an impossible page size, {page_size}"
    return DataFileMeta(page, page_size, last_page, txnid)


def read_data_file_meta(path: Path) -> DataFileMeta | str | None:
    """Read the meta pages of the LMDB data file ``path`` with plain file reads.

    Returns the meta page LMDB would use, or a description of the damage when
    either meta page is damaged (LMDB refuses such a file), or None when the
    file is missing or empty (LMDB then starts a new one). Raises
    :class:`~brain.errors.StorageFault` when the file cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageFault(f"cannot read the LMDB data file {path}: {exc}") from exc
    try:
        if os.fstat(fd).st_size == 0:
            return None
        first = _parse_meta(os.pread(fd, _META_BYTES, 0), 0)
        if isinstance(first, str):
            return first
        # LMDB finds the second meta page one page in, by the first one's page size.
        second = _parse_meta(os.pread(fd, _META_BYTES, first.page_size), 1)
    except OSError as exc:
        raise StorageFault(f"cannot read the LMDB data file {path}: {exc}") from exc
    finally:
        os.close(fd)
    if isinstance(second, str):
        return second
    if second.page_size != first.page_size:
        return f"the meta pages disagree on the page size ({first.page_size}, {second.page_size})"
    return second if second.txnid > first.txnid else first


def data_file_problem(path: Path) -> str | None:
    """What makes the LMDB data file ``path`` unsafe to map, or None when nothing does.

    A file shorter than the pages its meta page says are in use was cut short:
    LMDB would read the missing pages from the map and die of SIGBUS.
    """
    meta = read_data_file_meta(path)
    if meta is None or isinstance(meta, str):
        return meta
    size = path.stat().st_size
    if size < meta.used_bytes:
        return (
            f"it is {size} bytes long, but its meta page {meta.page} (transaction "
            f"{meta.txnid}) says pages 0 to {meta.last_page} of {meta.page_size} bytes are "
            f"in use, {meta.used_bytes} bytes: the file was cut short"
        )
    return None


def check_data_file(directory: Path, *, remedy: str = DEFAULT_REMEDY) -> None:
    """Refuse the LMDB environment in ``directory`` before it is mapped when its data
    file is damaged (:func:`data_file_problem`).

    Raises :class:`~brain.errors.StorageFault` naming the file, the damage and
    ``remedy``, what the operator can do about it; nothing is opened or changed.
    """
    path = directory / DATA_FILE
    problem = data_file_problem(path)
    if problem is not None:
        raise StorageFault(
            f"the LMDB data file {path} is damaged: {problem}; it was not opened and "
            f"nothing was changed. To recover, {remedy}"
        )


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
    """The LMDB environment and its named tables.

    Opening it refuses a damaged data file with a
    :class:`~brain.errors.StorageFault` (:func:`check_data_file`) whose message
    ends with ``remedy``: the caller says what the operator can do.
    """

    def __init__(
        self, path: Path, *, map_size: int = DEFAULT_MAP_SIZE, remedy: str = DEFAULT_REMEDY
    ) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.tables: dict[bytes, lmdb._Database] = {}
        self._remedy = remedy
        self.env = self._open(map_size)
        self._gate = _Gate()

    def _open(self, map_size: int) -> lmdb.Environment:
        check_data_file(self.path, remedy=self._remedy)
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
        """Rewrite the data file from its live rows only, so that pages freed by
        earlier writes (a forgotten text's old versions among them) and keys of
        deleted rows left in branch pages leave the disk.

        Runs with every reader held off; the caller (the writer thread, between
        batches) has no write open. The compacted copy is synced, then renamed over
        the data file, which is atomic: a crash leaves the old file or the new one,
        each complete. Returns the file's size before and after."""
        data = self.path / DATA_FILE
        with self._gate.exclusive():
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
