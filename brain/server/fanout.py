"""Who to wake after a commit: the open subscriptions, by the scope they follow.

The database calls one listener per committed batch, on its writer thread
(:meth:`~brain.engine.database.Database.on_applied`). :class:`ChangeFanout` is
that listener for every subscription of the server: it reads the scopes the
batch wrote off its change-log entries (every stored key begins with its
scope's prefix, spec/05-durability.md §10), and only when some subscription
follows one of them does it hand the event loop one callback, which wakes
those subscriptions and no other. A commit in a scope nobody follows costs the
loop nothing; however many commits come while a callback is pending, there is
only the one (each thread-safe call writes a byte to the loop's self-pipe, and
a flood of them would fill it).

It also keeps the count of subscriptions per key (spec/01-wire.md §6).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from typing import Final, cast

from brain.engine.store.scope import SCOPE_PREFIX_BYTES
from brain.engine.store.tables import CHANGE_LOG
from brain.engine.write.plan import Plan
from brain.errors import Overloaded

__all__ = ["MAX_SUBSCRIPTIONS_PER_KEY", "SUBSCRIPTIONS_RETRY_MS", "ChangeFanout", "Watch"]

MAX_SUBSCRIPTIONS_PER_KEY: Final = 256
"""Subscriptions one key may hold open at once, over all its connections. Each
costs a task and a wake-up entry for as long as it is open, and an idle one never
ends on its own; one per space for a client following many spaces fits well
within this, and no key can make the server hold thousands."""

SUBSCRIPTIONS_RETRY_MS: Final = 1000
"""Suggested back-off for a SUBSCRIBE refused at :data:`MAX_SUBSCRIPTIONS_PER_KEY`."""


class Watch:
    """One subscription's place in the fan-out: set when its scope was written."""

    __slots__ = ("event", "key_id", "scope")

    def __init__(self, scope: bytes, key_id: bytes) -> None:
        self.scope = scope
        self.key_id = key_id
        self.event = asyncio.Event()


class ChangeFanout:
    """The subscriptions of one server, and the listener that wakes them."""

    def __init__(self) -> None:
        # Loop thread only: the watches of each followed scope prefix.
        self._watches: dict[bytes, set[Watch]] = {}
        self._per_key: Counter[bytes] = Counter()
        # Read by the writer thread, replaced whole by the loop thread: a snapshot
        # needs no lock to read.
        self._followed: frozenset[bytes] = frozenset()
        self._loop: asyncio.AbstractEventLoop | None = None
        # Guards the scopes written since the last callback, and whether one is queued.
        self._lock = threading.Lock()
        self._pending: set[bytes] = set()
        self._scheduled = False
        self.callbacks = 0
        """Callbacks handed to the event loop so far (each wakes every watch of the
        scopes written since the one before)."""

    # --- the loop thread --------------------------------------------------------------

    def add(self, scope: bytes, key_id: bytes) -> Watch:
        """Follow ``scope`` (a scope prefix) for key ``key_id``; OVERLOADED when that
        key already holds :data:`MAX_SUBSCRIPTIONS_PER_KEY` subscriptions."""
        if self._per_key[key_id] >= MAX_SUBSCRIPTIONS_PER_KEY:
            raise Overloaded(
                f"this key has {MAX_SUBSCRIPTIONS_PER_KEY} subscriptions open, the most one "
                "key may; end one first",
                retry_after_ms=SUBSCRIPTIONS_RETRY_MS,
            )
        self._loop = asyncio.get_running_loop()
        watch = Watch(scope, key_id)
        self._per_key[key_id] += 1
        self._watches.setdefault(scope, set()).add(watch)
        self._followed = frozenset(self._watches)
        return watch

    def remove(self, watch: Watch) -> None:
        """Stop waking ``watch``."""
        watches = self._watches.get(watch.scope)
        if watches is None or watch not in watches:
            return
        watches.discard(watch)
        if not watches:
            del self._watches[watch.scope]
            self._followed = frozenset(self._watches)
        self._per_key[watch.key_id] -= 1
        if self._per_key[watch.key_id] <= 0:
            del self._per_key[watch.key_id]

    def subscriptions(self, key_id: bytes) -> int:
        """How many subscriptions key ``key_id`` holds open."""
        return self._per_key[key_id]

    def _wake(self) -> None:
        with self._lock:
            written, self._pending = self._pending, set()
            self._scheduled = False
        for scope in written:
            for watch in self._watches.get(scope, ()):
                watch.event.set()

    # --- the writer thread ------------------------------------------------------------

    def applied(self, plans: object) -> None:
        """The database's listener: note the followed scopes the batch ``plans``
        (``[(lsn, Plan)]``) wrote, and queue one wake-up unless one is queued."""
        followed = self._followed
        loop = self._loop
        if not followed or loop is None:
            return
        written = {
            change.key[:SCOPE_PREFIX_BYTES]
            for _, plan in cast(list[tuple[int, Plan]], plans)
            for change in plan.changes
            if change.table == CHANGE_LOG
        }
        hit = written & followed
        if not hit:
            return
        with self._lock:
            self._pending |= hit
            if self._scheduled:
                return
            self._scheduled = True
            self.callbacks += 1
        # Closed only after the server stopped serving: nobody is left to wake.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._wake)
