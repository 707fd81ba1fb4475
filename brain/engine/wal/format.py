"""The WAL's byte layout: segment names and headers, records, and segment scans.

No I/O here: every function takes bytes and returns values, so the rules for
what is a torn tail and what is corruption live in one place and are shared by
:class:`~brain.engine.wal.log.WriteAheadLog` (which repairs a torn tail) and
:func:`~brain.engine.wal.tools.verify` (which only reports it). All integers
are big-endian. ``spec/05-durability.md §3`` draws the layout byte by byte.

Two record layouts exist. Version 2 (written) gives each record header a CRC
of its own, so a damaged header is told from a torn write even in the last
record of the log. Version 1 (still read) had one CRC over header and payload,
which cannot be checked until the whole record is there. A segment's header
says which layout its records use.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import crc32c

from brain.errors import WalCorruption

__all__ = [
    "FORMAT_VERSION",
    "MAX_LSN",
    "MAX_PAYLOAD",
    "MAX_RECORD_KIND",
    "MIN_RECORD_KIND",
    "READABLE_VERSIONS",
    "RECORD_HEADER_SIZE",
    "SEGMENT_HEADER_SIZE",
    "SEGMENT_MAGIC",
    "V1_RECORD_HEADER_SIZE",
    "Incomplete",
    "SegmentHeader",
    "SegmentScan",
    "WalRecord",
    "count_records",
    "decode_record",
    "decode_segment_header",
    "encode_record",
    "encode_segment_header",
    "iter_segment",
    "parse_segment_name",
    "record_header_size",
    "scan_segment",
    "segment_name",
]

SEGMENT_MAGIC: Final = b"BRNWAL\x00\x01"
"""First 8 bytes of every segment; the NUL keeps a text file from passing as one."""

FORMAT_VERSION: Final = 2
"""The layout this build writes; bumped when the layout changes."""

READABLE_VERSIONS: Final = (1, 2)
"""The layouts this build reads. A version-1 segment is read until a checkpoint
deletes it; records are only ever appended to a version-2 segment. Other
versions are refused."""

SEGMENT_HEADER_SIZE: Final = 32
"""magic 8 + version 2 + reserved 2 + first LSN 8 + creation time 8 + CRC 4."""

RECORD_HEADER_SIZE: Final = 32
"""header CRC 4 + payload length 4 + LSN 8 + record time 8 + kind 2 + reserved 2 + payload CRC 4."""

V1_RECORD_HEADER_SIZE: Final = 28
"""Version 1: CRC 4 (over the rest of the header and the payload) + payload length 4
+ LSN 8 + record time 8 + kind 2 + reserved 2."""

MAX_PAYLOAD: Final = 64 * 1024 * 1024
"""Largest payload: far above one batch of plans, small enough to read into memory."""

MIN_RECORD_KIND: Final = 1
"""Kind 0 is never written, so a zeroed header can never pass as a record."""

MAX_RECORD_KIND: Final = 0x7FFF
"""Kinds from 0x8000 up are kept for the WAL's own future records; this version refuses them."""

MAX_LSN: Final = (1 << 64) - 1
"""LSNs are stored as u64."""

_MIN_TIME: Final = -(1 << 63)
_MAX_TIME: Final = (1 << 63) - 1
"""Record times are stored as i64 nanoseconds."""

_SEGMENT_NAME: Final = re.compile(r"wal-(\d{20})\.log")
"""20 digits hold any u64, so names sort in LSN order."""

# magic, version, reserved, first LSN, creation time; the CRC u32 follows
_SEGMENT_HEADER: Final = struct.Struct(">8sHHQQ")
# header CRC, payload length, LSN, record time, kind, reserved, payload CRC
_RECORD_HEADER: Final = struct.Struct(">IIQqHHI")
# version 1: CRC, payload length, LSN, record time, kind, reserved
_V1_RECORD_HEADER: Final = struct.Struct(">IIQqHH")
_CRC: Final = struct.Struct(">I")
_LSN_FIELD_OFFSET: Final = 8
"""Where the LSN sits inside a record header of either version (after CRC and length)."""


