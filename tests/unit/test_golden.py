"""Golden byte vectors: every opcode's request and response, and every error.

Each vector is checked whole, fed one byte at a time, and followed by trailing
bytes of a next frame; its payload must decode through its message class to
the readable mirror, and re-encode to the same bytes. The stored files must be
exactly what ``make bless`` would write now.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from brain.errors import error_from_wire
from brain.wire import cbor
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
    # WIRE.md §1 gives PING {"nonce": 7} on stream 1; ours is the same payload on stream 0.
    ping = next(v for v in VECTORS if v["name"] == "PING.request")
    assert ping["payload_hex"] == "a1656e6f6e636507"
