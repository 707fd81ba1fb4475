"""The short form of the chaos runner (``python -m tests.chaos``): a few kill rounds
under load from several client processes, then every check it makes."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.chaos import run_rounds

ROUNDS = int(os.environ.get("BRAIN_CHAOS_ROUNDS", "3"))
"""Rounds in the suite; ``python -m tests.chaos --rounds N`` runs the long form."""


@pytest.mark.timeout(max(120, 30 * ROUNDS))
def test_chaos_rounds_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    seed = int(os.environ.get("BRAIN_KILL_SEED", str(random.randrange(1 << 30))))
    figures = run_rounds(tmp_path / "data", ROUNDS, seed)
    assert figures["acknowledged_writes"], f"nothing was acknowledged (seed {seed})"
    assert (figures["lost"], figures["duplicated"]) == (0, 0), f"seed {seed}: {figures}"
    assert figures["index_problems"] == [], f"seed {seed}: {figures}"
