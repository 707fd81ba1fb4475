"""The JSONL export form itself: which tables its lines hold, a small golden file
(``tests/data/jsonl/dan-moves.jsonl``: Dan lived in Paris from April, and in June
we learned he moved to Rome) that imports to the answers a reader of the file
expects and exports back as the same bytes, every line readable by Python's json
module and by jq, and every field of every line type in the spec's table."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Final

import pytest

import brain
from brain.engine.admin import jsonl_fields
from brain.engine.admin.import_marks import EXPORTED
from brain.engine.admin.jsonl_codecs import Fields
from brain.engine.admin.jsonl_format import LINE_TABLES, LINE_TYPES, REBUILT_TABLES
from brain.engine.admin.jsonl_import import read_jsonl
from brain.engine.admin.jsonl_values import time_from_json
from brain.engine.database import Database
from brain.wire.messages.memory_ops import MemoryGet, MemoryGetOk
from brain.wire.messages.recall_ops import Recall, RecallOk
from brain.wire.messages.statement_ops import (
    StatementHistory,
    StatementHistoryOk,
    StatementList,
    StatementListOk,
)
from brain.wire.messages.values import NameRef
from brain.wire.opcodes import Opcode
from tests.unit.admin.test_jsonl_round_trip import OPTIONS, import_into

REPOSITORY: Final = Path(__file__).resolve().parents[3]
GOLDEN: Final = REPOSITORY / "tests" / "data" / "jsonl" / "dan-moves.jsonl"
SPEC: Final = REPOSITORY / "spec" / "06-operations.md"
NS: Final = "default"

PARIS, ROME = (
    bytes.fromhex("01900000000070008000000000000003"),
    bytes.fromhex("01900000000070008000000000000004"),
)
NOTE: Final = bytes.fromhex("01900000000070008000000000000002")


def _at(text: str) -> int:
    return time_from_json(text, "test")


def test_every_exported_table_is_held_by_the_lines_or_rebuilt_from_them() -> None:
    assert set(EXPORTED) == LINE_TABLES | REBUILT_TABLES
    assert not LINE_TABLES & REBUILT_TABLES


def _listed(db: Database, **query: object) -> list[tuple[bytes, str | None, int | None]]:
    answer = db.execute(
        NS,
        Opcode.STATEMENT_LIST,
        StatementList(subject=NameRef(name="Dan"), predicate="lives_in", **query),  # type: ignore[arg-type]
    )
    assert isinstance(answer, StatementListOk)
    return [(s.id, getattr(s.object_, "text", None), s.valid_to) for s in answer.statements]


def test_the_golden_file_imports_to_its_answers_and_exports_as_itself(tmp_path: Path) -> None:
    data = GOLDEN.read_bytes()
    with brain.open(tmp_path / "d", OPTIONS) as db:
        import_into(db, read_jsonl(data))
        history = db.execute(NS, Opcode.STATEMENT_HISTORY, StatementHistory(id=ROME))
        assert isinstance(history, StatementHistoryOk)
        assert [(v.id, v.version, v.recorded_at) for v in history.versions] == [
            (PARIS, 1, _at("2024-05-01T10:00:00.000000001Z")),
            (ROME, 2, _at("2024-06-01T09:00:00.000000000Z")),
        ]
        paris = history.versions[0]
        assert paris.superseded_by == ROME
        assert paris.record_invalidated_at == _at("2024-06-01T09:00:00.000000000Z")
        may, june_first = (
            _at("2024-05-15T00:00:00.000000000Z"),
            _at("2024-06-01T00:00:00.000000000Z"),
        )
        july = _at("2024-07-01T00:00:00.000000000Z")
        # What was believed in mid-May: Paris, with no end in sight.
        assert _listed(db, as_of=may) == [(PARIS, "Paris", None)]
        # What is believed now about July: Rome.
        assert _listed(db, valid_at=july) == [(ROME, "Rome", None)]
        # What was believed in May about July: still Paris.
        assert _listed(db, as_of=may, valid_at=july) == [(PARIS, "Paris", None)]
        # Now, about early May: Paris, which ended on 1 June, superseded.
        assert _listed(db, valid_at=may, include_superseded=True) == [(PARIS, "Paris", june_first)]
        memory = db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=NOTE))
        assert isinstance(memory, MemoryGetOk) and memory.memory.text == "Dan: I moved to Paris."
        # The import embedded the texts again: RECALL finds the new version by its words.
        assert db.wait_indexed()
        found = db.execute(NS, Opcode.RECALL, Recall(cue="Dan Rome", min_relevance=-1.0))
        assert isinstance(found, RecallOk) and found.hits[0].id == ROME
        exported = "".join(line + "\n" for line in db.export_jsonl(NS)).encode()
    assert exported == data


def test_every_line_is_a_json_object_with_a_type() -> None:
    lines = GOLDEN.read_text(encoding="utf-8").splitlines()
    parsed = [json.loads(line) for line in lines]
    assert all(isinstance(line, dict) for line in parsed)
    assert [line["type"] for line in parsed] == [
        "header",
        "schema",
        "entity",
        "memory",
        "statement",
        "statement",
        "trailer",
    ]
    assert all(line["namespace"] == NS for line in parsed[:-1])


JQ: Final = shutil.which("jq")


@pytest.mark.skipif(JQ is None, reason="jq is not installed; the json module check above stands")
def test_jq_reads_the_file_and_answers_as_python_does() -> None:
    assert JQ is not None
    program = (
        'select(.type == "statement") | [.id, .object.text, .subject.name, .state.superseded_by]'
    )
    run = subprocess.run(
        [JQ, "-c", program, str(GOLDEN)], capture_output=True, text=True, check=True, timeout=30
    )
    by_jq = [json.loads(line) for line in run.stdout.splitlines()]
    by_python = [
        [
            line["id"],
            line["object"]["text"],
            line["subject"]["name"],
            line.get("state", {}).get("superseded_by"),
        ]
        for line in map(json.loads, GOLDEN.read_text(encoding="utf-8").splitlines())
        if line["type"] == "statement"
    ]
    assert (
        by_jq
        == by_python
        == [
            [PARIS.hex(), "Paris", "Dan", ROME.hex()],
            [ROME.hex(), "Rome", "Dan", None],
        ]
    )


def _spec_fields() -> dict[str, set[str]]:
    """The field names the spec's table of line types lists for each type."""
    text = SPEC.read_text(encoding="utf-8")
    table = text[
        text.index("<!-- jsonl-fields:begin -->") : text.index("<!-- jsonl-fields:end -->")
    ]
    found: dict[str, set[str]] = {}
    for row in table.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        kind = cells[0].strip("`")
        found.setdefault(kind, set()).update(re.findall(r"`([a-z_0-9.]+)`", cells[1]))
    return found


