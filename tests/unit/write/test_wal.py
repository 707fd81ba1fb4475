"""The write-ahead log: golden bytes, round trips, rotation, torn tails, corruption, fsync faults.

spec/05-durability.md §11 tests 1-3 and 7 at the WAL level, and the reading of version-1
segments (§3.7). Most tests inject an fsync that does nothing, so the sweeps stay fast;
the round trip uses the real one.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import struct
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain.engine.wal import (
    MAX_PAYLOAD,
    StorageFault,
    WalCorruption,
    WalRecord,
    WalSyncFailed,
    WriteAheadLog,
    decode_record,
    encode_record,
    truncate_at,
    verify,
)
from brain.engine.wal.format import (
    FORMAT_VERSION,
    RECORD_HEADER_SIZE,
    SEGMENT_HEADER_SIZE,
    SEGMENT_MAGIC,
    Incomplete,
    encode_segment_header,
    parse_segment_name,
    segment_name,
)

BASE_TIME: Final = 1_700_000_000_000_000_000
"""Record times near 2023, so a wrong sign or width would show."""


# --- helpers (test_wal_tools.py uses them too) ----------------------------------------


def no_sync(fd: int) -> None:
    """An fsync that does nothing: tests that do not test durability stay fast."""


class FakeFsync:
    """Counts calls and raises ``error`` (when set) instead of syncing."""

    def __init__(self) -> None:
        self.calls = 0
        self.error: OSError | None = None

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.error is not None:
            raise self.error


def make_records(start: int, payloads: Iterable[bytes], kind: int = 1) -> list[WalRecord]:
    """Records with LSNs ``start``, ``start + 1``, … carrying ``payloads``."""
    return [
        WalRecord(start + i, BASE_TIME + start + i, kind, payload)
        for i, payload in enumerate(payloads)
    ]


def payload_for(lsn: int) -> bytes:
    """A payload whose size (0 to 40 bytes) and content depend on the LSN."""
    return bytes((lsn * 7 + i) % 256 for i in range(lsn * 13 % 41))


def write_log(directory: Path, count: int, *, segment_bytes: int = 1 << 20) -> list[WalRecord]:
    """A log of ``count`` records appended and synced in batches of 4; returns them."""
    records = make_records(1, (payload_for(lsn) for lsn in range(1, count + 1)))
    with WriteAheadLog.open(directory, segment_bytes=segment_bytes, fsync=no_sync) as log:
        for at in range(0, count, 4):
            log.append(records[at : at + 4])
            log.sync()
    return records


def read_all(directory: Path) -> list[WalRecord]:
    """Open the log in ``directory`` and read every record it holds."""
    with WriteAheadLog.open(directory, fsync=no_sync) as log:
        return list(log.read_from(log.first_lsn))


def digest(directory: Path) -> str:
    """A hash over every file name and content in ``directory``."""
    hasher = hashlib.sha256()
    for path in sorted(directory.iterdir()):
        hasher.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return hasher.hexdigest()


def copy_log(source: Path, target: Path) -> Path:
    """A fresh copy of a WAL directory at ``target``."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    return target


def offsets_in(path: Path) -> dict[int, int]:
    """Where each record of the (sound) segment ``path`` starts, by LSN."""
    data = path.read_bytes()
    first = parse_segment_name(path.name)
    assert first is not None
    version = int.from_bytes(data[8:10], "big")
    offsets = {}
    offset = SEGMENT_HEADER_SIZE
    while offset < len(data):
        result = decode_record(data, offset, version=version)
        assert not isinstance(result, Incomplete)
        offsets[result[0].lsn] = offset
        offset = result[1]
    return offsets


def flip_bit(path: Path, offset: int, bit: int) -> None:
    """Flip one bit of one byte of ``path`` in place."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 1 << bit
    path.write_bytes(bytes(data))


def reseal(frame: bytes) -> bytes:
    """Recompute a record's header CRC, so a crafted field meets the check aimed at it."""
    return crc32c.crc32c(frame[4:RECORD_HEADER_SIZE]).to_bytes(4, "big") + frame[4:]


# Version 1, written here from its description in spec/05-durability.md §3.7 (the log
# itself only reads it), so that the reading of old data directories is tested.
_V1_RECORD: Final = struct.Struct(">IIQqHH")


