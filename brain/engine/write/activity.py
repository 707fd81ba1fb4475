"""Which namespaces are active: the time of each one's latest request, as far as
the writer's pacing needs it.

The writer paces a namespace's writes only while another namespace is active
(spec/05-durability.md §1): a tenant alone keeps the whole writer. Every
request touches its namespace here, reads included (a reader has no job in the
writer, yet it waits for the interpreter lock the writer's planning holds).

The one question asked, "has any namespace other than X sent a request within
:data:`ACTIVE_WINDOW_S`?", needs only the two most recent distinct namespaces
with their latest times: if the most recent one is not X it answers, and if it
is X, the other one is the most recent namespace that is not X. So a touch is
one tuple stored and a query two comparisons, however many namespaces there are,
and nothing grows with them.

Threads: requests touch from the event loop and the read pool while the writer
thread asks. Both slots live in one immutable tuple replaced by one attribute
store, so the writer always reads a consistent pair. Touches are not locked: two
racing touches may lose one of them, and the namespace lost reappears at its
next request (an active tenant's next request is moments away). Pacing then
starts a request later; a lock taken by every request of every thread would cost
more than that.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

__all__ = ["ACTIVE_WINDOW_S", "Activity"]

ACTIVE_WINDOW_S: Final = 1.0
"""How long after its latest request a namespace counts as active. Long enough to
cover the gap between one request's answer and the next request of a tenant at
work (its own processing and network round trip, a few milliseconds to some
hundreds), so that it is protected between its requests as well as during them;
short enough that a tenant that stopped gives the busy one the whole writer back
within a second."""

_NOBODY: Final = (None, float("-inf"), None, float("-inf"))
"""No request yet: two empty slots, older than any window."""


class Activity:
    """The latest request time of the two most recently active namespaces."""

    __slots__ = ("_clock", "_recent")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        """``clock`` gives the time in seconds (the monotonic clock; tests may step one)."""
        self._clock = clock
        self._recent: tuple[str | None, float, str | None, float] = _NOBODY
        """(latest namespace, its time, the namespace before it that is not the
        latest, its time), replaced whole by each touch."""

    def touch(self, namespace: str) -> None:
        """Note a request of ``namespace`` now."""
        now = self._clock()
        latest, _, before, before_at = recent = self._recent
        if latest == namespace:
            self._recent = (namespace, now, before, before_at)
        else:
            self._recent = (namespace, now, latest, recent[1])

    def others_active(self, namespace: str | None, now: float | None = None) -> bool:
        """True when a namespace other than ``namespace`` sent a request within the
        last :data:`ACTIVE_WINDOW_S` (``now`` on this object's clock; default: now)."""
        latest, latest_at, before, before_at = self._recent
        since = (self._clock() if now is None else now) - ACTIVE_WINDOW_S
        if latest is not None and latest != namespace:
            return latest_at > since
        return before is not None and before_at > since
