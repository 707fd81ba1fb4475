"""The cluster-reads suite runs (its --quick form): reads on three nodes of a shard and
on the planner alone, every reader answered, their ratio reported pair by pair."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from bench.cluster_reads import CLIENTS
from tests.integration.benchrun import run_quick

TIMEOUT_S: Final = 240
"""The quick run takes ~30 s (a cluster, four server starts, a load and two one-second
turns of reader processes); the margin absorbs a loaded CI machine."""


def test_cluster_reads_quick(tmp_path: Path) -> None:
    out = tmp_path / "cluster-reads.json"
    run_quick("cluster-reads", out, timeout=TIMEOUT_S)
    doc = json.loads(out.read_text())
    three, one = doc["runs"]["three"], doc["runs"]["one"]
    assert len(three) == len(one) == 1
    assert three[0]["nodes"] == 3 and one[0]["nodes"] == 1
    for run in (*three, *one):
        # Every reader process was answered, on every node it read from.
        assert len(run["per_client"]) == CLIENTS and min(run["per_client"]) > 0
        assert run["reads"] == sum(run["per_client"]) and run["reads_per_s"] > 0
    expected = round(three[0]["reads_per_s"] / one[0]["reads_per_s"], 3)
    assert doc["ratio"]["per_pair"] == [expected]
    row = doc["summary"][0]
    assert row["unit"] == "reads/s" and row["ratio"] == doc["ratio"]["median"]