def encode_v1_record(record: WalRecord) -> bytes:
    """A record in the version-1 layout: one CRC over the rest of the header and the payload."""
    body = _V1_RECORD.pack(0, len(record.payload), record.lsn, record.record_time, record.kind, 0)
    crc = crc32c.crc32c(record.payload, crc32c.crc32c(body[4:]))
    return crc.to_bytes(4, "big") + body[4:] + record.payload


def encode_v1_segment_header(first_lsn: int, created_ns: int) -> bytes:
    """A segment header saying version 1."""
    body = struct.pack(">8sHHQQ", SEGMENT_MAGIC, 1, 0, first_lsn, created_ns)
    return body + crc32c.crc32c(body).to_bytes(4, "big")


def write_v1_segment(directory: Path, first_lsn: int, records: list[WalRecord]) -> Path:
    """A version-1 segment holding ``records`` (whose LSNs start at ``first_lsn``)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / segment_name(first_lsn)
    frames = b"".join(encode_v1_record(r) for r in records)
    path.write_bytes(encode_v1_segment_header(first_lsn, BASE_TIME) + frames)
    return path


# --- the byte layout ------------------------------------------------------------------

GOLDEN_RECORD: Final = bytes.fromhex(
    "4d7caaa6 00000005 0000000000000007 17979cfe3d85cd15 0002 0000 9a71bb4c 68656c6c6f"
)
GOLDEN_HEADER: Final = bytes.fromhex(
    "42524e57414c0001 0002 0000 0000000000000007 17979cfe362a0000 ea91defb"
)
GOLDEN_V1_RECORD: Final = bytes.fromhex(
    "f189eb68 00000005 0000000000000007 17979cfe3d85cd15 0002 0000 68656c6c6f"
)
GOLDEN_V1_HEADER: Final = bytes.fromhex(
    "42524e57414c0001 0001 0000 0000000000000007 17979cfe362a0000 24307d23"
)
"""Version 1's golden vectors, as spec/05-durability.md §3.7 still gives them."""


def test_record_is_encoded_byte_exact() -> None:
    record = WalRecord(7, 1_700_000_000_123_456_789, 2, b"hello")
    assert FORMAT_VERSION == 2
    assert encode_record(record) == GOLDEN_RECORD
    header = GOLDEN_RECORD[:RECORD_HEADER_SIZE]
    assert int.from_bytes(header[:4], "big") == crc32c.crc32c(header[4:])
    assert int.from_bytes(header[28:], "big") == crc32c.crc32c(b"hello")
    assert decode_record(GOLDEN_RECORD, 0) == (record, len(GOLDEN_RECORD))


def test_version_1_records_still_decode() -> None:
    record = WalRecord(7, 1_700_000_000_123_456_789, 2, b"hello")
    assert encode_v1_record(record) == GOLDEN_V1_RECORD
    assert encode_v1_segment_header(7, 1_700_000_000_000_000_000) == GOLDEN_V1_HEADER
    assert decode_record(GOLDEN_V1_RECORD, 0, version=1) == (record, len(GOLDEN_V1_RECORD))
    for size in range(len(GOLDEN_V1_RECORD)):
        assert isinstance(decode_record(GOLDEN_V1_RECORD[:size], 0, version=1), Incomplete)
    damaged = bytearray(GOLDEN_V1_RECORD)
    damaged[-1] ^= 1
    with pytest.raises(WalCorruption, match="record CRC mismatch"):
        decode_record(bytes(damaged), 0, version=1)


def test_segment_header_is_encoded_byte_exact() -> None:
    assert encode_segment_header(7, 1_700_000_000_000_000_000) == GOLDEN_HEADER
    assert int.from_bytes(GOLDEN_HEADER[28:], "big") == crc32c.crc32c(GOLDEN_HEADER[:28])
    assert segment_name(7) == "wal-00000000000000000007.log"
    assert parse_segment_name("wal-00000000000000000007.log") == 7
    assert parse_segment_name("wal-7.log") is None


def test_every_prefix_of_a_record_is_incomplete_and_trailing_bytes_are_left() -> None:
    for size in range(len(GOLDEN_RECORD)):
        assert isinstance(decode_record(GOLDEN_RECORD[:size], 0), Incomplete), size
    buffer = b"xx" + GOLDEN_RECORD + GOLDEN_RECORD[:3]
    result = decode_record(buffer, 2)
    assert not isinstance(result, Incomplete)
    assert result[1] == 2 + len(GOLDEN_RECORD)