def _crc(data: bytes | memoryview, value: int = 0) -> int:
    return int(crc32c.crc32c(data, value=value))


@dataclass(frozen=True, slots=True)
class WalRecord:
    """One logged record: its LSN, the record time (ns), its kind and opaque payload."""

    lsn: int
    record_time: int
    kind: int
    payload: bytes

    def __post_init__(self) -> None:
        if not 1 <= self.lsn <= MAX_LSN:
            raise ValueError(f"LSN {self.lsn} is outside 1..{MAX_LSN}")
        if not _MIN_TIME <= self.record_time <= _MAX_TIME:
            raise ValueError(f"record time {self.record_time} does not fit in an i64")
        if not MIN_RECORD_KIND <= self.kind <= MAX_RECORD_KIND:
            raise ValueError(
                f"record kind {self.kind} is outside {MIN_RECORD_KIND}..{MAX_RECORD_KIND}"
            )
        if not isinstance(self.payload, bytes):
            raise TypeError(f"payload must be bytes, not {type(self.payload).__name__}")
        if len(self.payload) > MAX_PAYLOAD:
            raise ValueError(f"payload of {len(self.payload)} bytes exceeds {MAX_PAYLOAD}")


@dataclass(frozen=True, slots=True)
class Incomplete:
    """The buffer ends inside a record whose bytes so far are plausible: a torn write."""

    reason: str


@dataclass(frozen=True, slots=True)
class SegmentHeader:
    """The decoded header of one segment."""

    first_lsn: int
    created_ns: int
    version: int
    """The layout of the segment's records (one of :data:`READABLE_VERSIONS`)."""


@dataclass(frozen=True, slots=True)
class SegmentScan:
    """What a scan of one segment's bytes found; see :func:`scan_segment`."""

    first_lsn: int
    records: int
    end: int
    """Offset just past the last whole record (0 when the header itself is torn)."""
    size: int
    torn: str | None
    """Why the bytes from ``end`` on are a torn tail, or None when there are none."""
    version: int = FORMAT_VERSION
    """The segment's layout; a torn header is rewritten in the current one."""

    @property
    def next_lsn(self) -> int:
        """The LSN the record after this segment's last one must carry."""
        return self.first_lsn + self.records

    @property
    def header_torn(self) -> bool:
        """Whether the segment is too short (or all zero) to hold its header."""
        return self.end < SEGMENT_HEADER_SIZE


def segment_name(first_lsn: int) -> str:
    """The file name of the segment whose first record has LSN ``first_lsn``."""
    return f"wal-{first_lsn:020d}.log"


def parse_segment_name(name: str) -> int | None:
    """The first LSN a segment file name encodes, or None if it is no segment name."""
    match = _SEGMENT_NAME.fullmatch(name)
    return int(match.group(1)) if match else None


def record_header_size(version: int) -> int:
    """The size of a record header in a segment of layout ``version``."""
    return V1_RECORD_HEADER_SIZE if version == 1 else RECORD_HEADER_SIZE


def encode_segment_header(first_lsn: int, created_ns: int) -> bytes:
    """The 32 header bytes of a new segment, in the current layout."""
    body = _SEGMENT_HEADER.pack(SEGMENT_MAGIC, FORMAT_VERSION, 0, first_lsn, created_ns)
    return body + _CRC.pack(_crc(body))


