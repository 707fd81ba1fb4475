"""The server's own codec as a conformance adapter (README.md beside this file).

    python3 protocol/conformance/run.py -- .venv/bin/python protocol/conformance/python_adapter.py

Frames go through :class:`brain.wire.frame.FrameReader` and
:func:`~brain.wire.frame.encode_frame`, payloads through :mod:`brain.cbor`
and the opcode's message class (as the Python client decodes an answer), ERROR
payloads through :func:`brain.errors.error_from_wire`. Running the runner
against this adapter proves the runner and the vectors agree with the code
that made them; running it against another language's adapter then checks
that language against the same bytes.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from typing import Any, Final, TextIO

import brain
from brain import cbor
from brain.errors import BadFrame, FrameTooLarge, InvalidArgument, error_from_wire
from brain.wire.frame import DEFAULT_MAX_FRAME, Frame, FrameReader, encode_frame
from brain.wire.messages.control import ErrorMessage
from brain.wire.opcodes import ERROR_OPCODE, RESPONSE_BIT, Opcode
from brain.wire.registry import MESSAGES, answer_class
from brain.wire.schema import Message

__all__ = ["IMPLEMENTATION", "Handler", "from_mirror", "handle", "main", "to_mirror"]

IMPLEMENTATION: Final = f"brain-python/{brain.__version__}"

_PLAIN_INTEGER: Final = 1 << 53
"""Largest integer magnitude the mirror writes as a plain JSON number (protocol/bless.py)."""

Handler = Callable[[dict[str, Any]], dict[str, Any]]


def to_mirror(value: object) -> object:
    """A decoded value as mirror JSON; floats JSON cannot write become ``{"$float": …}``."""
    if isinstance(value, bytes):
        return {"$bytes": value.hex()}
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if -_PLAIN_INTEGER <= value <= _PLAIN_INTEGER else {"$int": str(value)}
    if isinstance(value, list | tuple):
        return [to_mirror(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_mirror(v) for k, v in value.items()}
    raise TypeError(f"no JSON mirror for {type(value).__name__}")


def from_mirror(value: object) -> object:
    """Mirror JSON back to the values :func:`brain.cbor.encode` takes."""
    if isinstance(value, dict):
        if set(value) == {"$bytes"}:
            return bytes.fromhex(str(value["$bytes"]))
        if set(value) == {"$int"}:
            return int(str(value["$int"]))
        if set(value) == {"$float"}:
            return float(str(value["$float"]))
        return {k: from_mirror(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_mirror(v) for v in value]
    return value


def _message_class(opcode: int, eos: bool) -> type[Message]:
    """The class of a frame's payload; an open answer stream ends with another class."""
    if opcode == ERROR_OPCODE:
        return ErrorMessage
    try:
        request = Opcode(opcode & ~RESPONSE_BIT)
    except ValueError:
        raise InvalidArgument(f"unknown opcode {opcode:#06x}") from None
    return answer_class(request, eos) if opcode & RESPONSE_BIT else MESSAGES[request][0]


def _decode_payload(opcode: int, payload: bytes, eos: bool) -> dict[str, object]:
    raw = cbor.decode(payload) if payload else {}  # an empty payload is the empty map
    return _message_class(opcode, eos).from_wire(raw).to_wire()


def _describe(frame: Frame) -> dict[str, object]:
    message = _decode_payload(frame.opcode, frame.payload, frame.eos)
    out: dict[str, object] = {
        "opcode": frame.opcode,
        "stream_id": frame.stream_id,
        "eos": frame.eos,
        "payload": to_mirror(message),
    }
    if frame.opcode == ERROR_OPCODE:
        wire = ErrorMessage.from_wire(message)
        error = error_from_wire(
            wire.code,
            wire.name,
            wire.message,
            retryable=wire.retryable,
            field=wire.field,
            retry_after_ms=wire.retry_after_ms,
        )
        out["error"] = {
            "class": type(error).__name__,
            "name": error.wire_name,
            "code": error.wire_code,
            "retryable": error.retryable,
            "field": error.field,
            "retry_after_ms": error.retry_after_ms,
        }
    return out


def _encode(opcode: int, stream_id: int, payload: object, *, eos: bool) -> str:
    message = _message_class(opcode, eos).from_wire(payload).to_wire()
    return encode_frame(opcode, stream_id, cbor.encode(message), eos=eos).hex()


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Answer one runner request (raises on input it refuses; see :func:`answer`)."""
    op = request.get("op")
    if op == "hello":
        return {"ok": True, "implementation": IMPLEMENTATION, "protocol_version": 1}
    if op == "decode":
        reader = FrameReader(int(request.get("max_frame", DEFAULT_MAX_FRAME)))
        frames: list[Frame] = []
        for chunk in request["chunks"]:
            frames.extend(reader.feed(bytes.fromhex(chunk)))
        return {"ok": True, "frames": [_describe(f) for f in frames], "buffered": reader.buffered}
    if op == "encode":
        frame = _encode(
            int(request["opcode"]),
            int(request["stream_id"]),
            from_mirror(request["payload"]),
            eos=bool(request["eos"]),
        )
        return {"ok": True, "frame": frame}
    if op == "roundtrip":
        frames = FrameReader().feed(bytes.fromhex(request["frame"]))
        if len(frames) != 1:
            return {"ok": False, "error": "bad_frame", "message": f"{len(frames)} frames, not 1"}
        (one,) = frames
        message = _decode_payload(one.opcode, one.payload, one.eos)
        return {"ok": True, "frame": _encode(one.opcode, one.stream_id, message, eos=one.eos)}
    return {"ok": False, "error": "unsupported", "message": f"unknown op {op!r}"}


def answer(request: dict[str, Any], handler: Handler = handle) -> dict[str, Any]:
    """``handler``'s answer, or the refusal its exception stands for."""
    try:
        return handler(request)
    except FrameTooLarge as exc:
        return {"ok": False, "error": "frame_too_large", "message": exc.message}
    except BadFrame as exc:
        return {"ok": False, "error": "bad_frame", "message": exc.message}
    except InvalidArgument as exc:
        return {"ok": False, "error": "bad_payload", "message": exc.message}


def main(handler: Handler = handle, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> int:
    """Serve the line protocol until stdin closes."""
    for line in stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line), handler)
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