@pytest.mark.parametrize(
    ("offset", "value", "match"),
    [
        (25, 0x00, "unknown record kind 0x0000"),
        (24, 0x80, "unknown record kind 0x8002"),
        (27, 0x01, "reserved record bytes"),
        (15, 0x00, "LSN 0"),
        (4, 0x10, "exceeds the maximum"),
    ],
)
def test_sealed_but_invalid_header_fields_are_corruption(
    offset: int, value: int, match: str
) -> None:
    frame = bytearray(GOLDEN_RECORD)
    frame[offset] = value
    with pytest.raises(WalCorruption, match=match):
        decode_record(reseal(bytes(frame)), 0)


def test_records_are_validated_when_built() -> None:
    with pytest.raises(ValueError, match="exceeds"):
        WalRecord(1, 0, 1, bytes(MAX_PAYLOAD + 1))
    with pytest.raises(ValueError, match="LSN"):
        WalRecord(0, 0, 1, b"")
    with pytest.raises(ValueError, match="kind"):
        WalRecord(1, 0, 0, b"")
    with pytest.raises(ValueError, match="i64"):
        WalRecord(1, 1 << 63, 1, b"")


# --- 1. round trip --------------------------------------------------------------------


def test_round_trip_with_real_fsync(tmp_path: Path) -> None:
    payloads = [b"", b"x", bytes(range(256)) * 40, b"", os.urandom(1000), b"\x00" * 70_000]
    records = make_records(1, payloads, kind=3)
    with WriteAheadLog.open(tmp_path / "wal") as log:
        assert (log.first_lsn, log.last_lsn, log.next_lsn) == (1, 0, 1)
        log.append(records[:2])
        log.append(records[2:])
        log.sync()
        log.sync()  # nothing new: no second fsync
        assert log.sync_count == 1
        assert log.last_lsn == len(records)
        assert log.bytes_written == SEGMENT_HEADER_SIZE + sum(
            len(encode_record(r)) for r in records
        )
    with WriteAheadLog.open(tmp_path / "wal") as log:
        assert list(log.read_from(1)) == records
        assert list(log.read_from(4)) == records[3:]
        assert list(log.read_from(len(records) + 1)) == []
        assert log.torn_tail is None
        assert log.next_lsn == len(records) + 1


def test_append_refuses_wrong_lsns_and_writes_nothing(tmp_path: Path) -> None:
    with WriteAheadLog.open(tmp_path, fsync=no_sync) as log:
        log.append(make_records(1, [b"a"]))
        size = log.segments[-1].stat().st_size
        with pytest.raises(ValueError, match="LSN 3 where LSN 2"):
            log.append(make_records(3, [b"b"]))
        with pytest.raises(ValueError, match="LSN 4 where LSN 3"):
            log.append([*make_records(2, [b"b"]), *make_records(4, [b"c"])])
        assert log.segments[-1].stat().st_size == size
        assert log.last_lsn == 1
        log.append([])
    with pytest.raises(ValueError, match="closed"):
        log.append(make_records(2, [b"b"]))


def test_a_second_writer_is_refused(tmp_path: Path) -> None:
    with WriteAheadLog.open(tmp_path, fsync=no_sync), pytest.raises(StorageFault, match="in use"):
        WriteAheadLog.open(tmp_path, fsync=no_sync)
    WriteAheadLog.open(tmp_path, fsync=no_sync).close()


# --- 2. rotation and checkpoint -------------------------------------------------------


