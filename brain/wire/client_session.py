"""The client side of one connection, as a state machine with no I/O (spec/01-wire.md §3).

The mirror of :mod:`brain.wire.session`. Methods that send return the bytes to
write; :meth:`ClientSession.receive_data` takes the bytes the server sent and
returns one :class:`Reply` per frame, matched to the request it answers. The
socket, the waiting and the timeouts belong to the shells in
:mod:`brain.client`.

Stream ids are odd, counted 1, 3, 5, … and wrapped back to 1 before 2**32,
never reusing an id whose answer has not ended (the server would answer
``BAD_STREAM``). HELLO alone travels on stream 0.

Two kinds of failure are kept apart, as h11 does:

* the server broke the protocol (a bad frame, an answer nobody asked for, a
  payload that is not the opcode's response): :meth:`receive_data` raises
  :class:`~brain.errors.BadFrame` and the connection must be closed;
* the server refused a request: the :class:`Reply` carries the typed
  :class:`~brain.errors.BrainError` rebuilt from the ERROR payload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from brain import cbor
from brain.errors import (
    BadFrame,
    BrainError,
    ConnectionClosed,
    ConnectionFault,
    FrameTooLarge,
    InvalidArgument,
    StreamLimit,
    Unauthenticated,
    error_from_wire,
)
from brain.wire.frame import (
    DEFAULT_MAX_FRAME,
    MAX_STREAM_ID,
    PROTOCOL_VERSION,
    FrameReader,
    encode_frame,
)
from brain.wire.messages.control import (
    AuthOk,
    AuthRequest,
    Bye,
    CancelStream,
    ErrorMessage,
    Hello,
    Ping,
    Welcome,
)
from brain.wire.opcodes import ERROR_OPCODE, RESPONSE_BIT, Opcode, is_response
from brain.wire.registry import MESSAGES, answer_class, request_class
from brain.wire.schema import Message
from brain.wire.session import DEFAULT_MAX_STREAMS

__all__ = ["STREAMING_OPCODES", "ClientSession", "Reply"]

STREAMING_OPCODES: Final = frozenset({Opcode.SUBSCRIBE})
"""Opcodes whose answer is a stream of frames ended by EOS, not a single frame."""

_ODD_IDS: Final = (MAX_STREAM_ID + 1) // 2
"""How many odd u32 stream ids exist; all in flight means none is left to allocate."""


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer frame, matched to its request.

    ``opcode`` is the opcode of the request answered (HELLO for the WELCOME on
    stream 0); it is None only for a connection-level ERROR on stream 0 that
    answers nothing in particular. Exactly one of ``message`` and ``error`` is
    set. ``eos`` is True when the stream has ended; an ERROR always ends it.
    """

    stream_id: int
    opcode: Opcode | None
    eos: bool
    message: Message | None = None
    error: BrainError | None = None

    def result(self) -> Message:
        """The answer message, or raise the error the server sent."""
        if self.error is not None:
            raise self.error
        assert self.message is not None
        return self.message


@dataclass(slots=True)
class _Stream:
    opcode: Opcode
    abandoned: bool = False


