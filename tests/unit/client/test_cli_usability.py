"""The ``brain`` command's usability without a server: repeatable ``--evidence``,
compact table times, short ids read back, start-up imports and shell completion."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Final

import pytest

from brain.cli.main import _build_parser

MEMORY_A: Final = "0190f1a2b3c47d8e9fa0b1c2d3e4f501"
MEMORY_B: Final = "0190f1a2b3c47d8e9fa0b1c2d3e4f502"


# --- --evidence ---------------------------------------------------------------------------


def test_evidence_is_repeatable_and_leaves_the_positionals_alone() -> None:
    line = ["statement", "add", "--evidence", MEMORY_A, "--evidence", MEMORY_B]
    args = _build_parser().parse_args([*line, "Alice", "works_at", "Acme"])
    assert (args.subject, args.predicate, args.object) == ("Alice", "works_at", "Acme")
    assert [item.memory.hex() for item in args.evidence] == [MEMORY_A, MEMORY_B]


def test_relation_evidence_is_repeatable_too() -> None:
    args = _build_parser().parse_args(
        ["relation", "add", "--evidence", MEMORY_A, "knows", "Alice", "Bob"]
    )
    assert (args.type, args.from_, args.to) == ("knows", "Alice", "Bob")
    assert [item.memory.hex() for item in args.evidence] == [MEMORY_A]


# --- start-up imports -----------------------------------------------------------------------

HEAVY_MODULES: Final = ("numpy", "hnswlib", "lmdb", "asyncio", "brain.client", "brain.engine")
"""What a command that only parses or prints help has no use for: the embedder's and
index's libraries, the store, and the client library (asyncio, the wire session),
which load only when a verb runs or connects."""

_LOADED_BY: Final = """
import json, sys
from brain.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [["--help"], ["statement", "list", "--help"]])
def test_help_loads_no_heavy_module(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _LOADED_BY, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    assert "usage: brain" in done.stdout
    heavy = [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY_MODULES)]
    assert heavy == []


def test_the_cli_defaults_match_the_client_library() -> None:
    from brain.cli.verbs import connect
    from brain.client import sync

    assert (connect.DEFAULT_PORT, connect.DEFAULT_TIMEOUT_S) == (
        sync.DEFAULT_PORT,
        sync.DEFAULT_TIMEOUT_S,
    )
