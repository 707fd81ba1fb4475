"""Purge: after a hard forget, the text and its embedding leave every file of the
data directory (WAL, LMDB, index files), on demand and on the database's own."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import brain
from brain.embed.hashing import HashingEmbedder
from brain.engine.admin import purge as purge_module
from brain.engine.database import Database
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget
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