class ClientSession:
    """Protocol state of one client-side connection."""

    def __init__(self, *, first_stream_id: int = 1) -> None:
        """Start a session; ``first_stream_id`` (odd) lets tests begin near the wrap."""
        if first_stream_id % 2 != 1 or not 0 < first_stream_id <= MAX_STREAM_ID:
            raise ValueError(f"first stream id must be an odd u32, not {first_stream_id}")
        # The server may answer with frames up to the 24-bit ceiling; its max_frame
        # bounds what it accepts from us, not what it sends.
        self._reader = FrameReader()
        self._next_id = first_stream_id
        self._streams: dict[int, _Stream] = {}
        self._hello_sent = False
        self._bye_sent = False
        self._closed_reason: str | None = None
        self.welcome: Welcome | None = None
        """The server's WELCOME, once it arrived."""
        self.auth_ok: AuthOk | None = None
        """The server's AUTH_OK, once it arrived."""

    # --- inspection -------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once the connection is over: BYE_OK, a fatal error or a lost transport."""
        return self._closed_reason is not None

    @property
    def closed_reason(self) -> str | None:
        """Why the connection is over, or None while it is open."""
        return self._closed_reason

    @property
    def max_frame(self) -> int:
        """Largest payload the server accepts: its WELCOME's, or the default before."""
        return self.welcome.max_frame if self.welcome is not None else DEFAULT_MAX_FRAME

    @property
    def max_streams(self) -> int:
        """Requests the server lets be in flight at once."""
        return self.welcome.max_streams if self.welcome is not None else DEFAULT_MAX_STREAMS

    @property
    def in_flight(self) -> int:
        """How many streams await the end of their answer (``len(pending)``, cheaply)."""
        return len(self._streams)

    @property
    def pending(self) -> Mapping[int, Opcode]:
        """Streams whose answer has not ended, abandoned ones included, with their opcode."""
        return {sid: stream.opcode for sid, stream in self._streams.items()}

    # --- sending ----------------------------------------------------------------------

    def hello(self, client_name: str) -> bytes:
        """The HELLO frame, on stream 0, offering the protocol version this build speaks."""
        self._check_open()
        if self._hello_sent:
            raise RuntimeError("HELLO was already sent on this connection")
        message = Hello(client=client_name, versions=(PROTOCOL_VERSION,))
        data = self._encode(Opcode.HELLO, 0, message)
        self._hello_sent = True
        self._streams[0] = _Stream(Opcode.HELLO)
        return data

    def auth(self, api_key: str) -> tuple[int, bytes]:
        """An AUTH frame presenting ``api_key``; may follow HELLO before WELCOME arrives."""
        if not self._hello_sent:
            raise RuntimeError("send HELLO before AUTH")
        return self.request(Opcode.AUTH, AuthRequest(api_key=api_key))

    def ping(self, nonce: object = None) -> tuple[int, bytes]:
        """A PING frame; the PONG echoes ``nonce``."""
        return self.request(Opcode.PING, Ping(nonce=nonce))

    def cancel(self, stream_id: int) -> tuple[int, bytes]:
        """A CANCEL_STREAM frame asking the server to end answer stream ``stream_id``."""
        return self.request(Opcode.CANCEL_STREAM, CancelStream(stream=stream_id))

    def bye(self) -> tuple[int, bytes]:
        """A BYE frame; nothing may be sent after it."""
        sent = self.request(Opcode.BYE, Bye())
        self._bye_sent = True
        return sent

    def request(self, opcode: Opcode, message: Message) -> tuple[int, bytes]:
        """Frame ``message`` as request ``opcode`` on a fresh odd stream id."""
        self._check_open()
        if self._bye_sent:
            raise ConnectionClosed("BYE was sent; the connection takes no more requests")
        if opcode is Opcode.HELLO:
            raise ValueError("HELLO goes through hello(): it is the one stream-0 request")
        if opcode not in MESSAGES:
            raise ValueError(f"{opcode!r} has no registered message classes")
        expected = request_class(opcode)
        if type(message) is not expected:
            raise TypeError(
                f"{opcode.name} takes {expected.__name__}, not {type(message).__name__}"
            )
        sid = self._allocate()
        data = self._encode(opcode, sid, message)
        self._streams[sid] = _Stream(opcode)
        return sid, data

    def abandon(self, stream_id: int) -> None:
        """Stop caring about ``stream_id``: its later frames are dropped, not returned.

        The id stays reserved until the server ends the stream, since the server
        still counts it in flight.
        """
        stream = self._streams.get(stream_id)
        if stream is not None:
            stream.abandoned = True

    def connection_lost(self, reason: str) -> None:
        """The transport ended; nothing more will arrive."""
        if self._closed_reason is None:
            self._closed_reason = reason

    # --- receiving --------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Reply]:
        """Take bytes from the server; return the answers they complete, in order.

        Raises :class:`BadFrame` when the server broke the protocol; the
        connection is then closed and must be dropped.
        """
        if self.closed:
            if data:
                raise BadFrame(f"data arrived after the connection ended ({self._closed_reason})")
            return []
        try:
            frames = self._reader.feed(data)
            replies: list[Reply] = []
            for frame in frames:
                reply = self._reply(frame.opcode, frame.stream_id, frame.payload, frame.eos)
                if reply is not None:
                    replies.append(reply)
        except BadFrame as exc:
            self._closed_reason = f"the server broke the protocol: {exc.message}"
            raise
        return replies

    def _reply(self, opcode: int, sid: int, payload: bytes, eos: bool) -> Reply | None:
        if not is_response(opcode):
            raise BadFrame(f"the server sent request opcode {opcode:#06x} on stream {sid}")
        stream = self._streams.get(sid)
        if opcode == ERROR_OPCODE:
            if stream is None and sid != 0:
                raise BadFrame(f"ERROR on stream {sid}, which has no request in flight")
            error = self._decode_error(sid, payload)
            self._streams.pop(sid, None)
            self._after_error(stream, error)
            if stream is not None and stream.abandoned:
                return None
            return Reply(sid, stream.opcode if stream else None, True, error=error)
        if stream is None:
            raise BadFrame(f"answer {opcode:#06x} on stream {sid}, which has no request in flight")
        if opcode != stream.opcode | RESPONSE_BIT:
            raise BadFrame(
                f"answer {opcode:#06x} on stream {sid} does not match request {stream.opcode.name}"
            )
        message = _decode(answer_class(stream.opcode, eos), payload, f"{stream.opcode.name} answer")
        if eos:
            del self._streams[sid]
        if isinstance(message, Welcome):
            self.welcome = message
        elif isinstance(message, AuthOk):
            self.auth_ok = message
        elif stream.opcode is Opcode.BYE:
            self._closed_reason = "BYE_OK: the server closed the connection"
        if stream.abandoned:
            return None
        return Reply(sid, stream.opcode, eos, message=message)

    def _after_error(self, stream: _Stream | None, error: BrainError) -> None:
        # spec/01-wire.md §1, §3: the server closes after a connection fault (sent on the
        # stream of the request that caused it, or on 0) and after a failed AUTH.
        if isinstance(error, ConnectionFault):
            self._closed_reason = f"the server closed the connection: {error.message}"
        elif stream is None:
            self._closed_reason = f"the server sent a connection error: {error.message}"
        elif stream.opcode is Opcode.AUTH and isinstance(error, Unauthenticated):
            self._closed_reason = f"authentication failed: {error.message}"

    def _decode_error(self, sid: int, payload: bytes) -> BrainError:
        wire = _decode(ErrorMessage, payload, f"ERROR on stream {sid}")
        assert isinstance(wire, ErrorMessage)
        return error_from_wire(
            wire.code,
            wire.name,
            wire.message,
            retryable=wire.retryable,
            field=wire.field,
            retry_after_ms=wire.retry_after_ms,
        )

    # --- helpers ----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed_reason is not None:
            raise ConnectionClosed(f"the connection is closed: {self._closed_reason}")

    def _encode(self, opcode: Opcode, sid: int, message: Message) -> bytes:
        payload = cbor.encode(message.to_wire())
        if len(payload) > self.max_frame:
            # Refused here: the server would answer FRAME_TOO_LARGE and close.
            raise FrameTooLarge(
                f"{opcode.name} payload of {len(payload)} bytes is over max_frame {self.max_frame}"
            )
        return encode_frame(opcode, sid, payload)

    def _allocate(self) -> int:
        if len(self._streams) - (0 in self._streams) >= _ODD_IDS:
            raise StreamLimit("every odd stream id is in flight")
        sid = self._next_id
        while sid in self._streams:
            sid = self._after(sid)
        self._next_id = self._after(sid)
        return sid

    @staticmethod
    def _after(sid: int) -> int:
        return 1 if sid + 2 > MAX_STREAM_ID else sid + 2


def _decode(cls: type[Message], payload: bytes, what: str) -> Message:
    try:
        raw = cbor.decode(payload) if payload else {}  # empty payload = empty map
        return cls.from_wire(raw)
    except InvalidArgument as exc:
        # The server's payload is wrong, not the caller's request: a protocol fault.
        raise BadFrame(f"the server sent an invalid {what}: {exc.message}") from exc
