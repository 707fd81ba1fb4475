"""The record clock (spec/03-time.md §2): nanoseconds, strictly increasing, durable.

Every write gets its ``recorded_at`` from here. The clock follows the wall
clock but never goes back: when the wall clock steps back (or two writes land
in the same nanosecond) it hands out the previous value plus one. The engine
stores the last value handed out with every applied write and restarts the
clock from it, so record time keeps increasing across restarts too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["RecordClock"]


class RecordClock:
    """A strictly increasing nanosecond clock, seeded with the last durable value."""

    def __init__(self, last: int = 0, wall: Callable[[], int] = time.time_ns) -> None:
        self._last = last
        self._wall = wall
        self._lock = threading.Lock()

    @property
    def last(self) -> int:
        """The most recent value handed out (or the seed)."""
        return self._last

    def now(self) -> int:
        """The current record time, without advancing: never below :attr:`last`."""
        return max(self._wall(), self._last)

    def tick(self) -> int:
        """A new record time, strictly greater than every earlier one."""
        with self._lock:
            value = max(self._wall(), self._last + 1)
            self._last = value
            return value

    def observe(self, value: int) -> None:
        """Never hand out a time at or below ``value`` (used when replaying the log)."""
        with self._lock:
            self._last = max(self._last, value)
