"""The server side of one connection, as a state machine with no I/O (spec/01-wire.md §3).

Feed it the bytes a socket produced with :meth:`ServerSession.receive_data`; it
answers with a list of events. :class:`Outgoing` carries bytes to write,
:class:`CloseConnection` says to close after writing them, and the request
events (:class:`AuthRequested`, :class:`RequestReceived`, …) are work for the
shell, which answers through :meth:`ServerSession.respond`,
:meth:`ServerSession.respond_error` and the auth methods, each of which again
returns events.

The handshake, stream-id rules, the stream limit, payload decoding and the
permission check all happen here, so a request that reaches the shell is
authenticated, well-formed, within limits and permitted.

States::

    AWAITING_HELLO --HELLO--> AWAITING_AUTH --AUTH ok--> READY --BYE--> CLOSING --> CLOSED
         any state --bad frame / bad key / no common version--> CLOSED
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from brain import cbor
from brain.errors import (
    BadFrame,
    BadOpcode,
    BadStream,
    BrainError,
    ConnectionFault,
    FrameTooLarge,
    InvalidArgument,
    PermissionDenied,
    StreamLimit,
    Unauthenticated,
    Unavailable,
    VersionNotSupported,
)
from brain.wire.frame import (
    DEFAULT_MAX_FRAME,
    MAX_FRAME_CEILING,
    Frame,
    FrameReader,
    encode_frame,
)
from brain.wire.messages.control import (
    AuthOk,
    AuthRequest,
    ByeOk,
    CancelStream,
    ErrorMessage,
    Hello,
    Ping,
    Pong,
    Welcome,
)
from brain.wire.opcodes import (
    CONTROL_OPCODES,
    ERROR_OPCODE,
    Opcode,
    Permission,
    is_response,
    required_permission,
    response_opcode,
)
from brain.wire.registry import request_class
from brain.wire.schema import Message

__all__ = [
    "DEFAULT_MAX_STREAMS",
    "PRE_AUTH_MAX_FRAME",
    "AuthRequested",
    "ByeRequested",
    "CancelRequested",
    "CloseConnection",
    "Event",
    "Outgoing",
    "Principal",
    "RequestReceived",
    "ServerSession",
    "SessionState",
    "encode_error_frame",
]

PRE_AUTH_MAX_FRAME: Final = 64 * 1024
"""Largest payload accepted before AUTH succeeds: HELLO, AUTH and PING need a few
hundred bytes, and an unauthenticated connection must not make the server buffer
megabytes (a thousand such connections would hold gigabytes)."""

SUPPORTED_VERSIONS: Final = frozenset({1})

DEFAULT_MAX_STREAMS: Final = 256
"""Requests one connection may have in flight: enough to pipeline deeply, and a
bound on the tasks and buffered answers one client can make the server hold."""

HANDSHAKE_TIMEOUT_S: Final = 10.0
"""HELLO and AUTH must both be done within this many seconds (spec/01-wire.md §3)."""


class SessionState(enum.Enum):
    """Where a connection is in its life."""

    AWAITING_HELLO = "awaiting_hello"
    AWAITING_AUTH = "awaiting_auth"
    AUTHENTICATING = "authenticating"
    READY = "ready"
    CLOSING = "closing"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a connection speaks for: a key, its namespace and its permissions.

    ``session_id`` names the connection, which owns the transactions it opens.
    """

    namespace: str
    key_id: bytes
    permissions: frozenset[Permission]
    session_id: bytes = b""


@dataclass(frozen=True, slots=True)
class Outgoing:
    """Bytes to write to the peer, in order."""

    data: bytes


@dataclass(frozen=True, slots=True)
class CloseConnection:
    """Close the connection once every earlier :class:`Outgoing` is written."""

    reason: str
    """Why, in words: the error's message, or ``BYE`` after a clean goodbye. It may
    quote the peer's bytes (a bad magic, a CRC), so it is for logs only."""
    error: str | None = None
    """The wire name of the error that closed the connection (one of the fixed set
    in :mod:`brain.errors`), or None after BYE: what a metric may be labelled by."""


@dataclass(frozen=True, slots=True)
class AuthRequested:
    """The client presented a key; answer with ``auth_succeeded`` or ``auth_failed``."""

    stream_id: int
    api_key: str


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """A decoded, authenticated, permitted data request to execute."""

    stream_id: int
    opcode: Opcode
    request: Message


@dataclass(frozen=True, slots=True)
class ByeRequested:
    """The client said BYE; the session answers BYE_OK once nothing is in flight."""

    stream_id: int


