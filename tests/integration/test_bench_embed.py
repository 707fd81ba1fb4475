"""The embed suite runs (its --quick form): our figures, our agreement with the reference,
and the torch peer's figures when the bench-only environment is there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest

from bench import embed
from tests.integration.benchrun import run_quick

TIMEOUT_S: Final = 110
"""The quick run takes ~10 s without torch and ~20 s with it on two idle cores (importing
sentence-transformers alone costs ~6 s of CPU); the margin absorbs a loaded machine, within
pytest's own 120 s limit."""

THROUGHPUT_ROWS: Final = 4
"""Two text sets at two batch sizes."""


def _quick(tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "embed.json"
    run_quick("embed", out, timeout=TIMEOUT_S)
    data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return data


def test_embed_quick(tmp_path: Path) -> None:
    """Positive throughput for both batch sizes, vectors that match torch's, the peer run or
    recorded as skipped as the environment says."""
    data = _quick(tmp_path)
    assert data["suite"] == "embed" and data["quick"] is True
    summary = data["summary"]
    throughput = [row for row in summary if row["unit"] == "texts/s"]
    assert len(throughput) == THROUGHPUT_ROWS
    assert {"batch 32", "batch 1"} == {row["what"].rsplit(", ", 1)[1] for row in throughput}
    assert all(row["ours"] > 0 for row in throughput)
    for runs in data["throughput"].values():
        for run in runs["ours"]:
            assert run["texts"] > 0 and run["seconds"] > 0

    assert data["ours"]["openblas_threads"] in (None, embed.EMBED_THREADS)
    assert data["ours"]["vectors_drift_across_turns"] == 0.0
    reference = data["agreement"]["ours_vs_reference"]
    assert reference["vectors"] > 0
    assert reference["min_cosine"] >= embed.COSINE_GOAL
    reference_rows = [row for row in summary if "reference" in row.get("goal", "")]
    assert len(reference_rows) == 1 and reference_rows[0]["met"] is True

    if not embed.BENCH_PYTHON.is_file():
        assert data["torch"] == {"skipped": "make bench-env not run"}
        assert all("peer" not in row for row in throughput)
        return
    assert "skipped" not in data["torch"]
    assert data["torch"]["torch_threads"] == embed.EMBED_THREADS
    for row in throughput:
        assert row["peer"] > 0 and row["ratio"] > 0
        assert isinstance(row["met"], bool)
    agreement = data["agreement"]
    assert agreement["ours_vs_torch"]["min_cosine"] >= embed.COSINE_GOAL
    assert agreement["torch_vs_reference"]["min_cosine"] >= embed.COSINE_GOAL
    cosine_rows = [row for row in summary if "cosine to torch" in row.get("goal", "")]
    assert len(cosine_rows) == 2 and all(row["met"] is True for row in cosine_rows)


def test_full_run_needs_the_bench_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without .venv-bench a full run stops at once and names the command that builds it."""
    monkeypatch.setattr(embed, "BENCH_PYTHON", tmp_path / "missing" / "bin" / "python")
    assert embed.main(["--no-save"]) == 2
    assert "make bench-env" in capsys.readouterr().err
