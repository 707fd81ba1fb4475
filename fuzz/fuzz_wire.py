"""Atheris fuzz target for everything that reads bytes off the wire.

Run it (see fuzz/README.md)::

    .venv/bin/python fuzz/fuzz_wire.py -max_total_time=300 fuzz/corpus/wire

The rule it checks: whatever bytes arrive, our code ends normally or raises a
:class:`brain.errors.BrainError`. Any other exception is a crash, and so is a
broken invariant: a decoded message that does not survive re-encoding, or a
server session that writes a frame a client could not read.

Each input is used twice. Raw, it is a byte stream for :class:`FrameReader`,
:func:`cbor.decode`, :class:`ServerSession` and :class:`ClientSession`. Then it
is re-framed: read as a list of (opcode, stream, flags, payload) records and
wrapped into frames with valid CRCs, so that the fuzzer reaches the payload
decoders and session states behind the checksums, which it could never forge.

:func:`check_one` is the whole check as a plain function, so tests run it
without atheris.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
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
    from brain.errors import BrainError, NotFound
    from brain.wire.client_session import ClientSession
    from brain.wire.frame import HEADER_SIZE, Frame, FrameReader, encode_frame
    from brain.wire.messages.control import CancelStreamOk, ErrorMessage
    from brain.wire.opcodes import ERROR_OPCODE, RESPONSE_BIT, Opcode, Permission
    from brain.wire.registry import MESSAGES, request_class, response_class
    from brain.wire.schema import Message
    from brain.wire.session import (
        AuthRequested,
        CancelRequested,
        CloseConnection,
        Event,
        Outgoing,
        Principal,
        RequestReceived,
        ServerSession,
    )

__all__ = ["check_one", "main"]

CRASH_DIR: Final = Path(__file__).resolve().parent / "crashes"
"""Where libFuzzer writes crashing inputs unless told otherwise (git-ignored)."""

_EVERYONE: Final = Principal("fuzz", bytes(16), frozenset(Permission))

_REFRAME_HEADER: Final = 4
"""Bytes of one re-framing record header: opcode selector, stream/flags byte, u16 length."""


def _opcode_table() -> tuple[int, ...]:
    # From the spec/01-wire.md §6 table, not the registry, so that a record's selector byte
    # keeps naming the same opcode as message classes are added: seeds stay meaningful.
    requests = sorted(int(op) for op in Opcode)
    responses = [op | RESPONSE_BIT for op in requests]
    # Plus ERROR, an unassigned request opcode and an unassigned response opcode.
    return (*requests, *responses, ERROR_OPCODE, 0x0003, 0x7FFF)


_OPCODES: Final = _opcode_table()
"""What a re-framing record's selector byte picks from, modulo its length."""


def check_one(data: bytes) -> None:
    """Feed ``data`` to every wire decoder, raw and re-framed.

    Returns normally when every decoder either accepted the bytes or refused
    them with a BrainError; any other exception propagates as a finding.
    """
    _tolerate(cbor.decode, data)
    for stream in (data, _reframe(data)):
        _tolerate(_decode_frames, stream)
        _tolerate(_drive_server_whole, stream)
        _tolerate(_drive_server_by_frame, stream)
        _tolerate(_drive_client, stream)


def _tolerate(step: Callable[[bytes], object], data: bytes) -> None:
    # Refusing bad input with our own error is the correct outcome.
    with contextlib.suppress(BrainError):
        step(data)


def _reframe(data: bytes) -> bytes:
    """Read ``data`` as frame records and return them as frames with valid checksums."""
    out = bytearray()
    pos = 0
    while pos + _REFRAME_HEADER <= len(data):
        selector, stream_flags, length = data[pos], data[pos + 1], data[pos + 2 : pos + 4]
        pos += _REFRAME_HEADER
        size = min(int.from_bytes(length, "big"), len(data) - pos)
        payload = data[pos : pos + size]
        pos += size
        opcode = _OPCODES[selector % len(_OPCODES)]
        # Streams 0-7 only, so that frames meet the streams the sessions have in flight.
        out += encode_frame(opcode, stream_flags & 0x07, payload, eos=bool(stream_flags & 0x80))
    return bytes(out)


