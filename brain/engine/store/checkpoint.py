"""The store's checkpoint: LMDB's two meta pages as they were at the last forced sync,
kept in a file beside the data file, so that recovery can return LMDB to that state.

LMDB commits are not flushed (the WAL makes a write durable, spec/05-durability.md
§5). Between two checkpoints the kernel writes the data file's dirty pages back in
any order it likes, so after a power loss the file may hold a meta page of a later
commit whose tree pages never reached the disk. What keeps the checkpointed state
whole is that nothing overwrites it: its pages are pinned by a read transaction the
store holds open until the next checkpoint (LMDB never reuses a page a reader can
still see), and only its meta pages, which every commit rewrites in turn, can be
lost. Those are what this file keeps. Writing them back makes the data file exactly
the checkpointed tree again, whatever else reached the disk; recovery then replays
the WAL from that tree's ``applied_lsn``.

The file also keeps a CRC-32C of the root pages of LMDB's two trees (its free-page
tree and its main tree). Those pages belong to the pinned state, so in the data file
the checkpoint was taken of they are unchanged: a mismatch means the data file was
replaced or damaged by something else, and restoring meta pages onto it would
corrupt it, so the store refuses to open instead.

Layout (little-endian): ``CHECKPOINT_MAGIC`` (8 bytes), format version (u32), page
size (u32), txnid (u64), the roots' CRC (u32), then the two meta pages (two page
sizes), then a CRC-32C of everything before it (u32).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import crc32c

from brain.engine.store.datafile import (
    DATA_FILE,
    DataFileMeta,
    choose_meta,
    parse_meta_page,
    read_data_file_meta,
)
from brain.errors import StorageFault

__all__ = [
    "CHECKPOINT_FILE",
    "CHECKPOINT_MAGIC",
    "Checkpoint",
    "checkpointed_txnid",
    "forget_checkpoint",
    "load_checkpoint",
    "restore_checkpoint",
    "save_checkpoint",
]

CHECKPOINT_FILE: Final = "checkpoint"
"""The file beside ``data.mdb`` that holds the last checkpoint's meta pages."""

CHECKPOINT_MAGIC: Final = b"BRAINCKP"
"""First bytes of the checkpoint file."""

CHECKPOINT_VERSION: Final = 1
"""The checkpoint file's layout version."""

_HEAD: Final = struct.Struct("<8sIIQI")
_CRC: Final = struct.Struct("<I")

# Offsets in an LMDB 0.9 meta page (64-bit layout, after its 16-byte page header)
# of the root page numbers of the free-page tree and the main tree: MDB_meta holds
# magic, version, address and map size (24 bytes), then two 48-byte MDB_db records
# whose last field, 40 bytes in, is md_root.
_ROOT: Final = struct.Struct("=Q")
_FREE_ROOT_AT: Final = 16 + 24 + 40
_MAIN_ROOT_AT: Final = 16 + 24 + 48 + 40
_NO_PAGE: Final = (1 << 64) - 1
"""``P_INVALID``: the root of an empty tree."""

Fsync = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A checkpoint as read from its file."""

    txnid: int
    """The LMDB transaction the meta pages describe."""
    page_size: int
    roots_crc: int
    pages: bytes
    """Both meta pages, as they were on disk right after the checkpoint's sync."""


def _meta(pages: bytes, page_size: int) -> DataFileMeta | str:
    return choose_meta(parse_meta_page(pages[:page_size], 0), parse_meta_page(pages[page_size:], 1))


def _roots_crc(fd: int, meta_page: bytes, page_size: int) -> int:
    """CRC-32C of the root pages the meta page names, read from the file ``fd``."""
    value = 0
    for at in (_FREE_ROOT_AT, _MAIN_ROOT_AT):
        (root,) = _ROOT.unpack_from(meta_page, at)
        if root != _NO_PAGE:
            value = crc32c.crc32c(os.pread(fd, page_size, root * page_size), value=value)
    return int(value)


def _fsync_directory(directory: Path, fsync: Fsync) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(directory: Path, txnid: int, fsync: Fsync = os.fsync) -> None:
    """Record the data file's meta pages as the checkpoint of transaction ``txnid``.

    The caller has just forced an LMDB sync, with no commit since, and holds a read
    transaction of ``txnid`` open, so the pages read here are on disk and stay
    there. Written to a temporary file, synced, renamed over the old checkpoint and
    the directory synced: a crash leaves the old checkpoint or the new one, whole.
    """
    data = directory / DATA_FILE
    fd = os.open(data, os.O_RDONLY | os.O_CLOEXEC)
    try:
        meta = read_data_file_meta(data)
        if not isinstance(meta, DataFileMeta):
            raise StorageFault(f"cannot checkpoint the LMDB data file {data}: {meta}")
        page_size = meta.page_size
        pages = os.pread(fd, 2 * page_size, 0)
        chosen = _meta(pages, page_size)
        if not isinstance(chosen, DataFileMeta) or chosen.txnid != txnid:
            raise StorageFault(
                f"cannot checkpoint the LMDB data file {data}: its meta pages show "
                f"{chosen}, not transaction {txnid}"
            )
        current = pages[chosen.page * page_size : (chosen.page + 1) * page_size]
        roots = _roots_crc(fd, current, page_size)
    finally:
        os.close(fd)
    head = _HEAD.pack(CHECKPOINT_MAGIC, CHECKPOINT_VERSION, page_size, txnid, roots)
    body = head + pages
    blob = body + _CRC.pack(crc32c.crc32c(body))
    staging = directory / (CHECKPOINT_FILE + ".new")
    try:
        out = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(out, blob)
            fsync(out)
        finally:
            os.close(out)
        os.replace(staging, directory / CHECKPOINT_FILE)
        _fsync_directory(directory, fsync)
    except OSError as exc:
        # The old checkpoint, and the pin that keeps its pages, stay in force.
        raise StorageFault(f"cannot write the store's checkpoint in {directory}: {exc}") from exc


