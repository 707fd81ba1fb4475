"""The scale suite runs (its --quick form) at two sizes and reports latency and memory."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Final

from tests.integration.benchrun import run_quick

TIMEOUT_S: Final = 300
"""The quick run takes under a minute on a busy two-core machine; the margin absorbs CI."""

QUICK_SIZES: Final = [200, 1000]
"""The sizes a quick run loads."""

MIN_RSS_MB: Final = 50.0
"""A server with the MiniLM model loaded cannot be smaller than this."""


def _run_quick(tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "scale.json"
    run_quick("scale", out, timeout=TIMEOUT_S)
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def test_scale_quick(tmp_path: Path) -> None:
    """Both sizes loaded and measured in turns; goal rows checked; memory read three times."""
    data = _run_quick(tmp_path)
    assert data["suite"] == "scale"
    params = data["parameters"]
    assert params["sizes"] == QUICK_SIZES
    rows = data["summary"]
    goals = [row for row in rows if "goal" in row]
    assert len(goals) == 2
    for row in goals:
        assert row["goal"] == "p50(largest) ≤ 2x p50(smallest)"
        assert isinstance(row["met"], bool)
        assert row["ours"] > 0 and row["peer"] > 0
        assert math.isfinite(row["ratio"]) and row["ratio"] > 0
    for mode in ("cue", "vector"):
        for size in QUICK_SIZES:
            measured = data["latency_ms"][mode][str(size)]
            assert len(measured["runs"]) == params["pairs"] >= 2
            for run in measured["runs"]:
                assert run["count"] == params["cues_per_turn"]
                assert 0 < run["p50"] <= run["p99"], run
    for size in QUICK_SIZES:
        memory = data["memory_mb"][str(size)]
        for key in ("after_load_mb", "after_open_mb", "after_queries_mb"):
            assert memory[key] > MIN_RSS_MB, (size, memory)
        parts = memory["after_queries_parts_mb"]
        assert parts["anon"] > 0 and parts["file"] > 0
        assert parts["anon"] + parts["file"] <= memory["after_queries_mb"] + 1, memory
        corpus = data["corpus"][str(size)]
        assert corpus["statements"] == size
        assert corpus["load_s"] > 0 and corpus["index_wait_after_load_s"] >= 0
        assert corpus["reused_from_cache"] is False
    assert math.isfinite(data["memory_per_million_statements_mb"]["value"])
    reopen = data["reopen_after_kill"]
    assert reopen["statements"] == QUICK_SIZES[-1]
    assert 0 < reopen["ready_s"] <= reopen["first_recall_s"], reopen
    assert data["parameters"]["embedder"] == "minilm"
