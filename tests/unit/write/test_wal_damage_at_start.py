"""Damage at the end of the WAL as a start finds it, through the whole engine.

spec/05-durability.md §3.3 and §4: a damaged header of the log's last record is
corruption, not a torn tail, also when the store is behind the log (the rollback a
power loss may bring); a torn end holding a record the store has applied is refused,
not cut; a data directory whose log is of format version 1 recovers and goes on in
version 2 (§3.7).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import brain
from brain import cbor
from brain.engine.database import Database
from brain.engine.wal import WalCorruption, WriteAheadLog, encode_record, truncate_at
from brain.wire.messages.memory_ops import EncodeOk, MemoryGet
from brain.wire.opcodes import Opcode
from tests.unit.write.store_behind import encode_applied, logged_request, store_behind
from tests.unit.write.test_wal import digest, encode_v1_record, encode_v1_segment_header

APPLIED = 4
"""Memories logged and applied before the fault."""


def _last_segment(path: Path) -> Path:
    return sorted((path / "wal").glob("wal-*.log"))[-1]


def _flip(path: Path, offset: int, bit: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 1 << bit
    path.write_bytes(bytes(data))


def test_a_flipped_length_bit_in_the_last_record_refuses_with_the_store_behind(
    tmp_path: Path,
) -> None:
    path = tmp_path / "d"
    applied, records = store_behind(path, APPLIED, logged_only=1)
    segment = _last_segment(path)
    lsn = records[-1].lsn
    offset = segment.stat().st_size - len(encode_record(records[-1]))
    # The length field (bytes 4-7 of a record header) grows by 65,536: past the end of
    # the file, so the record looks cut short by a crash.
    assert len(records[-1].payload) < 1 << 16
    _flip(segment, offset + 5, 0)
    before = digest(path / "wal")
    with pytest.raises(WalCorruption) as caught:
        Database.open(path)
    assert (caught.value.lsn, caught.value.offset) == (lsn, offset)
    assert Path(caught.value.path).name == segment.name
    assert digest(path / "wal") == before, "a refused start changes nothing"
    # The operator's way out: drop the damaged record knowingly; its write is then
    # not in the database, and a retry performs it again.
    assert truncate_at(path / "wal", lsn) == 1
    with brain.open(path) as db:
        assert db.applied_lsn >= applied
        retried = db.submit("default", Opcode.ENCODE, logged_request(0)).result()
        answer = EncodeOk.from_wire(cbor.decode(retried))
        assert answer.lsn > applied
        assert db.execute("default", Opcode.MEMORY_GET, MemoryGet(id=answer.memory_id))


def test_a_cut_in_an_applied_record_refuses_the_start_and_cuts_nothing(tmp_path: Path) -> None:
    path = tmp_path / "d"
    with brain.open(path) as db:
        for n in range(APPLIED):
            encode_applied(db, n)
        assert db.wait_indexed()
        applied = db.applied_lsn
    with WriteAheadLog.open(path / "wal") as wal:
        last = list(wal.read_from(wal.first_lsn))[-1]
    assert last.lsn == applied
    segment = _last_segment(path)
    offset = segment.stat().st_size - len(encode_record(last))
    # The store holds LSN `applied`, so its record was whole and synced once: losing
    # its end is damage. Cutting it would leave a log that ends before the store.
    os.truncate(segment, segment.stat().st_size - 5)
    before = digest(path / "wal")
    with pytest.raises(WalCorruption) as caught:
        Database.open(path)
    assert (caught.value.lsn, caught.value.offset) == (applied, offset)
    assert Path(caught.value.path).name == segment.name
    assert f"applied up to LSN {applied}" in str(caught.value)
    assert digest(path / "wal") == before


def test_a_data_directory_with_a_version_1_log_recovers_and_goes_on_in_version_2(
    tmp_path: Path,
) -> None:
    path = tmp_path / "d"
    applied, records = store_behind(path, APPLIED, logged_only=2)
    # The same log as a build of version 1 would have written it.
    wal = path / "wal"
    for segment in sorted(wal.glob("wal-*.log")):
        first = int(segment.name[4:24])
        held = [r for r in records if r.lsn >= first]
        following = sorted(p for p in wal.glob("wal-*.log") if p.name > segment.name)
        if following:
            held = [r for r in held if r.lsn < int(following[0].name[4:24])]
        frames = b"".join(encode_v1_record(r) for r in held)
        segment.write_bytes(encode_v1_segment_header(first, 0) + frames)
    with brain.open(path) as db:
        # Recovery replayed the two version-1 records the store had not applied.
        assert db.applied_lsn >= applied + 2
        for n in range(2):
            retried = db.submit("default", Opcode.ENCODE, logged_request(n)).result()
            assert EncodeOk.from_wire(cbor.decode(retried)).lsn <= applied + 2
        new = encode_applied(db, 200)
    newest = _last_segment(path).read_bytes()
    assert int.from_bytes(newest[8:10], "big") == 2  # new records: the current layout
    with brain.open(path) as db:
        assert db.execute("default", Opcode.MEMORY_GET, MemoryGet(id=new.memory_id))
        for n in range(APPLIED):
            assert encode_applied(db, n).lsn <= applied
