"""The LMDB data file read with plain file reads: its meta pages, and the check that
refuses a damaged file before LMDB maps it.

LMDB reads its pages straight from the map, so a page past the end of a
truncated file would kill the process with SIGBUS instead of raising an error.
:func:`check_data_file` reads the two meta pages with ``pread`` first and
refuses a file they show to be damaged or cut short. The checkpoint
(:mod:`brain.engine.store.checkpoint`) reads and restores the same pages.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from brain.errors import StorageFault

__all__ = [
    "DATA_FILE",
    "DEFAULT_REMEDY",
    "LMDB_DATA_VERSION",
    "LMDB_MAGIC",
    "MAX_PAGE_SIZE",
    "MIN_PAGE_SIZE",
    "DataFileMeta",
    "check_data_file",
    "choose_meta",
    "data_file_problem",
    "parse_meta_page",
    "read_data_file_meta",
]

DATA_FILE: Final = "data.mdb"
"""The file of an LMDB environment that holds its pages (``lock.mdb`` is the other)."""

DEFAULT_REMEDY: Final = (
    "restore a snapshot with `brain snapshot restore BUNDLE --data NEW_DIR` "
    "(spec/05-durability.md §4)"
)
"""What the error about a damaged data file advises when the caller knows no better way."""

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


def parse_meta_page(head: bytes, page: int) -> DataFileMeta | str:
    """The meta page ``page`` (0 or 1) whose first bytes are ``head``, or what is
    wrong with it."""
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
        first = parse_meta_page(os.pread(fd, _META_BYTES, 0), 0)
        if isinstance(first, str):
            return first
        # LMDB finds the second meta page one page in, by the first one's page size.
        second = parse_meta_page(os.pread(fd, _META_BYTES, first.page_size), 1)
    except OSError as exc:
        raise StorageFault(f"cannot read the LMDB data file {path}: {exc}") from exc
    finally:
        os.close(fd)
    return choose_meta(first, second)


def choose_meta(first: DataFileMeta | str, second: DataFileMeta | str) -> DataFileMeta | str:
    """The meta page LMDB would use of the two parsed ones (the higher txnid), or
    what is wrong with them."""
    if isinstance(first, str):
        return first
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
