"""The short form of the cluster chaos run (``python -m tests.cluster_chaos``): a few
kill rounds of the planner, a follower or a NATS server under load, then every check
of spec/05 §14.8."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.cluster_chaos import TAKEOVER_BOUND_S, run_rounds

ROUNDS = int(os.environ.get("BRAIN_CLUSTER_CHAOS_ROUNDS", "4"))
"""Rounds in the suite; ``python -m tests.cluster_chaos --rounds N`` runs the long form."""


@pytest.mark.timeout(max(180, 20 * ROUNDS))
def test_cluster_chaos_rounds_lose_nothing_and_converge(tmp_path: Path) -> None:
    seed = int(os.environ.get("BRAIN_KILL_SEED", str(random.randrange(1 << 30))))
    figures = run_rounds(tmp_path, ROUNDS, seed)
    assert figures["writes_acknowledged"], f"nothing was acknowledged (seed {seed})"
    assert (figures["lost"], figures["duplicated"]) == (0, 0), f"seed {seed}: {figures}"
    assert figures["violations"] == 0, f"seed {seed}: {figures}"
    assert figures["converged"] is True, f"seed {seed}: {figures}"
    assert figures["stuck"] == [], f"seed {seed}: {figures}"
    assert figures["read_your_writes_failed"] == [], f"seed {seed}: {figures}"
    assert figures["reads_checked"], f"no read was checked (seed {seed})"
    # The planner and minimum-LSN rules were put to work, not passed for want of reads.
    assert figures["planner_reads"] and figures["min_lsn_reads"], figures
    assert figures["takeovers_over_bound"] == 0, f"seed {seed}: {figures}"
    assert figures["takeovers_in_elections_over_bound"] == 0, f"seed {seed}: {figures}"
    worst = figures["takeover_max_s"]
    assert worst is None or (isinstance(worst, float) and worst < TAKEOVER_BOUND_S), figures
