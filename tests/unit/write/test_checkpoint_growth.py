"""The writer checkpoints when the data file has grown by a bound since the last
checkpoint, so the checkpoint's pin cannot let a fast writer grow the file without
limit between timed checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest

import brain
from brain.engine.store.datafile import DATA_FILE
from brain.engine.write import writer as writer_module
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.opcodes import Opcode
from tests.request_ids import request_id as rid

WRITES = 300
"""Each ENCODE copies a few dozen pages: 300 of them rewrite about 30 MiB."""


def _fill(path: Path) -> tuple[int, int]:
    """(checkpoints taken, data file size) after :data:`WRITES` ENCODEs."""
    db = brain.open(path)
    try:
        store = db._store
        before = store.checkpoints
        for n in range(WRITES):
            answer = db.execute(
                "default", Opcode.ENCODE, Encode(request_id=rid(n), text=f"note {n} " * 20)
            )
            assert isinstance(answer, EncodeOk)
        return store.checkpoints - before, (path / "lmdb" / DATA_FILE).stat().st_size
    finally:
        db.close()


def test_the_growth_bound_keeps_the_data_file_near_its_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Asked after every batch: the bound itself is under test, not how often it is asked.
    monkeypatch.setattr(writer_module, "GROWTH_CHECK_S", 0.0)
    monkeypatch.setattr(writer_module, "CHECKPOINT_GROWTH_BYTES", 2**40)
    _, unbounded = _fill(tmp_path / "unbounded")
    monkeypatch.setattr(writer_module, "CHECKPOINT_GROWTH_BYTES", 256 * 1024)
    checkpoints, bounded = _fill(tmp_path / "bounded")
    assert checkpoints >= 5
    assert bounded * 3 < unbounded, (bounded, unbounded)
