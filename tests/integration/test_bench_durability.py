"""The durability suite runs (its --quick form): the disk is probed and group commit shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from tests.integration.benchrun import run_quick

TIMEOUT_S: Final = 110
"""The quick run takes ~15 s on two cores; the margin absorbs a loaded CI machine."""


def test_durability_quick(tmp_path: Path) -> None:
    """A measured fdatasync rate, an ingest curve, and the 8x goal judged at 16 clients."""
    out = tmp_path / "durability.json"
    run_quick("durability", out, timeout=TIMEOUT_S)
    doc = json.loads(out.read_text())
    disk = doc["disk"]
    assert disk["before"]["fdatasyncs"] > 0 and disk["after"]["fdatasyncs"] > 0
    assert disk["fdatasync_per_s"] > 0
    overlapping = disk["overlapping_streams"]
    assert overlapping["streams"] == len(overlapping["per_stream_per_s"]) > 1
    assert overlapping["per_s"] > 0
    assert [run["clients"] for run in doc["curve"]] == [1, 16]
    for run in doc["curve"]:
        assert run["ops_per_s"] > 0 and run["errors"] == 0
        assert run["writes_per_disk_fsync"] == round(run["ops_per_s"] / disk["fdatasync_per_s"], 3)
    # With 16 writes in flight, several share each WAL fsync.
    assert doc["curve"][1]["writes_per_wal_fsync"] > 1
    goal_row = doc["summary"][0]
    assert goal_row["ratio"] == doc["curve"][1]["writes_per_disk_fsync"]
    assert goal_row["met"] == (goal_row["ratio"] >= 8)
    assert isinstance(doc["notes"], list)
    if not goal_row["met"]:
        assert any("Goal not met" in note for note in doc["notes"])