def test_rotation_keeps_lsns_contiguous_and_checkpoint_spares_the_active(tmp_path: Path) -> None:
    records = write_log(tmp_path, 60, segment_bytes=300)
    with WriteAheadLog.open(tmp_path, segment_bytes=300, fsync=no_sync) as log:
        paths = log.segments
        assert len(paths) > 5
        firsts = [parse_segment_name(p.name) for p in paths]
        assert firsts[0] == 1
        for path in paths[:-1]:
            # Only a record that alone outgrows a segment may push it past the limit.
            offsets = offsets_in(path)
            assert len(offsets) == 1 or path.stat().st_size <= 300
        assert list(log.read_from(1)) == records
        boundary = firsts[3]
        assert boundary is not None
        deleted = log.checkpoint(boundary - 1)  # exactly the first three are wholly ≤
        assert deleted == paths[:3]
        assert not any(p.exists() for p in deleted)
        assert log.first_lsn == boundary
        assert list(log.read_from(boundary)) == records[boundary - 1 :]
        with pytest.raises(ValueError, match="below the first LSN"):
            log.read_from(1)
        assert log.checkpoint(boundary) == []  # its segment still holds later records
        assert log.checkpoint(log.last_lsn) == paths[3:-1]
        assert log.segments == [paths[-1]]
        with pytest.raises(ValueError, match="outside"):
            log.checkpoint(log.last_lsn + 1)
    assert read_all(tmp_path) == [r for r in records if r.lsn >= log.first_lsn]


def test_rotate_and_checkpoint_empty_the_log_but_keep_its_position(tmp_path: Path) -> None:
    write_log(tmp_path, 5)
    with WriteAheadLog.open(tmp_path, fsync=no_sync) as log:
        log.rotate()
        log.rotate()  # the new segment is empty: nothing to do
        assert len(log.segments) == 2
        assert len(log.checkpoint(5)) == 1
    with WriteAheadLog.open(tmp_path, fsync=no_sync) as log:
        assert (log.first_lsn, log.last_lsn, log.next_lsn) == (6, 5, 6)
        assert list(log.read_from(6)) == []
        log.append(make_records(6, [b"six"]))
    assert [r.lsn for r in read_all(tmp_path)] == [6]


def test_a_record_larger_than_a_segment_gets_one_to_itself(tmp_path: Path) -> None:
    records = make_records(1, [b"a", bytes(500), b"b"])
    with WriteAheadLog.open(tmp_path, segment_bytes=100, fsync=no_sync) as log:
        log.append(records)
        assert len(log.segments) == 3
    assert read_all(tmp_path) == records


# --- 3. torn tails: the truncation sweep ----------------------------------------------


def test_truncation_sweep_over_the_last_three_records(tmp_path: Path) -> None:
    source = tmp_path / "source"
    records = write_log(source, 40, segment_bytes=700)
    active = sorted(source.iterdir())[-1]
    offsets = offsets_in(active)
    last_three = sorted(offsets)[-3:]
    start, end = offsets[last_three[0]], active.stat().st_size
    assert len(offsets) > 3 and len(list(source.iterdir())) > 1
    for size in range(start, end + 1):
        work = copy_log(source, tmp_path / "work")
        os.truncate(work / active.name, size)
        whole = [r for r in records if r.lsn not in offsets or _end_of(r, offsets) <= size]
        boundary = max(
            [_end_of(r, offsets) for r in whole if r.lsn in offsets], default=SEGMENT_HEADER_SIZE
        )
        with WriteAheadLog.open(work, segment_bytes=700, fsync=no_sync) as log:
            assert list(log.read_from(1)) == whole, size
            assert (work / active.name).stat().st_size == boundary, size
            assert (log.torn_tail is None) == (size == boundary)
            more = make_records(log.next_lsn, [b"after", b"", b"the cut"])
            log.append(more)
            log.sync()
        assert read_all(work) == whole + more, size


def _end_of(record: WalRecord, offsets: dict[int, int]) -> int:
    return offsets[record.lsn] + len(encode_record(record))


def test_short_or_zeroed_last_segment_header_is_rewritten_from_its_name(tmp_path: Path) -> None:
    write_log(tmp_path, 5)
    with WriteAheadLog.open(tmp_path, fsync=no_sync) as log:
        log.rotate()
        log.checkpoint(5)
        (active,) = log.segments
    for content in (b"", b"BRNW", bytes(SEGMENT_HEADER_SIZE), bytes(100)):
        active.write_bytes(content)
        with WriteAheadLog.open(tmp_path, fsync=no_sync) as log:
            assert log.torn_tail is not None and "header torn" in log.torn_tail
            assert (log.first_lsn, log.next_lsn) == (6, 6)
            assert active.stat().st_size == SEGMENT_HEADER_SIZE


