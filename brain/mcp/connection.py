"""The facade an MCP server speaks through: connected on first use, not at start.

A client starts ``brain mcp`` when it starts, often before the Brain server is up;
connecting lazily lets the MCP handshake and the tool list succeed regardless,
and a call made while the server is down fails as a tool error that says so,
while the next call tries again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from brain.sdk import Brain

__all__ = ["Connection"]


class Connection:
    """One :class:`Brain` facade shared by every tool call, opened by ``opener`` on
    first use and opened again after a failed attempt.

    Tool calls run on worker threads; the facade serialises them on its one
    connection, and the lock here only guards opening it.
    """

    def __init__(self, opener: Callable[[], Brain]) -> None:
        """``opener`` connects and authenticates, raising the BrainError it met."""
        self._opener = opener
        self._lock = threading.Lock()
        self._brain: Brain | None = None

    def brain(self) -> Brain:
        """The connected facade, connecting now if no connection is open yet."""
        with self._lock:
            if self._brain is None:
                self._brain = self._opener()
            return self._brain

    def close(self) -> None:
        """Close the connection, if one was opened."""
        with self._lock:
            if self._brain is not None:
                self._brain.close()
                self._brain = None
