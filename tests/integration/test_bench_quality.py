"""The retrieval-quality suite runs (its --quick form) and reports three sane scores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import pytest

from bench.modes import ABLATIONS
from tests.integration.benchrun import run_quick

MODES: Final = ("lexical", "semantic", "hybrid")
"""The rows the suite's table must have, one per RECALL mode."""

TIMEOUT_S: Final = 300
"""The quick run takes ~20 s on two quiet cores, minutes on busy ones (MiniLM embeds)."""

PEER_ROW: Final = "bm25s (peer)"
"""The table row of the reference system."""

METRICS: Final = ("ndcg_at_10", "recall_at_100")
"""The scores every mode and the peer report."""

SCORE_COLUMNS: Final = 2
"""nDCG@10 and recall@100, the first two numbers of each row."""


@pytest.mark.timeout(TIMEOUT_S + 30)
def test_quality_quick(tmp_path: Path) -> None:
    """Exit 0, one table row per mode and one for bm25s with both scores in [0, 1], the
    JSON only where asked, with the peer's scores and the summary rows."""
    out = tmp_path / "quality.json"
    result = run_quick("quality", out, timeout=TIMEOUT_S)
    rows: dict[str, list[float]] = {}
    for line in result.stdout.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells and cells[0] in (*MODES, PEER_ROW):
            rows[cells[0]] = [float(cell) for cell in cells[1:]]
    assert sorted(rows) == sorted((*MODES, PEER_ROW)), result.stdout
    for mode, numbers in rows.items():
        scores = numbers[:SCORE_COLUMNS]
        assert all(0.0 <= score <= 1.0 for score in scores), (mode, numbers)
    assert "goal hybrid >= best single arm on ndcg_at_10" in result.stdout
    assert out.is_file()
    document = json.loads(out.read_text(encoding="utf-8"))
    assert sorted(document["modes"]) == sorted(MODES)
    peer = document["peers"]["bm25s"]
    assert peer["config"]["method"] == "lucene"
    assert peer["scored_queries"] == document["modes"]["lexical"]["scored_queries"] > 0
    for metric in METRICS:
        assert 0.0 < peer[metric] <= 1.0
    summary = document["summary"]
    goals = [row for row in summary if "met" in row]
    assert len(goals) == len(METRICS)
    for row in goals:
        assert row["goal"] == "hybrid >= best single arm"
        assert row["met"] == document["goal"][row["unit"].lower().replace("@", "_at_")]["met"]
    compared = [row for row in summary if row.get("peer_name") == "bm25s BM25"]
    assert len(compared) == len(MODES) * len(METRICS)
    assert all(row["ratio"] > 0 for row in compared)


COMMITTED: Final = Path(__file__).resolve().parents[2] / "bench" / "results" / "quality.json"
"""The full run's figures, as committed for the README and spec/04-retrieval.md §8."""


def test_committed_quality_meets_its_goal() -> None:
    """The committed full run is a run of the whole collection, and its hybrid nDCG@10 is
    at least the better single arm's, as its own ``goal`` says."""
    document = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert document["suite"] == "quality" and document["quick"] is False
    modes = document["modes"]
    # Every mode of a run, and the ablations when it was asked for them.
    assert set(MODES) <= set(modes) <= set(MODES) | set(ABLATIONS)
    queries = document["collection"]["queries"]
    assert all(modes[mode]["scored_queries"] == queries > 0 for mode in modes)
    hybrid = modes["hybrid"]["ndcg_at_10"]
    best = max(modes["lexical"]["ndcg_at_10"], modes["semantic"]["ndcg_at_10"])
    assert 0.0 < best <= hybrid <= 1.0, (hybrid, best)
    goal = document["goal"]["ndcg_at_10"]
    assert goal["met"] is True and goal["hybrid"] == hybrid
    assert goal["best_single_arm_value"] == best
