"""A snapshot's WAL (spec/05-durability.md §13): only the records its LMDB copy lacks, in
one segment named for the copy's LSN + 1, which `brain wal verify` reads and a restore
replays to exactly the snapshot's LSN."""

from __future__ import annotations

from pathlib import Path

import brain
from brain.engine.admin.snapshot import restore_snapshot, write_bundle
from brain.engine.database import Database, DatabaseOptions
from brain.engine.store.meta import get_progress
from brain.engine.wal import verify
from brain.engine.wal.log import list_segments
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid

SMALL_SEGMENTS = DatabaseOptions(wal_segment_bytes=4096)
"""Segments of a few records each, so a snapshot's LSN falls inside one."""


def _encode(db: Database, text: str) -> EncodeOk:
    made = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text=text))
    assert isinstance(made, EncodeOk)
    return made


def _holding(root: Path, needle: bytes) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and needle in p.read_bytes()
    )


def test_a_snapshot_copies_only_the_records_its_lmdb_copy_lacks(tmp_path: Path) -> None:
    with brain.open(tmp_path / "live", SMALL_SEGMENTS) as db:
        early = [_encode(db, f"early note {i} with kiwi-{i}") for i in range(40)]
        assert db.wait_indexed()
        assert len(db.wal.segments) > 3
        assert any(b"kiwi-3" in path.read_bytes() for path in db.wal.segments)
        store = db._store
        # The copy's read transaction is taken, then more is written before the WAL
        # is copied: as when writes go on while a snapshot is taken.
        with db.writer.checkpoints_held(), store.read() as txn:
            lsn = get_progress(store, txn).applied_lsn
            late = [_encode(db, f"late note {i}") for i in range(5)]
            assert db.wait_indexed()
            end = db.applied_lsn
            info = write_bundle(
                tmp_path / "bundle",
                env=store.env,
                meta_db_reader=txn,
                lsn=lsn,
                wal_segments=db.wal.segments,
            )
        assert lsn < end and info.lsn == end
    segments = list_segments(tmp_path / "bundle" / "wal")
    assert [first for first, _ in segments] == [lsn + 1]
    report = verify(tmp_path / "bundle" / "wal")
    assert report.ok and report.first_lsn == lsn + 1 and report.last_lsn == end
    assert report.torn_tail is None
    # Records the LMDB copy holds are not in the bundle's WAL.
    assert _holding(tmp_path / "bundle" / "wal", b"kiwi-3") == []
    assert _holding(tmp_path / "bundle" / "wal", b"late note 4") != []
    restore_snapshot(tmp_path / "bundle", tmp_path / "restored")
    with brain.open(tmp_path / "restored") as db:
        assert db.applied_lsn == end
        for made in (early[3], late[4]):
            got = db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=made.memory_id))
            assert isinstance(got, MemoryGetOk) and got.memory.text is not None
        assert _encode(db, "after the restore").lsn == end + 1


def test_a_snapshot_of_a_settled_store_has_an_empty_segment(tmp_path: Path) -> None:
    with brain.open(tmp_path / "live", SMALL_SEGMENTS) as db:
        for i in range(20):
            _encode(db, f"note {i}")
        assert db.wait_indexed()
        lsn = db.applied_lsn
        info = db.snapshot(tmp_path / "bundle")
    assert info.lsn == lsn
    report = verify(tmp_path / "bundle" / "wal")
    assert report.ok and report.records == 0 and report.first_lsn == lsn + 1
    restore_snapshot(tmp_path / "bundle", tmp_path / "restored")
    with brain.open(tmp_path / "restored") as db:
        assert db.applied_lsn == lsn
        assert _encode(db, "next").lsn == lsn + 1
