"""The short form of the load test (``python -m tests.load``): 100 connections for
30 seconds of the recall-heavy mix; no error but OVERLOADED, memory steady."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.load import run_load

SECONDS = float(os.environ.get("BRAIN_LOAD_SECONDS", "30"))
"""Length of the suite's run; ``python -m tests.load --seconds 600`` is the long form."""

RSS_GROWTH_MB = 200
"""Most the server's resident memory may grow from the start to the end of the run."""


@pytest.mark.timeout(max(180, int(4 * SECONDS)))
def test_a_hundred_connections_of_mixed_load(tmp_path: Path) -> None:
    figures = run_load(
        tmp_path / "data",
        connections=100,
        seconds=SECONDS,
        embedder="hashing",
        seed=random.randrange(1 << 30),
    )
    outcomes = figures["outcomes"]
    assert isinstance(outcomes, dict)
    unexpected = {k: v for k, v in outcomes.items() if not k.endswith((":ok", ":OVERLOADED"))}
    assert unexpected == {}, figures
    for kind in ("recall", "write", "other"):
        assert outcomes.get(f"{kind}:ok"), figures
    rss = figures["rss_mb"]
    assert isinstance(rss, dict)
    assert rss["end"] - rss["start"] < RSS_GROWTH_MB, figures
