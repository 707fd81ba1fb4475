"""Turn the committed results into the results table and plots the README shows.

    python -m bench report [--readme]

Reads every ``bench/results/<suite>.json`` that carries a ``summary`` (the rows
each suite writes with :func:`bench.harness.row`), and writes:

- ``bench/results/SUMMARY.md``: one table per suite, every row with our
  figure, the peer's, the median per-pair ratio, the goal and whether it was
  met — goals missed are listed first, plainly;
- ``bench/results/goals.png``: each goal's measured ratio against its bound;
- ``bench/results/throughput.png`` and ``bench/results/latency.png``: ours
  beside the peer's for every row that has both, in operations per second and
  in milliseconds.

With ``--readme`` the table of goals also replaces the part of ``README.md``
between :data:`README_BEGIN` and :data:`README_END`.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from bench.harness import RESULTS

__all__ = ["README_BEGIN", "README_END", "load_rows", "main", "render_markdown"]

ROOT: Final = Path(__file__).resolve().parents[1]
README_BEGIN: Final = "<!-- bench:begin -->"
README_END: Final = "<!-- bench:end -->"

_RATE_UNITS: Final = ("ops/s", "writes/s", "queries/s", "texts/s", "recalls/s")
_TIME_UNITS: Final = {"ms": 1.0, "µs": 1e-3, "s": 1e3}
"""Latency units and their factor to milliseconds."""

_PLOT_WIDTH_IN: Final = 10.0
_ROW_HEIGHT_IN: Final = 0.38
"""Inches per bar row: tall enough for a label in the default font."""


_BOUND: Final = re.compile(r"(>=|<=|≥|≤)\s*([0-9]+(?:\.[0-9]+)?)")
"""A goal's bound as its text states it ("throughput >= 0.8x torch")."""


def _with_bound(row: dict[str, Any]) -> dict[str, Any]:
    """The row with ``bound`` and ``at_least`` read from its goal's text when a suite
    recorded only the text."""
    if "met" not in row or "bound" in row:
        return row
    match = _BOUND.search(str(row.get("goal", "")))
    if match is None:
        return row
    return {**row, "bound": float(match[2]), "at_least": match[1] in (">=", "≥")}


def load_rows(results: Path = RESULTS) -> list[dict[str, Any]]:
    """Every summary row of every suite's full results, each tagged with its suite
    and when it was measured (quick runs are never committed, so never read)."""
    rows: list[dict[str, Any]] = []
    for path in sorted(results.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("summary"), list):
            continue
        # A file is one run, named for its suite unless it is a second run of one
        # (``scale-1m-hashing.json``): its section is the file's name, so two runs of
        # a suite stand side by side instead of merging.
        suite = path.stem
        for row in data["summary"]:
            rows.append(_with_bound({"suite": suite, "when": data.get("when"), **row}))
    return rows


def _figure(value: object) -> str:
    if not isinstance(value, int | float):
        return "—"
    if value == 0 or abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:,.2f}"
    return f"{value:.3g}"


def _verdict(row: dict[str, Any]) -> str:
    if "met" not in row:
        return ""
    return "met" if row["met"] else "**not met**"


