"""Answers built from stored rows are converted, not validated again
(:func:`brain.wire.schema.built_answers`), unless the full checks are on.

Every golden answer decodes to the same message, and re-encodes to the same bytes,
whether built trusted or checked; a built answer that breaks a constraint passes
trusted and fails checked; requests outside the block are checked as before, on
every thread.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from brain import cbor
from brain.errors import InvalidArgument
from brain.wire.messages.control import ErrorMessage
from brain.wire.messages.records import Statement
from brain.wire.messages.statement_ops import StatementGet, StatementGetOk
from brain.wire.messages.values import EntityRef, TextValue
from brain.wire.opcodes import ERROR_OPCODE, RESPONSE_BIT, Opcode
from brain.wire.registry import answer_class
from brain.wire.schema import Message, built_answers, check_built_answers
from protocol.bless import GOLDEN_PATH

ANSWERS: list[dict[str, Any]] = [
    v
    for v in json.loads(GOLDEN_PATH.read_text(encoding="utf-8"))["vectors"]
    if int(v["opcode"], 16) & RESPONSE_BIT or int(v["opcode"], 16) == ERROR_OPCODE
]

ID = bytes(range(16))


@pytest.fixture
def trusting() -> Iterator[None]:
    """Built answers trusted, as the server runs (the unit suite checks them)."""
    previous = check_built_answers(False)
    try:
        yield
    finally:
        check_built_answers(previous)


def _answer_class(vector: dict[str, Any]) -> type[Message]:
    opcode = int(vector["opcode"], 16)
    if opcode == ERROR_OPCODE:
        return ErrorMessage
    return answer_class(Opcode(opcode & ~RESPONSE_BIT), vector["eos"])


def _statement_wire(**changes: object) -> dict[str, object]:
    wire: dict[str, object] = {
        "id": ID,
        "space": "default",
        "kind": "fact",
        "subject": {"entity": ID},
        "predicate": "likes",
        "object": {"text": "tea"},
        "confidence": 1,  # an integer, as some encoders send 1.0
        "evidence": [],
        "recorded_at": 5,
        "version": 1,
        "chain_root": ID,
    }
    wire.update(changes)
    return wire


def test_the_suite_checks_built_answers() -> None:
    """The unit suite runs with the full checks on (tests/unit/conftest.py)."""
    assert check_built_answers(True) is True


@pytest.mark.usefixtures("trusting")
@pytest.mark.parametrize("vector", ANSWERS, ids=lambda v: v["name"])
def test_golden_answers_build_the_same_trusted(vector: dict[str, Any]) -> None:
    payload = bytes.fromhex(vector["payload_hex"])
    cls = _answer_class(vector)
    checked = cls.from_wire(cbor.decode(payload))
    with built_answers():
        trusted = cls.from_wire(cbor.decode(payload))
    assert trusted == checked
    assert cbor.encode(trusted.to_wire()) == payload


@pytest.mark.usefixtures("trusting")
def test_a_built_answer_is_converted_but_not_validated() -> None:
    over_long = "x" * 2000  # predicates are at most 1024 characters
    with built_answers():
        statement = Statement.from_wire(_statement_wire(predicate=over_long))
        wrapped = StatementGetOk(statement=statement)
    assert statement.predicate == over_long
    assert statement.subject == EntityRef(entity=ID)
    assert statement.object_ == TextValue(text="tea")
    assert statement.evidence == ()
    assert type(statement.confidence) is float
    assert wrapped.statement is statement
    # The same values, built as checked as a request is.
    with pytest.raises(InvalidArgument, match="predicate"):
        Statement.from_wire(_statement_wire(predicate=over_long))


def test_with_the_checks_on_a_bad_builder_fails() -> None:
    previous = check_built_answers(True)
    try:
        with built_answers(), pytest.raises(InvalidArgument, match="predicate"):
            Statement.from_wire(_statement_wire(predicate="x" * 2000))
    finally:
        check_built_answers(previous)


@pytest.mark.usefixtures("trusting")
def test_a_built_answer_still_refuses_an_unknown_key() -> None:
    with built_answers(), pytest.raises(TypeError, match="colour"):
        Statement.from_wire(_statement_wire(colour="blue"))


@pytest.mark.usefixtures("trusting")
def test_requests_are_checked_outside_the_block_and_on_other_threads() -> None:
    refused: list[BaseException] = []

    def decode_request() -> None:
        try:
            StatementGet.from_wire({"id": b"short"})
        except InvalidArgument as exc:
            refused.append(exc)

    with built_answers():
        other = threading.Thread(target=decode_request)
        other.start()
        other.join()
        with built_answers():
            pass  # blocks nest: leaving the inner one keeps the outer in force
        assert StatementGet.from_wire({"id": b"short"}).id == b"short"
    assert len(refused) == 1
    with pytest.raises(InvalidArgument, match="id"):
        StatementGet.from_wire({"id": b"short"})
