"""Running a benchmark suite's ``--quick`` form the way CI and the README do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Final

__all__ = ["ROOT", "run_quick"]

ROOT: Final = Path(__file__).resolve().parents[2]


def run_quick(suite: str, out: Path, *, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m bench SUITE --quick --out OUT`` from the repository root; fails the
    test, with what the suite printed, unless it exits 0. One BLAS thread, as the
    server uses: on two cores a BLAS thread pool only slows the embedder down."""
    result = subprocess.run(
        [sys.executable, "-m", "bench", suite, "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result