def load_checkpoint(directory: Path) -> Checkpoint | None:
    """The checkpoint kept in ``directory``, or None when there is none.

    Raises :class:`~brain.errors.StorageFault` when the file is damaged: it is
    written whole or not at all, so damage is not a crash's doing.
    """
    path = directory / CHECKPOINT_FILE
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageFault(f"cannot read the store's checkpoint {path}: {exc}") from exc
    damaged = StorageFault(
        f"the store's checkpoint {path} is damaged; if the data file beside it is known "
        "to be whole (the server was stopped cleanly), delete the checkpoint file; "
        "otherwise restore a snapshot (spec/05-durability.md §4)"
    )
    if len(blob) < _HEAD.size + _CRC.size:
        raise damaged
    body, (crc,) = blob[: -_CRC.size], _CRC.unpack(blob[-_CRC.size :])
    magic, version, page_size, txnid, roots = _HEAD.unpack_from(body)
    if magic != CHECKPOINT_MAGIC or crc != crc32c.crc32c(body):
        raise damaged
    if version != CHECKPOINT_VERSION:
        raise StorageFault(
            f"the store's checkpoint {path} has layout version {version}, which this "
            f"build does not read (it reads {CHECKPOINT_VERSION})"
        )
    pages = body[_HEAD.size :]
    if len(pages) != 2 * page_size or not isinstance(_meta(pages, page_size), DataFileMeta):
        raise damaged
    return Checkpoint(txnid, page_size, roots, pages)


def restore_checkpoint(directory: Path, remedy: str, fsync: Fsync = os.fsync) -> bool:
    """Before LMDB maps the data file: return it to the last checkpoint when it moved
    on since (the server stopped without a final checkpoint). True when it did.

    Every commit after the checkpoint is dropped; they are all in the WAL, which
    recovery replays. Raises :class:`~brain.errors.StorageFault`, changing nothing,
    when the checkpoint does not belong to this data file (its tree's root pages
    differ) or the file is too short to hold the checkpointed tree; its message
    ends with ``remedy``, what the operator can do.
    """
    checkpoint = load_checkpoint(directory)
    data = directory / DATA_FILE
    if checkpoint is None or not data.exists():
        return False
    current = read_data_file_meta(data)
    if isinstance(current, DataFileMeta) and current.txnid == checkpoint.txnid:
        return False
    saved = _meta(checkpoint.pages, checkpoint.page_size)
    assert isinstance(saved, DataFileMeta)  # load_checkpoint checked it
    size = data.stat().st_size
    fd = os.open(data, os.O_RDWR | os.O_CLOEXEC)
    try:
        if size < saved.used_bytes:
            raise StorageFault(
                f"the LMDB data file {data} is {size} bytes long, shorter than the "
                f"{saved.used_bytes} bytes its last checkpoint (transaction "
                f"{checkpoint.txnid}) needs: it was cut short; it was not opened and "
                f"nothing was changed. To recover, {remedy}"
            )
        page = checkpoint.pages[saved.page * saved.page_size : (saved.page + 1) * saved.page_size]
        if _roots_crc(fd, page, saved.page_size) != checkpoint.roots_crc:
            raise StorageFault(
                f"the store's checkpoint {directory / CHECKPOINT_FILE} does not belong to "
                f"the LMDB data file {data}: the checkpointed tree's root pages differ. "
                "Nothing was changed. If the data file was replaced on purpose, delete "
                f"the checkpoint file; otherwise, to recover, {remedy}"
            )
        os.pwrite(fd, checkpoint.pages, 0)
        fsync(fd)
    finally:
        os.close(fd)
    return True


def checkpointed_txnid(directory: Path) -> int | None:
    """The transaction the checkpoint in ``directory`` describes, or None when there
    is none, or when the data file beside it has moved on since (then the store's
    first checkpoint after opening writes a new one)."""
    checkpoint = load_checkpoint(directory)
    if checkpoint is None:
        return None
    current = read_data_file_meta(directory / DATA_FILE)
    if isinstance(current, DataFileMeta) and current.txnid == checkpoint.txnid:
        return checkpoint.txnid
    return None


def forget_checkpoint(directory: Path, fsync: Fsync = os.fsync) -> None:
    """Remove the checkpoint (before the data file is replaced by a compacted copy,
    whose own checkpoint is taken when it is opened)."""
    try:
        (directory / CHECKPOINT_FILE).unlink()
    except FileNotFoundError:
        return
    _fsync_directory(directory, fsync)
