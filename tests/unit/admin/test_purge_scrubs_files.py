"""Purge: after a hard forget, the text and its embedding leave every file of the
data directory (WAL, LMDB, index files, the bundles in ``snapshots/``), on demand and
on the database's own; version rows of words no document holds go too."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

import pytest

import brain
from brain.embed.hashing import HashingEmbedder
from brain.engine.admin import purge as purge_module
from brain.engine.admin import snapshot as snapshot_module
from brain.engine.admin.snapshot import (
    MANIFEST,
    SNAPSHOT_DIR,
    list_snapshots,
    restore_snapshot,
    scrub_bundles,
)
from brain.engine.database import Database
from brain.engine.store.scope import Scope
from brain.engine.store.tables import LEX_STATS
from brain.engine.wal import verify
from brain.engine.write.plan import Add, Plan, read_counter
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget, MemoryGet, MemoryGetOk
from brain.wire.messages.recall_ops import Recall, RecallOk
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid

SECRET = "the launch code is PELICAN-4417"


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and needle in p.read_bytes()
    )


def _secret_and_filler(db: Database) -> bytes:
    made = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text=SECRET))
    assert isinstance(made, EncodeOk)
    for i in range(30):
        db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text=f"filler number {i}"))
    assert db.wait_indexed()
    return made.memory_id


def test_purge_removes_text_and_vector_bytes(tmp_path: Path) -> None:
    root = tmp_path / "d"
    vector = HashingEmbedder().embed([SECRET])[0].astype("<f4").tobytes()
    with brain.open(root) as db:
        memory = _secret_and_filler(db)
        db.retrieval.indexes.save_dirty()
        assert _files_holding(root, SECRET.encode())  # the test can see it
        assert _files_holding(root, vector[:64])
        db.execute(NS, Opcode.FORGET, Forget(request_id=rid(), memory=memory, mode="hard"))
        assert db.wait_indexed()
        assert db.statistics().purge_pending == 1
        assert db.purge() == 1
        assert db.statistics().purge_pending == 0
        assert _files_holding(root, SECRET.encode()) == []
        assert _files_holding(root, vector[:64]) == []
        # Everything else still answers, and keeps doing so after a restart.
        found = db.execute(NS, Opcode.RECALL, Recall(cue="filler number 7"))
        assert isinstance(found, RecallOk) and found.hits
        again = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text="after the purge"))
        assert isinstance(again, EncodeOk)
    with brain.open(root) as db:
        assert _files_holding(root, SECRET.encode()) == []
        found = db.execute(NS, Opcode.RECALL, Recall(cue="after the purge"))
        assert isinstance(found, RecallOk) and found.hits[0].id == again.memory_id


def test_the_database_purges_on_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(purge_module, "PURGE_INTERVAL_S", 0.0)
    root = tmp_path / "d"
    with brain.open(root) as db:
        memory = _secret_and_filler(db)
        db.execute(NS, Opcode.FORGET, Forget(request_id=rid(), memory=memory, mode="hard"))
        deadline = time.monotonic() + 30
        while db.statistics().purge_pending and time.monotonic() < deadline:
            db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text="a write wakes the writer"))
            time.sleep(0.05)
        assert db.statistics().purge_pending == 0
        assert _files_holding(root, SECRET.encode()) == []


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _as_an_earlier_build_wrote_it(bundle: Path, db: Database) -> dict[str, object]:
    """Make ``bundle`` (just taken, no write since) what earlier builds wrote: the WAL's
    segments copied whole, records the LMDB copy already holds included."""
    manifest = json.loads((bundle / MANIFEST).read_text())
    shutil.rmtree(bundle / "wal")
    (bundle / "wal").mkdir()
    for segment in db.wal.segments:
        shutil.copyfile(segment, bundle / "wal" / segment.name)
    files = sorted(p for p in bundle.rglob("*") if p.is_file() and p.name != MANIFEST)
    manifest["files"] = {str(p.relative_to(bundle)): _sha256(p) for p in files}
    manifest["lsn"] = max(manifest["store_lsn"], verify(bundle / "wal").last_lsn)
    (bundle / MANIFEST).write_text(json.dumps(manifest))
    return dict(manifest)


def test_the_purge_scrubs_the_snapshots_in_the_data_directory(tmp_path: Path) -> None:
    root = tmp_path / "d"
    with brain.open(root) as db:
        memory = _secret_and_filler(db)
        db.execute(NS, Opcode.FORGET, Forget(request_id=rid(), memory=memory, mode="hard"))
        assert db.wait_indexed()
        old = root / SNAPSHOT_DIR / "old"
        db.snapshot(old)
        before = _as_an_earlier_build_wrote_it(old, db)
        assert before["store_lsn"] == before["lsn"] == db.applied_lsn
        assert _files_holding(old, SECRET.encode()) == ["wal/wal-00000000000000000001.log"]
        db.purge()
        assert _files_holding(root, SECRET.encode()) == []
    after = json.loads((old / MANIFEST).read_text())
    assert {k: after[k] for k in ("id", "lsn", "store_lsn", "created_at")} == {
        k: before[k] for k in ("id", "lsn", "store_lsn", "created_at")
    }
    report = verify(old / "wal")
    assert report.ok and report.records == 0 and report.first_lsn == before["lsn"] + 1
    assert [s.id for s in list_snapshots(root / SNAPSHOT_DIR)] == [before["id"]]
    restore_snapshot(old, tmp_path / "restored")
    with brain.open(tmp_path / "restored") as db:
        got = db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=memory))
        assert isinstance(got, MemoryGetOk) and got.memory.text is None
        found = db.execute(NS, Opcode.RECALL, Recall(cue="filler number 7"))
        assert isinstance(found, RecallOk) and found.hits


def test_a_scrub_cut_short_is_finished_or_undone(tmp_path: Path) -> None:
    root = tmp_path / "d"
    snapshots = root / SNAPSHOT_DIR
    with brain.open(root) as db:
        memory = _secret_and_filler(db)
        db.execute(NS, Opcode.FORGET, Forget(request_id=rid(), memory=memory, mode="hard"))
        assert db.wait_indexed()
        for name in ("swapped", "assembling"):
            db.snapshot(snapshots / name)
            _as_an_earlier_build_wrote_it(snapshots / name, db)
    # "swapped": the scrubbed copy was whole and the old bundle half deleted.
    assert snapshot_module.scrub_bundle(snapshots / "swapped")
    (snapshots / "swapped").rename(snapshots / "swapped.scrubbing")
    shutil.copytree(snapshots / "assembling", snapshots / "swapped")
    (snapshots / "swapped" / MANIFEST).unlink()
    # "assembling": the scrubbed copy had no manifest yet; the bundle is untouched.
    (snapshots / "assembling.scrubbing" / "wal").mkdir(parents=True)
    assert scrub_bundles(snapshots) == 1  # "assembling"; "swapped" was finished
    assert sorted(p.name for p in snapshots.iterdir()) == ["assembling", "swapped"]
    assert _files_holding(snapshots, SECRET.encode()) == []
    for name in ("swapped", "assembling"):
        restore_snapshot(snapshots / name, tmp_path / name)
    assert scrub_bundles(snapshots) == 0


def test_the_purge_drops_version_rows_no_posting_backs(db: Database) -> None:
    scope = Scope.of(NS, None)
    term = hashlib.blake2b(b"zanzibar", digest_size=8).digest()
    version = scope.key(b"v:", term)

    def rows() -> dict[bytes, int]:
        with db._store.read() as txn:
            cursor = txn.cursor(db=db._store.table(LEX_STATS))
            return {bytes(k): read_counter(bytes(v)) for k, v in cursor}

    # What an earlier build left: the row of a word no document holds any more.
    db.writer.submit(lambda ctx: Plan((Add(LEX_STATS, version, 7),), ())).result()
    _secret_and_filler(db)
    assert rows()[version] == 7
    db.purge()
    assert version not in rows()
    made = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text="zanzibar again"))
    assert isinstance(made, EncodeOk)
    assert rows()[version] > 7  # above every version the word had, so no cache matches
