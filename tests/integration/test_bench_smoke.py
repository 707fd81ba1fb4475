"""``python -m bench`` dispatches to its suites and explains itself when misused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]

TIMEOUT_S: Final = 60
"""Starting the interpreter and importing a suite; no load is run."""


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        cwd=ROOT,
    )


def test_usage_names_the_suites() -> None:
    """No suite, or an unknown one: exit 2 and a usage line naming every suite."""
    for args in ((), ("no-such-suite",)):
        result = _bench(*args)
        assert result.returncode == 2
        assert all(name in result.stderr for name in ("ingest", "point", "durability"))


def test_suites_take_the_common_options() -> None:
    """Each of these suites imports and documents --quick and --out."""
    for suite in ("ingest", "point", "durability"):
        result = _bench(suite, "--help")
        assert result.returncode == 0, result.stderr
        assert "--quick" in result.stdout and "--out" in result.stdout