def decode_segment_header(data: bytes, *, path: Path | str, name_lsn: int) -> SegmentHeader:
    """Validate the header at the start of ``data`` against the file's name.

    Raises :class:`WalCorruption` when it is short, damaged, of a version this
    build does not read or disagrees with the first LSN the file name promises.
    """
    if len(data) < SEGMENT_HEADER_SIZE:
        raise WalCorruption(path, len(data), name_lsn, "segment is shorter than its header")
    magic, version, reserved, first_lsn, created_ns = _SEGMENT_HEADER.unpack_from(data)
    (stored,) = _CRC.unpack_from(data, _SEGMENT_HEADER.size)
    if magic != SEGMENT_MAGIC:
        raise WalCorruption(path, 0, name_lsn, f"bad segment magic {magic!r}")
    computed = _crc(memoryview(data)[: _SEGMENT_HEADER.size])
    if computed != stored:
        raise WalCorruption(
            path,
            _SEGMENT_HEADER.size,
            name_lsn,
            f"segment header CRC mismatch (stored {stored:#010x}, computed {computed:#010x})",
        )
    if version not in READABLE_VERSIONS:
        raise WalCorruption(
            path,
            8,
            name_lsn,
            f"unsupported WAL format version {version} (this build reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))})",
        )
    if reserved != 0:
        raise WalCorruption(path, 10, name_lsn, f"reserved header bytes are {reserved:#06x}, not 0")
    if first_lsn == 0:
        raise WalCorruption(path, 12, name_lsn, "header says first LSN 0, which is never written")
    if first_lsn != name_lsn:
        raise WalCorruption(
            path, 12, name_lsn, f"header says first LSN {first_lsn}, file name says {name_lsn}"
        )
    return SegmentHeader(first_lsn, created_ns, version)


def encode_record(record: WalRecord) -> bytes:
    """The bytes of one record in the current layout: header, then payload.

    The payload CRC sits in the header, and the header CRC covers every other
    header byte, so the header can be trusted before the payload has been read.
    """
    body = _RECORD_HEADER.pack(
        0,
        len(record.payload),
        record.lsn,
        record.record_time,
        record.kind,
        0,
        _crc(record.payload),
    )[_CRC.size :]
    return b"".join((_CRC.pack(_crc(body)), body, record.payload))


def decode_record(
    buf: bytes,
    offset: int,
    *,
    version: int = FORMAT_VERSION,
    expected_lsn: int | None = None,
    path: Path | str = "<buffer>",
) -> tuple[WalRecord, int] | Incomplete:
    """Decode the record at ``offset``: ``(record, next_offset)`` or :class:`Incomplete`.

    ``version`` is the layout of the segment the buffer comes from.
    :class:`Incomplete` means the buffer ends inside a record, the shape a torn
    append leaves: inside its header, or inside its payload after a sound
    header (in version 2 one whose CRC holds). A header whose CRC fails (version
    2), a whole record whose CRC fails, an impossible length, a wrong LSN (when
    ``expected_lsn`` is given), a bad kind or non-zero reserved bytes raise
    :class:`WalCorruption`, which names ``path``, ``offset`` and the expected
    LSN (else the one found).
    """
    if version == 1:
        return _decode_v1(buf, offset, expected_lsn=expected_lsn, path=path)
    if version != FORMAT_VERSION:
        raise ValueError(f"WAL format version {version} is not one this build reads")
    available = len(buf) - offset
    if available < RECORD_HEADER_SIZE:
        return Incomplete(
            f"the file ends {available} bytes into a {RECORD_HEADER_SIZE}-byte record header"
        )
    stored, length, lsn, record_time, kind, reserved, payload_crc = _RECORD_HEADER.unpack_from(
        buf, offset
    )
    named = expected_lsn if expected_lsn is not None else lsn
    computed = _crc(memoryview(buf)[offset + _CRC.size : offset + RECORD_HEADER_SIZE])
    if computed != stored:
        raise WalCorruption(
            path,
            offset,
            named,
            f"record header CRC mismatch (stored {stored:#010x}, computed {computed:#010x}; "
            f"the damaged header claims LSN {lsn} and a {length}-byte payload)",
        )
    _check_fields(
        path,
        offset,
        expected_lsn=expected_lsn,
        lsn=lsn,
        kind=kind,
        reserved=reserved,
        length=length,
    )
    end = offset + RECORD_HEADER_SIZE + length
    if end > len(buf):
        have = available - RECORD_HEADER_SIZE
        return Incomplete(f"the file ends {have} bytes into a {length}-byte payload")
    computed = _crc(memoryview(buf)[offset + RECORD_HEADER_SIZE : end])
    if computed != payload_crc:
        raise WalCorruption(
            path,
            offset,
            named,
            f"record payload CRC mismatch (stored {payload_crc:#010x}, computed {computed:#010x})",
        )
    payload = buf[offset + RECORD_HEADER_SIZE : end]
    return WalRecord(lsn, record_time, kind, payload), end


