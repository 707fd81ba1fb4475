"""Atheris fuzz target for what recovery reads back from disk: WAL segments and plans.

Run it (see fuzz/README.md)::

    .venv/bin/python fuzz/fuzz_wal.py -max_total_time=300 fuzz/corpus/wal

The rule it checks: whatever bytes a segment file holds, the readers end
normally or raise a :class:`brain.errors.StorageFault` (of which
:class:`~brain.errors.WalCorruption` is one). Any other exception is a crash
(IndexError, struct.error, a ValueError leaking from a record's own checks…),
and so is a broken invariant: :func:`iter_segment` disagreeing with the
:func:`scan_segment` that passed the same bytes, or a decoded plan that does not
survive :func:`encode_plan`.

Each input is used twice. Raw, it is a segment (scanned as the last segment and
as an earlier one), a record buffer, and a plan payload. Then it is re-sealed:
the segment header's and every whole record's CRC32C are recomputed, so that
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
        RECORD_HEADER_SIZE,
        SEGMENT_HEADER_SIZE,
        Incomplete,
        count_records,
        decode_record,
        iter_segment,
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
            count_records(segment, SEGMENT_HEADER_SIZE, _name_lsn(segment))


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


def reseal(data: bytes) -> bytes:
    """``data`` with the segment header's and each whole record's CRC32C made valid."""
    out = bytearray(data)
    if len(out) < SEGMENT_HEADER_SIZE:
        return bytes(out)
    _CRC.pack_into(out, _HEADER_CRC_AT, crc32c.crc32c(bytes(out[:_HEADER_CRC_AT])))
    offset = SEGMENT_HEADER_SIZE
    while offset + RECORD_HEADER_SIZE <= len(out):
        (length,) = _LENGTH.unpack_from(out, offset + _CRC.size)
        end = offset + RECORD_HEADER_SIZE + length
        if end > len(out):
            break
        _CRC.pack_into(out, offset, crc32c.crc32c(bytes(out[offset + _CRC.size : end])))
        offset = end
    return bytes(out)


def _check_record_at_start(data: bytes) -> None:
    """A record buffer with no segment header, as ``decode_record`` sees one."""
    result = decode_record(data, 0, path=_PATH)
    if not isinstance(result, Incomplete):
        record, end = result
        if end != RECORD_HEADER_SIZE + len(record.payload):
            raise AssertionError(f"record ends at {end} with a {len(record.payload)}-byte payload")


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
