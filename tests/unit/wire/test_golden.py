"""Golden byte vectors: every opcode's request and response, and every error.

Each vector is checked whole, fed one byte at a time, and followed by trailing
bytes of a next frame; its payload must decode through its message class to
the readable mirror, and re-encode to the same bytes. The stored files must be
exactly what ``make bless`` would write now.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from brain import cbor
from brain.errors import InvalidArgument, error_from_wire
from brain.wire.frame import Frame, FrameReader, encode_frame
from brain.wire.messages.control import ErrorMessage
from brain.wire.opcodes import ERROR_OPCODE, RESPONSE_BIT, Opcode
from brain.wire.registry import MESSAGES, answer_class
from brain.wire.schema import Message
from protocol.bless import (
    GOLDEN_PATH,
    SCHEMA_PATH,
    from_mirror,
    golden_document,
    render,
    schema_document,
)
from protocol.conformance import schema_check

VECTORS: list[dict[str, Any]] = json.loads(GOLDEN_PATH.read_text(encoding="utf-8"))["vectors"]


def _message_class(opcode: int, eos: bool = True) -> type[Message]:
    if opcode == ERROR_OPCODE:
        return ErrorMessage
    if not opcode & RESPONSE_BIT:
        return MESSAGES[Opcode(opcode)][0]
    return answer_class(Opcode(opcode & ~RESPONSE_BIT), eos)


def _check_frame(vector: dict[str, Any], frame: Frame) -> None:
    assert frame.opcode == int(vector["opcode"], 16)
    assert frame.stream_id == vector["stream_id"]
    assert frame.eos is vector["eos"]
    assert frame.payload.hex() == vector["payload_hex"]


def test_files_are_blessed() -> None:
    assert GOLDEN_PATH.read_text(encoding="utf-8") == render(golden_document()), (
        "protocol/vectors/golden.json is stale: review the change, then run `make bless`"
    )
    assert SCHEMA_PATH.read_text(encoding="utf-8") == render(schema_document()), (
        "protocol/schema.json is stale: review the change, then run `make bless`"
    )


def test_every_opcode_and_error_has_vectors() -> None:
    names = {v["name"] for v in VECTORS}
    for opcode in Opcode:
        assert f"{opcode.name}.request" in names
        assert f"{opcode.name}.response" in names
    errors = {n for n in names if n.startswith("ERROR.")}
    assert len(errors) == 21


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["name"])
def test_whole(vector: dict[str, Any]) -> None:
    raw = bytes.fromhex(vector["frame_hex"])
    frames = FrameReader().feed(raw)
    assert len(frames) == 1
    _check_frame(vector, frames[0])


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["name"])
def test_one_byte_at_a_time(vector: dict[str, Any]) -> None:
    raw = bytes.fromhex(vector["frame_hex"])
    reader = FrameReader()
    frames: list[Frame] = []
    for i in range(len(raw)):
        got = reader.feed(raw[i : i + 1])
        if i < len(raw) - 1:
            assert got == []
        frames.extend(got)
    assert len(frames) == 1
    _check_frame(vector, frames[0])


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["name"])
def test_with_trailing_bytes(vector: dict[str, Any]) -> None:
    raw = bytes.fromhex(vector["frame_hex"])
    follower = encode_frame(0x0010, 3, cbor.encode({"nonce": 1}))
    reader = FrameReader()
    frames = reader.feed(raw + follower[:17])
    assert len(frames) == 1
    _check_frame(vector, frames[0])
    assert reader.buffered == 17
    assert reader.feed(follower[17:])[0].stream_id == 3


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["name"])
def test_payload_decodes_to_mirror_and_back(vector: dict[str, Any]) -> None:
    payload = bytes.fromhex(vector["payload_hex"])
    decoded = cbor.decode(payload)
    assert decoded == from_mirror(vector["payload"])
    message = _message_class(int(vector["opcode"], 16), vector["eos"]).from_wire(decoded)
    assert message.to_wire() == decoded
    assert cbor.encode(message.to_wire()) == payload


@pytest.mark.parametrize(
    "vector", [v for v in VECTORS if v["name"].startswith("ERROR.")], ids=lambda v: v["name"]
)
def test_error_vectors_rebuild_typed_errors(vector: dict[str, Any]) -> None:
    message = ErrorMessage.from_wire(cbor.decode(bytes.fromhex(vector["payload_hex"])))
    error = error_from_wire(
        message.code,
        message.name,
        message.message,
        retryable=message.retryable,
        field=message.field,
        retry_after_ms=message.retry_after_ms,
    )
    assert type(error).__name__ != "UnknownError"
    assert error.wire_name == vector["name"].removeprefix("ERROR.")
    assert ErrorMessage.from_error(error) == message


def test_wire_md_ping_example_is_a_vector_payload() -> None:
    # spec/01-wire.md §1 gives PING {"nonce": 7} on stream 1; ours is the same payload on stream 0.
    ping = next(v for v in VECTORS if v["name"] == "PING.request")
    assert ping["payload_hex"] == "a1656e6f6e636507"


# --- the mechanical schema check (protocol/conformance/schema_check.py) ---------------

SCHEMA = schema_check.load_schema()


def _target(vector: dict[str, Any]) -> tuple[str, str]:
    return schema_check.vector_target(vector)


def _payload(name: str) -> dict[str, Any]:
    vector = next(v for v in VECTORS if v["name"] == name)
    payload = from_mirror(vector["payload"])
    assert isinstance(payload, dict)
    return copy.deepcopy(payload)


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["name"])
def test_vector_fits_its_schema(vector: dict[str, Any]) -> None:
    opcode, direction = _target(vector)
    schema_check.check_payload(SCHEMA, opcode, direction, from_mirror(vector["payload"]))


def test_every_type_text_of_the_schema_parses() -> None:
    shapes = SCHEMA["shapes"]
    assert isinstance(shapes, dict)
    texts = {str(f["type"]) for fields in shapes.values() for f in fields}
    assert len(texts) > 50
    for text in texts:
        schema_check.parse_type(text)


@pytest.mark.parametrize(
    ("text", "value", "fits"),
    [
        ("text /[a-z]+/", "abc", True),
        ("text /[a-z]+/", "abC", False),
        ("text /a/b/(1..3)", "a/b", True),  # a pattern may hold a slash
        ("[text /[^]]x/](0..1)", ["zx"], True),
        ("[text /[^]]x/](0..1)", ["zx", "zx"], False),
        ("text(1..4) label", "a b", True),
        ("text(1..4) label", " ab", False),
        ("text(1..4) label", "a\u2028b", False),  # a line separator
        ("text(1..4) label", "a\u200bb", False),  # a format character
        ("text(2)", "\U0001f600\U0001f600", True),  # code points, not UTF-16 units
        ("int[1..5]", 5, True),
        ("int[1..5]", 6, False),
        ("int[1..5]", True, False),
        ("float[0..1] finite", 1, True),  # an integer for a float key, in a request
        ("float[0..] finite", math.inf, False),
        ("float", math.nan, True),
        ("float[0..1]", math.nan, False),
        ("bytes(16)", bytes(15), False),
        ("[bytes(16)](1..)", [], False),
        ("enum(a|b)", "c", False),
        ("enum(a|bb)(2)", "bb", True),  # a length after a choice, as bless.py can write it
        ("enum(a|bb)(2)", "a", False),
        ("map", {1: "x"}, False),
        ("any", {1: [None]}, True),
    ],
)
def test_notation(text: str, value: object, fits: bool) -> None:
    kind = schema_check.parse_type(text)
    checker = schema_check.Checker(SCHEMA["shapes"], request=True)
    if fits:
        checker.value(kind, value, "k")
    else:
        with pytest.raises(schema_check.SchemaViolation):
            checker.value(kind, value, "k")


def test_unreadable_notation_is_an_error_not_a_pass() -> None:
    for text in ("text sparkly", "int[0..5", "[text", "enum(a|b", "bool(1..2)", "text finite"):
        with pytest.raises(schema_check.NotationError):
            schema_check.parse_type(text)


def _bad_payloads() -> list[tuple[str, str, str, dict[str, Any], str]]:
    """(case, vector, direction, payload, the field the refusal must name)."""
    cases: list[tuple[str, str, str, dict[str, Any], str]] = []

    def add(case: str, vector: str, change: Any, field: str) -> None:
        payload = _payload(vector)
        change(payload)
        direction = "request" if vector.endswith(".request") else "response"
        cases.append((case, vector, direction, payload, field))

    add("unknown key", "PING.request", lambda p: p.update(filters=1), "filters")
    add("missing required key", "HELLO.request", lambda p: p.pop("client"), "client")
    add("null for a required key", "HELLO.request", lambda p: p.update(client=None), "client")
    add("int for text", "HELLO.request", lambda p: p.update(client=5), "client")
    add("text for bytes", "MEMORY_GET.request", lambda p: p.update(id="00" * 16), "id")
    add("bytes of the wrong length", "MEMORY_GET.request", lambda p: p.update(id=bytes(15)), "id")
    add(
        "space against its pattern", "MEMORY_GET.request", lambda p: p.update(space="Work"), "space"
    )
    add("float for int", "RECALL.request", lambda p: p.update(top_k=5.0), "top_k")
    add("bool for int", "RECALL.request", lambda p: p.update(top_k=True), "top_k")
    add("int below its bound", "RECALL.request", lambda p: p.update(top_k=0), "top_k")
    add(
        "float above its bound",
        "RECALL.request",
        lambda p: p.update(min_confidence=1.5),
        "min_confidence",
    )
    add(
        "NaN where finite",
        "RECALL.request",
        lambda p: p["arms"].update(semantic=math.nan),
        "arms.semantic",
    )
    add(
        "unknown nested key",
        "RECALL.request",
        lambda p: p["arms"].update(vector=1.0),
        "arms.vector",
    )
    add("enum value", "RECALL.request", lambda p: p.update(kinds=["fact", "rumour"]), "kinds[1]")
    add("empty array under its bound", "RECALL.request", lambda p: p.update(kinds=[]), "kinds")
    add(
        "label with a control character",
        "RECALL.request",
        lambda p: p.update(predicates=["a\x00b"]),
        "predicates[0]",
    )
    add(
        "label with edge whitespace",
        "RECALL.request",
        lambda p: p.update(predicates=[" a"]),
        "predicates[0]",
    )
    add("union with no key", "STATEMENT_CREATE.request", lambda p: p.update(subject={}), "subject")
    add(
        "union with two keys",
        "STATEMENT_CREATE.request",
        lambda p: p.update(subject={"entity": bytes(16), "name": "x"}),
        "subject",
    )
    add(
        "wrong type inside a union member",
        "STATEMENT_CREATE.request",
        lambda p: p.update(subject={"entity": "x"}),
        "subject.entity",
    )
    add(
        "array item of the wrong shape",
        "STATEMENT_CREATE.request",
        lambda p: p["evidence"][0].update(memory=7),
        "evidence[0].memory",
    )
    add(
        "map with a non-text key",
        "ENTITY_CREATE.request",
        lambda p: p.update(attributes={1: "x"}),
        "attributes",
    )
    add("array for a shape", "RECALL.request", lambda p: p.update(arms=[]), "arms")
    add(
        "null in a response",
        "STATEMENT_GET.response",
        lambda p: p["statement"].update(valid_to=None),
        "statement.valid_to",
    )
    add(
        "int for a float in a response",
        "RECALL.response",
        lambda p: p["hits"][0].update(score=1),
        "hits[0].score",
    )
    add(
        "stream end shape for a change event",
        "SUBSCRIBE.response",
        lambda p: p.update(next_lsn=1),
        "next_lsn",
    )
    return cases


BAD_PAYLOADS = _bad_payloads()


@pytest.mark.parametrize(
    ("vector", "direction", "payload", "field"),
    [case[1:] for case in BAD_PAYLOADS],
    ids=[case[0] for case in BAD_PAYLOADS],
)
def test_bad_payload_is_refused(
    vector: str, direction: str, payload: dict[str, Any], field: str
) -> None:
    opcode = vector.split(".", maxsplit=1)[0]
    with pytest.raises(schema_check.SchemaViolation) as refused:
        schema_check.check_payload(SCHEMA, opcode, direction, payload)
    assert refused.value.field == field, refused.value
    if direction == "request":
        # The server refuses it too, naming the same key path.
        cls = MESSAGES[Opcode[opcode]][0]
        with pytest.raises(InvalidArgument) as server:
            cls.from_wire(payload)
        assert server.value.field == field


def _wrong_value(kind: schema_check.Type) -> object:
    """A value of another CBOR type than ``kind`` wants, or None when every type fits."""
    return {
        "bool": 1,
        "int": "1",
        "float": "1.5",
        "text": 5,
        "enum": 5,
        "bytes": "00",
        "map": 5,
        "array": "x",
        "shape": "x",
        "union": "x",
    }.get(kind.base)


def _typed_paths(
    kind: schema_check.Type, value: object, path: tuple[str | int, ...]
) -> list[tuple[tuple[str | int, ...], schema_check.Type]]:
    """Every position in ``value`` with the type the schema gives it."""
    out = [(path, kind)] if path else []
    if kind.base in ("shape", "union") and isinstance(value, dict):
        shape = kind.names[0]
        if kind.base == "union":
            shape = next(
                name
                for name in kind.names
                if any(f["required"] and f["key"] in value for f in SCHEMA["shapes"][name])
            )
        types = {f["key"]: f["type"] for f in SCHEMA["shapes"][shape]}
        for key, item in value.items():
            out += _typed_paths(schema_check.parse_type(types[key]), item, (*path, key))
    elif kind.base == "array" and isinstance(value, list):
        assert kind.item is not None
        for index, item in enumerate(value):
            out += _typed_paths(kind.item, item, (*path, index))
    return out


def _field(path: tuple[str | int, ...]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def test_a_wrong_type_anywhere_in_any_request_is_refused_like_the_server_does() -> None:
    checked = 0
    for vector in VECTORS:
        opcode, direction = _target(vector)
        if direction != "request":
            continue
        shape = schema_check.shape_name(SCHEMA, opcode, direction)
        original = from_mirror(vector["payload"])
        root = schema_check.Type("shape", names=(shape,))
        for path, kind in _typed_paths(root, original, ()):
            wrong = _wrong_value(kind)
            if wrong is None:
                continue
            payload = copy.deepcopy(original)
            holder: Any = payload
            for part in path[:-1]:
                holder = holder[part]
            holder[path[-1]] = wrong
            with pytest.raises(schema_check.SchemaViolation) as refused:
                schema_check.check_payload(SCHEMA, opcode, direction, payload)
            assert refused.value.field == _field(path)
            with pytest.raises(InvalidArgument) as server:
                MESSAGES[Opcode[opcode]][0].from_wire(payload)
            assert server.value.field == _field(path)
            checked += 1
    assert checked > 100
