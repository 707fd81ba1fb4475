"""The ``brain`` command's usability without a server: repeatable ``--evidence``,
compact table times, short ids read back, start-up imports and shell completion."""

from __future__ import annotations

import datetime
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from brain.cli import completion
from brain.cli.main import _build_parser, main
from brain.cli.verbs.dates import format_time, parse_time
from brain.cli.verbs.output import Printer, shorten_ids
from brain.cli.verbs.recall import lag_note
from brain.cli.verbs.short_ids import ShortId, entity_short_id, parse_short_id, short_id_arg
from brain.cli.verbs.views import entity_table, statement_panel, statement_table
from brain.wire.messages.recall_ops import Coverage
from brain.wire.messages.records import Entity, Statement

MEMORY_A: Final = "0190f1a2b3c47d8e9fa0b1c2d3e4f501"
MEMORY_B: Final = "0190f1a2b3c47d8e9fa0b1c2d3e4f502"
STATEMENT: Final = bytes.fromhex("0190f1a2b3c47d8e9fa0b1c2d3e4f503")
ENTITY: Final = bytes.fromhex("0190f1a2b3c47d8e9fa0b1c2d3e4f504")

RECORDED: Final = 1_796_416_265_123_456_789
"""2026-12-04T20:31:05.123456789Z: a record time with every nanosecond set."""

FEB_1: Final = 1_706_745_600_000_000_000
"""2024-02-01T00:00:00Z."""


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


# --- short ids ----------------------------------------------------------------------------


def test_the_short_form_a_table_prints_reads_as_a_short_id() -> None:
    printed = shorten_ids([STATEMENT, ENTITY])[STATEMENT]
    assert printed == "…d3e4f503"
    for typed in (printed, "...d3e4f503", "d3e4f503", "…D3E4F503"):
        assert parse_short_id(typed, "statement") == ShortId("statement", "d3e4f503")
    assert parse_short_id(STATEMENT.hex(), "statement") == STATEMENT
    with pytest.raises(ValueError, match="short form tables print"):
        parse_short_id("d3e4", "statement")  # bare digits: 8 or more, unlike …d3e4
    assert parse_short_id("…d3e4", "statement") == ShortId("statement", "d3e4")


def test_an_entity_argument_reads_bare_digits_as_a_name() -> None:
    assert entity_short_id("…d3e4f504") == ShortId("entity", "d3e4f504")
    assert entity_short_id("id:d3e4f504") == ShortId("entity", "d3e4f504")
    assert entity_short_id("d3e4f504") is None  # a name that looks like hex
    assert entity_short_id(f"id:{ENTITY.hex()}") is None  # whole: read as it always was


def test_only_listable_kinds_take_short_ids() -> None:
    with pytest.raises(ValueError, match="no short form"):
        short_id_arg("memory")
    args = _build_parser().parse_args(["review", "decide", "…d3e4f503", "keep_both"])
    assert args.review_id == ShortId("review", "d3e4f503")
    with pytest.raises(SystemExit):
        _build_parser().parse_args(["memory", "get", "…d3e4f503"])


# --- compact times in tables ------------------------------------------------------------------


def test_compact_times_are_to_the_second() -> None:
    assert format_time(RECORDED, utc=True, compact=True) == "2026-12-04 20:31:05Z"
    assert format_time(RECORDED, utc=True) == "2026-12-04T20:31:05.123456789Z"
    plus_one = datetime.timezone(datetime.timedelta(hours=1))
    assert format_time(RECORDED, tz=plus_one, compact=True) == "2026-12-04 21:31:05+01:00"
    # Cut off, not rounded: 0.999 s before the epoch is still in the second before it.
    assert format_time(-1, utc=True, compact=True) == "1969-12-31 23:59:59Z"
    # What a table shows reads back as the start of that second.
    assert parse_time("2026-12-04 20:31:05Z") == RECORDED - 123_456_789


def _shown(*renderables: object) -> str:
    buffer = io.StringIO()
    printer = Printer(utc=True, stdout=buffer, stderr=io.StringIO())
    for build in renderables:
        assert callable(build)
        printer.show(build(printer))
    return buffer.getvalue()


def _statement() -> Statement:
    return Statement.from_wire(
        {
            "id": STATEMENT,
            "space": "default",
            "kind": "fact",
            "subject": {"entity": ENTITY},
            "predicate": "works_at",
            "object": {"text": "Acme"},
            "confidence": 1.0,
            "evidence": [{"memory": bytes.fromhex(MEMORY_A)}],
            "valid_from": FEB_1 + 5,
            "recorded_at": RECORDED,
            "version": 1,
            "chain_root": STATEMENT,
        }
    )


def test_tables_show_compact_times_and_detail_views_every_nanosecond() -> None:
    statement = _statement()
    entity = Entity.from_wire(
        {
            "id": ENTITY,
            "name": "Alice",
            "aliases": [],
            "attributes": {},
            "created_at": RECORDED,
            "recorded_at": RECORDED,
        }
    )
    table = _shown(
        lambda p: statement_table([statement], p, p.labels(statement)),
        lambda p: entity_table([entity], p, p.labels(entity)),
    )
    assert "2026-12-04 20:31:05Z" in table and "2024-02-01 00:00:00Z → open" in table
    assert ".123" not in table and "T20:31" not in table
    panel = _shown(lambda p: statement_panel(statement, p, p.labels(statement, detail=True)))
    assert "2026-12-04T20:31:05.123456789Z" in panel
    assert "2024-02-01T00:00:00.000000005Z" in panel


