"""One clear line per failure: what went wrong, where, and how to fix it.

A :class:`~brain.errors.BrainError` prints as ``brain: NAME: message (field F) —
hint``: the wire name (spec/01-wire.md §5), the server's message, the offending field
and, where the fix is obvious, the option or command that makes it. Client-side
failures (no connection, no answer in time) get the same shape.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Final

from brain.errors import (
    AsOfInFuture,
    BrainError,
    CardinalityViolation,
    Conflict,
    ConnectionClosed,
    Forgotten,
    IdempotencyConflict,
    Internal,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    RequestTimeout,
    TransientError,
    Unauthenticated,
    VersionNotSupported,
)

__all__ = ["describe_error", "flag_for_field"]

START_SERVER: Final = "is the server running? start it with `make serve` or `brain serve`"

_HINTS: Final[dict[type[BrainError], str]] = {
    NotFound: "check the id and --space (records live in one namespace and space)",
    Unauthenticated: "pass --api-key or set BRAIN_API_KEY (or --data: the server's data directory)",
    PermissionDenied: "use a key with that permission (brain keys create --permissions ...)",
    AsOfInFuture: "--as-of must not be later than the server's clock (leave it out for now)",
    IdempotencyConflict: "that --request-id was used for another write; leave --request-id out",
    Forgotten: "this text was hard-forgotten; --override-forgotten stores it again (audited)",
    CardinalityViolation: (
        "the relation type allows no more current edges here; supersede or tombstone one "
        "(brain relation list ENTITY)"
    ),
    Conflict: "the record's current state forbids it; look at it with get or `brain history ID`",
    Internal: "a server bug: look the log id up in the server's log",
    VersionNotSupported: "client and server speak no common protocol version; upgrade one",
}

_INDEX: Final = re.compile(r"\[\d+\]")


def flag_for_field(field: str, flags: Collection[str]) -> str | None:
    """The option among ``flags`` that sets the wire ``field`` (``new.valid_to`` →
    ``--valid-to``, ``evidence[2].memory`` → ``--evidence``), or None."""
    parts = [p for p in _INDEX.sub("", field).split(".") if p and p != "new"]
    for part in reversed(parts):
        flag = "--" + part.replace("_", "-")
        if flag in flags:
            return flag
    return None


def describe_error(
    exc: BrainError,
    *,
    address: str | None = None,
    flags: Collection[str] = (),
    request_id: bytes | None = None,
    key_source: str | None = None,
) -> str:
    """The line to print for ``exc``: name, message, field, hint.

    ``address`` is the server's ``host:port``; ``flags`` the options of the verb
    that failed, so a field can be named as the flag that sets it; ``request_id``
    the id of the write that was sent, so a timed-out write can be retried safely;
    ``key_source`` where the API key came from, named when the server refused it.
    """
    if isinstance(exc, ConnectionClosed):
        where = f" to {address}" if address else ""
        if isinstance(exc.__cause__, OSError) and exc.message.startswith("cannot connect"):
            reason = exc.__cause__.strerror or str(exc.__cause__)
            return f"brain: cannot connect{where} ({reason.lower()}) — {START_SERVER}"
        return f"brain: the connection{where} ended: {exc.message}"
    if isinstance(exc, RequestTimeout):
        advice = "the server may be busy; retry or raise --timeout"
        if request_id is not None:
            advice += (
                f"; the write may still have happened: retry it with --request-id "
                f"{request_id.hex()} to apply it once"
            )
        return f"brain: TIMEOUT: {exc.message} — {advice}"
    name = exc.wire_name or type(exc).__name__
    line = f"brain: {name}: {exc.message}"
    hint: str | None = None
    if exc.field:
        flag = flag_for_field(exc.field, flags)
        line += f" (field {exc.field}{', set by ' + flag if flag else ''})"
        if isinstance(exc, InvalidArgument) and flag:
            hint = f"check {flag}"
    for cls, text in _HINTS.items():
        if isinstance(exc, cls):
            hint = text
            break
    if isinstance(exc, Unauthenticated) and key_source:
        hint = f"{hint}; the key used came from {key_source}"
    if hint is None and isinstance(exc, TransientError):
        hint = "retry later"
        if exc.retry_after_ms is not None:
            hint += f" (in {exc.retry_after_ms} ms)"
    return line if hint is None else f"{line} — {hint}"
