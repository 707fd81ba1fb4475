"""The lexical-arm suite runs (its --quick form), and its top-10 check can tell ties from
differences."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest

from bench.lexical import SCORE_TOLERANCE, compare_top
from tests.integration.benchrun import run_quick

TIMEOUT_S: Final = 240
"""The quick run takes ~10 s on two cores; the margin absorbs a loaded CI machine."""

QUICK_DOCUMENTS: Final = 200
"""What ``bench.lexical.QUICK_DOCUMENTS`` promises a quick run loads."""


def test_ties_may_swap_but_differences_count() -> None:
    """Score-equal documents may trade places, at the cut-off too; others may not."""
    ours = [(b"a", 3.0), (b"b", 2.0), (b"c", 2.0), (b"d", 1.0)]
    swapped = [(b"a", 3.0), (b"c", 2.0), (b"b", 2.0), (b"d", 1.0)]
    verdict = compare_top(ours, swapped, top=3)
    assert verdict["up_to_ties"] is True and verdict["exact"] is False
    at_cut = compare_top(ours, [(b"a", 3.0), (b"c", 2.0)], top=2)
    assert at_cut["up_to_ties"] is True and at_cut["exact"] is False
    assert compare_top(ours, [(b"a", 3.0)], top=2)["up_to_ties"] is False  # one missing
    boundary = compare_top(ours[:3], [(b"a", 3.0), (b"b", 2.0), (b"c", 2.0)], top=2)
    assert boundary["up_to_ties"] is True and boundary["exact"] is True
    reordered = [(b"b", 2.0), (b"a", 3.0), (b"c", 2.0), (b"d", 1.0)]
    assert compare_top(ours, reordered, top=3)["up_to_ties"] is False
    stranger = [(b"a", 3.0), (b"x", 2.0), (b"c", 2.0)]
    verdict = compare_top(ours, stranger, top=3)
    assert verdict["up_to_ties"] is False and verdict["unmatched"] == 1
    rescored = [(b"a", 3.3), (b"b", 2.0), (b"c", 2.0), (b"d", 1.0)]
    assert compare_top(ours, rescored)["max_relative_score_difference"] > SCORE_TOLERANCE


def _run(out: Path) -> dict[str, Any]:
    run_quick("lexical", out, timeout=TIMEOUT_S)
    document: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return document


@pytest.mark.timeout(TIMEOUT_S + 30)
def test_lexical_quick(tmp_path: Path) -> None:
    """Every query's top-10 matches bm25s up to ties; latency timed in pairs."""
    result = _run(tmp_path / "lexical.json")
    assert result["suite"] == "lexical" and result["quick"] is True
    collection = result["collection"]
    assert collection["documents"] == QUICK_DOCUMENTS
    assert collection["indexed"]["documents"] == collection["memories"] > 0
    assert collection["queries"] > 0

    peer = result["peer"]
    parameters = result["parameters"]
    assert peer["method"] == peer["idf_method"] == "lucene"
    assert (peer["k1"], peer["b"]) == (parameters["k1"], parameters["b"])

    top = result["top10"]
    assert top["queries"] == collection["queries"]
    assert top["identical_up_to_ties"] == top["queries"] and top["differing"] == []
    assert 0 <= top["max_relative_score_difference"] <= SCORE_TOLERANCE

    latency = result["latency"]
    for side in ("ours", "bm25s", "ours_lmdb"):
        assert len(latency[side]) == parameters["pairs"]
        for turn in latency[side]:
            assert turn["queries"] == collection["queries"] * parameters["passes_per_turn"]
            assert 0 < turn["p50_us"] <= turn["p99_us"]
    assert len(latency["ratio_p50"]["per_pair"]) == parameters["pairs"]

    timed, cpu, uncached, identical = result["summary"]
    for row in (timed, cpu, uncached):
        assert row["ours"] > 0 and row["peer"] > 0 and row["ratio"] > 0
        assert row["peer_name"] == "bm25s"
    assert isinstance(timed["met"], bool) and "2.0" in timed["goal"]
    assert identical["ours"] == top["queries"] and identical["met"] is True
