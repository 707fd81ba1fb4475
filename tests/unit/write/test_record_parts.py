"""A plan larger than one record of its log is logged as parts (spec/05-durability.md
§14.12): split and joined again byte for byte, parts a deposed writer left without the
rest dropped and counted into the next record, never applied; a database whose log
takes small records writes, answers and recovers large plans as any other."""

from __future__ import annotations

from pathlib import Path

import lmdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import brain
from brain.engine.database import Database
from brain.engine.wal import WalRecord, WriteAheadLog
from brain.engine.wal.parts import (
    MIN_PART_ROOM,
    PART_HEADER,
    PART_RECORD_KIND,
    Whole,
    join_parts,
    record_count,
    split_record,
)
from brain.engine.write.plan import PLAN_RECORD_KIND
from brain.errors import Unavailable
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.opcodes import Opcode
from tests.request_ids import request_id as rid

LIMIT = MIN_PART_ROOM + PART_HEADER.size
"""The smallest record limit a log may have: every test plan below is cut at it."""

BIG_TEXT_CHARS = 200 * 1024
"""A memory whose plan is several records at :data:`LIMIT`."""


def whole(lsn: int, payload: bytes = b"plan") -> WalRecord:
    return WalRecord(lsn, 7, PLAN_RECORD_KIND, payload)


@settings(max_examples=50, deadline=None)
@given(
    size=st.integers(min_value=0, max_value=5 * LIMIT),
    limit=st.integers(min_value=LIMIT, max_value=3 * LIMIT),
    lsn=st.integers(min_value=1, max_value=1 << 40),
)
def test_split_then_joined_is_the_record(size: int, limit: int, lsn: int) -> None:
    payload = bytes(i % 251 for i in range(size))
    records = split_record(lsn, 42, PLAN_RECORD_KIND, payload, limit)
    assert len(records) == record_count(size, limit)
    assert [r.lsn for r in records] == list(range(lsn, lsn + len(records)))
    assert all(len(r.payload) <= limit for r in records)
    assert (len(records) == 1) == (size <= limit)
    joined = list(join_parts(records))
    assert joined == [Whole(lsn, 42, PLAN_RECORD_KIND, payload, lsn, lsn + len(records) - 1)]


def test_a_limit_too_small_for_parts_is_refused() -> None:
    with pytest.raises(ValueError, match="too small"):
        split_record(1, 0, PLAN_RECORD_KIND, bytes(LIMIT * 2), LIMIT - 1)


def test_parts_without_the_rest_are_dropped_and_counted_into_the_next_record() -> None:
    parts = split_record(10, 1, PLAN_RECORD_KIND, bytes(3 * MIN_PART_ROOM + 1), LIMIT)
    assert len(parts) == 4
    # A writer deposed after two parts; the next appends a whole record after them.
    assert list(join_parts([*parts[:2], whole(12)])) == [
        Whole(12, 7, PLAN_RECORD_KIND, b"plan", 10, 12)
    ]
    # Or a split record of its own, at the same place.
    again = split_record(12, 2, PLAN_RECORD_KIND, bytes(2 * MIN_PART_ROOM + 1), LIMIT)
    joined = list(join_parts([*parts[:2], *again]))
    assert [(w.lsn, w.first, w.last) for w in joined] == [(12, 10, 14)]
    assert joined[0].payload == bytes(2 * MIN_PART_ROOM + 1)


def test_incomplete_or_damaged_parts_are_never_yielded() -> None:
    parts = split_record(5, 1, PLAN_RECORD_KIND, bytes(2 * MIN_PART_ROOM + 1), LIMIT)
    assert len(parts) == 3
    # The end of what was read so far: a reader reads them again later.
    assert list(join_parts([whole(4), *parts[:2]])) == [
        Whole(4, 7, PLAN_RECORD_KIND, b"plan", 4, 4)
    ]
    # Read from the middle of a split record: its later parts alone are no record.
    assert list(join_parts(parts[1:])) == []
    # A part whose header does not fit where it stands.
    first, index, count, kind = PART_HEADER.unpack_from(parts[1].payload)
    moved = WalRecord(
        6,
        1,
        PART_RECORD_KIND,
        PART_HEADER.pack(first + 1, index, count, kind) + parts[1].payload[PART_HEADER.size :],
    )
    short = WalRecord(6, 1, PART_RECORD_KIND, b"tiny")
    for damaged in (moved, short):
        assert list(join_parts([parts[0], damaged, parts[2], whole(8)])) == [
            Whole(8, 7, PLAN_RECORD_KIND, b"plan", 5, 8)
        ]