def test_zero_filled_tail_is_a_torn_tail(tmp_path: Path) -> None:
    records = write_log(tmp_path, 6)
    (active,) = sorted(tmp_path.iterdir())
    size = active.stat().st_size
    with active.open("ab") as file:
        file.write(bytes(4096))
    with WriteAheadLog.open(tmp_path, fsync=no_sync) as log:
        assert log.torn_tail is not None and "zero bytes" in log.torn_tail
        assert list(log.read_from(1)) == records
    assert active.stat().st_size == size


# --- 4. a flipped bit -----------------------------------------------------------------

RECORD_PARTS: Final = {
    "header crc": range(4),
    "length": range(4, 8),
    "lsn": range(8, 16),
    "time": range(16, 24),
    "kind+reserved": range(24, 28),
    "payload crc": range(28, 32),
    "payload": range(32, 36),
}


@pytest.mark.parametrize("part", sorted(RECORD_PARTS))
def test_a_flipped_bit_in_a_record_refuses_names_it_and_changes_nothing(
    tmp_path: Path, part: str
) -> None:
    source = tmp_path / "source"
    records = write_log(source, 30, segment_bytes=500)
    segments = sorted(source.iterdir())
    assert len(segments) >= 3
    # A record in the middle of a middle segment, and one just before the last record.
    targets = [segments[1], segments[-1]]
    for target in targets:
        offsets = offsets_in(target)
        # Any record with a payload to flip, as long as a whole record follows it.
        lsn = max(n for n in sorted(offsets)[:-1] if len(records[n - 1].payload) >= 4)
        for byte in RECORD_PARTS[part]:
            for bit in range(8):
                work = copy_log(source, tmp_path / "work")
                flip_bit(work / target.name, offsets[lsn] + byte, bit)
                before = digest(work)
                with pytest.raises(WalCorruption) as caught:
                    WriteAheadLog.open(work, segment_bytes=500, fsync=no_sync)
                error = caught.value
                assert (error.lsn, error.offset) == (lsn, offsets[lsn]), (byte, bit, error)
                assert Path(error.path).name == target.name
                assert f"LSN {lsn}" in str(error) and target.name in str(error)
                assert digest(work) == before
                _assert_verify_and_truncate_repair(work, error, lsn, records)


def _assert_verify_and_truncate_repair(
    work: Path, error: WalCorruption, lsn: int, records: list[WalRecord]
) -> None:
    before = digest(work)
    report = verify(work)
    assert not report.ok
    assert report.corruption is not None and str(report.corruption) == str(error)
    assert report.last_lsn == lsn - 1
    assert digest(work) == before
    assert truncate_at(work, lsn) == len(records) - lsn + 1
    assert read_all(work) == records[: lsn - 1]


def test_a_flipped_bit_in_a_segment_header_refuses(tmp_path: Path) -> None:
    source = tmp_path / "source"
    records = write_log(source, 30, segment_bytes=500)
    segments = sorted(source.iterdir())
    for target in (segments[0], segments[2], segments[-1]):
        first = parse_segment_name(target.name)
        assert first is not None
        for byte in range(SEGMENT_HEADER_SIZE):
            work = copy_log(source, tmp_path / "work")
            flip_bit(work / target.name, byte, byte % 8)
            before = digest(work)
            with pytest.raises(WalCorruption) as caught:
                WriteAheadLog.open(work, fsync=no_sync)
            assert caught.value.lsn == first
            assert Path(caught.value.path).name == target.name
            assert 0 <= caught.value.offset <= SEGMENT_HEADER_SIZE
            assert digest(work) == before
            _assert_verify_and_truncate_repair(work, caught.value, first, records)


@pytest.mark.parametrize("byte", range(RECORD_HEADER_SIZE))
def test_a_flipped_bit_in_the_last_records_header_is_corruption_not_a_torn_tail(
    tmp_path: Path, byte: int
) -> None:
    # A damaged length in the log's very last record points past the end of the file,
    # as a torn append would; the header's own CRC tells the two apart.
    source = tmp_path / "source"
    records = write_log(source, 12)
    (segment,) = sorted(source.iterdir())
    lsn = len(records)
    offset = offsets_in(segment)[lsn]
    for bit in range(8):
        work = copy_log(source, tmp_path / "work")
        flip_bit(work / segment.name, offset + byte, bit)
        before = digest(work)
        with pytest.raises(WalCorruption) as caught:
            WriteAheadLog.open(work, fsync=no_sync)
        error = caught.value
        assert (error.lsn, error.offset) == (lsn, offset), (bit, error)
        assert Path(error.path).name == segment.name
        assert "header CRC mismatch" in error.reason
        assert digest(work) == before
        _assert_verify_and_truncate_repair(work, error, lsn, records)


