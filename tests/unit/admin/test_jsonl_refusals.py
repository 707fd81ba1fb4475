"""A JSONL export that is cut, changed or malformed is refused before anything is
written: a cut file by its missing trailer, a changed one by its checksum, and a
line that does not read with its line number and the field."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest

from brain.engine.admin.jsonl_import import read_jsonl
from brain.errors import InvalidArgument

GOLDEN: Final = Path(__file__).resolve().parents[3] / "tests" / "data" / "jsonl" / "dan-moves.jsonl"

Line = dict[str, object]


def _lines() -> list[Line]:
    return [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()]


def _dump(lines: list[Line]) -> bytes:
    return "".join(
        json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n" for line in lines
    ).encode()


def _sealed(lines: list[Line]) -> bytes:
    """``lines`` (header and records) with a trailer that counts and checks them."""
    body = _dump(lines)
    trailer = {
        "type": "trailer",
        "lines": len(lines) - 1,
        "sha256": hashlib.sha256(body).hexdigest(),
    }
    return body + _dump([trailer])


def _refused(data: bytes) -> str:
    with pytest.raises(InvalidArgument) as refused:
        read_jsonl(data)
    return str(refused.value)


def test_the_golden_file_reads() -> None:
    assert len(read_jsonl(GOLDEN.read_bytes()).rows) > 20
    assert _sealed(_lines()[:-1]) == GOLDEN.read_bytes()


@pytest.mark.parametrize("kept", range(1, 7))
def test_a_file_cut_after_any_line_is_refused(kept: int) -> None:
    data = GOLDEN.read_bytes()
    cut = b"".join(line + b"\n" for line in data.splitlines()[:kept])
    assert "cut short" in _refused(cut)


def test_a_file_cut_inside_any_line_is_refused() -> None:
    data = GOLDEN.read_bytes()
    for end in range(1, len(data) - 1, 23):
        with pytest.raises(InvalidArgument):
            read_jsonl(data[:end])
    assert "cut short" in _refused(data[:-10])


def test_a_changed_record_is_refused_by_the_checksum() -> None:
    data = GOLDEN.read_bytes().replace(b'"Rome"', b'"Roma"')
    message = _refused(data)
    assert "line 7" in message and "checksum" in message


def test_counts_that_disagree_with_the_lines_are_refused() -> None:
    lines = _lines()[:-1]
    counts = lines[0]["counts"]
    assert isinstance(counts, dict)
    counts["statement"] = 3
    assert "3 statement lines" in _refused(_sealed(lines))
    trailer = _lines()[-1]
    trailer["lines"] = 4
    assert "trailer counts 4" in _refused(_dump([*_lines()[:-1], trailer]))


def test_a_file_of_another_format_is_refused() -> None:
    lines = _lines()[:-1]
    lines[0]["format"] = "brain-jsonl/2"
    message = _refused(_sealed(lines))
    assert "line 1" in message and "brain-jsonl/2" in message


Change = Callable[[list[Line]], None]


def _set(index: int, path: str, value: object) -> Change:
    def change(lines: list[Line]) -> None:
        target: dict[str, object] = lines[index]
        *parents, name = path.split(".")
        for parent in parents:
            inner = target[parent]
            assert isinstance(inner, dict)
            target = inner
        target[name] = value

    return change


def _drop(index: int, name: str) -> Change:
    def change(lines: list[Line]) -> None:
        del lines[index][name]

    return change


def _repeat(index: int) -> Change:
    def change(lines: list[Line]) -> None:
        lines.insert(index + 1, dict(lines[index]))

    return change


MALFORMED: Final = [
    (_set(2, "created_at", "2024-05-01T10:00:00Z"), "line 3", "created_at"),
    (_set(2, "created_at", "2024-02-30T10:00:00.000000000Z"), "line 3", "created_at"),
    (_set(2, "created_at", "1969-05-01T10:00:00.000000000Z"), "line 3", "1970"),
    (_set(2, "colour", "blue"), "line 3", "colour"),
    (_set(2, "type", "person"), "line 3", "type"),
    (_set(2, "namespace", "other"), "line 3", "namespace"),
    (_set(2, "space", "Not A Space"), "line 3", "space"),
    (_set(3, "sha256", "00" * 32), "line 4", "sha256"),
    (_set(3, "id", "0190"), "line 4", "id: must be 16 bytes"),
    (_set(3, "id", "019000000000700080000000000000AB"), "line 4", "lowercase hex"),
    (_set(3, "vector", "AAAAAA=="), "line 4", "vectors: none"),
    (_set(4, "subject.id", "zz"), "line 5", "subject.id"),
    (_set(4, "subject.name", "Daniel"), "line 5", "subject.name"),
    (_set(4, "subject", {"name": "Dan"}), "line 5", "subject"),
    (_set(4, "object", {"text": 3}), "line 5", "object.text"),
    (_set(4, "object", {"colour": "red"}), "line 5", "kind of object"),
    (_set(4, "confidence", "high"), "line 5", "confidence"),
    (
        _set(4, "evidence", [{"memory": "01900000000070008000000000000002", "x": 1}]),
        "line 5",
        "evidence[0].x",
    ),
    (_set(4, "state.tombstoned_at", 5), "line 5", "state.tombstoned_at"),
    (_set(4, "state.colour", 5), "line 5", "state.colour"),
    (_drop(4, "predicate"), "line 5", "predicate"),
    (_drop(5, "recorded_at"), "line 6", "recorded_at"),
    (
        _set(5, "subject", {"id": "01900000000070008000000000000009", "name": "Dan"}),
        "line 6",
        "which the file does not hold",
    ),
    (_set(1, "predicates", {"p": {"$bad": 1}}), "line 2", "$bad"),
    (_repeat(3), "line 5", "same record as line 4"),
]


@pytest.mark.parametrize(("change", "line", "field"), MALFORMED)
def test_a_malformed_line_is_refused_with_its_number_and_field(
    change: Change, line: str, field: str
) -> None:
    lines = _lines()[:-1]
    change(lines)
    message = _refused(_sealed(lines))
    assert message.startswith(f"{line}:") and field in message, message


def test_a_line_that_is_not_json_is_refused_with_its_number() -> None:
    raw = GOLDEN.read_bytes().splitlines()
    raw[3] = raw[3][:40]
    message = _refused(b"".join(line + b"\n" for line in raw))
    assert message.startswith("line 4:") and "not JSON" in message


def test_a_field_given_twice_in_a_line_is_refused() -> None:
    raw = GOLDEN.read_bytes().splitlines()
    raw[2] = raw[2].replace(b'"name":"Dan"', b'"name":"Dan","name":"Dan"')
    message = _refused(b"".join(line + b"\n" for line in raw))
    assert message.startswith("line 3:") and "name: the field is given twice" in message
