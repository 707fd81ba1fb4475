"""The error trees of Brain. Every error a client can see has a wire code.

Each class carries the code and name of spec/01-wire.md §5 and whether a client may
retry the same request unchanged. Foreign exceptions (OSError, lmdb, CBOR) are
translated into these at the boundary where they enter, with ``raise … from``.

::

    BrainError
    ├── ConnectionFault          the byte stream or handshake is broken; closes
    │   ├── BadFrame                   0x0001
    │   ├── FrameTooLarge              0x0004
    │   ├── VersionNotSupported        0x0020
    │   └── ConnectionClosed           client side: the connection ended first
    ├── RequestError             the request itself is wrong; fix it, do not retry
    │   ├── BadOpcode                  0x0002
    │   ├── BadStream                  0x0006
    │   ├── InvalidArgument            0x0040  (names the offending ``field``)
    │   ├── AsOfInFuture               0x0041
    │   ├── OverBudget                 0x0070
    │   └── TxnTooLarge                0x0071
    ├── AccessError              who is asking is not allowed
    │   ├── Unauthenticated            0x0030
    │   └── PermissionDenied           0x0031
    ├── StateError               the stored state forbids it
    │   ├── NotFound                   0x0050
    │   ├── IdempotencyConflict        0x0060
    │   ├── Conflict                   0x0061
    │   ├── TxnExpired                 0x0062
    │   ├── CardinalityViolation       0x0063
    │   └── Forgotten                  0x0064
    ├── TransientError           try again later, unchanged
    │   ├── StreamLimit                0x0005
    │   ├── Overloaded                 0x0072  (with ``retry_after_ms``)
    │   ├── Unavailable                0x0090
    │   └── RequestTimeout             client side: no answer in time
    ├── Internal                 a server bug; the message names a log id  0x0080
    └── UnknownError             a code this build does not know (client side)

A second, small tree holds the storage faults of the engine. They never reach
the wire: they carry paths and byte offsets meant for the operator's log, and
the engine translates them at its boundary (``WalSyncFailed`` becomes
``Unavailable`` and turns the server read-only; ``WalCorruption`` refuses
startup).

::

    StorageFault                 the local storage cannot be trusted or written
    ├── WalCorruption            the WAL on disk is damaged: names file, offset, LSN
    └── WalSyncFailed            a write or fsync failed; the log takes no more writes
        └── LogFenced            the replicated log refused an append from a writer it
                                 does not expect (another one appended first)
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

__all__ = [
    "AccessError",
    "AsOfInFuture",
    "BadFrame",
    "BadOpcode",
    "BadStream",
    "BrainError",
    "CardinalityViolation",
    "Conflict",
    "ConnectionClosed",
    "ConnectionFault",
    "Forgotten",
    "FrameTooLarge",
    "IdempotencyConflict",
    "Internal",
    "InvalidArgument",
    "LogFenced",
    "NotFound",
    "OverBudget",
    "Overloaded",
    "PermissionDenied",
    "RequestError",
    "RequestTimeout",
    "StateError",
    "StorageFault",
    "StreamLimit",
    "TransientError",
    "TxnExpired",
    "TxnTooLarge",
    "Unauthenticated",
    "Unavailable",
    "UnknownError",
    "VersionNotSupported",
    "WalCorruption",
    "WalSyncFailed",
    "error_class_for_code",
    "error_from_wire",
    "registered_errors",
]

_REGISTRY: dict[int, type[BrainError]] = {}


class BrainError(Exception):
    """Base of every error Brain reports; carries its wire code and name."""

    code: ClassVar[int] = 0
    name: ClassVar[str] = ""
    retryable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        retry_after_ms: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.retry_after_ms = retry_after_ms

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("code")
        if code is None:
            return  # an abstract grouping class
        if code in _REGISTRY:
            other = _REGISTRY[code].__name__
            raise TypeError(f"wire code {code:#06x} of {cls.__name__} is taken by {other}")
        _REGISTRY[code] = cls

    @property
    def wire_code(self) -> int:
        """The code sent on the wire (an instance may differ from its class's)."""
        return self.code

    @property
    def wire_name(self) -> str:
        """The name sent on the wire."""
        return self.name

    def with_field_prefix(self, prefix: str) -> BrainError:
        """Return the same error with ``prefix`` put before its field path."""
        if not prefix:
            return self
        field = prefix if self.field is None else f"{prefix}.{self.field}"
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        Exception.__init__(clone, self.message)
        clone.field = field
        return clone

    def __repr__(self) -> str:
        extra = f", field={self.field!r}" if self.field is not None else ""
        return f"{type(self).__name__}({self.message!r}{extra})"


class ConnectionFault(BrainError):
    """The byte stream or the handshake can no longer be trusted; the connection closes."""


class RequestError(BrainError):
    """The request is wrong as sent; retrying it unchanged fails the same way."""


class AccessError(BrainError):
    """The caller lacks credentials or permission."""


class StateError(BrainError):
    """The stored state forbids the request."""


class TransientError(BrainError):
    """A momentary condition; the same request may succeed later."""

    retryable = True


class BadFrame(ConnectionFault):
    """A frame header or checksum is invalid."""

    code = 0x0001
    name = "BAD_FRAME"


class BadOpcode(RequestError):
    """An unknown opcode, or a response opcode sent by a client."""

    code = 0x0002
    name = "BAD_OPCODE"


class FrameTooLarge(ConnectionFault):
    """A frame's declared length is over the negotiated ``max_frame``."""

    code = 0x0004
    name = "FRAME_TOO_LARGE"


class StreamLimit(TransientError):
    """Too many requests are in flight on this connection."""

    code = 0x0005
    name = "STREAM_LIMIT"


class BadStream(RequestError):
    """A stream id that is even, zero for a data request, or still in use."""

    code = 0x0006
    name = "BAD_STREAM"


class VersionNotSupported(ConnectionFault):
    """Client and server share no protocol version."""

    code = 0x0020
    name = "VERSION_NOT_SUPPORTED"


class Unauthenticated(AccessError):
    """No credentials, or bad ones."""

    code = 0x0030
    name = "UNAUTHENTICATED"


class PermissionDenied(AccessError):
    """The key lacks the permission the operation needs."""

    code = 0x0031
    name = "PERMISSION_DENIED"


class InvalidArgument(RequestError):
    """The payload is not valid for the opcode; ``field`` names the key path."""

    code = 0x0040
    name = "INVALID_ARGUMENT"


class AsOfInFuture(RequestError):
    """An ``as_of`` later than the server's record clock."""

    code = 0x0041
    name = "AS_OF_IN_FUTURE"


class NotFound(StateError):
    """No such record in this namespace and space."""

    code = 0x0050
    name = "NOT_FOUND"


class IdempotencyConflict(StateError):
    """A ``request_id`` reused with other content."""

    code = 0x0060
    name = "IDEMPOTENCY_CONFLICT"


class Conflict(StateError):
    """The record's state forbids the operation."""

    code = 0x0061
    name = "CONFLICT"


class TxnExpired(StateError):
    """The transaction timed out or is unknown."""

    code = 0x0062
    name = "TXN_EXPIRED"


class CardinalityViolation(StateError):
    """A relation would break its type's cardinality."""

    code = 0x0063
    name = "CARDINALITY_VIOLATION"


class Forgotten(StateError):
    """Content matching a hard-forgotten record was written again."""

    code = 0x0064
    name = "FORGOTTEN"


class OverBudget(RequestError):
    """The planner's cost estimate exceeds the budget."""

    code = 0x0070
    name = "OVER_BUDGET"


class TxnTooLarge(RequestError):
    """More operations than a transaction may hold."""

    code = 0x0071
    name = "TXN_TOO_LARGE"


class Overloaded(TransientError):
    """The server is saturated; retry after ``retry_after_ms``."""

    code = 0x0072
    name = "OVERLOADED"


class Internal(BrainError):
    """A server bug; the message names a log id to look up."""

    code = 0x0080
    name = "INTERNAL"


class Unavailable(TransientError):
    """The server cannot serve this now (read-only after a storage fault, or not built)."""

    code = 0x0090
    name = "UNAVAILABLE"


class ConnectionClosed(ConnectionFault):
    """Client side: the connection could not be made, or ended before the answer came.

    It has no wire code: no server sends it. ``__cause__`` holds the fault that
    ended the connection when there was one.
    """


class RequestTimeout(TransientError):
    """Client side: no answer came within the timeout.

    The request may still take effect: retry a write with the same ``request_id``.
    """


class UnknownError(BrainError):
    """An error whose code this build does not know; keeps what the server sent."""

    def __init__(
        self,
        message: str,
        *,
        wire_code: int,
        wire_name: str,
        retryable: bool,
        field: str | None = None,
        retry_after_ms: int | None = None,
    ) -> None:
        super().__init__(message, field=field, retry_after_ms=retry_after_ms)
        self._wire_code = wire_code
        self._wire_name = wire_name
        self._retryable = retryable

    @property
    def wire_code(self) -> int:
        return self._wire_code

    @property
    def wire_name(self) -> str:
        return self._wire_name

    @property
    def is_retryable(self) -> bool:
        """Whether the server marked this unknown error retryable."""
        return self._retryable


class StorageFault(Exception):
    """The engine's local storage cannot be trusted or written; never sent to a client.

    Not a :class:`BrainError`: it has no wire code. The engine decides what the
    client sees (``Unavailable``) and what the operator sees (this message).
    """


class WalCorruption(StorageFault):
    """The write-ahead log on disk is damaged in a way a crash cannot explain.

    ``path`` is the segment file, ``offset`` the byte offset in it where the
    damage starts and ``lsn`` the LSN the log expected there (None when no LSN
    applies). Nothing on disk was changed; ``brain wal truncate`` can drop the
    damaged suffix.
    """

    def __init__(self, path: Path | str, offset: int, lsn: int | None, reason: str) -> None:
        where = f"LSN {lsn}" if lsn is not None else "no LSN"
        super().__init__(f"WAL corruption in {path} at byte {offset} ({where}): {reason}")
        self.path = path
        self.offset = offset
        self.lsn = lsn
        self.reason = reason


class WalSyncFailed(StorageFault):
    """A write or fsync of the WAL failed (EIO, ENOSPC); the log takes no more writes.

    The pages that failed may be lost even though the kernel reports them
    clean, so the log never retries: every later append and sync raises this
    again, and only a restart (which re-reads the log from disk) writes again.
    """


class LogFenced(WalSyncFailed):
    """The replicated log refused an append: the stream's last sequence was not the
    one this writer expected, so another writer appended since it last looked.

    ``expected`` is the sequence this writer believed last, ``actual`` the one the
    stream reported (None when it did not say). The writer that sees this must
    stop writing: its plans were made against a state that is no longer the log's.
    """

    def __init__(self, location: str, expected: int, actual: int | None, detail: str) -> None:
        held = f"{actual}" if actual is not None else "unknown"
        super().__init__(
            f"the log {location} refused an append fenced at last sequence {expected} "
            f"(the stream's last sequence is {held}): another writer appended; {detail}"
        )
        self.expected = expected
        self.actual = actual


def registered_errors() -> dict[int, type[BrainError]]:
    """Every error class with a wire code, by code."""
    return dict(sorted(_REGISTRY.items()))


def error_class_for_code(code: int) -> type[BrainError] | None:
    """The class registered for ``code``, or None."""
    return _REGISTRY.get(code)


def error_from_wire(
    code: int,
    name: str,
    message: str,
    *,
    retryable: bool,
    field: str | None = None,
    retry_after_ms: int | None = None,
) -> BrainError:
    """Rebuild the typed error a server sent in an ERROR payload."""
    cls = _REGISTRY.get(code)
    if cls is None:
        return UnknownError(
            message,
            wire_code=code,
            wire_name=name,
            retryable=retryable,
            field=field,
            retry_after_ms=retry_after_ms,
        )
    return cls(message, field=field, retry_after_ms=retry_after_ms)
