"""The benchmark harness's own parts: the histogram, the load generator, ratios, the report."""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from bench import report
from bench.datagen import generate
from bench.harness import Goal, ratios, row
from bench.histogram import SUB_BUCKETS, Histogram
from bench.loadgen import LoadFailed, run_load


def test_percentiles_are_within_the_histograms_precision() -> None:
    rng = random.Random(7)
    samples = [rng.lognormvariate(-5, 1.2) for _ in range(20_000)]
    hist = Histogram()
    for value in samples:
        hist.record(value)
    ordered = sorted(samples)
    for share in (50.0, 95.0, 99.0, 99.9):
        exact = ordered[max(0, -(-len(ordered) * int(share * 10) // 1000) - 1)] * 1e3
        got = hist.percentile(share)
        # Never below the exact value, and above it by at most one bucket (plus 1 µs).
        assert exact - 1e-3 <= got <= exact * (1 + 1 / SUB_BUCKETS) + 1e-3


def test_histograms_merge_and_survive_json() -> None:
    a, b, both = Histogram(), Histogram(), Histogram()
    for i in range(1, 500):
        (a if i % 2 else b).record(i / 1e4)
        both.record(i / 1e4)
    a.merge(Histogram.from_dict(json.loads(json.dumps(b.to_dict()))))
    assert a.summary() == both.summary()
    with pytest.raises(ValueError, match="no latency"):
        Histogram().percentile(50)


def test_ratios_are_per_pair_and_goals_say_whether_they_are_met() -> None:
    got = ratios([{"x": 10}, {"x": 30}, {"x": 20}], [{"x": 10}, {"x": 10}, {"x": 10}], "x")
    assert got == {"per_pair": [1.0, 3.0, 2.0], "median": 2.0}
    assert Goal("fast", 1.0, at_least=True).check(0.5)["met"] is False
    assert Goal("small", 2.0, at_least=False).check(1.5)["met"] is True
    line = row(
        "w", "ops/s", 5.0, peer=10.0, peer_name="p", ratio=0.5, goal=Goal("g", 1.0, at_least=True)
    )
    assert line["met"] is False and line["bound"] == 1.0
    with pytest.raises(ValueError):
        row("w", "ops/s", 1.0, goal=Goal("g", 1.0, at_least=True))


class _Sleeper:
    """A session whose every step takes about a millisecond."""

    def __init__(self, params: Mapping[str, Any], session_no: int) -> None:
        self.fail = bool(params.get("fail")) and session_no == 0

    async def open(self) -> None:
        return None

    async def step(self, n: int) -> None:
        await asyncio.sleep(0.001)
        if self.fail and n % 2:
            raise RuntimeError("odd step")

    async def close(self) -> None:
        return None


def sleeper(params: Mapping[str, Any], session_no: int) -> _Sleeper:
    return _Sleeper(params, session_no)


def test_load_generator_counts_operations_and_errors_across_processes() -> None:
    result = run_load(
        "tests.unit.bench.test_bench_core:sleeper", {"fail": True},
        processes=2, connections=4, seconds=1.0, warmup_s=2.0,
    )  # fmt: skip
    assert result.operations > 100 and result.errors > 10
    assert result.first_error == "RuntimeError: odd step"
    assert result.latency.total == result.operations
    assert 1.0 <= result.latency.percentile(50) < 50.0


class _Dier(_Sleeper):
    async def open(self) -> None:
        os._exit(3)


def dier(params: Mapping[str, Any], session_no: int) -> _Dier:
    return _Dier(params, session_no)


def test_load_generator_fails_fast_when_a_process_fails_or_dies() -> None:
    started = time.monotonic()
    with pytest.raises(LoadFailed, match="No module named"):
        run_load("tests.unit.no_such_module:x", {}, processes=1, connections=1, seconds=30)
    with pytest.raises(LoadFailed, match="exited with code 3 before reporting"):
        run_load(
            "tests.unit.bench.test_bench_core:dier", {}, processes=1, connections=1, seconds=30
        )
    assert time.monotonic() - started < 30


def test_generated_worlds_are_seeded_and_chains_go_forward() -> None:
    one, two = generate(2_000, 3), generate(2_000, 3)
    assert one == two and generate(2_000, 4) != one
    names = [e.name for e in one.entities]
    assert len(names) == len(set(names))
    for spec in one.statements:
        if spec.supersedes is not None:
            old = one.statements[spec.supersedes]
            assert (old.subject, old.predicate) == (spec.subject, spec.predicate)
            assert (spec.valid_from or spec.event_at or 0) > (old.valid_from or old.event_at or 0)


def test_report_lists_missed_goals_first_and_fills_the_readme(tmp_path: Path) -> None:
    rows = [
        row(
            "a",
            "ops/s",
            2.0,
            peer=1.0,
            peer_name="p",
            ratio=2.0,
            goal=Goal("≥ 1", 1.0, at_least=True),
        ),
        row(
            "b",
            "ms",
            4.0,
            peer=1.0,
            peer_name="p",
            ratio=4.0,
            goal=Goal("≤ 2", 2.0, at_least=False),
        ),
    ]
    (tmp_path / "x.json").write_text(json.dumps({"suite": "x", "when": "t", "summary": rows}))
    loaded = report.load_rows(tmp_path)
    text = report.render_markdown(loaded)
    assert "2 goals measured, 1 met, 1 not met" in text
    assert text.index("| x | b |") < text.index("| x | a |")
    assert report.main(["--results", str(tmp_path)]) == 0
    assert (tmp_path / "goals.png").stat().st_size > 1000
    assert (tmp_path / "SUMMARY.md").exists()


def test_report_gives_a_second_run_of_a_suite_its_own_section(tmp_path: Path) -> None:
    # The section is the file's name, so a by-hand run saved beside the default one
    # (scale.json and scale-1m-hashing.json) is reported beside it, not merged into it.
    for name, ours in (("scale", 1.0), ("scale-1m-hashing", 3.0)):
        summary = [row("p50", "ms", ours)]
        doc = {"suite": "scale", "when": name, "summary": summary}
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    loaded = report.load_rows(tmp_path)
    assert sorted((r["suite"], r["when"]) for r in loaded) == [
        ("scale", "scale"),
        ("scale-1m-hashing", "scale-1m-hashing"),
    ]
    text = report.render_markdown(loaded)
    assert "## scale (measured scale)" in text and "## scale-1m-hashing (measured" in text
