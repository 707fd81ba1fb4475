"""The ``brain`` data verbs without a server: reading arguments, printing answers, errors.

Dates (ISO 8601 in every accepted form, nanoseconds, the message for bad input,
round trips through the printed form), refs and objects, arm weights, schema
declarations, transaction files, the JSON form of answers (bytes as hex, integers
exact), id shortening, error lines and their hints, and the exit codes of the
failures that happen before anything is sent.
"""

from __future__ import annotations

import datetime
import io
import json
import time
import zoneinfo
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brain.cli import verbs
from brain.cli.main import _build_parser
from brain.cli.verbs.admin_ops import parse_predicate_decl, parse_relation_type_decl
from brain.cli.verbs.arguments import (
    parse_arms,
    parse_attribute,
    parse_bool,
    parse_choices,
    parse_evidence,
    parse_id,
    parse_object,
    parse_ref,
)
from brain.cli.verbs.connect import UsageProblem, resolve_target
from brain.cli.verbs.dates import format_time, parse_time
from brain.cli.verbs.follow import resume_point
from brain.cli.verbs.output import Labels, Printer, collect_ids, dump_json, shorten_ids, to_json
from brain.cli.verbs.problems import START_SERVER, describe_error, flag_for_field
from brain.cli.verbs.txn import TxnLineError, parse_txn_lines, substitute
from brain.cli.verbs.views import memory_panel, statement_state, statement_table
from brain.errors import (
    ConnectionClosed,
    InvalidArgument,
    NotFound,
    Overloaded,
    RequestTimeout,
    Unauthenticated,
)
from brain.wire.messages.records import Memory, Statement
from brain.wire.messages.values import (
    BoolValue,
    EntityRef,
    EntityValue,
    FloatValue,
    IntValue,
    MemoryRef,
    MemoryValue,
    NameRef,
    StatementValue,
    TextValue,
    TimeValue,
)

ID_A: Final = bytes.fromhex("0190f1a2b3c47d8e9fa0b1c2d3e4f501")
ID_B: Final = bytes.fromhex("0190f1a2b3c47d8e9fa0b1c2d3e4f502")
ENTITY: Final = bytes.fromhex("0190f1a2b3c47d8e9fa0b1c2d3e4f503")
SHA: Final = bytes(range(32))

FEB_1_UTC: Final = 1_706_745_600_000_000_000
"""2024-02-01T00:00:00Z in nanoseconds."""

BERLIN: Final = zoneinfo.ZoneInfo("Europe/Berlin")
PLUS_2: Final = datetime.timezone(datetime.timedelta(hours=2))
HOUR: Final = 3600 * 10**9


@pytest.fixture
def berlin_local(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local time zone is Europe/Berlin for the test."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


# --- dates ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-02-01", FEB_1_UTC - 2 * HOUR),  # midnight in the given zone (+02:00)
        ("2024-02-01T09:30", FEB_1_UTC + 7 * HOUR + 30 * 60 * 10**9),
        ("2024-02-01 00:00:00.5", FEB_1_UTC - 2 * HOUR + 500_000_000),
        ("2024-02-01T00:00:00Z", FEB_1_UTC),
        ("2024-02-01T00:00:00z", FEB_1_UTC),
        ("2024-02-01T02:00:00+02:00", FEB_1_UTC),
        ("2024-02-01T02:00:00+0200", FEB_1_UTC),
        ("2024-01-31T19:00:00-05", FEB_1_UTC),
        ("2024-02-01T00:00:00.000000001Z", FEB_1_UTC + 1),
        ("2024-02-01T00:00:00,25Z", FEB_1_UTC + 250_000_000),
        ("1706745600000000000", FEB_1_UTC),
        ("0", 0),
        ("  2024-02-01T00:00Z  ", FEB_1_UTC),
    ],
)
def test_parse_time_forms(text: str, expected: int) -> None:
    assert parse_time(text, tz=PLUS_2) == expected


