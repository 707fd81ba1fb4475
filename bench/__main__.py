"""Run a benchmark suite: ``python -m bench <suite> [--quick] [options]``."""

from __future__ import annotations

import importlib
import sys
from typing import Final

SUITES: Final = {
    "ingest": "bench.ingest",
    "point": "bench.point",
    "recall": "bench.recall",
    "semantic": "bench.semantic",
    "lexical": "bench.lexical",
    "embed": "bench.embed",
    "scale": "bench.scale",
    "quality": "bench.quality",
    "locomo": "bench.locomo",
    "durability": "bench.durability",
    "sustained": "bench.sustained",
    "replication": "bench.replication",
    "cluster-reads": "bench.cluster_reads",
    "report": "bench.report",
}
"""Every suite of spec/08-benchmarks.md (and ``report``, which turns results into tables and
plots), by the module whose ``main(argv)`` runs it; imported only when asked for."""


def main(argv: list[str]) -> int:
    """Dispatch to the named suite."""
    if not argv or argv[0] not in SUITES:
        print(f"usage: python -m bench {{{','.join(SUITES)}}} [--quick] [options]", file=sys.stderr)
        return 2
    module = importlib.import_module(SUITES[argv[0]])
    code: int = module.main(argv[1:])
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
