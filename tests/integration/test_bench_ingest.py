"""The ingest suite runs (its --quick form) against our server and a real PostgreSQL 15."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Final

from bench import ingest
from bench.peers.postgres import BIN
from tests.integration.benchrun import run_quick

TIMEOUT_S: Final = 110
"""The quick run takes ~20 s on two cores; the margin absorbs a loaded CI machine."""


def _run(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    assert (BIN / "postgres").exists(), (
        f"PostgreSQL 15 is missing from {BIN}: apt-get install postgresql-15 (see .ci/run)"
    )
    out = tmp_path / "ingest.json"
    result = run_quick("ingest", out, timeout=TIMEOUT_S)
    return result, json.loads(out.read_text())


def test_ingest_quick(tmp_path: Path) -> None:
    """Both systems wrote without errors, group commit shows, and the goal row is judged."""
    result, doc = _run(tmp_path)
    assert doc["suite"] == "ingest" and doc["quick"] is True
    assert doc["peer"]["version"].startswith("15.")
    assert doc["peer"]["settings"]["synchronous_commit"] == "on"
    assert doc["peer"]["settings"]["fsync"] == "on"
    assert doc["errors"] == 0
    for system in ("brain", "postgres"):
        for runs, clients in ((doc["runs"], 16), (doc["single_client_runs"], 1)):
            (run,) = runs[system]
            assert run["clients"] == clients
            assert run["ops_per_s"] > 0 and run["errors"] == 0
            assert run["latency_ms"]["count"] == run["operations"]
            assert 0 < run["latency_ms"]["p50"] <= run["latency_ms"]["p99"]
            assert run["generator_cpu_s"] > 0
    # 16 writes in flight share flushes: fewer than one WAL fsync per write.
    assert 0 < doc["runs"]["brain"][0]["fsyncs_per_1000_writes"] < 1000
    goal_row = doc["summary"][0]
    assert goal_row["unit"] == "writes/s" and goal_row["peer_name"] == "PostgreSQL 15"
    assert goal_row["ratio"] > 0 and isinstance(goal_row["met"], bool)
    assert goal_row["met"] == (goal_row["ratio"] >= ingest.GOAL)
    assert doc["ratio"]["16_clients"]["median"] == goal_row["ratio"]
    single_row = doc["summary"][1]
    assert single_row["bound"] == ingest.SINGLE_GOAL
    assert single_row["met"] == (single_row["ratio"] >= ingest.SINGLE_GOAL)
    lines = [line for line in result.stdout.splitlines() if line.startswith("clients=")]
    assert len(lines) == 4
    assert all("writes/s=" in line and "fsyncs/1000 writes=" in line for line in lines)
