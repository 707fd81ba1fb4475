"""Connection control: HELLO, AUTH, PING, BYE, CANCEL_STREAM and ERROR (spec/01-wire.md §3, §5)."""

from __future__ import annotations

from typing import Annotated, Final

from brain.errors import BrainError, UnknownError
from brain.wire.messages.values import Id, Nanos, UInt
from brain.wire.schema import Len, Message, Range, wire_message

__all__ = [
    "AuthOk",
    "AuthRequest",
    "Bye",
    "ByeOk",
    "CancelStream",
    "CancelStreamOk",
    "ErrorMessage",
    "Hello",
    "Ping",
    "Pong",
    "Welcome",
]

MAX_CLIENT_NAME_CHARS: Final = 256
"""A client name is a short product/version label."""

MAX_VERSIONS: Final = 16
"""A client offers a handful of protocol versions, not thousands."""

MAX_API_KEY_CHARS: Final = 256
"""Real keys are 47 characters; anything far longer is not a key."""


@wire_message
class Hello(Message):
    """HELLO: the client names itself and the protocol versions it speaks."""

    client: Annotated[str, Len(1, MAX_CLIENT_NAME_CHARS)]
    versions: Annotated[tuple[Annotated[int, Range(0, 0xFFFF)], ...], Len(1, MAX_VERSIONS)]


@wire_message
class Welcome(Message):
    """WELCOME: the server's answer to HELLO with the negotiated limits."""

    server: str
    version: UInt
    session_id: Id
    max_frame: UInt
    max_streams: UInt
    server_time: Nanos


@wire_message
class AuthRequest(Message):
    """AUTH: present an API key."""

    api_key: Annotated[str, Len(1, MAX_API_KEY_CHARS)]


@wire_message
class AuthOk(Message):
    """AUTH_OK: the key's namespace, id and permissions."""

    namespace: str
    key_id: Id
    permissions: tuple[str, ...]


@wire_message
class Ping(Message):
    """PING: answered at any time, echoing ``nonce``."""

    nonce: object | None = None


@wire_message
class Pong(Message):
    """PONG: the echoed nonce and the server's clock."""

    nonce: object | None = None
    server_time: Nanos


@wire_message
class Bye(Message):
    """BYE: finish what is in flight, then close."""


@wire_message
class ByeOk(Message):
    """BYE_OK: everything in flight was answered; the server closes next."""


@wire_message
class CancelStream(Message):
    """CANCEL_STREAM: end the open answer stream ``stream`` (a subscription)."""

    stream: Annotated[int, Range(1, 0xFFFFFFFF)]


@wire_message
class CancelStreamOk(Message):
    """The answer to CANCEL_STREAM; ``cancelled`` says whether the stream was open."""

    cancelled: bool


@wire_message
class ErrorMessage(Message):
    """ERROR (opcode 0x00FF): one error, as spec/01-wire.md §5 lays it out."""

    code: Annotated[int, Range(0, 0xFFFF)]
    name: str
    message: str
    field: str | None = None
    retryable: bool
    retry_after_ms: UInt | None = None

    @classmethod
    def from_error(cls, error: BrainError) -> ErrorMessage:
        """The ERROR payload for ``error``."""
        retryable = error.is_retryable if isinstance(error, UnknownError) else error.retryable
        return cls(
            code=error.wire_code,
            name=error.wire_name,
            message=error.message,
            field=error.field,
            retryable=retryable,
            retry_after_ms=error.retry_after_ms,
        )
