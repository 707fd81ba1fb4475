"""The benchmark harness runs (its --quick form), so it cannot rot unnoticed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ingest_quick() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench", "ingest", "--quick", "--clients", "1,4"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("clients=")]
    assert len(lines) == 2
    assert all("writes/s=" in line and "fsyncs/1000 writes=" in line for line in lines)