def _decode_v1(
    buf: bytes, offset: int, *, expected_lsn: int | None, path: Path | str
) -> tuple[WalRecord, int] | Incomplete:
    """A version-1 record: one CRC over header and payload, checked once both are there."""
    available = len(buf) - offset
    if available < V1_RECORD_HEADER_SIZE:
        return Incomplete(
            f"the file ends {available} bytes into a {V1_RECORD_HEADER_SIZE}-byte record header"
        )
    stored, length, lsn, record_time, kind, reserved = _V1_RECORD_HEADER.unpack_from(buf, offset)
    named = expected_lsn if expected_lsn is not None else lsn
    if length > MAX_PAYLOAD:
        raise WalCorruption(
            path, offset, named, f"record length {length} exceeds the maximum {MAX_PAYLOAD}"
        )
    end = offset + V1_RECORD_HEADER_SIZE + length
    whole = end <= len(buf)
    if whole:
        # The CRC first: in a whole record it tells damage from a bad field.
        computed = _crc(memoryview(buf)[offset + _CRC.size : end])
        if computed != stored:
            raise WalCorruption(
                path,
                offset,
                named,
                f"record CRC mismatch (stored {stored:#010x}, computed {computed:#010x}; "
                f"the header claims LSN {lsn})",
            )
    # A torn append leaves a true prefix, so the header fields must hold either way.
    _check_fields(
        path,
        offset,
        expected_lsn=expected_lsn,
        lsn=lsn,
        kind=kind,
        reserved=reserved,
        length=length,
    )
    if not whole:
        have = available - V1_RECORD_HEADER_SIZE
        return Incomplete(f"the file ends {have} bytes into a {length}-byte payload")
    payload = buf[offset + V1_RECORD_HEADER_SIZE : end]
    return WalRecord(lsn, record_time, kind, payload), end


def _check_fields(
    path: Path | str,
    offset: int,
    *,
    expected_lsn: int | None,
    lsn: int,
    kind: int,
    reserved: int,
    length: int,
) -> None:
    named = expected_lsn if expected_lsn is not None else lsn
    if length > MAX_PAYLOAD:
        raise WalCorruption(
            path, offset, named, f"record length {length} exceeds the maximum {MAX_PAYLOAD}"
        )
    if expected_lsn is not None and lsn != expected_lsn:
        raise WalCorruption(path, offset, named, f"expected LSN {expected_lsn}, found {lsn}")
    if lsn == 0:
        raise WalCorruption(path, offset, named, "LSN 0 is never written")
    if not MIN_RECORD_KIND <= kind <= MAX_RECORD_KIND:
        raise WalCorruption(path, offset, named, f"unknown record kind {kind:#06x}")
    if reserved != 0:
        raise WalCorruption(path, offset, named, f"reserved record bytes are {reserved:#06x}")


def _all_zero(data: bytes, start: int) -> bool:
    return data.count(0, start) == len(data) - start


def _following_record(
    data: bytes, after: int, lsn: int, path: Path | str, version: int
) -> int | None:
    """The offset of a whole, valid record with LSN ``lsn`` starting at or after ``after``."""
    if not 1 <= lsn <= MAX_LSN:
        return None  # past the last LSN there can be no record at all
    needle = lsn.to_bytes(8, "big")
    at = data.find(needle, after + _LSN_FIELD_OFFSET)
    while at != -1:
        start = at - _LSN_FIELD_OFFSET
        try:
            found = decode_record(data, start, version=version, expected_lsn=lsn, path=path)
            if not isinstance(found, Incomplete):
                return start
        except WalCorruption:
            pass  # eight bytes that merely look like the LSN; keep looking
        at = data.find(needle, at + 1)
    return None


