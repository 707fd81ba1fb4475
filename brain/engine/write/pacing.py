"""The writer's pacing: no namespace plans for more than half the writer's time while
another namespace is active (spec/05-durability.md §1).

The server is one Python process, and the writer plans in pure Python: while it
plans it holds the interpreter lock, which every other thread (the event loop,
the read pool) needs at each step. Round-robin between the writer's lanes shares
the writer between the tenants that have writes waiting, but a tenant that only
reads has no job there, and a flood of writes that keeps the writer planning
makes each of its reads wait for the lock at every hop. So a namespace's
planning time is metered, and while another namespace is active
(:mod:`brain.engine.write.activity`) a namespace over
:data:`MAX_SHARED_WRITER_SHARE` of the writer's time is held back: the writer
plans other lanes' jobs, or, when only held lanes have work, waits with the lock
released. A namespace alone is never held, nor is the engine's own lane (the
indexer's vectors, an import), which is no tenant's.

Each namespace's planning time is kept as an exponentially decaying sum with the
time constant :data:`SHARE_WINDOW_S`: a namespace that plans a fraction ``f`` of
the time has a sum of ``f * SHARE_WINDOW_S``, so it is over its share when the
sum exceeds ``MAX_SHARED_WRITER_SHARE * SHARE_WINDOW_S``, and the time until it
falls back under follows from the decay. One number and one time per namespace,
dropped once it has decayed to nothing.

Only the writer thread uses a :class:`Pacing`; it is not locked.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import Final

from brain.engine.write.activity import Activity
from brain.engine.write.lanes import Lane

__all__ = ["MAX_PAUSE_S", "MAX_SHARED_WRITER_SHARE", "SHARE_WINDOW_S", "Pacing"]

MAX_SHARED_WRITER_SHARE: Final = 0.5
"""Most of the writer's time one namespace's planning takes while another namespace
is active. The other half leaves the interpreter lock free for the other
tenants' reads and writes (a reader's median was 3 to 6 times slower while a
flood kept the writer planning 60 % of the time); two tenants both writing hard
each get about half, which is what round-robin gives them anyway."""

SHARE_WINDOW_S: Final = 0.2
"""Time constant of the decaying planning time a share is measured over. Short
enough that a flood is held back within a fraction of a second of another tenant
becoming active, and that, held, it alternates planning and pausing in steps of
about one job (milliseconds, which a reader waiting for the lock sees as short
waits, not as a long stall); long enough to span many jobs, so one job's length
does not swing the share."""

MAX_PAUSE_S: Final = 0.005
"""Longest one pause of the writer before it looks again. A new submission or a
stop wakes it at once, but the other tenant going quiet announces itself by
nothing, so the writer looks again after this long; a few wake-ups per pause cost
nothing next to the planning they pace."""

FORGET_AFTER_S: Final = 20 * SHARE_WINDOW_S
"""A namespace's meter is dropped once it planned nothing for this long (its sum has
decayed by e^-20, to nothing), so the meters do not grow with the namespaces that
ever wrote."""

_CAP: Final = MAX_SHARED_WRITER_SHARE * SHARE_WINDOW_S
"""The decayed planning time (seconds) at which a namespace is over its share."""


class Pacing:
    """Each namespace's recent planning time, and whether it is held back."""

    __slots__ = ("_activity", "_clock", "_meters", "_pruned_at")

    def __init__(self, activity: Activity, clock: Callable[[], float] = time.monotonic) -> None:
        """``activity`` says which namespaces are active; ``clock`` is its clock."""
        self._activity = activity
        self._clock = clock
        self._meters: dict[str, tuple[float, float]] = {}
        """Per namespace: (decayed planning seconds, the time they were decayed to)."""
        self._pruned_at = clock()

    @property
    def activity(self) -> Activity:
        """The record of active namespaces the pacing follows."""
        return self._activity

    def now(self) -> float:
        """The time on the pacing's clock."""
        return self._clock()

    def spent(self, lane: Lane, seconds: float, now: float) -> None:
        """Count ``seconds`` of planning of ``lane`` that ended at ``now``."""
        if lane is None:
            return
        self._meters[lane] = (self._decayed(lane, now) + seconds, now)
        if now - self._pruned_at >= FORGET_AFTER_S:
            self._prune(now)

    def held(self, lane: Lane, now: float) -> bool:
        """True when ``lane`` is over its share while another namespace is active."""
        if lane is None:
            return False  # the engine's own work is no tenant's
        return self._decayed(lane, now) > _CAP and self._activity.others_active(lane, now)

    def pause(self, lanes: Iterable[Lane], now: float) -> float:
        """How long the writer waits before planning again when ``lanes`` are the
        lanes with work: 0 when one of them is not held, else until the first of
        them falls back under its share, at most :data:`MAX_PAUSE_S`."""
        wait = MAX_PAUSE_S
        held = False
        for lane in lanes:
            if lane is None or not self.held(lane, now):
                return 0.0
            held = True
            # sum * exp(-t / window) = cap  <=>  t = window * ln(sum / cap)
            wait = min(wait, SHARE_WINDOW_S * math.log(self._decayed(lane, now) / _CAP))
        return wait if held else 0.0

    def _decayed(self, lane: str, now: float) -> float:
        meter = self._meters.get(lane)
        if meter is None:
            return 0.0
        total, at = meter
        return total * math.exp(min(0.0, at - now) / SHARE_WINDOW_S)

    def _prune(self, now: float) -> None:
        self._pruned_at = now
        stale = [lane for lane, (_, at) in self._meters.items() if now - at >= FORGET_AFTER_S]
        for lane in stale:
            del self._meters[lane]
