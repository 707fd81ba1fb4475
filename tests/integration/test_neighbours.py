"""The short form of the noisy-neighbour test (``python -m tests.neighbours``): each
attack of the hostile tenant in turn, and the quiet tenant's median of every
operation within the attack's bound (``bound_for``) of its figure alone, with no
request refused."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from tests.neighbours import ATTACKS, run_neighbours

SECONDS = float(os.environ.get("BRAIN_NEIGHBOURS_SECONDS", "3"))
"""Length of each phase in the suite; ``python -m tests.neighbours --seconds 10`` is the
long form, with the real model and the fuzzy tier filled to its limit."""

ALIASES = 3_000
"""Long aliases the fuzzy attack writes first in the suite (the long form: 50,000)."""


@pytest.mark.serial
@pytest.mark.timeout(600)
def test_a_hostile_tenant_does_not_slow_a_quiet_one(tmp_path: Path) -> None:
    figures = run_neighbours(
        tmp_path / "data",
        attacks=list(ATTACKS),
        seconds=SECONDS,
        embedder="hashing",
        aliases=ALIASES,
        seed=random.randrange(1 << 30),
    )
    shown = json.dumps(figures, indent=1)
    assert figures["failures"] == [], shown
    attacks = figures["attacks"]
    assert isinstance(attacks, dict)
    assert sorted(attacks) == sorted(ATTACKS)
    slowed = {
        name: result["p50_ratio"]
        for name, result in attacks.items()
        if result["worst_ratio"] > result["bound"]
    }
    assert slowed == {}, shown