def _line(row: dict[str, Any], *, with_suite: bool) -> str:
    cells = [row["suite"]] if with_suite else []
    cells += [
        str(row["what"]),
        f"{_figure(row.get('ours'))} {row.get('unit', '')}".strip(),
        (
            f"{_figure(row['peer'])} ({row.get('peer_name', 'peer')})"
            if isinstance(row.get("peer"), int | float)
            else "—"
        ),
        f"{row['ratio']:.2f}\N{MULTIPLICATION SIGN}"
        if isinstance(row.get("ratio"), int | float)
        else "—",
        str(row.get("goal", "")),
        _verdict(row),
    ]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def render_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The results document: the goals (missed ones first), then every row by suite."""
    head = "| what | ours | peer | ratio | goal | verdict |\n|---|---|---|---|---|---|"
    goals = [r for r in rows if "met" in r]
    missed = [r for r in goals if not r["met"]]
    out = ["# Benchmark results", ""]
    out.append(
        f"{len(goals)} goals measured, {len(goals) - len(missed)} met, {len(missed)} not met. "
        "Ratios are ours over the peer's, the median of pairs measured in alternating "
        "turns in the same run (see `bench/README.md`)."
    )
    out += ["", "## Goals", "", "| suite " + head.replace("\n", "\n|---")]
    out += [_line(r, with_suite=True) for r in missed + [r for r in goals if r["met"]]]
    by_suite: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_suite.setdefault(row["suite"], []).append(row)
    for suite, suite_rows in by_suite.items():
        when = suite_rows[0].get("when") or "?"
        out += ["", f"## {suite} (measured {when})", "", head]
        out += [_line(r, with_suite=False) for r in suite_rows]
    out += [
        "",
        "![goals](goals.png)",
        "",
        "![throughput](throughput.png)",
        "",
        "![latency](latency.png)",
        "",
    ]
    return "\n".join(out)


def readme_table(rows: Sequence[dict[str, Any]]) -> str:
    """The goals table as the README shows it."""
    goals = [r for r in rows if "met" in r]
    head = "| suite | what | ours | peer | ratio | goal | verdict |\n|---|---|---|---|---|---|---|"
    return "\n".join([head, *(_line(r, with_suite=True) for r in goals)])


def _label(row: dict[str, Any]) -> str:
    what = str(row["what"])
    text = what if what.startswith(row["suite"]) else f"{row['suite']}: {what}"
    return text if len(text) <= 70 else text[:67] + "…"


def _plot_goals(rows: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    goals = [r for r in rows if "met" in r and isinstance(r.get("ratio"), int | float)]
    goals = [r for r in goals if isinstance(r.get("bound"), int | float) and r["ratio"] > 0]
    if not goals:
        return
    fig, ax = plt.subplots(figsize=(_PLOT_WIDTH_IN, 1.2 + _ROW_HEIGHT_IN * len(goals)))
    ys = list(range(len(goals)))
    colours = ["#2e7d32" if r["met"] else "#c62828" for r in goals]
    ax.barh(ys, [r["ratio"] for r in goals], color=colours)
    for y, row in zip(ys, goals, strict=True):
        ax.plot([row["bound"]] * 2, [y - 0.4, y + 0.4], color="black", linewidth=2)
    ax.set_yticks(ys, [_label(r) for r in goals], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("ratio, ours over peer (black mark: the goal; green met, red not met)")
    ax.set_title("Goals of spec/08-benchmarks.md")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_pairs(rows: Sequence[dict[str, Any]], path: Path, *, rates: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen: list[tuple[str, float, float]] = []
    for row in rows:
        ours, peer, unit = row.get("ours"), row.get("peer"), row.get("unit", "")
        if not isinstance(ours, int | float) or not isinstance(peer, int | float):
            continue
        if rates and unit in _RATE_UNITS:
            chosen.append((_label(row) + f" ({unit})", float(ours), float(peer)))
        elif not rates and unit in _TIME_UNITS:
            factor = _TIME_UNITS[unit]
            chosen.append((_label(row), float(ours) * factor, float(peer) * factor))
    if not chosen:
        return
    fig, ax = plt.subplots(figsize=(_PLOT_WIDTH_IN, 1.2 + 2 * _ROW_HEIGHT_IN * len(chosen)))
    ys = [2.5 * i for i in range(len(chosen))]
    ax.barh([y - 0.5 for y in ys], [c[1] for c in chosen], height=1.0, label="Brain")
    ax.barh([y + 0.5 for y in ys], [c[2] for c in chosen], height=1.0, label="peer")
    ax.set_yticks(ys, [c[0] for c in chosen], fontsize=8)
    ax.invert_yaxis()
    values = [v for c in chosen for v in c[1:] if v > 0]
    if values and max(values) / min(values) > 100 and min(values) > 0:
        ax.set_xscale("log")
    ax.set_xlabel("operations per second (more is better)" if rates else "ms (less is better)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _replace_readme(table: str, readme: Path) -> bool:
    text = readme.read_text(encoding="utf-8")
    start, end = text.find(README_BEGIN), text.find(README_END)
    if start < 0 or end < start:
        return False
    updated = text[: start + len(README_BEGIN)] + "\n" + table + "\n" + text[end:]
    readme.write_text(updated, encoding="utf-8")
    return True


def main(argv: list[str]) -> int:
    """Entry point: ``python -m bench report``."""
    parser = argparse.ArgumentParser(prog="python -m bench report", description=__doc__)
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the JSON files are")
    parser.add_argument("--readme", action="store_true", help="also update README.md's table")
    args = parser.parse_args(argv)
    rows = load_rows(args.results)
    if not rows:
        print(f"no results with a summary in {args.results}")
        return 1
    (args.results / "SUMMARY.md").write_text(render_markdown(rows), encoding="utf-8")
    _plot_goals(rows, args.results / "goals.png")
    _plot_pairs(rows, args.results / "throughput.png", rates=True)
    _plot_pairs(rows, args.results / "latency.png", rates=False)
    goals = [r for r in rows if "met" in r]
    print(
        f"{len(rows)} rows from {len({r['suite'] for r in rows})} suites; "
        f"{sum(1 for r in goals if r['met'])} of {len(goals)} goals met"
    )
    if args.readme and not _replace_readme(readme_table(rows), ROOT / "README.md"):
        print(f"README.md has no {README_BEGIN} … {README_END} section to fill")
        return 1
    return 0 if math.isfinite(len(rows)) else 1
