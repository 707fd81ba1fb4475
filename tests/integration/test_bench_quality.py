"""The retrieval-quality suite runs (its --quick form) and reports three sane scores."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]

MODES: Final = ("lexical", "semantic", "hybrid")
"""The rows the suite's table must have, one per RECALL mode."""

TIMEOUT_S: Final = 120
"""The quick run takes ~20 s on two cores; the margin absorbs a loaded CI machine."""

SCORE_COLUMNS: Final = 2
"""nDCG@10 and recall@100, the first two numbers of each row."""


def test_quality_quick(tmp_path: Path) -> None:
    """Exit 0, one table row per mode with both scores in [0, 1], the JSON only where asked."""
    out = tmp_path / "quality.json"
    # One BLAS thread: on two cores, BLAS threading slows the numpy MiniLM down.
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "bench", "quality", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    rows: dict[str, list[float]] = {}
    for line in result.stdout.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells and cells[0] in MODES:
            rows[cells[0]] = [float(cell) for cell in cells[1:]]
    assert sorted(rows) == sorted(MODES), result.stdout
    for mode, numbers in rows.items():
        scores = numbers[:SCORE_COLUMNS]
        assert all(0.0 <= score <= 1.0 for score in scores), (mode, numbers)
    assert "goal hybrid >= best single arm on ndcg_at_10" in result.stdout
    assert out.is_file()
