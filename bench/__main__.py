"""Run a benchmark suite: ``python -m bench <suite> [options]``."""

from __future__ import annotations

import sys

from bench import ingest, quality

SUITES = {"ingest": ingest.main, "quality": quality.main}


def main(argv: list[str]) -> int:
    """Dispatch to the named suite."""
    if not argv or argv[0] not in SUITES:
        print(f"usage: python -m bench {{{','.join(SUITES)}}} [--quick] [options]", file=sys.stderr)
        return 2
    return SUITES[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
