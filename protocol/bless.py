"""Regenerate the golden byte vectors and the message schema: ``make bless``.

Writes two files from the message classes in ``brain/wire`` and the example
payloads in :mod:`protocol.examples`:

- ``protocol/vectors/golden.json``: for a request and a response of every
  opcode, and an ERROR for every error code, the whole frame in hex, the
  payload in hex, and a readable JSON mirror of the payload.
- ``protocol/schema.json``: every message's keys, whether each is required,
  and its type, for each opcode's request and response.

The tests compare both files with what this module would write now, so a
change to a message class fails until the change is blessed and reviewed.
Run it only when a change to the bytes is intended.

JSON mirror conventions, chosen so any language can read it exactly: a byte
string is ``{"$bytes": "<hex>"}``, an integer beyond ±2^53 is
``{"$int": "<decimal>"}``, other values are plain JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Final

from brain import cbor
from brain.errors import BrainError, ConnectionFault, InvalidArgument, registered_errors
from brain.wire.frame import encode_frame
from brain.wire.messages.control import ErrorMessage
from brain.wire.opcodes import CONTROL_OPCODES, ERROR_OPCODE, Opcode, response_opcode
from brain.wire.registry import MESSAGES, STREAM_ENDS
from brain.wire.schema import Message, describe_message, nested_messages
from protocol.examples import examples

__all__ = ["GOLDEN_PATH", "SCHEMA_PATH", "from_mirror", "golden_document", "schema_document"]

ROOT: Final = Path(__file__).resolve().parent
GOLDEN_PATH: Final = ROOT / "vectors" / "golden.json"
SCHEMA_PATH: Final = ROOT / "schema.json"

_SAFE_INT: Final = 1 << 53

REQUEST_STREAM: Final = 1
"""Data requests in the vectors travel on stream 1; control ones on stream 0."""


def to_mirror(value: object) -> object:
    """A decoded CBOR value as exact, readable JSON."""
    if isinstance(value, bytes):
        return {"$bytes": value.hex()}
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return value
    if isinstance(value, int):
        return value if -_SAFE_INT <= value <= _SAFE_INT else {"$int": str(value)}
    if isinstance(value, list | tuple):
        return [to_mirror(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_mirror(v) for k, v in value.items()}
    raise TypeError(f"no JSON mirror for {type(value).__name__}")


def from_mirror(value: object) -> object:
    """Invert :func:`to_mirror`."""
    if isinstance(value, dict):
        if set(value) == {"$bytes"}:
            return bytes.fromhex(str(value["$bytes"]))
        if set(value) == {"$int"}:
            return int(str(value["$int"]))
        return {k: from_mirror(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_mirror(v) for v in value]
    return value


def _vector(
    name: str, opcode: int, stream_id: int, payload: dict[str, object], *, eos: bool
) -> dict[str, object]:
    payload_bytes = cbor.encode(payload)
    return {
        "name": name,
        "opcode": f"0x{opcode:04X}",
        "stream_id": stream_id,
        "eos": eos,
        "frame_hex": encode_frame(opcode, stream_id, payload_bytes, eos=eos).hex(),
        "payload_hex": payload_bytes.hex(),
        "payload": to_mirror(payload),
    }


def _example_error(cls: type[BrainError]) -> BrainError:
    if cls is InvalidArgument:
        return cls("unknown key 'filters.as_of'", field="filters.as_of")
    if cls.name == "OVERLOADED":
        return cls("the server is saturated; try again later", retry_after_ms=250)
    return cls(f"example {cls.name.lower().replace('_', ' ')} error")


def golden_document() -> dict[str, object]:
    """The golden vectors as they follow from the code right now."""
    payloads = examples()
    vectors: list[dict[str, object]] = []
    for opcode in Opcode:
        example = payloads[opcode.name]
        request_cls, response_cls = MESSAGES[opcode]
        # Normalise through the classes, so a vector is always a valid message.
        request = request_cls.from_wire(example["request"]).to_wire()
        response = response_cls.from_wire(example["response"]).to_wire()
        stream = 0 if opcode in CONTROL_OPCODES else REQUEST_STREAM
        streaming = opcode in STREAM_ENDS
        vectors.append(_vector(f"{opcode.name}.request", opcode, stream, request, eos=False))
        vectors.append(
            _vector(
                f"{opcode.name}.response",
                response_opcode(opcode),
                stream,
                response,
                eos=not streaming,
            )
        )
        if streaming:
            # An open answer stream: its frames, then the frame that ends it.
            end = STREAM_ENDS[opcode].from_wire(example["end"]).to_wire()
            vectors.append(
                _vector(f"{opcode.name}.end", response_opcode(opcode), stream, end, eos=True)
            )
    for cls in registered_errors().values():
        error = _example_error(cls)
        stream = 0 if isinstance(error, ConnectionFault) else REQUEST_STREAM
        payload = ErrorMessage.from_error(error).to_wire()
        vectors.append(_vector(f"ERROR.{cls.name}", ERROR_OPCODE, stream, payload, eos=True))
    return {"protocol_version": 1, "vectors": vectors}


def schema_document() -> dict[str, object]:
    """Every opcode's request and response keys, and every nested shape, from the code."""
    shapes: dict[str, list[dict[str, object]]] = {}
    opcodes: list[dict[str, object]] = []

    def add(cls: type[Message]) -> str:
        shapes.setdefault(cls.__name__, describe_message(cls))
        for nested in nested_messages(cls):
            shapes.setdefault(nested.__name__, describe_message(nested))
        return cls.__name__

    for opcode in Opcode:
        request_cls, response_cls = MESSAGES[opcode]
        opcodes.append(
            {
                "name": opcode.name,
                "code": f"0x{opcode.value:04X}",
                "request": add(request_cls),
                "response": add(response_cls),
                **({"stream_end": add(STREAM_ENDS[opcode])} if opcode in STREAM_ENDS else {}),
            }
        )
    add(ErrorMessage)
    return {"opcodes": opcodes, "shapes": dict(sorted(shapes.items()))}


def render(document: dict[str, object]) -> str:
    """The exact text a document is stored as."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    """Write both files; print what changed."""
    for path, document in ((GOLDEN_PATH, golden_document()), (SCHEMA_PATH, schema_document())):
        text = render(document)
        old = path.read_text(encoding="utf-8") if path.exists() else None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        state = "unchanged" if old == text else "written"
        print(f"{path.relative_to(ROOT.parent)}: {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