def _decode_frames(data: bytes) -> None:
    for frame in FrameReader().feed(data):
        # One bad payload does not stop the frames after it being checked.
        with contextlib.suppress(BrainError):
            _decode_frame(frame)


def _decode_frame(frame: Frame) -> None:
    """Decode one frame's payload as its opcode's message and check it re-encodes."""
    raw = cbor.decode(frame.payload) if frame.payload else {}
    message_class = _message_class(frame.opcode)
    if message_class is None:
        return
    message = message_class.from_wire(raw)
    _check_round_trip(message)


def _message_class(opcode: int) -> type[Message] | None:
    if opcode == ERROR_OPCODE:
        return ErrorMessage
    try:
        request = Opcode(opcode & ~RESPONSE_BIT)
    except ValueError:
        return None
    if request not in MESSAGES:
        return None
    return response_class(request) if opcode & RESPONSE_BIT else request_class(request)


def _check_round_trip(message: Message) -> None:
    """A message we accepted must encode, decode to an equal encoding, and not fail."""
    encoded = cbor.encode(message.to_wire())
    try:
        again = type(message).from_wire(cbor.decode(encoded))
    except BrainError as exc:
        raise AssertionError(f"re-encoded {type(message).__name__} was refused: {exc!r}") from exc
    # Compared as bytes: a NaN inside makes equal messages compare unequal.
    if cbor.encode(again.to_wire()) != encoded:
        raise AssertionError(f"{type(message).__name__} changed across a round trip")


def _drive_server_whole(data: bytes) -> None:
    """All of ``data`` in one read, as a pipelining client's burst arrives."""
    _drive_server(data, max(len(data), 1))


def _drive_server_by_frame(data: bytes) -> None:
    """``data`` in HEADER_SIZE-byte reads, each of which completes at most one frame.

    So AUTH is answered before the next frame is seen, as for a client that waits
    for AUTH_OK, and the fuzzer reaches the states after the handshake.
    """
    _drive_server(data, HEADER_SIZE)


def _drive_server(data: bytes, read_size: int) -> None:
    """Play ``data`` into a server session as a shell would, answering what it asks."""
    server = ServerSession(server_name="fuzz", session_id=bytes(16), clock=lambda: 0)
    written = bytearray()
    for start in range(0, len(data), read_size):
        events = server.receive_data(data[start : start + read_size])
        while events:
            event = events.pop(0)
            if isinstance(event, Outgoing):
                written += event.data
            elif isinstance(event, CloseConnection):
                if not server.closed:
                    raise AssertionError("the session asked to close but is not closed")
            else:
                events.extend(_answer(server, event))
        if server.closed:
            break
    _check_server_output(bytes(written))


def _answer(server: ServerSession, event: Event) -> list[Event]:
    if isinstance(event, AuthRequested):
        return server.auth_succeeded(event.stream_id, _EVERYONE)
    if isinstance(event, CancelRequested):
        ok = CancelStreamOk(cancelled=False)
        return server.respond(event.stream_id, Opcode.CANCEL_STREAM, ok)
    if isinstance(event, RequestReceived) and event.stream_id % 4 == 1:
        # Only some are answered, so that others stay in flight and meet the stream rules.
        return server.respond_error(event.stream_id, NotFound("fuzz"))
    return []


def _check_server_output(written: bytes) -> None:
    """Everything the server wrote must be frames whose payloads decode."""
    try:
        frames = FrameReader().feed(written)
    except BrainError as exc:
        raise AssertionError(f"the server wrote a bad frame: {exc!r}") from exc
    for frame in frames:
        try:
            _decode_frame(frame)
        except BrainError as exc:
            raise AssertionError(f"the server wrote an unreadable {frame!r}: {exc!r}") from exc


def _drive_client(data: bytes) -> None:
    """Play ``data`` into a client session with requests in flight on streams 0-5."""
    client = ClientSession()
    client.hello("fuzz/1")
    client.auth("brn_fuzz")  # stream 1
    client.ping()  # stream 3
    client.cancel(1)  # stream 5
    for reply in client.receive_data(data):
        if (reply.message is None) == (reply.error is None):
            raise AssertionError(f"a reply must carry a message or an error: {reply!r}")


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
