"""The semantic-arm suite runs (its --quick form) and reports a sane, checked comparison."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest

from tests.integration.benchrun import run_quick

TIMEOUT_S: Final = 240
"""The quick run takes ~10 s on two cores; the margin absorbs a loaded CI machine."""

QUICK_VECTORS: Final = 5_000
"""What ``bench.semantic.VECTORS_QUICK`` promises a quick run indexes."""


def _run(out: Path) -> dict[str, Any]:
    run_quick("semantic", out, timeout=TIMEOUT_S)
    document: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return document


@pytest.mark.timeout(TIMEOUT_S + 30)
def test_semantic_quick(tmp_path: Path) -> None:
    """Both depths timed in pairs against hnswlib; identical top-10 on the same graph."""
    result = _run(tmp_path / "semantic.json")
    assert result["suite"] == "semantic" and result["quick"] is True
    parameters = result["parameters"]
    assert parameters["vectors"] == QUICK_VECTORS
    assert result["graph"]["elements"] == QUICK_VECTORS
    assert (result["graph"]["M"], result["graph"]["ef_construction"]) == (
        parameters["M"],
        parameters["ef_construction"],
    )

    agreement = result["agreement"]
    assert agreement["queries"] == parameters["queries_per_turn"]
    assert agreement["identical_top10"] == agreement["queries"], agreement
    exact = agreement["recall_at_10_vs_exact"]
    assert exact["ours"] == exact["hnswlib"]
    assert 0.5 < exact["ours"] <= 1.0

    for k in parameters["depths"]:
        depth = result["depths"][f"top_{k}"]
        for side in ("ours", "hnswlib"):
            turns = depth[side]
            assert len(turns) == parameters["pairs"]
            for turn in turns:
                assert turn["queries"] == parameters["queries_per_turn"]
                assert 0 < turn["p50_us"] <= turn["p99_us"]
                assert turn["mean_us"] > 0 and turn["cpu_us"] > 0
        assert len(depth["ratio_p50"]["per_pair"]) == parameters["pairs"]
        assert depth["ratio_p50"]["median"] > 0

    timed = [row for row in result["summary"] if "ratio" in row]
    assert len(timed) == 2 * len(parameters["depths"])  # latency and CPU time per depth
    for row in timed:
        assert row["ours"] > 0 and row["peer"] > 0 and row["ratio"] > 0
        assert row["peer_name"] == "raw hnswlib knn_query"
    goals = [row for row in timed if "met" in row]
    assert len(goals) == len(parameters["depths"])
    assert all(isinstance(row["met"], bool) and "1.5" in row["goal"] for row in goals)
    agreeing = [row for row in result["summary"] if "identical" in row["what"]]
    assert len(agreeing) == 1 and agreeing[0]["met"] is True
