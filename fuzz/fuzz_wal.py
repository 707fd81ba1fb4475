"""Atheris fuzz target for what recovery reads back from disk: WAL segments and plans.

Run it (see fuzz/README.md)::

    .venv/bin/python fuzz/fuzz_wal.py -max_total_time=300 fuzz/corpus/wal

The rule it checks: whatever bytes a segment file holds, the readers end
normally or raise a :class:`brain.errors.StorageFault` (of which
:class:`~brain.errors.WalCorruption` is one). Any other exception is a crash
(IndexError, struct.error, a ValueError leaking from a record's own checks…),
and so is a broken invariant: :func:`iter_segment` disagreeing with the
:func:`scan_segment` that passed the same bytes; a version-2 scan taking a
record header whose own CRC fails for a torn tail (a damaged header must be
corruption, spec/05-durability.md §3.3); or a decoded plan that does not
survive :func:`encode_plan`.

Each input is used twice. Raw, it is a segment (scanned as the last segment and
as an earlier one), a record buffer of each readable layout, and a plan
payload. Then it is re-sealed: the segment header's CRC32C and, in the layout
the header names, every whole record's CRCs (version 2: the payload CRC, then
the header CRC over it; version 1: the one record CRC) are recomputed, so that
the fuzzer reaches the field checks, torn-tail rules and plan decoder behind
the checksums, which it could never forge. The segment's name LSN is read from
its header, as it would agree for a segment the log wrote.

:func:`check_one` is the whole check as a plain function, so tests run it
without atheris.
"""

from __future__ import annotations

import contextlib
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

if __name__ == "__main__":
    # Only the fuzzing process needs atheris; tests import check_one without it.
    import atheris

    _instrumented: contextlib.AbstractContextManager[object] = atheris.instrument_imports(
        include=["brain"]
    )
else:
    _instrumented = contextlib.nullcontext()

with _instrumented:
    import crc32c

    from brain.engine.wal.format import (
        FORMAT_VERSION,
        READABLE_VERSIONS,
        RECORD_HEADER_SIZE,
        SEGMENT_HEADER_SIZE,
        Incomplete,
        SegmentScan,
        count_records,
        decode_record,
        iter_segment,
        record_header_size,
        scan_segment,
    )
    from brain.engine.write.plan import PLAN_RECORD_KIND, decode_plan, encode_plan
    from brain.errors import StorageFault

__all__ = ["check_one", "main", "reseal"]

CRASH_DIR: Final = Path(__file__).resolve().parent / "crashes"
"""Where libFuzzer writes crashing inputs unless told otherwise (git-ignored)."""

_PATH: Final = "<fuzz>"
_HEADER_CRC_AT: Final = SEGMENT_HEADER_SIZE - 4
_FIRST_LSN: Final = struct.Struct(">Q")
_FIRST_LSN_AT: Final = 12
"""Where the first LSN sits in a segment header (after magic, version, reserved)."""
_LENGTH: Final = struct.Struct(">I")
_CRC: Final = struct.Struct(">I")
_VERSION: Final = struct.Struct(">H")
_VERSION_AT: Final = 8
"""Where the format version sits in a segment header (after the magic)."""
_PAYLOAD_CRC_AT: Final = RECORD_HEADER_SIZE - 4
"""Where a version-2 record header keeps its payload's CRC (its last 4 bytes)."""


def check_one(data: bytes) -> None:
    """Feed ``data`` to every WAL reader, raw and re-sealed.

    Returns normally when every reader either accepted the bytes or refused
    them with a StorageFault; any other exception propagates as a finding.
    """
    _tolerate(_check_plan, data)
    for segment in (data, reseal(data)):
        _tolerate(_check_record_at_start, segment)
        _tolerate(_check_last_segment, segment)
        _tolerate(_check_earlier_segment, segment)
        if len(segment) >= SEGMENT_HEADER_SIZE:
            # What `brain wal truncate` reports; it promises never to raise.
            count_records(segment, SEGMENT_HEADER_SIZE, _name_lsn(segment), _version(segment))


def _tolerate(step: Callable[[bytes], object], data: bytes) -> None:
    # Refusing damaged storage with a StorageFault is the correct outcome.
    with contextlib.suppress(StorageFault):
        step(data)


def _name_lsn(segment: bytes) -> int:
    """The first LSN the header claims, as the file name of a segment we wrote would."""
    if len(segment) < _FIRST_LSN_AT + _FIRST_LSN.size:
        return 1
    (lsn,) = _FIRST_LSN.unpack_from(segment, _FIRST_LSN_AT)
    return int(lsn)


def _version(segment: bytes) -> int:
    """The record layout the header names, when this build reads it; else the current one."""
    if len(segment) < _VERSION_AT + _VERSION.size:
        return FORMAT_VERSION
    (version,) = _VERSION.unpack_from(segment, _VERSION_AT)
    return int(version) if version in READABLE_VERSIONS else FORMAT_VERSION