def test_a_torn_tail_holding_an_applied_record_is_refused_not_cut(tmp_path: Path) -> None:
    source = tmp_path / "source"
    records = write_log(source, 10)
    (segment,) = sorted(source.iterdir())
    last = offsets_in(segment)[10]
    sound = segment.read_bytes()
    cases = {
        "record cut short": sound[:-3],
        "header cut short": sound[: last + RECORD_HEADER_SIZE - 1],
        "zeros": sound[:last] + bytes(100),
    }
    for name, damaged in cases.items():
        work = copy_log(source, tmp_path / "work")
        (work / segment.name).write_bytes(damaged)
        before = digest(work)
        with WriteAheadLog.open(work, fsync=no_sync, defer_cut=True) as log:
            assert list(log.read_from(1)) == records[:9], name
            with pytest.raises(ValueError, match="torn tail"):
                log.append(make_records(10, [b"too soon"]))
            # The store applied LSN 10, so it was whole and synced: damage, not a torn append.
            with pytest.raises(WalCorruption) as caught:
                log.cut_torn_tail(10)
            assert (caught.value.lsn, caught.value.offset) == (10, last), name
            assert Path(caught.value.path).name == segment.name
            assert "applied up to LSN 10" in str(caught.value)
            assert digest(work) == before, name
            assert log.torn_tail is None
            # A store one record behind is the rollback a power loss may bring: a torn tail.
            log.cut_torn_tail(9)
            assert log.torn_tail is not None
            assert (work / segment.name).stat().st_size == last
            log.append(make_records(10, [b"again"]))
            log.sync()
        assert read_all(work) == [*records[:9], *make_records(10, [b"again"])]


def test_a_torn_header_at_or_below_the_applied_lsn_is_refused(tmp_path: Path) -> None:
    write_log(tmp_path, 5)
    with WriteAheadLog.open(tmp_path, fsync=no_sync) as log:
        log.rotate()
        log.checkpoint(5)
        (active,) = log.segments
    active.write_bytes(b"BRN")
    with WriteAheadLog.open(tmp_path, fsync=no_sync, defer_cut=True) as log:
        with pytest.raises(WalCorruption, match="applied up to LSN 6") as caught:
            log.cut_torn_tail(6)
        assert (caught.value.lsn, caught.value.offset) == (6, 0)
        assert active.read_bytes() == b"BRN"
        log.cut_torn_tail(5)
        assert active.stat().st_size == SEGMENT_HEADER_SIZE


# --- 5. gaps and other corruption -----------------------------------------------------


def test_a_missing_middle_segment_is_corruption(tmp_path: Path) -> None:
    write_log(tmp_path, 30, segment_bytes=500)
    segments = sorted(tmp_path.iterdir())
    missing = parse_segment_name(segments[2].name)
    segments[2].unlink()
    before = digest(tmp_path)
    with pytest.raises(WalCorruption, match="missing segment") as caught:
        WriteAheadLog.open(tmp_path, fsync=no_sync)
    assert caught.value.lsn == missing
    assert Path(caught.value.path) == segments[3]
    assert digest(tmp_path) == before


def test_a_gap_inside_a_segment_is_corruption(tmp_path: Path) -> None:
    frames = [encode_record(r) for r in make_records(1, [b"a", b"b"])]
    frames += [encode_record(r) for r in make_records(4, [b"d", b"e"])]
    path = tmp_path / segment_name(1)
    path.write_bytes(encode_segment_header(1, BASE_TIME) + b"".join(frames))
    with pytest.raises(WalCorruption, match="expected LSN 3, found 4") as caught:
        WriteAheadLog.open(tmp_path, fsync=no_sync)
    assert (caught.value.lsn, caught.value.offset) == (
        3,
        SEGMENT_HEADER_SIZE + len(frames[0]) + len(frames[1]),
    )


def test_a_torn_end_in_a_segment_that_is_not_last_is_corruption(tmp_path: Path) -> None:
    write_log(tmp_path, 30, segment_bytes=500)
    segments = sorted(tmp_path.iterdir())
    os.truncate(segments[1], segments[1].stat().st_size - 3)
    with pytest.raises(WalCorruption, match="not the last") as caught:
        WriteAheadLog.open(tmp_path, fsync=no_sync)
    assert Path(caught.value.path) == segments[1]