def test_a_time_without_offset_is_local_time(berlin_local: None) -> None:
    # Berlin is UTC+1 in winter, UTC+2 in summer.
    assert parse_time("2024-02-01") == FEB_1_UTC - HOUR
    assert parse_time("2024-07-01T12:00") == parse_time("2024-07-01T10:00:00Z")
    assert format_time(FEB_1_UTC) == "2024-02-01T01:00:00+01:00"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("yesterday", "is not a time; use a date (2024-02-01)"),
        ("2024-13-01", "is not a valid time"),
        ("2024-02-30", "is not a valid time"),
        ("2024-02-01T25:00", "is not a valid time"),
        ("2024-02-01T00:00:00.1234567891Z", "more than 9 fraction digits"),
        ("2024-02-01T00:00+24:00", "out of range"),
        ("2024-02-01Z", "is not a time"),
        ("-5", "is not a time"),
        ("", "is not a time"),
        ("\uff12\uff10\uff12\uff14", "is not a time"),  # fullwidth digits pass str.isdigit
    ],
)
def test_parse_time_refuses_with_a_message(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        parse_time(text, tz=datetime.UTC)


def test_the_bad_date_message_lists_every_form() -> None:
    with pytest.raises(ValueError) as caught:
        parse_time("next tuesday")
    message = str(caught.value)
    for form in ("a date", "a date-time", "an offset", "nanoseconds"):
        assert form in message


@pytest.mark.parametrize(
    ("nanos", "utc", "expected"),
    [
        (FEB_1_UTC, True, "2024-02-01T00:00:00Z"),
        (FEB_1_UTC + 123_000_000, True, "2024-02-01T00:00:00.123Z"),
        (FEB_1_UTC + 123_456_000, True, "2024-02-01T00:00:00.123456Z"),
        (FEB_1_UTC + 1, True, "2024-02-01T00:00:00.000000001Z"),
        (FEB_1_UTC, False, "2024-02-01T02:00:00+02:00"),
        (-1, True, "1969-12-31T23:59:59.999999999Z"),
    ],
)
def test_format_time(nanos: int, utc: bool, expected: str) -> None:
    assert format_time(nanos, utc=utc, tz=PLUS_2) == expected


def test_format_time_at_the_ends_of_the_wire_range() -> None:
    assert format_time(2**63 - 1, utc=True) == "2262-04-11T23:47:16.854775807Z"
    assert format_time(-(2**63), utc=True) == "1677-09-21T00:12:43.145224192Z"


@given(
    nanos=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    zone=st.sampled_from([datetime.UTC, PLUS_2, BERLIN, zoneinfo.ZoneInfo("America/St_Johns")]),
    utc=st.booleans(),
)
def test_a_printed_time_reads_back_as_the_same_nanosecond(
    nanos: int, zone: datetime.tzinfo, utc: bool
) -> None:
    shown = format_time(nanos, utc=utc, tz=zone)
    assert parse_time(shown, tz=datetime.UTC) == nanos


# --- ids, refs and objects ----------------------------------------------------------------


def test_parse_id_accepts_hex_and_uuid_forms() -> None:
    assert parse_id(ID_A.hex()) == ID_A
    assert parse_id(ID_A.hex().upper()) == ID_A
    assert parse_id("0190f1a2-b3c4-7d8e-9fa0-b1c2d3e4f501") == ID_A
    for bad in ("", "0190", ID_A.hex() + "00", "z" * 32):
        with pytest.raises(ValueError, match="is not an id"):
            parse_id(bad)


def test_parse_ref_prefixes() -> None:
    assert parse_ref(f"id:{ENTITY.hex()}") == EntityRef(entity=ENTITY)
    assert parse_ref(f"entity:{ENTITY.hex()}") == EntityRef(entity=ENTITY)
    assert parse_ref(f"memory:{ID_A.hex()}") == MemoryRef(memory=ID_A)
    assert parse_ref("Alice") == NameRef(name="Alice")
    assert parse_ref("Alice", type_="person") == NameRef(name="Alice", type_="person")
    assert parse_ref("name:id:odd") == NameRef(name="id:odd")
    assert parse_ref("Dr. Who: the doctor") == NameRef(name="Dr. Who: the doctor")
    with pytest.raises(ValueError, match="is not an id"):
        parse_ref("id:Alice")
    with pytest.raises(ValueError, match="white space"):
        parse_ref("   ")


@pytest.mark.parametrize(
    ("text", "object_type", "expected"),
    [
        ("Acme", "text", TextValue(text="Acme")),
        ("", "text", TextValue(text="")),
        (ENTITY.hex(), "entity", EntityValue(entity=ENTITY)),
        (f"id:{ENTITY.hex()}", "entity", EntityValue(entity=ENTITY)),
        (ID_A.hex(), "memory", MemoryValue(memory=ID_A)),
        (ID_B.hex(), "statement", StatementValue(statement=ID_B)),
        ("-42", "int", IntValue(int_=-42)),
        ("2.5", "float", FloatValue(float_=2.5)),
        ("yes", "bool", BoolValue(bool_=True)),
        ("False", "bool", BoolValue(bool_=False)),
        ("2024-02-01T00:00:00Z", "time", TimeValue(time=FEB_1_UTC)),
    ],
)
def test_parse_object(text: str, object_type: str, expected: object) -> None:
    assert parse_object(text, object_type) == expected


@pytest.mark.parametrize(
    ("text", "object_type", "fragment"),
    [
        ("4.5", "int", "not an integer"),
        ("inf", "float", "not a finite number"),
        ("x", "float", "not a number"),
        ("maybe", "bool", "not a truth value"),
        ("soon", "time", "not a time"),
        ("Bob", "entity", "not an id"),
        ("x", "colour", "unknown object type"),
    ],
)
def test_parse_object_refuses(text: str, object_type: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_object(text, object_type)


def test_parse_bool_words() -> None:
    assert [parse_bool(w) for w in ("true", "ON", "1", "no", "off", "0")] == [
        True, True, True, False, False, False,
    ]  # fmt: skip


def test_parse_evidence() -> None:
    assert parse_evidence(ID_A.hex()).to_wire() == {"memory": ID_A}
    pinned = parse_evidence(f"memory:{ID_A.hex()}:{SHA.hex()}")
    assert pinned.to_wire() == {"memory": ID_A, "sha256": SHA}
    with pytest.raises(ValueError, match="SHA-256"):
        parse_evidence(f"{ID_A.hex()}:abc")


def test_parse_attribute_text_and_json() -> None:
    assert parse_attribute("team=infra") == ("team", "infra")
    assert parse_attribute("note=a=b") == ("note", "a=b")
    assert parse_attribute("level:=3") == ("level", 3)
    assert parse_attribute('tags:=["a", "b"]') == ("tags", ["a", "b"])
    assert parse_attribute("url=http://x:=y") == ("url", "http://x:=y")
    with pytest.raises(ValueError, match="not JSON"):
        parse_attribute("level:=three")
    with pytest.raises(ValueError, match="KEY=TEXT"):
        parse_attribute("lonely")
    with pytest.raises(ValueError, match="no key"):
        parse_attribute("=x")


# --- arms, choices, schema declarations ----------------------------------------------------


def test_parse_arms() -> None:
    arms = parse_arms("semantic=1,lexical=0.5,graph=0")
    assert arms.to_wire() == {"semantic": 1.0, "lexical": 0.5, "graph": 0.0}
    assert parse_arms(" graph = 2 ".replace(" ", "")).to_wire() == {"graph": 2.0}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("semantic", "not ARM=WEIGHT"),
        ("vector=1", "unknown arm 'vector'"),
        ("graph=1,graph=0", "given twice"),
        ("lexical=-1", "0 or more"),
        ("lexical=nan", "finite"),
        ("lexical=much", "not a number"),
    ],
)
def test_parse_arms_refuses(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_arms(text)


def test_parse_choices() -> None:
    allowed = ("statement", "memory")
    assert parse_choices("statement,memory", allowed) == ("statement", "memory")
    assert parse_choices(" memory ", allowed) == ("memory",)
    for bad, fragment in (("", "at least one"), ("entity", "unknown"), ("memory,memory", "twice")):
        with pytest.raises(ValueError, match=fragment):
            parse_choices(bad, allowed)


def test_schema_declarations() -> None:
    assert parse_predicate_decl("works_at", stateful=True).to_wire() == {
        "name": "works_at",
        "stateful": True,
    }
    assert parse_predicate_decl("likes:fact", stateful=False).to_wire() == {
        "name": "likes",
        "kind": "fact",
        "stateful": False,
    }
    assert parse_predicate_decl("ns:odd", stateful=False).name == "ns:odd"
    assert parse_relation_type_decl("reports_to:many_to_one").to_wire() == {
        "name": "reports_to",
        "cardinality": "many_to_one",
    }
    assert parse_relation_type_decl("married:one_to_one:symmetric").symmetric is True
    with pytest.raises(ValueError, match="NAME:CARDINALITY"):
        parse_relation_type_decl("reports_to:some")


# --- transaction files ---------------------------------------------------------------------


def test_txn_lines_and_references() -> None:
    text = '# comment\n\nmemory add "two words"  # trailing\nstatement add A p $1\n'
    lines = parse_txn_lines(text)
    assert lines == [(3, ["memory", "add", "two words"]), (4, ["statement", "add", "A", "p", "$1"])]
    ids = {1: ID_A}
    assert substitute(["x", "$1", "id:$1", "memory:$1", "cost $1"], ids, 4) == [
        "x", ID_A.hex(), f"id:{ID_A.hex()}", f"memory:{ID_A.hex()}", "cost $1",
    ]  # fmt: skip
    with pytest.raises(TxnLineError, match=r"\$2 names no earlier write"):
        substitute(["$2"], ids, 5)
    with pytest.raises(TxnLineError, match="line 1"):
        parse_txn_lines('memory add "unclosed\n')


# --- JSON and tables -----------------------------------------------------------------------


def _statement(**extra: object) -> Statement:
    fields: dict[str, object] = {
        "id": ID_A,
        "space": "default",
        "kind": "fact",
        "subject": {"entity": ENTITY},
        "predicate": "works_at",
        "object": {"text": "Acme"},
        "confidence": 1.0,
        "evidence": [{"memory": ID_B, "sha256": SHA}],
        "valid_from": FEB_1_UTC,
        "recorded_at": 1_796_019_154_829_635_219,
        "version": 1,
        "chain_root": ID_A,
        **extra,
    }
    return Statement.from_wire(fields)


def test_json_has_hex_bytes_and_exact_integers() -> None:
    statement = _statement()
    document = json.loads(dump_json({"statement": statement}))
    assert document["statement"]["id"] == ID_A.hex()
    assert document["statement"]["subject"] == {"entity": ENTITY.hex()}
    assert document["statement"]["evidence"] == [{"memory": ID_B.hex(), "sha256": SHA.hex()}]
    assert document["statement"]["recorded_at"] == 1_796_019_154_829_635_219  # not rounded
    assert isinstance(document["statement"]["version"], int)
    assert document["statement"]["confidence"] == 1.0
    assert document["statement"]["object"] == {"text": "Acme"}
    one_line = dump_json(statement, one_line=True)
    assert "\n" not in one_line and json.loads(one_line) == to_json(statement)
    assert to_json({"a": (b"\x00\xff", [1, b"\x01"])}) == {"a": ["00ff", [1, "01"]]}


def test_collect_ids_finds_every_record_id_once() -> None:
    assert collect_ids({"statement": _statement()}) == [ID_A, ENTITY, ID_B]


def test_shortened_ids_are_never_ambiguous() -> None:
    short = shorten_ids([ID_A, ID_B])
    assert short == {ID_A: "…d3e4f501", ID_B: "…d3e4f502"}
    # Two ids sharing their last 8 hex digits: the labels grow until they differ.
    twin = bytes.fromhex("0290f1a2b3c47d8e9fa0b1c2d3e4f501")
    labels = shorten_ids([ID_A, twin])
    assert len(set(labels.values())) == 2
    assert labels[ID_A] == ID_A.hex()  # they differ only in the head: shown whole
    assert shorten_ids([ID_A], full=True) == {ID_A: ID_A.hex()}


def test_labels_keep_namesakes_apart() -> None:
    labels = Labels(
        shorten_ids([ID_A, ID_B, ENTITY]), {ID_A: "Alice", ID_B: "Alice", ENTITY: "Bob"}
    )
    assert labels.entity(ENTITY) == "Bob"
    assert labels.entity(ID_A) == "Alice (…d3e4f501)"
    assert labels.entity(bytes(16)) == f"entity {bytes(16).hex()}"


def _printer() -> tuple[Printer, io.StringIO]:
    buffer = io.StringIO()
    return Printer(utc=True, stdout=buffer, stderr=io.StringIO()), buffer


def test_statement_table_shows_names_short_ids_and_utc() -> None:
    printer, buffer = _printer()
    statement = _statement()
    labels = printer.labels(statement, {ENTITY: "Alice"})
    printer.show(statement_table([statement], printer, labels))
    shown = buffer.getvalue()
    assert "…d3e4f501" in shown and "Alice" in shown and "Acme" in shown
    assert "2024-02-01 00:00:00Z → open" in shown and "current" in shown
    assert "kind" not in shown  # every row a fact held with confidence 1


RECORDED: Final = 1_000
"""The record time of the statements of the as-of tests (any unit will do)."""

LATER: Final = 2_000
"""When the database learned more about them."""


@pytest.mark.parametrize(
    ("change", "as_of", "expected"),
    [
        ({}, None, "current"),
        ({}, 1_500, "current"),
        ({"superseded_by": ID_B, "record_invalidated_at": LATER}, None, "superseded"),
        ({"superseded_by": ID_B, "record_invalidated_at": LATER}, 1_500, "current"),
        ({"superseded_by": ID_B, "record_invalidated_at": LATER}, LATER, "superseded"),
        ({"superseded_by": ID_B, "record_invalidated_at": LATER}, 2_500, "superseded"),
        ({"tombstoned_at": LATER, "record_invalidated_at": LATER}, 1_500, "current"),
        ({"tombstoned_at": LATER, "record_invalidated_at": LATER}, LATER, "tombstoned"),
        # Superseded, then tombstoned (its only evidence forgotten) later still.
        (
            {"superseded_by": ID_B, "record_invalidated_at": LATER, "tombstoned_at": 3_000},
            2_500,
            "superseded",
        ),
    ],
)
def test_the_state_is_judged_as_of_the_instant_asked(
    change: dict[str, object], as_of: int | None, expected: str
) -> None:
    statement = _statement(recorded_at=RECORDED, **change)
    assert statement_state(statement, as_of) == expected


def test_a_retracted_statement_shows_retracted_at_any_instant() -> None:
    husk = Statement.from_wire(
        {
            "id": ID_A,
            "space": "default",
            "recorded_at": RECORDED,
            "record_invalidated_at": LATER,
            "tombstoned_at": LATER,
            "tombstone_reason": "retracted",
            "version": 1,
            "chain_root": ID_A,
        }
    )
    assert statement_state(husk, 1_500) == statement_state(husk) == "retracted"


def test_a_list_as_of_shows_a_row_believed_then_as_current_then() -> None:
    # The tour's "believed then": Acme was superseded after the instant asked about.
    printer, buffer = _printer()
    acme = _statement(recorded_at=RECORDED, superseded_by=ID_B, record_invalidated_at=LATER)
    labels = printer.labels(acme, {ENTITY: "Alice"})
    printer.show(statement_table([acme], printer, labels, as_of=1_500))
    assert "current" in buffer.getvalue() and "superseded" not in buffer.getvalue()
    printer.show(statement_table([acme], printer, labels))
    assert "superseded" in buffer.getvalue()


@pytest.mark.parametrize(
    ("last_shown", "unshown", "next_lsn", "expected"),
    [
        (7, [7, 8], 9, 7),  # LSN 7 was cut short: it repeats
        (7, [8, 8], 9, 8),  # LSN 7 was whole; LSN 8 came but was not shown
        (7, [], 8, 8),  # nothing came after LSN 7: it was whole
        (7, [], 12, 12),  # LSNs 8 to 11 held no change of the kinds asked for
        (7, [], 7, 8),  # ended while LSN 7's frames were still being flushed
        (7, [], None, 7),  # no ending frame: nothing says LSN 7 was whole
    ],
)
def test_follow_resumes_at_the_first_change_not_shown(
    last_shown: int, unshown: list[int], next_lsn: int | None, expected: int
) -> None:
    assert resume_point(last_shown, unshown, next_lsn) == expected


def test_stored_text_is_never_markup() -> None:
    printer, buffer = _printer()
    memory = Memory.from_wire(
        {"id": ID_A, "sha256": SHA, "recorded_at": 0, "text": "[bold red]x[/bold red] \x1b[2J"}
    )
    printer.show(memory_panel(memory, printer))
    shown = buffer.getvalue()
    assert "[bold red]x[/bold red]" in shown
    assert "\x1b" not in shown and "\\x1b[2J" in shown  # shown, never sent to the terminal


# --- errors --------------------------------------------------------------------------------


def test_flag_for_field() -> None:
    flags = {"--valid-to", "--evidence", "--as-of"}
    assert flag_for_field("new.valid_to", flags) == "--valid-to"
    assert flag_for_field("evidence[2].memory", flags) == "--evidence"
    assert flag_for_field("as_of", flags) == "--as-of"
    assert flag_for_field("subject.name", flags) is None


def test_error_lines_name_the_error_field_and_fix() -> None:
    line = describe_error(NotFound("no statement x", field="id"))
    assert line.startswith("brain: NOT_FOUND: no statement x (field id)")
    assert "--space" in line
    line = describe_error(Unauthenticated("unknown API key"), key_source="brain-data/c.toml")
    assert "--api-key" in line and "BRAIN_API_KEY" in line and "brain-data/c.toml" in line
    line = describe_error(
        InvalidArgument("valid_to must not be before valid_from", field="new.valid_to"),
        flags={"--valid-to"},
    )
    assert "set by --valid-to" in line and line.endswith("check --valid-to")
    assert "in 250 ms" in describe_error(Overloaded("busy", retry_after_ms=250))


def test_connection_refused_says_how_to_start_the_server() -> None:
    refused = ConnectionClosed("cannot connect to 127.0.0.1:9: refused")
    refused.__cause__ = ConnectionRefusedError(111, "Connection refused")
    line = describe_error(refused, address="127.0.0.1:9")
    assert line == (f"brain: cannot connect to 127.0.0.1:9 (connection refused) — {START_SERVER}")
    assert "make serve" in line and "brain serve" in line


def test_a_timed_out_write_names_its_request_id() -> None:
    line = describe_error(RequestTimeout("no answer"), request_id=ID_A)
    assert f"--request-id {ID_A.hex()}" in line


# --- the parser and the failures before anything is sent -----------------------------------


def _run(argv: list[str], environ: dict[str, str]) -> tuple[int, str, str]:
    args = _build_parser().parse_args(argv)
    out, err = io.StringIO(), io.StringIO()
    code = verbs.run(args, environ=environ, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_every_verb_command_is_registered() -> None:
    parser = _build_parser()
    group = next(a for a in parser._actions if a.dest == "command")
    assert set(group.choices) >= verbs.COMMANDS  # type: ignore[arg-type]


CONNECTION_OPCODES = frozenset({"HELLO", "AUTH", "PING", "BYE", "CANCEL_STREAM"})
"""Opcodes the client library speaks for every command (handshake, liveness, close,
stream cancel); every other opcode is some verb's job."""


def test_every_opcode_has_a_verb() -> None:
    import re
    from pathlib import Path

    import brain.cli
    from brain.wire.opcodes import Opcode

    root = Path(brain.cli.__file__).parent
    source = "".join(path.read_text() for path in sorted(root.rglob("*.py")))
    spoken = set(re.findall(r"\bOpcode\.([A-Z_]+)\b", source))
    missing = {op.name for op in Opcode} - spoken - CONNECTION_OPCODES
    assert not missing, f"no brain verb sends {sorted(missing)}"


def test_statement_add_defaults() -> None:
    args = _build_parser().parse_args(["statement", "add", "Alice", "works_at", "Acme"])
    assert (args.kind, args.object_type, args.request_id, args.json) == (None, "text", None, False)
    args = _build_parser().parse_args(
        ["statement", "add", "A", "met", "B", "--event-at", "2024-02-01T00:00Z", "--json"]
    )
    assert args.event_at == FEB_1_UTC and args.json


def test_bad_dates_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _build_parser().parse_args(["statement", "list", "--as-of", "last week"])
    assert exited.value.code == 2
    assert "argument --as-of: 'last week' is not a time" in capsys.readouterr().err


def test_no_api_key_is_a_usage_error(tmp_path: Path) -> None:
    code, out, err = _run(["statement", "list", "--data", str(tmp_path)], environ={})
    assert code == 2 and out == ""
    assert "no API key" in err and "--api-key" in err and "credentials.toml" in err


def test_a_refused_argument_is_a_usage_error_before_connecting() -> None:
    # No server listens on port 1: the message is refused before any connection.
    env = {"BRAIN_PORT": "1", "BRAIN_API_KEY": "brn_x"}
    code, _, err = _run(["statement", "add", "A", "met", "B", "--kind", "event"], env)
    assert code == 2 and "event_at is required" in err and "--event-at" in err
    code, _, err = _run(["statement", "add", "id:zz", "p", "o"], env)
    assert code == 2 and "SUBJECT" in err


def test_quiet_and_json_together_are_a_usage_error() -> None:
    code, _, err = _run(["memory", "add", "x", "-q", "--json"], {"BRAIN_API_KEY": "k"})
    assert code == 2 and "--quiet" in err


def test_a_group_without_an_action_prints_its_help() -> None:
    code, _, err = _run(["entity"], {})
    assert code == 2 and "resolve" in err


def test_target_precedence(tmp_path: Path) -> None:
    (tmp_path / "credentials.toml").write_text('api_key = "brn_from_file"\n', encoding="utf-8")
    args = _build_parser().parse_args(["review", "list", "--data", str(tmp_path)])
    target = resolve_target(args, {})
    assert (target.host, target.port, target.api_key) == ("127.0.0.1", 9090, "brn_from_file")
    env = {"BRAIN_HOST": "db.local", "BRAIN_PORT": "9100", "BRAIN_API_KEY": "brn_env"}
    target = resolve_target(args, env)
    assert (target.host, target.port, target.api_key) == ("db.local", 9100, "brn_env")
    args = _build_parser().parse_args(
        ["review", "list", "--port", "9200", "--api-key", "brn_flag", "--host", "h"]
    )
    target = resolve_target(args, env)
    assert (target.host, target.port, target.api_key, target.key_source) == (
        "h", 9200, "brn_flag", "--api-key",
    )  # fmt: skip
    bare = _build_parser().parse_args(["review", "list", "--api-key", "k"])
    with pytest.raises(UsageProblem, match="BRAIN_PORT must be a port"):
        resolve_target(bare, {"BRAIN_PORT": "x"})


def test_the_server_config_gives_port_and_credentials(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "credentials.toml").write_text('api_key = "brn_cfg"\n', encoding="utf-8")
    config = tmp_path / "brain.toml"
    config.write_text(
        f'[server]\nhost = "0.0.0.0"\nport = 9300\ndata_dir = "{data}"\n', encoding="utf-8"
    )
    args = _build_parser().parse_args(["schema", "get", "--config", str(config)])
    target = resolve_target(args, {})
    # A wildcard listen address is this machine.
    assert (target.host, target.port, target.api_key) == ("127.0.0.1", 9300, "brn_cfg")
    assert target.key_source == str(data / "credentials.toml")