def reseal(data: bytes) -> bytes:
    """``data`` with the segment header's and each whole record's CRC32C made valid."""
    out = bytearray(data)
    if len(out) < SEGMENT_HEADER_SIZE:
        return bytes(out)
    _CRC.pack_into(out, _HEADER_CRC_AT, crc32c.crc32c(bytes(out[:_HEADER_CRC_AT])))
    version = _version(data)
    header_size = record_header_size(version)
    offset = SEGMENT_HEADER_SIZE
    while offset + header_size <= len(out):
        (length,) = _LENGTH.unpack_from(out, offset + _CRC.size)
        end = offset + header_size + length
        if version == 1:
            if end > len(out):
                break
            _CRC.pack_into(out, offset, crc32c.crc32c(bytes(out[offset + _CRC.size : end])))
        else:
            # The header is sealed even when its payload runs past the end: a torn tail.
            if end <= len(out):
                payload = bytes(out[offset + header_size : end])
                _CRC.pack_into(out, offset + _PAYLOAD_CRC_AT, crc32c.crc32c(payload))
            header = bytes(out[offset + _CRC.size : offset + header_size])
            _CRC.pack_into(out, offset, crc32c.crc32c(header))
            if end > len(out):
                break
        offset = end
    return bytes(out)


def _check_record_at_start(data: bytes) -> None:
    """A record buffer with no segment header, as ``decode_record`` sees one in each layout."""
    for version in READABLE_VERSIONS:
        with contextlib.suppress(StorageFault):
            result = decode_record(data, 0, version=version, path=_PATH)
            if not isinstance(result, Incomplete):
                record, end = result
                if end != record_header_size(version) + len(record.payload):
                    raise AssertionError(
                        f"a version-{version} record ends at {end} "
                        f"with a {len(record.payload)}-byte payload"
                    )


def _check_last_segment(data: bytes) -> None:
    _check_segment(data, is_last=True)


def _check_earlier_segment(data: bytes) -> None:
    _check_segment(data, is_last=False)


def _check_segment(data: bytes, *, is_last: bool) -> None:
    """Scan ``data`` as recovery does; what the scan passed must read back the same."""
    name_lsn = _name_lsn(data)
    scan = scan_segment(
        data, path=_PATH, name_lsn=name_lsn, expected_first_lsn=None, is_last=is_last
    )
    if scan.torn is not None and not is_last:
        raise AssertionError(f"a segment that is not last was passed with a torn tail: {scan!r}")
    if not 0 <= scan.end <= scan.size == len(data):
        raise AssertionError(f"scan bounds are off for {len(data)} bytes: {scan!r}")
    _check_torn_header(data, scan)
    try:
        records = list(iter_segment(data, path=_PATH, name_lsn=name_lsn, end=scan.end))
    except StorageFault as exc:
        raise AssertionError(f"a segment that scanned sound does not read back: {exc}") from exc
    lsns = [record.lsn for record in records]
    if lsns != list(range(name_lsn, name_lsn + scan.records)):
        raise AssertionError(f"scan counted {scan.records} records from {name_lsn}, read {lsns}")
    for record in records:
        if record.kind == PLAN_RECORD_KIND:
            _tolerate(_check_plan, record.payload)


def _check_torn_header(data: bytes, scan: SegmentScan) -> None:
    """A version-2 torn tail holds no whole record header whose own CRC fails, bar zeros."""
    if scan.torn is None or scan.version == 1 or scan.header_torn:
        return
    tail = data[scan.end :]
    if len(tail) < RECORD_HEADER_SIZE or tail.count(0) == len(tail):
        return
    (stored,) = _CRC.unpack_from(tail)
    if stored != crc32c.crc32c(tail[_CRC.size : RECORD_HEADER_SIZE]):
        raise AssertionError(f"a damaged record header passed as a torn tail: {scan!r}")


def _check_plan(payload: bytes) -> None:
    """A plan that decoded must survive encoding: the same changes and answers."""
    plan = decode_plan(payload)
    try:
        again = decode_plan(encode_plan(plan))
    except StorageFault as exc:
        raise AssertionError(f"a re-encoded plan was refused: {exc}") from exc
    if again != plan:
        raise AssertionError(f"a plan changed across a round trip: {plan!r} -> {again!r}")


def main() -> None:
    """Run libFuzzer over :func:`check_one` with the command-line options it was given."""
    import atheris

    argv = list(sys.argv)
    if not any(arg.startswith("-artifact_prefix=") for arg in argv):
        CRASH_DIR.mkdir(exist_ok=True)
        argv.append(f"-artifact_prefix={CRASH_DIR}/")
    atheris.Setup(argv, check_one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