def scan_segment(
    data: bytes,
    *,
    path: Path | str,
    name_lsn: int,
    expected_first_lsn: int | None,
    is_last: bool,
) -> SegmentScan:
    """Validate one segment's bytes and find where its whole records end.

    ``expected_first_lsn`` is the previous segment's next LSN (None for the
    first segment). Only the last segment may have a torn tail, and only of
    these shapes: shorter than (or an all-zero) header; the file ends inside a
    record header; the file ends inside a record's payload after a sound header
    (its CRC holds, in version 2) and no whole record with the next LSN
    follows; or nothing but zero bytes after the last whole record (a crash
    after the file grew but before its data reached the disk). Everything else
    raises :class:`WalCorruption`.
    """
    if expected_first_lsn is not None and name_lsn != expected_first_lsn:
        raise WalCorruption(
            path,
            0,
            expected_first_lsn,
            f"missing segment: expected one starting at LSN {expected_first_lsn}, "
            f"found one starting at LSN {name_lsn}",
        )
    if len(data) < SEGMENT_HEADER_SIZE or _all_zero(data, 0):
        if not is_last:
            raise WalCorruption(
                path, 0, name_lsn, f"segment holds no header ({len(data)} bytes) but is not last"
            )
        torn = f"segment header torn ({len(data)} bytes, need {SEGMENT_HEADER_SIZE})"
        return SegmentScan(name_lsn, 0, 0, len(data), torn)
    version = decode_segment_header(data, path=path, name_lsn=name_lsn).version
    header_size = record_header_size(version)
    offset = SEGMENT_HEADER_SIZE
    lsn = name_lsn
    while offset < len(data):
        try:
            result = decode_record(data, offset, version=version, expected_lsn=lsn, path=path)
        except WalCorruption:
            if is_last and _all_zero(data, offset):
                torn = f"{len(data) - offset} zero bytes after the last whole record"
                return SegmentScan(name_lsn, lsn - name_lsn, offset, len(data), torn, version)
            raise
        if isinstance(result, Incomplete):
            if not is_last:
                raise WalCorruption(
                    path, offset, lsn, f"segment is not the last but {result.reason}"
                )
            follower = _following_record(data, offset + header_size, lsn + 1, path, version)
            if follower is not None:
                raise WalCorruption(
                    path,
                    offset,
                    lsn,
                    f"record runs past the end of the file ({result.reason}), "
                    f"yet record LSN {lsn + 1} follows at byte {follower}",
                )
            return SegmentScan(name_lsn, lsn - name_lsn, offset, len(data), result.reason, version)
        offset = result[1]
        lsn += 1
    return SegmentScan(name_lsn, lsn - name_lsn, offset, len(data), None, version)


def iter_segment(data: bytes, *, path: Path | str, name_lsn: int, end: int) -> Iterator[WalRecord]:
    """Every record of a segment already scanned sound, up to byte ``end``."""
    if end < SEGMENT_HEADER_SIZE:
        return
    if len(data) < end:
        raise WalCorruption(path, len(data), None, f"segment shrank below byte {end}")
    version = decode_segment_header(data, path=path, name_lsn=name_lsn).version
    offset = SEGMENT_HEADER_SIZE
    lsn = name_lsn
    while offset < end:
        result = decode_record(data, offset, version=version, expected_lsn=lsn, path=path)
        if isinstance(result, Incomplete) or result[1] > end:
            raise WalCorruption(path, offset, lsn, f"the record no longer ends by byte {end}")
        record, offset = result
        yield record
        lsn += 1


def count_records(data: bytes, offset: int, lsn: int, version: int = FORMAT_VERSION) -> int:
    """How many records lie from ``offset`` on, the first with LSN ``lsn``, damaged ones too.

    Best effort, for reporting what :func:`~brain.engine.wal.tools.truncate_at`
    drops: a record that does not decode counts as one, and the count goes on
    from the next whole record with the following LSN if there is one.
    ``version`` is the segment's layout.
    """
    header_size = record_header_size(version)
    records = 0
    while offset < len(data):
        try:
            result = decode_record(data, offset, version=version, expected_lsn=lsn)
        except WalCorruption:
            result = Incomplete("damaged")
        records += 1
        if isinstance(result, Incomplete):
            if _all_zero(data, offset):
                return records - 1
            follower = _following_record(data, offset + header_size, lsn + 1, "<buffer>", version)
            if follower is None:
                return records
            offset = follower
        else:
            offset = result[1]
        lsn += 1
    return records
