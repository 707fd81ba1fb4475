"""Offline WAL tools: ``verify`` reports without touching, ``truncate_at`` drops a suffix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from brain.engine.wal import (
    StorageFault,
    WalCorruption,
    WriteAheadLog,
    truncate_at,
    verify,
)
from brain.engine.wal.format import SEGMENT_HEADER_SIZE, parse_segment_name
from tests.unit.write.test_wal import digest, flip_bit, make_records, no_sync, offsets_in, write_log


def firsts(directory: Path) -> list[int]:
    """The first LSN of every segment in ``directory``, in order."""
    names = [parse_segment_name(p.name) for p in directory.iterdir()]
    return sorted(n for n in names if n is not None)


# --- verify ---------------------------------------------------------------------------


def test_verify_a_sound_log(tmp_path: Path) -> None:
    write_log(tmp_path, 30, segment_bytes=500)
    before = digest(tmp_path)
    report = verify(tmp_path)
    assert report.ok
    assert (report.first_lsn, report.last_lsn, report.records) == (1, 30, 30)
    assert report.segments == len(firsts(tmp_path)) > 1
    assert report.torn_tail is None and report.corruption is None
    assert digest(tmp_path) == before


def test_verify_reports_a_torn_tail_as_normal_and_leaves_it(tmp_path: Path) -> None:
    write_log(tmp_path, 30, segment_bytes=500)
    active = sorted(tmp_path.iterdir())[-1]
    last = max(offsets_in(active))
    os.truncate(active, active.stat().st_size - 2)
    before = digest(tmp_path)
    report = verify(tmp_path)
    assert report.ok and report.corruption is None
    assert report.last_lsn == last - 1
    assert report.torn_tail is not None
    assert active.name in report.torn_tail and "cuts" in report.torn_tail
    assert digest(tmp_path) == before
    with WriteAheadLog.open(tmp_path, fsync=no_sync) as log:
        assert log.last_lsn == last - 1
        assert log.torn_tail is not None


def test_verify_an_empty_or_missing_directory(tmp_path: Path) -> None:
    report = verify(tmp_path)
    assert report.ok
    assert (report.first_lsn, report.last_lsn, report.records, report.segments) == (1, 0, 0, 0)
    with pytest.raises(FileNotFoundError):
        verify(tmp_path / "nowhere")


def test_verify_counts_the_sound_records_before_a_corruption(tmp_path: Path) -> None:
    write_log(tmp_path, 30, segment_bytes=500)
    middle = sorted(tmp_path.iterdir())[1]
    offsets = offsets_in(middle)
    lsn = sorted(offsets)[1]
    flip_bit(middle, offsets[lsn] + 1, 3)
    report = verify(tmp_path)
    assert not report.ok
    assert isinstance(report.corruption, WalCorruption)
    assert report.corruption.lsn == lsn
    assert (report.last_lsn, report.records) == (lsn - 1, lsn - 1)


# --- truncate_at ----------------------------------------------------------------------


def test_truncate_a_sound_log_in_the_middle_of_a_segment(tmp_path: Path) -> None:
    records = write_log(tmp_path, 30, segment_bytes=500)
    boundaries = firsts(tmp_path)
    lsn = boundaries[1] + 1
    assert truncate_at(tmp_path, lsn) == 30 - lsn + 1
    assert firsts(tmp_path) == boundaries[:2]
    with WriteAheadLog.open(tmp_path, segment_bytes=500, fsync=no_sync) as log:
        assert log.torn_tail is None
        assert list(log.read_from(1)) == records[: lsn - 1]
        log.append(make_records(lsn, [b"again"]))
        log.sync()


def test_truncate_at_a_segment_start_keeps_the_segment_header(tmp_path: Path) -> None:
    records = write_log(tmp_path, 30, segment_bytes=500)
    boundaries = firsts(tmp_path)
    lsn = boundaries[2]
    assert truncate_at(tmp_path, lsn) == 30 - lsn + 1
    assert firsts(tmp_path) == boundaries[:3]
    assert (sorted(tmp_path.iterdir())[-1]).stat().st_size == SEGMENT_HEADER_SIZE
    with WriteAheadLog.open(tmp_path, fsync=no_sync) as log:
        assert list(log.read_from(1)) == records[: lsn - 1]
        assert log.next_lsn == lsn


def test_truncate_everything_keeps_the_position(tmp_path: Path) -> None:
    write_log(tmp_path, 10)
    with WriteAheadLog.open(tmp_path, fsync=no_sync) as log:
        log.rotate()
        log.append(make_records(11, [b"eleven", b"twelve"]))
        log.checkpoint(10)
    assert truncate_at(tmp_path, 11) == 2
    with WriteAheadLog.open(tmp_path, fsync=no_sync) as log:
        assert (log.first_lsn, log.next_lsn) == (11, 11)
    with pytest.raises(ValueError, match="below the first LSN"):
        truncate_at(tmp_path, 10)
    with pytest.raises(ValueError, match="below 1"):
        truncate_at(tmp_path, 0)


def test_truncate_beyond_the_end_changes_nothing(tmp_path: Path) -> None:
    write_log(tmp_path, 12, segment_bytes=500)
    active = sorted(tmp_path.iterdir())[-1]
    os.truncate(active, active.stat().st_size - 1)  # a torn tail stays for open to cut
    before = digest(tmp_path)
    assert truncate_at(tmp_path, 13) == 0
    assert truncate_at(tmp_path, 500) == 0
    assert digest(tmp_path) == before
    assert truncate_at(tmp_path, 12) == 1  # the torn record itself
    assert verify(tmp_path).torn_tail is None


def test_truncate_refuses_when_records_before_the_cut_are_damaged(tmp_path: Path) -> None:
    write_log(tmp_path, 30, segment_bytes=500)
    middle = sorted(tmp_path.iterdir())[1]
    offsets = offsets_in(middle)
    lsn = sorted(offsets)[1]
    flip_bit(middle, offsets[lsn] + 30, 0)
    before = digest(tmp_path)
    for at in (lsn + 1, 30):
        with pytest.raises(WalCorruption) as caught:
            truncate_at(tmp_path, at)
        assert caught.value.lsn == lsn
    assert digest(tmp_path) == before
    assert truncate_at(tmp_path, lsn) == 30 - lsn + 1


def test_truncate_repairs_a_missing_segment_at_the_gap(tmp_path: Path) -> None:
    records = write_log(tmp_path, 30, segment_bytes=500)
    segments = sorted(tmp_path.iterdir())
    gap = firsts(tmp_path)[2]
    segments[2].unlink()
    with pytest.raises(WalCorruption, match="missing segment"):
        WriteAheadLog.open(tmp_path, fsync=no_sync)
    truncate_at(tmp_path, gap)
    with WriteAheadLog.open(tmp_path, fsync=no_sync) as log:
        assert list(log.read_from(1)) == records[: gap - 1]


def test_truncate_refuses_while_the_log_is_open(tmp_path: Path) -> None:
    write_log(tmp_path, 5)
    with (
        WriteAheadLog.open(tmp_path, fsync=no_sync),
        pytest.raises(StorageFault, match="in use"),
    ):
        truncate_at(tmp_path, 3)