def _declared(shape: Fields, prefix: str = "") -> set[str]:
    return {f"{prefix}{f.name}" for f in shape.fields}


def test_the_spec_lists_every_field_of_every_line_type() -> None:
    listed = _spec_fields()
    assert set(LINE_TYPES) | {"header", "trailer"} <= set(listed)
    shapes = {
        "schema": jsonl_fields.SCHEMA,
        "entity": jsonl_fields.ENTITY,
        "merge": jsonl_fields.MERGE,
        "review": jsonl_fields.REVIEW,
        "memory": jsonl_fields.MEMORY,
        "statement": jsonl_fields.STATEMENT,
        "relation": jsonl_fields.RELATION,
        "audit": jsonl_fields.AUDIT,
    }
    for kind, shape in shapes.items():
        assert _declared(shape) <= listed[kind], kind
    assert _declared(jsonl_fields.MENTIONS, "mentions.") <= listed["memory"]
    assert _declared(jsonl_fields.STATEMENT_STATE, "state.") <= listed["statement"]
    assert _declared(jsonl_fields.RELATION_STATE, "state.") <= listed["relation"]
    assert {"sha256", "forgotten_at"} <= listed["forgotten"]
    assert {"format", "namespace", "vectors", "counts"} <= listed["header"]
    assert {"lines", "sha256"} <= listed["trailer"]