# --- the semantic index's lag -------------------------------------------------------------


def _coverage(**extra: object) -> Coverage:
    wire = {
        "space": "default",
        "arms": ["semantic", "lexical", "graph"],
        "corpus": 5,
        "candidates": {"semantic": 5, "lexical": 1, "graph": 0},
        **extra,
    }
    return Coverage.from_wire(wire)


def test_the_lag_note_says_how_long_and_how_much() -> None:
    assert lag_note(_coverage()) is None
    assert lag_note(_coverage(index_wait_ms=40)) is None  # a blink: not worth a line
    assert lag_note(_coverage(index_wait_ms=2_500, embed_backlog=3)) == (
        "the semantic index lagged behind the writes: the recall waited 2.5 s for it; "
        "3 documents were not in it yet, so not searched by meaning"
    )
    counted = lag_note(_coverage(embed_backlog=1_000))
    assert counted is not None and "1,000 or more documents were" in counted


# --- start-up imports -----------------------------------------------------------------------

HEAVY_MODULES: Final = (
    *("numpy", "hnswlib", "lmdb", "asyncio", "brain.client", "brain.engine"),
    *("urllib.request", "http.client", "rich"),
)
"""What a command that only parses or prints help has no use for: the embedder's and
index's libraries, the store, the client library (asyncio, the wire session), which
load only when a verb runs or connects, the HTTP client of export and import, and
rich, which loads when something is drawn."""

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


# --- shell completion -------------------------------------------------------------------------


def _script(tmp_path: Path, shell: str) -> Path:
    path = tmp_path / f"brain.{shell}"
    path.write_text(completion.script(_build_parser(), shell), encoding="utf-8")
    return path


def _shell(name: str) -> str:
    binary = shutil.which(name)
    if binary is None:
        pytest.skip(f"{name} is not installed")
    return binary


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    assert done.stderr == ""
    return done.stdout


def _complete(shell: str, script: Path, lines: list[tuple[str, ...]]) -> list[list[str]]:
    """What the bash completion function offers, run by bash or by zsh through its
    bashcompinit, for each command line (its last word being typed): one shell for
    them all, since zsh's compinit takes a while to load."""
    setup = "autoload -U compinit && compinit -u -D; " if shell == "zsh" else ""
    program = [f"{setup}source {script}"]
    for words in lines:
        quoted = " ".join("'" + word.replace("'", "'\\''") + "'" for word in words)
        program.append(
            f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; COMPREPLY=(); _brain; "
            "printf '%s\\n' \"${COMPREPLY[@]}\" '--'"
        )
    flags = ["-f"] if shell == "zsh" else ["--norc", "--noprofile"]
    shown = _run([_shell(shell), *flags, "-c", "; ".join(program)])
    return [[w for w in block.split("\n") if w] for block in shown.split("--\n")[:-1]]


CASES: Final = [
    (("brain", "sta"), ["statement"]),
    (("brain", "statement", "a"), ["add"]),
    (("brain", "--version", "statement", "l"), ["list"]),
    (("brain", "statement", "add", "--ki"), ["--kind"]),
    (("brain", "statement", "add", "--kind", ""), ["fact", "preference", "event"]),
    # An option's value is not a command: "statement" here is a subject name.
    (("brain", "statement", "list", "--subject", "statement", "--pred"), ["--predicate"]),
    (("brain", "review", "decide", "0190", "m"), ["merge"]),
    (("brain", "completion", ""), ["bash", "zsh", "fish"]),
]
"""Command lines being typed, and what completing the last word offers."""


def test_the_bash_script_is_valid_bash(tmp_path: Path) -> None:
    _run(["bash", "-n", str(_script(tmp_path, "bash"))])


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_offers_commands_options_and_choices(shell: str, tmp_path: Path) -> None:
    offered = _complete(shell, _script(tmp_path, shell), [words for words, _ in CASES])
    assert offered == [expected for _, expected in CASES]


@pytest.mark.parametrize(("words", "offered"), CASES)
def test_fish_completes_the_same(
    words: tuple[str, ...], offered: list[str], tmp_path: Path
) -> None:
    script = _script(tmp_path, "fish")
    line = " ".join(words)
    shown = _run([_shell("fish"), "-N", "-c", f"source {script}; complete -C '{line}'"])
    assert sorted(row.split("\t")[0] for row in shown.splitlines()) == sorted(offered)


def test_brain_completion_prints_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    assert "complete -o default -F _brain brain" in capsys.readouterr().out
    assert main(["completion", "zsh"]) == 0
    assert capsys.readouterr().out.startswith("autoload -U +X bashcompinit && bashcompinit\n")
    assert main(["completion", "fish"]) == 0
    assert "complete -c brain" in capsys.readouterr().out


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_the_other_scripts_parse(shell: str, tmp_path: Path) -> None:
    _run([_shell(shell), "-n", str(_script(tmp_path, shell))])
