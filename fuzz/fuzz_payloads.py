"""Atheris fuzz target for the typed message decoders, one payload at a time.

Run it (see fuzz/README.md)::

    .venv/bin/python fuzz/fuzz_payloads.py -max_total_time=300 fuzz/corpus/payloads

An input is two selector bytes and a CBOR payload. The first byte picks an
opcode from :data:`_OPCODES` (modulo its length); the second byte's low bit
picks the response class rather than the request class, and its next bit the
class of an answer stream's last frame (:data:`brain.wire.registry.STREAM_ENDS`).
The payload goes through :func:`cbor.decode` and the class's ``from_wire``.

The rule it checks: the decoders end normally or raise a
:class:`brain.errors.BrainError`; any other exception is a crash. A message that
decoded must be stable: its encoding decodes and validates again, to an equal
message with the same encoding. A broken invariant raises AssertionError.

Unlike fuzz_wire.py, no frame header or CRC stands in front of the payload,
so every mutation lands in a message decoder. :func:`check_one` is the whole
check as a plain function, so tests run it without atheris.
"""

from __future__ import annotations

import contextlib
import math
import sys
from pathlib import Path
from typing import Final

if __name__ == "__main__":
    # Only the fuzzing process needs atheris; tests import check_one without it.
    import atheris

    _instrumented: contextlib.AbstractContextManager[object] = atheris.instrument_imports(
        include=["brain"]
    )
else:
    _instrumented = contextlib.nullcontext()

with _instrumented:
    from brain import cbor
    from brain.errors import BrainError
    from brain.wire.messages.control import ErrorMessage
    from brain.wire.opcodes import ERROR_OPCODE, Opcode
    from brain.wire.registry import MESSAGES, answer_class, request_class
    from brain.wire.schema import Message

__all__ = ["SELECTOR_SIZE", "check_one", "main", "message_class", "selector_for"]

CRASH_DIR: Final = Path(__file__).resolve().parent / "crashes"
"""Where libFuzzer writes crashing inputs unless told otherwise (git-ignored)."""

SELECTOR_SIZE: Final = 2
"""Bytes in front of the payload: opcode index, then the request/response/stream-end bits."""

_RESPONSE_FLAG: Final = 0x01
_STREAM_END_FLAG: Final = 0x02

_OPCODES: Final = (*sorted(int(op) for op in Opcode), ERROR_OPCODE)
"""What the first selector byte picks from, modulo its length.

From the spec/01-wire.md §6 table, not the registry, so that a seed's selector keeps
naming the same opcode as message classes are added.
"""


def message_class(selector: bytes) -> type[Message] | None:
    """The message class two selector bytes name, or None for an opcode without classes."""
    opcode = _OPCODES[selector[0] % len(_OPCODES)]
    if opcode == ERROR_OPCODE:
        return ErrorMessage
    request = Opcode(opcode)
    if request not in MESSAGES:
        return None
    if selector[1] & _RESPONSE_FLAG:
        return answer_class(request, eos=bool(selector[1] & _STREAM_END_FLAG))
    return request_class(request)


def selector_for(opcode: int, *, response: bool, stream_end: bool = False) -> bytes:
    """The selector bytes that name ``opcode``'s request, response or stream-end class."""
    flags = (_RESPONSE_FLAG if response else 0) | (_STREAM_END_FLAG if stream_end else 0)
    return bytes([_OPCODES.index(opcode), flags])


def check_one(data: bytes) -> None:
    """Decode ``data``'s payload as the message its selector names, and check it re-encodes.

    Returns normally when the payload is accepted and stable, or refused with a
    BrainError; any other exception propagates as a finding.
    """
    if len(data) < SELECTOR_SIZE:
        return
    cls = message_class(data[:SELECTOR_SIZE])
    if cls is None:
        return
    try:
        message = cls.from_wire(cbor.decode(data[SELECTOR_SIZE:]))
    except BrainError:
        return  # refusing bad input with our own error is the correct outcome
    _check_round_trip(message)


def _check_round_trip(message: Message) -> None:
    """A message we accepted must encode, decode and validate to an equal message."""
    name = type(message).__name__
    wire = message.to_wire()
    encoded = cbor.encode(wire)
    try:
        again = type(message).from_wire(cbor.decode(encoded))
    except BrainError as exc:
        raise AssertionError(f"re-encoded {name} was refused: {exc!r}") from exc
    if cbor.encode(again.to_wire()) != encoded:
        raise AssertionError(f"{name} encodes differently after a round trip")
    # A NaN inside makes equal messages compare unequal; the bytes above still match.
    if again != message and not _holds_nan(wire):
        raise AssertionError(f"{name} changed across a round trip: {message!r} -> {again!r}")


def _holds_nan(value: object) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, dict):
        return any(_holds_nan(k) or _holds_nan(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_holds_nan(item) for item in value)
    if isinstance(value, cbor.Tag):
        return _holds_nan(value.value)
    return False


def main() -> None:
    """Run libFuzzer over :func:`check_one` with the command-line options it was given."""
    import atheris

    argv = list(sys.argv)
    if not any(arg.startswith("-artifact_prefix=") for arg in argv):
        CRASH_DIR.mkdir(exist_ok=True)
        argv.append(f"-artifact_prefix={CRASH_DIR}/")
    atheris.Setup(argv, check_one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