@pytest.fixture
def small_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local log takes records of :data:`LIMIT` bytes, as a NATS server's would."""
    monkeypatch.setattr(WriteAheadLog, "max_record_payload", property(lambda self: LIMIT))


def big_text(n: int) -> str:
    return f"{n} " + "".join(chr(0x61 + (i * 7 + n) % 26) for i in range(BIG_TEXT_CHARS))


def encode(db: Database, n: int) -> EncodeOk:
    answer = db.execute("default", Opcode.ENCODE, Encode(request_id=rid(n), text=big_text(n)))
    assert isinstance(answer, EncodeOk)
    return answer


def crash() -> None:
    raise lmdb.Error("injected failure between the log's sync and the LMDB commit")


def text_of(db: Database, answer: EncodeOk) -> str:
    found = db.execute("default", Opcode.MEMORY_GET, MemoryGet(id=answer.memory_id))
    assert isinstance(found, MemoryGetOk)
    assert found.memory.text is not None
    return found.memory.text


@pytest.mark.usefixtures("small_records")
def test_a_large_plan_is_written_in_parts_and_recovered_whole(tmp_path: Path) -> None:
    db = brain.open(tmp_path)
    try:
        first, second = encode(db, 1), encode(db, 2)
        assert text_of(db, first) == big_text(1)
        assert db.wait_indexed()
        # A third is logged and its commit fails: recovery applies it from its parts.
        db.writer.inject_fault_before_commit(crash)
        with pytest.raises(Unavailable):
            db.execute("default", Opcode.ENCODE, Encode(request_id=rid(3), text=big_text(3)))
    finally:
        db.close()
    with WriteAheadLog.open(tmp_path / "wal") as wal:
        logged = list(wal.read_from(wal.first_lsn))
    last_first, _, count, _ = PART_HEADER.unpack_from(logged[-1].payload)
    assert logged[-1].kind == PART_RECORD_KIND and count > 2
    assert [r.kind for r in logged[-count:]] == [PART_RECORD_KIND] * count
    db = brain.open(tmp_path)
    try:
        assert db.applied_lsn == logged[-1].lsn
        retried = db.execute("default", Opcode.ENCODE, Encode(request_id=rid(3), text=big_text(3)))
        assert isinstance(retried, EncodeOk)  # answered from the recovered record
        assert retried.lsn == last_first == logged[-1].lsn - count + 1
        assert text_of(db, retried) == big_text(3)
        assert text_of(db, second) == big_text(2)
    finally:
        db.close()


@pytest.mark.usefixtures("small_records")
def test_torn_parts_at_the_end_of_the_log_are_never_applied(tmp_path: Path) -> None:
    db = brain.open(tmp_path)
    try:
        kept = encode(db, 1)
    finally:
        db.close()
    # A writer deposed mid-append left two parts of a payload that is no plan: a
    # recovery that applied them would fail the open.
    with WriteAheadLog.open(tmp_path / "wal") as wal:
        torn = split_record(wal.next_lsn, 1, PLAN_RECORD_KIND, bytes(3 * MIN_PART_ROOM), LIMIT)
        wal.append(torn[:2])
        wal.sync()
        torn_end = wal.last_lsn
    db = brain.open(tmp_path)
    try:
        # Opened past them: no record was applied from them, and the next write
        # comes after them.
        after = encode(db, 2)
        assert after.lsn > torn_end
        assert text_of(db, kept) == big_text(1)
    finally:
        db.close()
    db = brain.open(tmp_path)  # recovery reads past the torn parts
    try:
        assert text_of(db, after) == big_text(2)
    finally:
        db.close()
