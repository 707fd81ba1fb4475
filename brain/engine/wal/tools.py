"""Offline operator tools for a WAL directory: ``brain wal verify`` and ``brain wal truncate``.

Both run without a server. :func:`verify` only reads. :func:`truncate_at` is
the one sanctioned way to lose records: the operator names the first LSN to
drop, typically the one a :class:`~brain.errors.WalCorruption` named.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from brain.engine.wal.format import (
    FORMAT_VERSION,
    READABLE_VERSIONS,
    SEGMENT_HEADER_SIZE,
    Incomplete,
    count_records,
    decode_record,
    decode_segment_header,
    encode_segment_header,
    scan_segment,
)
from brain.engine.wal.log import list_segments, lock_directory
from brain.errors import WalCorruption

__all__ = ["VerifyReport", "truncate_at", "verify"]

_VERSION_AT: Final = 8
"""Where the format version sits in a segment header (after the magic)."""


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What :func:`verify` found.

    ``first_lsn``, ``last_lsn`` and ``records`` cover the sound records (up to
    the corruption, if any); ``last_lsn`` is ``first_lsn - 1`` when there are
    none. A torn tail is normal after a crash and keeps ``ok`` true.
    """

    ok: bool
    first_lsn: int
    last_lsn: int
    records: int
    segments: int
    torn_tail: str | None
    corruption: WalCorruption | None


def verify(directory: Path) -> VerifyReport:
    """Check every segment in ``directory`` as opening the log would, changing nothing."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"no WAL directory at {directory}")
    found = list_segments(directory)
    first_lsn = found[0][0] if found else 1
    records = 0
    torn: str | None = None
    expected: int | None = None
    for index, (lsn, path) in enumerate(found):
        try:
            scan = scan_segment(
                path.read_bytes(),
                path=path,
                name_lsn=lsn,
                expected_first_lsn=expected,
                is_last=index == len(found) - 1,
            )
        except WalCorruption as exc:
            # The scan names the LSN it expected where the damage starts.
            last = exc.lsn - 1 if exc.lsn is not None else first_lsn + records - 1
            return VerifyReport(False, first_lsn, last, last - first_lsn + 1, len(found), None, exc)
        records += scan.records
        expected = scan.next_lsn
        if scan.torn is not None:
            cut = scan.size - scan.end
            torn = f"{path}: {scan.torn}; opening the log cuts {cut} bytes at byte {scan.end}"
    return VerifyReport(True, first_lsn, first_lsn + records - 1, records, len(found), torn, None)


def truncate_at(directory: Path, lsn: int) -> int:
    """Drop every record with LSN ≥ ``lsn``; return how many records were dropped.

    The segment holding ``lsn`` is cut at that record and every later segment is
    deleted, each step synced. The records before ``lsn`` must be sound (a
    :class:`~brain.errors.WalCorruption` says where they are not, with nothing
    changed); what follows may be damaged in any way. The count is best effort
    where the data is damaged: a record that no longer decodes counts as one.
    When the log holds no record at or after ``lsn`` nothing changes and 0 is
    returned. Holding the directory lock, it refuses while a server has the
    log open (:class:`~brain.errors.StorageFault`).
    """
    directory = Path(directory)
    if lsn < 1:
        raise ValueError(f"LSN {lsn} is below 1")
    dir_fd = lock_directory(directory)
    try:
        found = list_segments(directory)
        if not found:
            return 0
        if lsn < found[0][0]:
            raise ValueError(f"LSN {lsn} is below the first LSN the log holds, {found[0][0]}")
        holder = max(index for index, (first, _) in enumerate(found) if first <= lsn)
        expected: int | None = None
        for first, path in found[:holder]:
            scan = scan_segment(
                path.read_bytes(),
                path=path,
                name_lsn=first,
                expected_first_lsn=expected,
                is_last=False,
            )
            expected = scan.next_lsn
        first, path = found[holder]
        if expected is not None and first != expected:
            raise WalCorruption(path, 0, expected, f"missing segment: next one starts at {first}")
        data = path.read_bytes()
        cut = _cut_offset(data, path, first, lsn, is_last=holder == len(found) - 1)
        if cut is None:
            return 0
        dropped = count_records(
            data, max(cut, SEGMENT_HEADER_SIZE), lsn if cut else first, _version_of(data)
        )
        # Newest first, so a crash midway leaves a log without gaps; rerunning finishes.
        for later_first, later in reversed(found[holder + 1 :]):
            later_data = later.read_bytes()
            dropped += count_records(
                later_data, SEGMENT_HEADER_SIZE, later_first, _version_of(later_data)
            )
            later.unlink()
            os.fsync(dir_fd)
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.ftruncate(fd, cut)
            if cut == 0:
                # Cutting at the first record keeps the segment, so its name still
                # says where the log stands, under a fresh header.
                os.write(fd, encode_segment_header(first, time.time_ns()))
            os.fsync(fd)
        finally:
            os.close(fd)
        return dropped
    finally:
        os.close(dir_fd)


def _version_of(data: bytes) -> int:
    """The record layout a segment's header names, for counting what is dropped.

    Best effort, like the count: a header too damaged to say is taken for the
    current layout.
    """
    if len(data) >= SEGMENT_HEADER_SIZE:
        version = int.from_bytes(data[_VERSION_AT : _VERSION_AT + 2], "big")
        if version in READABLE_VERSIONS:
            return version
    return FORMAT_VERSION


def _cut_offset(data: bytes, path: Path, first: int, lsn: int, *, is_last: bool) -> int | None:
    """Where to cut the segment ``data`` so record ``lsn`` and later go; None: nothing to cut.

    0 means the header is damaged and is rewritten. The segment is judged as
    opening the log would judge it: damage at or after ``lsn`` is what is cut;
    damage before it raises :class:`~brain.errors.WalCorruption`.
    """
    if lsn == first:
        try:
            decode_segment_header(data, path=path, name_lsn=first)
        except WalCorruption:
            return 0
        return None if is_last and len(data) == SEGMENT_HEADER_SIZE else SEGMENT_HEADER_SIZE
    try:
        scan = scan_segment(
            data, path=path, name_lsn=first, expected_first_lsn=None, is_last=is_last
        )
        whole_until = scan.next_lsn
    except WalCorruption as exc:
        if exc.lsn is None or exc.lsn < lsn:
            raise
        whole_until = exc.lsn
    if whole_until < lsn:
        if is_last:
            return None  # the log ends (perhaps torn) before lsn
        raise WalCorruption(path, scan.end, whole_until, f"segment ends before LSN {lsn}")
    # A damaged header was refused above (its LSN is the first), so this one reads.
    version = decode_segment_header(data, path=path, name_lsn=first).version
    offset = SEGMENT_HEADER_SIZE
    for _ in range(lsn - first):
        result = decode_record(data, offset, version=version)
        assert not isinstance(result, Incomplete)  # the scan found these whole
        offset = result[1]
    return None if is_last and offset == len(data) else offset
