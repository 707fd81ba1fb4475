"""The ``brain`` command's usability without a server: repeatable ``--evidence``,
compact table times, short ids read back, start-up imports and shell completion."""

from __future__ import annotations

from typing import Final

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
