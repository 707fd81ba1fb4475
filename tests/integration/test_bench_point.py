"""The point-read suite runs (its --quick form) and both systems agree on as-of answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from bench import point
from bench.peers.postgres import BIN
from tests.integration.benchrun import run_quick

TIMEOUT_S: Final = 110
"""The quick run takes ~25 s on two cores; the margin absorbs a loaded CI machine."""


def test_point_quick(tmp_path: Path) -> None:
    """Same as-of answers on both sides, sane query rates, both goal rows judged."""
    assert (BIN / "postgres").exists(), (
        f"PostgreSQL 15 is missing from {BIN}: apt-get install postgresql-15 (see .ci/run)"
    )
    out = tmp_path / "point.json"
    run_quick("point", out, timeout=TIMEOUT_S)
    doc = json.loads(out.read_text())
    check = doc["as_of_check"]
    assert check["pairs_checked"] > 0
    assert check["pairs_agreeing"] == check["pairs_checked"]
    # The check is not vacuous: rows came back, some only because of as_of.
    assert check["non_empty_answers"] > 0
    assert check["rows_invalidated_after_as_of"] > 0
    assert doc["parameters"]["corrections"] > 0
    assert doc["errors"] == 0
    for query in ("get", "list_as_of"):
        for system in ("brain", "postgres"):
            (run,) = doc["runs"][query][system]
            assert run["ops_per_s"] > 0 and run["errors"] == 0
            assert 0 < run["latency_ms"]["p50"] <= run["latency_ms"]["p99"]
    goals = [row for row in doc["summary"] if "goal" in row]
    assert [row["bound"] for row in goals] == [point.GET_GOAL, point.LIST_GOAL]
    for row in goals:
        assert row["unit"] == "queries/s" and row["ratio"] > 0
        assert row["met"] == (row["ratio"] >= row["bound"])
    assert doc["load"]["brain_writes_per_s"] > 0 and doc["load"]["postgres_writes_per_s"] > 0
