"""Brain errors as MCP tool errors.

A tool that fails answers ``isError: true`` with one text block the model can act
on, never a protocol error or a crash::

    NOT_FOUND (0x0050): no statement 0190… in this space [field: id]

The wire name and code are those of spec/01-wire.md §5; the field, when the
server named one, is the argument at fault; a transient error says when to try
again. Failures that never reached the server have names of their own:
``CONNECTION_CLOSED`` (the server cannot be reached), ``TIMEOUT`` (no answer in
time; the write may have happened). An argument the facade refuses before
sending (a malformed time, an id that is not hex) is the facade's own
INVALID_ARGUMENT, naming the argument.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from mcp.server.mcpserver.exceptions import ToolError

from brain.errors import BrainError, ConnectionClosed, RequestTimeout

__all__ = ["describe", "refusals"]

CONNECTION_CLOSED: Final = "CONNECTION_CLOSED"
"""The name of a failure to reach the server, which has no wire code: it is the client's."""

TIMEOUT: Final = "TIMEOUT"
"""The name of a request left unanswered in time, the client's own too."""


def describe(exc: BrainError, *, address: str | None = None) -> str:
    """The one line a tool error shows for ``exc``; ``address`` names the server."""
    if isinstance(exc, ConnectionClosed):
        where = f" at {address}" if address else ""
        return (
            f"{CONNECTION_CLOSED}: the Brain server{where} cannot be reached ({exc.message}); "
            "is it running? The next call tries again"
        )
    if isinstance(exc, RequestTimeout):
        return (
            f"{TIMEOUT}: {exc.message}; a write may still have happened, so check before "
            "repeating it"
        )
    name = exc.wire_name or type(exc).__name__
    line = (
        f"{name} (0x{exc.wire_code:04x}): {exc.message}"
        if exc.wire_code
        else (f"{name}: {exc.message}")
    )
    if exc.field:
        line += f" [field: {exc.field}]"
    if exc.retryable:
        wait = f" in {exc.retry_after_ms} ms" if exc.retry_after_ms is not None else " later"
        line += f"; retry{wait}"
    return line


@contextmanager
def refusals(*, address: str | None = None) -> Iterator[None]:
    """Turn the errors of the facade call inside into :class:`ToolError`, which the SDK
    answers as a tool result with ``isError`` set."""
    try:
        yield
    except BrainError as exc:
        raise ToolError(describe(exc, address=address)) from exc
