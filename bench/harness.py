"""What every suite shares: its command line, alternating A/B runs, and its results file.

A figure that matters is a ratio between two systems measured in the same run,
taking turns (A B A B …), reported pair by pair (spec/08-benchmarks.md): drift on a
shared machine then hits both sides of each pair alike. :func:`alternate`
runs the turns; :func:`ratios` reduces them.

Every suite writes one JSON document to ``bench/results/<suite>.json`` on a
full run; a ``--quick`` run writes nothing there (it only keeps the harness
alive in CI) unless ``--out`` names a file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypedDict

__all__ = [
    "RESULTS",
    "Goal",
    "Ratios",
    "alternate",
    "machine",
    "parser",
    "ratios",
    "row",
    "rss_mb",
    "save",
]

RESULTS: Final = Path(__file__).resolve().parent / "results"
"""Where full runs commit their JSON (and the summary and plots made from it)."""


def parser(suite: str, doc: str | None) -> argparse.ArgumentParser:
    """The options every suite takes: ``--quick``, ``--out``, ``--no-save``."""
    p = argparse.ArgumentParser(
        prog=f"python -m bench {suite}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="a few seconds, to keep it alive (CI)")
    p.add_argument("--out", type=Path, help="write the JSON here (also for --quick)")
    p.add_argument("--no-save", action="store_true", help="do not write bench/results/")
    return p


def machine() -> dict[str, object]:
    """What the figures were measured on."""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        # Other work on the machine shows here; ratios from alternating turns hold anyway.
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def save(suite: str, args: argparse.Namespace, result: dict[str, Any]) -> dict[str, Any]:
    """Stamp ``result`` and write it where the options say; return it."""
    stamped: dict[str, Any] = {
        "suite": suite,
        "quick": bool(args.quick),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        **result,
    }
    text = json.dumps(stamped, indent=2, sort_keys=False) + "\n"
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    if not args.quick and not args.no_save:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{suite}.json").write_text(text, encoding="utf-8")
    return stamped


def alternate(
    systems: Mapping[str, Callable[[], Mapping[str, Any]]], pairs: int
) -> dict[str, list[Mapping[str, Any]]]:
    """Run each system's measurement ``pairs`` times, taking turns in the given order.

    Returns each system's runs in order, so ``runs[a][i]`` and ``runs[b][i]``
    were measured next to each other and form pair ``i``."""
    if pairs < 1:
        raise ValueError("at least one pair is needed")
    runs: dict[str, list[Mapping[str, Any]]] = {name: [] for name in systems}
    for _ in range(pairs):
        for name, measure in systems.items():
            runs[name].append(measure())
    return runs


class Goal:
    """A goal of spec/08-benchmarks.md: a ratio of ours to a peer's, and the bound it must meet."""

    def __init__(self, text: str, bound: float, *, at_least: bool) -> None:
        self.text = text
        self.bound = bound
        self.at_least = at_least

    def check(self, ratio: float) -> dict[str, object]:
        """The goal, the measured ratio and whether it was met."""
        met = ratio >= self.bound if self.at_least else ratio <= self.bound
        return {
            "goal": self.text,
            "ratio": round(ratio, 3),
            "bound": self.bound,
            "at_least": self.at_least,
            "met": met,
        }


def row(
    what: str,
    unit: str,
    ours: float,
    *,
    peer: float | None = None,
    peer_name: str | None = None,
    ratio: float | None = None,
    goal: Goal | None = None,
) -> dict[str, object]:
    """One line of the results table (``bench/results/SUMMARY.md``, the README).

    Every suite's JSON carries a ``"summary"`` list of these rows: what was
    measured, our figure, the peer's (when there is one), their ratio (the
    median of per-pair ratios, ours over theirs) and the goal it is held to."""
    out: dict[str, object] = {"what": what, "unit": unit, "ours": round(ours, 3)}
    if peer is not None:
        out["peer"] = round(peer, 3)
        out["peer_name"] = peer_name
    if ratio is not None:
        out["ratio"] = round(ratio, 3)
        if goal is not None:
            out.update(goal.check(ratio))
    elif goal is not None:
        raise ValueError("a goal is checked against a ratio")
    return out


class Ratios(TypedDict):
    """Per-pair ratios, ours over theirs, and their median."""

    per_pair: list[float]
    median: float


def ratios(
    ours: Sequence[Mapping[str, Any]], theirs: Sequence[Mapping[str, Any]], key: str
) -> Ratios:
    """Per-pair ratios ``ours[i][key] / theirs[i][key]`` and their median."""
    if len(ours) != len(theirs) or not ours:
        raise ValueError("ratios need the same, non-zero number of runs on both sides")
    per_pair = [float(a[key]) / float(b[key]) for a, b in zip(ours, theirs, strict=True)]
    return Ratios(
        per_pair=[round(r, 3) for r in per_pair],
        median=round(statistics.median(per_pair), 3),
    )


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MiB, from ``/proc`` (Linux)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmRSS for process {pid}")
