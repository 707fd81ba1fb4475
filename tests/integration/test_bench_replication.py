"""The replication suite runs (its --quick form): the same writes on three JetStream
replicas and on the single node's WAL, their ratio reported pair by pair."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from tests.integration.benchrun import run_quick

TIMEOUT_S: Final = 120
"""The quick run takes ~10 s (a cluster to start, two one-second turns); the margin
absorbs a loaded CI machine."""


def test_replication_quick(tmp_path: Path) -> None:
    out = tmp_path / "replication.json"
    run_quick("replication", out, timeout=TIMEOUT_S)
    doc = json.loads(out.read_text())
    replicated, single = doc["runs"]["replicated"], doc["runs"]["single"]
    assert len(replicated) == len(single) == 1
    for run in (*replicated, *single):
        assert run["writes"] > 0 and run["writes_per_s"] > 0
    expected = round(replicated[0]["writes_per_s"] / single[0]["writes_per_s"], 3)
    assert doc["ratio"]["per_pair"] == [expected]
    row = doc["summary"][0]
    assert row["unit"] == "writes/s" and row["ratio"] == doc["ratio"]["median"]