def test_a_header_name_mismatch_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / segment_name(5)
    path.write_bytes(encode_segment_header(4, BASE_TIME))
    with pytest.raises(WalCorruption, match="file name says 5"):
        WriteAheadLog.open(tmp_path, fsync=no_sync)


# --- 6. fsync failure -----------------------------------------------------------------


def test_a_failed_fsync_fails_the_log_for_good(tmp_path: Path) -> None:
    fsync = FakeFsync()
    synced = make_records(1, [b"one", b"two"])
    with WriteAheadLog.open(tmp_path, fsync=fsync) as log:
        log.append(synced)
        log.sync()
        log.append(make_records(3, [b"three"]))
        fsync.error = OSError(errno.EIO, "Input/output error")
        calls = fsync.calls
        with pytest.raises(WalSyncFailed) as caught:
            log.sync()
        assert isinstance(caught.value.__cause__, OSError)
        assert caught.value.__cause__.errno == errno.EIO
        assert fsync.calls == calls + 1
        fsync.error = None  # even a disk that "recovers" is never asked again
        for attempt in (
            log.sync,
            lambda: log.append(make_records(4, [b"four"])),
            lambda: log.checkpoint(1),
            lambda: log.read_from(1),
        ):
            with pytest.raises(WalSyncFailed) as again:
                attempt()
            assert again.value.__cause__ is caught.value.__cause__
        assert fsync.calls == calls + 1
        assert log.failed and log.sync_count == 1
    assert read_all(tmp_path)[:2] == synced


def test_a_failed_fsync_during_rotation_fails_the_log(tmp_path: Path) -> None:
    fsync = FakeFsync()
    with WriteAheadLog.open(tmp_path, segment_bytes=100, fsync=fsync) as log:
        log.append(make_records(1, [bytes(40)]))
        log.sync()
        fsync.error = OSError(errno.ENOSPC, "No space left on device")
        with pytest.raises(WalSyncFailed, match=r"while (rotating|appending)"):
            log.append(make_records(2, [bytes(40)]))
        calls = fsync.calls
        with pytest.raises(WalSyncFailed):
            log.sync()
        assert fsync.calls == calls
    assert read_all(tmp_path) == make_records(1, [bytes(40)])


# --- 7. the crash property ------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(
        st.tuples(st.lists(st.binary(max_size=120), min_size=1, max_size=6), st.booleans()),
        min_size=1,
        max_size=12,
    ),
    segment_bytes=st.integers(min_value=80, max_value=1200),
    cut_fraction=st.floats(min_value=0.0, max_value=1.0),
)
def test_a_crash_keeps_a_prefix_holding_everything_synced(
    batches: list[tuple[list[bytes], bool]], segment_bytes: int, cut_fraction: float
) -> None:
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        appended: list[WalRecord] = []
        durable = 0
        synced_at: tuple[Path, int] | None = None
        with WriteAheadLog.open(directory, segment_bytes=segment_bytes, fsync=no_sync) as log:
            for payloads, sync in batches:
                batch = make_records(log.next_lsn, payloads)
                log.append(batch)
                appended += batch
                if sync:
                    log.sync()
                    durable = len(appended)
                    synced_at = (log.segments[-1], log.segments[-1].stat().st_size)
            active = log.segments[-1]
        # A crash loses only what the active segment got after its last fsync:
        # rotation synced the segments before it, and its own header.
        # (Cutting into the header, which a crash cannot do, must still keep the rest.)
        size = active.stat().st_size
        floor = synced_at[1] if synced_at is not None and synced_at[0] == active else 0
        os.truncate(active, floor + int((size - floor) * cut_fraction))
        survived = read_all(directory)
        assert survived == appended[: len(survived)]
        assert len(survived) >= durable


# --- 8. version-1 segments ------------------------------------------------------------


