"""The recall suite runs (its --quick form) against its SQLite peer and reports sane figures."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Final

from tests.integration.benchrun import run_quick

TIMEOUT_S: Final = 300
"""The quick run takes ~30 s on a busy two-core machine; the margin absorbs a slower CI."""

SYSTEMS: Final = ("brain", "sqlite", "brain_vector")
"""The three systems that take turns."""

MIN_PRECISION: Final = 0.5
"""Both sides find mostly statements about the named subject (about 0.85 in practice):
below this, a side is answering something else (wrong vectors, a broken query)."""

MIN_SAME_ANSWERS: Final = 0.8
"""Share of cues whose top 10 hits must not change when the server is given the cue's
vector instead of embedding it: the vectors are the same, up to float rounding. The
hits are compared as sets: rounding may swap two near-tied hits (of 12 cues, 8 to 11
keep their exact order), and wrong vectors change the sets themselves."""

MAX_VECTOR_DIFF: Final = 1e-5
"""The stored vectors are MiniLM's own: re-embedding a sample agrees to float rounding."""


def _run_quick(tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "recall.json"
    run_quick("recall", out, timeout=TIMEOUT_S)
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def test_recall_quick(tmp_path: Path) -> None:
    """Rows with positive figures and checked goals; same vectors; relevant answers."""
    data = _run_quick(tmp_path)
    assert data["suite"] == "recall"
    assert data["quick"] is True
    params = data["parameters"]
    rows = data["summary"]
    assert len(rows) >= 6
    for row in rows:
        assert row["ours"] > 0 and row["peer"] > 0, row
        assert math.isfinite(row["ratio"]) and row["ratio"] > 0, row
    goals = [row for row in rows if "goal" in row]
    assert {row["goal"] for row in goals} == {"p50 latency ≤ 0.5x SQLite's", "quality not lower"}
    assert all(isinstance(row["met"], bool) for row in goals)
    for system in SYSTEMS:
        runs = data["runs"][system]
        assert len(runs) == params["pairs"] >= 2
        for run in runs:
            assert run["count"] == params["cues"]
            assert 0 < run["p50"] <= run["p95"] <= run["p99"], run
    assert len(data["ratios"]["p50_brain_over_sqlite"]["per_pair"]) == params["pairs"]
    for system in ("brain", "sqlite"):
        quality = data["quality"][system]
        assert quality["scored_cues"] > 0
        assert MIN_PRECISION <= quality["precision_at_10"] <= 1.0, (system, quality)
        assert 0.0 < quality["recall_at_10"] <= 1.0, (system, quality)
    same = data["same_top10_set_brain_and_brain_vector"]
    assert data["same_top10_brain_and_brain_vector"] <= same
    assert same >= MIN_SAME_ANSWERS * params["cues"], same
    assert data["corpus"]["vector_check"]["max_abs_diff"] < MAX_VECTOR_DIFF
    assert data["corpus"]["statements"] == params["statements"]
    assert data["corpus"]["reused_from_cache"] is False
    assert data["brain_cue_embedding_ms_median"] > 0
    assert data["sqlite"]["pragmas"]["journal_mode"] == "wal"
    assert data["sqlite"]["fts5_tokenizer"] == "porter unicode61"
