"""The sustained-ingest suite runs (its --quick form, with a backlog limit its writes
fill): clients refused with OVERLOADED wait and retry, none of their writes fails,
and the indexer empties the backlog after the load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from tests.integration.benchrun import run_quick

TIMEOUT_S: Final = 600
"""Model load, three seconds of writes, then embedding what they left."""


def test_sustained_quick(tmp_path: Path) -> None:
    out = tmp_path / "sustained.json"
    run_quick("sustained", out, timeout=TIMEOUT_S)
    data: dict[str, Any] = json.loads(out.read_text())
    assert data["suite"] == "sustained" and data["quick"] is True
    load = data["load"]
    assert load["operations"] > 0 and load["errors"] == 0, load
    assert data["samples"], data
    at_end = data["at_end"]
    assert at_end["refused"] > 0, at_end  # the limit was reached, and obeyed
    # Past the limit by at most what arrives while a count is reused (RECOUNT_S).
    assert max(s["backlog"] for s in data["samples"]) <= data["max_embed_backlog"] + 500
    assert data["drain"]["left"] == 0 and data["drain"]["drained_after_s"] is not None
    assert at_end["embedded"] > 0
    assert {row["what"].split(",")[0] for row in data["summary"]} >= {"sustained ingest"}