@dataclass(frozen=True, slots=True)
class CancelRequested:
    """The client asked to end the answer stream ``target``; answer on ``stream_id``."""

    stream_id: int
    target: int


Event = (
    Outgoing | CloseConnection | AuthRequested | RequestReceived | ByeRequested | (CancelRequested)
)


def encode_error_frame(stream_id: int, error: BrainError) -> bytes:
    """One ERROR frame, flagged EOS, carrying ``error``."""
    payload = cbor.encode(ErrorMessage.from_error(error).to_wire())
    return encode_frame(ERROR_OPCODE, stream_id, payload, eos=True)


class ServerSession:
    """Protocol state of one server-side connection."""

    def __init__(
        self,
        *,
        server_name: str,
        session_id: bytes,
        clock: Callable[[], int],
        max_frame: int = DEFAULT_MAX_FRAME,
        max_streams: int = DEFAULT_MAX_STREAMS,
        observer: Callable[[str, str], None] | None = None,
    ) -> None:
        """``observer(opcode_name, outcome)`` is told of every answer the session
        gives by itself (PING, HELLO, and requests it refuses), so metrics can
        count them; requests it hands to the shell are the shell's to count."""
        self._observer = observer
        self._label = "FRAME"
        self.server_name = server_name
        self.session_id = session_id
        self.max_frame = max_frame
        self.max_streams = max_streams
        self._clock = clock
        # Until AUTH succeeds a peer is nobody: it may not make the server hold more
        # than a handshake's worth of bytes for it.
        self._reader = FrameReader(min(max_frame, PRE_AUTH_MAX_FRAME))
        self._in_flight: set[int] = set()
        self._bye_stream: int | None = None
        self.state = SessionState.AWAITING_HELLO
        self.principal: Principal | None = None

    # --- inspection -------------------------------------------------------------------

    @property
    def mid_frame(self) -> bool:
        """True while the peer has sent part of a frame and not the rest."""
        return self._reader.mid_frame

    @property
    def in_flight(self) -> frozenset[int]:
        """Stream ids whose answers have not ended yet."""
        return frozenset(self._in_flight)

    @property
    def handshake_done(self) -> bool:
        """True once AUTH succeeded."""
        return self.state in (SessionState.READY, SessionState.CLOSING)

    @property
    def closed(self) -> bool:
        """True once the connection must be closed."""
        return self.state is SessionState.CLOSED

    # --- input ------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """Take bytes from the peer; return what to do about them."""
        frames, events = self.frames(data)
        for frame in frames:
            if self.closed:
                break
            events.extend(self.handle(frame))
        return events

    def frames(self, data: bytes) -> tuple[list[Frame], list[Event]]:
        """:meth:`receive_data` in two steps: the whole frames ``data`` completes,
        their payloads not yet decoded, for :meth:`handle` one at a time (so that the
        caller may let other work run between two of them); and, when the bytes
        break the framing, the events that end the connection instead."""
        if self.closed:
            return [], []
        try:
            return self._reader.feed(data), []
        except (BadFrame, FrameTooLarge) as exc:
            self._label = "FRAME"
            return [], self._fatal(0, exc)

    def handle(self, frame: Frame) -> list[Event]:
        """Decode one frame of :meth:`frames` and say what to do about it; nothing
        once the connection is closed (a frame after a fatal one is dropped)."""
        if self.closed:
            return []
        return self._handle(frame)

    def _note(self, outcome: str) -> None:
        if self._observer is not None:
            self._observer(self._label, outcome)

    def _handle(self, frame: Frame) -> list[Event]:
        sid = frame.stream_id
        opcode = self._request_opcode(frame.opcode)
        if not isinstance(opcode, Opcode):
            return self._error(sid, opcode)
        misrouted = self._stream_refusal(sid, opcode)
        if misrouted is not None:
            return self._error(sid, misrouted)
        # PING and HELLO are answered in every state; the rest wait for the handshake.
        if opcode is Opcode.PING:
            return self._ping(sid, frame.payload)
        if opcode is Opcode.HELLO:
            return self._hello(sid, frame.payload)
        refused = self._state_refusal(opcode)
        if refused is not None:
            return self._error(sid, refused)
        if opcode is Opcode.AUTH:
            return self._auth(sid, frame.payload)
        if opcode is Opcode.BYE:
            return self._bye(sid, frame.payload)
        if opcode is Opcode.CANCEL_STREAM:
            return self._cancel(sid, frame.payload)
        return self._data_request(sid, opcode, frame.payload)

    def _request_opcode(self, raw: int) -> Opcode | BadOpcode:
        """The request opcode ``raw`` names, or why a client may not send it; the
        answers that follow are counted under its name."""
        try:
            opcode: Opcode | None = Opcode(raw)
        except ValueError:
            opcode = None
        self._label = "UNKNOWN" if opcode is None else opcode.name
        if is_response(raw):
            return BadOpcode(f"opcode {raw:#06x} is a response opcode")
        if opcode is None:
            return BadOpcode(f"unknown opcode {raw:#06x}")
        return opcode

    def _stream_refusal(self, sid: int, opcode: Opcode) -> BadStream | None:
        """Why ``opcode`` may not arrive on stream ``sid``, or None: control
        requests may use stream 0, the rest a fresh odd id."""
        if sid == 0:
            if opcode not in CONTROL_OPCODES:
                return BadStream(f"{opcode.name} needs an odd stream id, not 0")
        elif sid % 2 == 0:
            return BadStream(f"stream id {sid} is even; requests use odd ids")
        elif sid in self._in_flight:
            return BadStream(f"stream id {sid} is still in use")
        return None

    def _state_refusal(self, opcode: Opcode) -> BrainError | None:
        """Why ``opcode`` (neither PING nor HELLO) may not be sent yet or any more,
        or None: AUTH needs HELLO first, the rest a finished AUTH and no BYE."""
        if self.state is SessionState.AWAITING_HELLO:
            return Unauthenticated("send HELLO, then AUTH, before any request")
        if opcode is Opcode.AUTH:
            return None
        if self.state in (SessionState.AWAITING_AUTH, SessionState.AUTHENTICATING):
            return Unauthenticated("authenticate with AUTH first")
        if self.state is SessionState.CLOSING:
            return Unavailable("the connection is closing after BYE")
        return None

    def _decode(self, sid: int, opcode: Opcode, payload: bytes) -> Message | list[Event]:
        try:
            raw = cbor.decode(payload) if payload else {}
            return request_class(opcode).from_wire(raw)
        except InvalidArgument as exc:
            return self._error(sid, exc)

    def _ping(self, sid: int, payload: bytes) -> list[Event]:
        decoded = self._decode(sid, Opcode.PING, payload)
        if isinstance(decoded, list):
            return decoded
        assert isinstance(decoded, Ping)
        pong = Pong(nonce=decoded.nonce, server_time=self._clock())
        payload = cbor.encode(pong.to_wire())
        # A nonce that filled its frame no longer fits one once server_time is added.
        if len(payload) > MAX_FRAME_CEILING:
            return self._error(
                sid, InvalidArgument("nonce is too large to echo in one frame", field="nonce")
            )
        return [Outgoing(encode_frame(response_opcode(Opcode.PING), sid, payload, eos=True))]

    def _hello(self, sid: int, payload: bytes) -> list[Event]:
        if self.state is not SessionState.AWAITING_HELLO:
            return self._error(sid, InvalidArgument("HELLO was already received"))
        decoded = self._decode(sid, Opcode.HELLO, payload)
        if isinstance(decoded, list):
            return decoded
        assert isinstance(decoded, Hello)
        common = SUPPORTED_VERSIONS.intersection(decoded.versions)
        if not common:
            offered = ", ".join(str(v) for v in decoded.versions)
            return self._fatal(
                sid, VersionNotSupported(f"server speaks version 1; client offered {offered}")
            )
        self.state = SessionState.AWAITING_AUTH
        welcome = Welcome(
            server=self.server_name,
            version=max(common),
            session_id=self.session_id,
            max_frame=self.max_frame,
            max_streams=self.max_streams,
            server_time=self._clock(),
        )
        self._note("ok")
        return [Outgoing(self._frame(Opcode.HELLO, sid, welcome))]

    def _auth(self, sid: int, payload: bytes) -> list[Event]:
        if self.state is not SessionState.AWAITING_AUTH:
            reason = (
                "an AUTH is already being checked"
                if self.state is SessionState.AUTHENTICATING
                else "the connection is already authenticated"
            )
            return self._error(sid, InvalidArgument(reason))
        decoded = self._decode(sid, Opcode.AUTH, payload)
        if isinstance(decoded, list):
            return decoded
        assert isinstance(decoded, AuthRequest)
        self.state = SessionState.AUTHENTICATING
        return [AuthRequested(sid, decoded.api_key)]

    def _bye(self, sid: int, payload: bytes) -> list[Event]:
        decoded = self._decode(sid, Opcode.BYE, payload)
        if isinstance(decoded, list):
            return decoded
        self.state = SessionState.CLOSING
        self._bye_stream = sid
        return [ByeRequested(sid), *self._maybe_finish_bye()]

    def _cancel(self, sid: int, payload: bytes) -> list[Event]:
        decoded = self._decode(sid, Opcode.CANCEL_STREAM, payload)
        if isinstance(decoded, list):
            return decoded
        assert isinstance(decoded, CancelStream)
        return [CancelRequested(sid, decoded.stream)]

    def _data_request(self, sid: int, opcode: Opcode, payload: bytes) -> list[Event]:
        if len(self._in_flight) >= self.max_streams:
            return self._error(
                sid, StreamLimit(f"{self.max_streams} requests are already in flight")
            )
        decoded = self._decode(sid, opcode, payload)
        if isinstance(decoded, list):
            return decoded
        needed = required_permission(opcode)
        assert self.principal is not None
        if needed is not None and needed not in self.principal.permissions:
            return self._error(
                sid, PermissionDenied(f"{opcode.name} needs the {needed.value} permission")
            )
        self._in_flight.add(sid)
        return [RequestReceived(sid, opcode, decoded)]

    # --- answers from the shell -------------------------------------------------------

    def auth_succeeded(self, stream_id: int, principal: Principal) -> list[Event]:
        """The key checked out: answer AUTH_OK and accept requests."""
        if self.state is not SessionState.AUTHENTICATING:
            return []
        self.state = SessionState.READY
        self.principal = principal
        self._reader.max_frame = self.max_frame
        self._label = Opcode.AUTH.name
        self._note("ok")
        ok = AuthOk(
            namespace=principal.namespace,
            key_id=principal.key_id,
            permissions=tuple(p.value for p in Permission if p in principal.permissions),
        )
        return [Outgoing(self._frame(Opcode.AUTH, stream_id, ok))]

    def auth_failed(self, stream_id: int, error: BrainError) -> list[Event]:
        """The key was wrong: answer with ``error`` and close (spec/01-wire.md §3)."""
        if self.state is not SessionState.AUTHENTICATING:
            return []
        self._label = Opcode.AUTH.name
        return self._fatal(stream_id, error)

    def respond(
        self, stream_id: int, opcode: Opcode, message: Message, *, eos: bool = True
    ) -> list[Event]:
        """Answer request ``stream_id``; ``eos=False`` keeps the stream open (SUBSCRIBE)."""
        return self.respond_raw(stream_id, opcode, cbor.encode(message.to_wire()), eos=eos)

    def respond_raw(
        self, stream_id: int, opcode: Opcode, payload: bytes, *, eos: bool = True
    ) -> list[Event]:
        """Answer with an already encoded payload (a stored answer, sent byte for byte)."""
        if self.closed:
            return []
        data = encode_frame(response_opcode(opcode), stream_id, payload, eos=eos)
        if not eos:
            return [Outgoing(data)]
        self._in_flight.discard(stream_id)
        return [Outgoing(data), *self._maybe_finish_bye()]

    def respond_error(self, stream_id: int, error: BrainError) -> list[Event]:
        """End request ``stream_id`` with an ERROR."""
        if self.closed:
            return []
        self._in_flight.discard(stream_id)
        if isinstance(error, ConnectionFault):
            return self._fatal(stream_id, error)
        return [Outgoing(encode_error_frame(stream_id, error)), *self._maybe_finish_bye()]

    def close(self) -> None:
        """The transport closed; nothing more will be sent or received."""
        self.state = SessionState.CLOSED
        self._in_flight.clear()

    # --- helpers ----------------------------------------------------------------------

    def _frame(self, opcode: Opcode, sid: int, message: Message, *, eos: bool = True) -> bytes:
        payload = cbor.encode(message.to_wire())
        return encode_frame(response_opcode(opcode), sid, payload, eos=eos)

    def _error(self, sid: int, error: BrainError) -> list[Event]:
        self._note(error.wire_name)
        return [Outgoing(encode_error_frame(sid, error))]

    def _fatal(self, sid: int, error: BrainError) -> list[Event]:
        self._note(error.wire_name)
        self.state = SessionState.CLOSED
        self._in_flight.clear()
        return [
            Outgoing(encode_error_frame(sid, error)),
            CloseConnection(error.message, error.wire_name),
        ]

    def _maybe_finish_bye(self) -> list[Event]:
        if self.state is not SessionState.CLOSING or self._in_flight or self._bye_stream is None:
            return []
        sid = self._bye_stream
        self._bye_stream = None
        data = self._frame(Opcode.BYE, sid, ByeOk())
        self.state = SessionState.CLOSED
        return [Outgoing(data), CloseConnection("BYE")]