def test_a_version_1_log_is_read_and_new_records_go_to_a_version_2_segment(
    tmp_path: Path,
) -> None:
    old = make_records(1, [payload_for(lsn) for lsn in range(1, 8)])
    first = write_v1_segment(tmp_path, 1, old[:4])
    second = write_v1_segment(tmp_path, 5, old[4:])
    assert verify(tmp_path).ok and verify(tmp_path).records == 7
    assert read_all(tmp_path) == old  # reading changes nothing
    assert sorted(tmp_path.iterdir()) == [first, second]
    new = make_records(8, [b"eight", b"nine"])
    with WriteAheadLog.open(tmp_path, fsync=no_sync) as log:
        assert (log.first_lsn, log.next_lsn) == (1, 8)
        log.append(new)
        log.sync()
        assert len(log.segments) == 3
        current = log.segments[-1]
        assert current.name == segment_name(8)
        assert current.read_bytes()[8:10] == FORMAT_VERSION.to_bytes(2, "big")
        assert second.read_bytes()[8:10] == b"\x00\x01"  # the old segment is left as it was
    assert read_all(tmp_path) == old + new
    with WriteAheadLog.open(tmp_path, fsync=no_sync) as log:
        assert log.checkpoint(7) == [first, second]
    assert read_all(tmp_path) == new


def test_an_empty_version_1_active_segment_gets_a_current_header_in_place(
    tmp_path: Path,
) -> None:
    write_v1_segment(tmp_path, 1, make_records(1, [b"a", b"b"]))
    empty = write_v1_segment(tmp_path, 3, [])
    with WriteAheadLog.open(tmp_path, fsync=no_sync) as log:
        log.append(make_records(3, [b"c"]))
        log.sync()
        assert log.segments[-1] == empty
    assert empty.read_bytes()[8:10] == FORMAT_VERSION.to_bytes(2, "big")
    assert [r.payload for r in read_all(tmp_path)] == [b"a", b"b", b"c"]


def test_version_1_torn_tails_and_corruption_are_judged_as_before(tmp_path: Path) -> None:
    records = make_records(1, [payload_for(lsn) for lsn in range(1, 9)])
    source = write_v1_segment(tmp_path / "source", 1, records).parent
    (segment,) = sorted(source.iterdir())
    # Cut inside the last record: a torn tail.
    work = copy_log(source, tmp_path / "work")
    os.truncate(work / segment.name, segment.stat().st_size - 2)
    with WriteAheadLog.open(work, fsync=no_sync) as log:
        assert log.torn_tail is not None
        assert list(log.read_from(1)) == records[:-1]
    # A flipped bit in a whole record before the last: corruption, named.
    work = copy_log(source, tmp_path / "work")
    offset = SEGMENT_HEADER_SIZE + sum(len(encode_v1_record(r)) for r in records[:3])
    flip_bit(work / segment.name, offset + 10, 3)
    with pytest.raises(WalCorruption, match="record CRC mismatch") as caught:
        WriteAheadLog.open(work, fsync=no_sync)
    assert (caught.value.lsn, caught.value.offset) == (4, offset)
    _assert_verify_and_truncate_repair(work, caught.value, 4, records)


def test_a_version_1_length_flip_in_the_last_record_is_refused_once_applied(
    tmp_path: Path,
) -> None:
    # Version 1 cannot tell this damage from a torn append; the store's applied LSN can.
    records = make_records(1, [payload_for(lsn) for lsn in range(1, 6)])
    path = write_v1_segment(tmp_path, 1, records)
    offset = path.stat().st_size - len(encode_v1_record(records[-1]))
    flip_bit(path, offset + 5, 0)  # the length grows by 65,536: past the end of the file
    before = digest(tmp_path)
    with (
        WriteAheadLog.open(tmp_path, fsync=no_sync, defer_cut=True) as log,
        pytest.raises(WalCorruption) as caught,
    ):
        log.cut_torn_tail(5)
    assert (caught.value.lsn, caught.value.offset) == (5, offset)
    assert digest(tmp_path) == before


def test_a_segment_of_an_unknown_version_is_refused(tmp_path: Path) -> None:
    body = struct.pack(">8sHHQQ", SEGMENT_MAGIC, 3, 0, 1, BASE_TIME)
    (tmp_path / segment_name(1)).write_bytes(body + crc32c.crc32c(body).to_bytes(4, "big"))
    with pytest.raises(WalCorruption, match="unsupported WAL format version 3") as caught:
        WriteAheadLog.open(tmp_path, fsync=no_sync)
    assert (caught.value.lsn, caught.value.offset) == (1, 8)
