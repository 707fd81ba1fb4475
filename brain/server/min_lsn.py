"""Reads that name a minimum LSN: answered only once this node applied the log up to it.

A read request's ``min_lsn`` (spec/01-wire.md §4) gives read-your-writes on a
follower: a client that wrote at LSN *n* (the write's answer carries it) reads
with ``min_lsn`` *n* on any node of the shard and sees its write. The rule
(spec/05-durability.md §14.4):

- ``min_lsn`` at or below the node's applied LSN: the read runs at once.
- On a node that plans the shard's writes (a single node, or the planner once it
  took over), applying is answering: every LSN the log holds is applied, so a
  ``min_lsn`` beyond it names no write yet made and no wait can meet it. It is
  refused at once with ``INVALID_ARGUMENT`` (field ``min_lsn``).
- On a follower (or a node that stopped planning), the read waits for the
  follower to apply it, up to :data:`MIN_LSN_WAIT_S`, then is refused with
  ``UNAVAILABLE`` saying how far behind the node is and naming the planner.

The wait holds no thread: it is a future on the event loop, resolved by the
database's applied listener, so a client asking an LSN far ahead costs the
server one small entry for at most the bound, and at most
:data:`MAX_LSN_WAITS_PER_KEY` of them per key.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import threading
from collections import Counter
from typing import TYPE_CHECKING, Final

from brain.errors import InvalidArgument, Overloaded, Unavailable
from brain.wire.messages.common import MIN_LSN_WAIT_S, ReadRequest
from brain.wire.schema import Message
from brain.wire.session import Principal

if TYPE_CHECKING:
    from brain.engine.database import Database

__all__ = [
    "MAX_LSN_WAITS_PER_KEY",
    "MIN_LSN_RETRY_MS",
    "MIN_LSN_WAIT_S",
    "LsnWaits",
    "min_lsn_of",
]

MIN_LSN_RETRY_MS: Final = 1000
"""Suggested back-off for a read refused because its ``min_lsn`` was not reached:
a follower that missed the bound is in a failed round or an election, which
lasts about that long."""

MAX_LSN_WAITS_PER_KEY: Final = 256
"""Reads one key may hold waiting for a ``min_lsn`` at once, over all its
connections: each is a future and a heap entry for up to :data:`MIN_LSN_WAIT_S`,
and no key can make the server hold thousands (beyond it: ``OVERLOADED``)."""


def min_lsn_of(request: Message) -> int | None:
    """The ``min_lsn`` a read request names; None for any other request or none given."""
    return request.min_lsn if isinstance(request, ReadRequest) else None


class LsnWaits:
    """The reads of one server waiting for their ``min_lsn``, and the listener that
    wakes them after each batch the database applies."""

    def __init__(self, database: Database) -> None:
        self._db = database
        # Loop thread only: (lsn, order, future) by LSN, and the waits per key.
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._per_key: Counter[bytes] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        # Read by the writer thread, written by the loop thread: the lowest LSN
        # waited for (0: none), so a batch nobody waits for costs one comparison.
        self._lowest = 0
        self._lock = threading.Lock()
        self._scheduled = False
        self._stop_listening = database.on_applied(self._applied)

    def met(self, request: Message) -> bool:
        """True when ``request`` may run now: it names no ``min_lsn`` or one already
        applied. Raises the immediate refusal (a planner asked beyond its log)."""
        lsn = min_lsn_of(request)
        if lsn is None or lsn <= self._db.applied_lsn:
            return True
        self._refuse_if_planning(lsn)
        return False

    async def reach(self, principal: Principal, request: Message) -> None:
        """Return once this node applied the request's ``min_lsn`` (at once without
        one); raise ``INVALID_ARGUMENT``, ``UNAVAILABLE`` or ``OVERLOADED`` per the
        module's rule."""
        if self.met(request):
            return
        lsn = min_lsn_of(request)
        assert lsn is not None
        key = principal.key_id
        if self._per_key[key] >= MAX_LSN_WAITS_PER_KEY:
            raise Overloaded(
                f"this key has {MAX_LSN_WAITS_PER_KEY} reads waiting for their min_lsn, "
                "the most one key may",
                retry_after_ms=MIN_LSN_RETRY_MS,
            )
        loop = asyncio.get_running_loop()
        self._loop = loop
        future: asyncio.Future[None] = loop.create_future()
        self._per_key[key] += 1
        heapq.heappush(self._heap, (lsn, next(self._order), future))
        self._lowest = self._heap[0][0]
        try:
            # The batch may have been applied between the look above and the push.
            if self._db.applied_lsn < lsn:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(future), MIN_LSN_WAIT_S)
        finally:
            self._drop(future, key)
        applied = self._db.applied_lsn
        if applied < lsn:
            planner = self._db.planner
            raise Unavailable(
                f"this node has applied the log up to LSN {applied}, {lsn - applied} behind "
                f"the min_lsn {lsn} the read asks, and did not catch up within "
                f"{MIN_LSN_WAIT_S:g} s" + (f"; the planner is {planner}" if planner else ""),
                retry_after_ms=MIN_LSN_RETRY_MS,
            )

    def waiting(self) -> int:
        """How many reads wait for their ``min_lsn`` now."""
        return len(self._heap)

    def close(self) -> None:
        """Stop listening to the database."""
        self._stop_listening()

    def _refuse_if_planning(self, lsn: int) -> None:
        db = self._db
        plans = db.lease is None or (
            db.writer.standby_reason is None and db.read_only_reason is None
        )
        if plans:
            applied = db.applied_lsn
            raise InvalidArgument(
                f"min_lsn {lsn} is beyond LSN {applied}, the last the log holds; this "
                "node plans the shard's writes, so no write has that LSN yet",
                field="min_lsn",
            )

    def _drop(self, future: asyncio.Future[None], key: bytes) -> None:
        future.cancel()
        self._heap = [entry for entry in self._heap if entry[2] is not future]
        heapq.heapify(self._heap)
        self._lowest = self._heap[0][0] if self._heap else 0
        self._per_key[key] -= 1
        if self._per_key[key] <= 0:
            del self._per_key[key]

    def _wake(self) -> None:
        with self._lock:
            self._scheduled = False
        applied = self._db.applied_lsn
        while self._heap and self._heap[0][0] <= applied:
            _, _, future = heapq.heappop(self._heap)
            if not future.done():
                future.set_result(None)
        self._lowest = self._heap[0][0] if self._heap else 0

    # --- the writer thread ------------------------------------------------------------

    def _applied(self, plans: object) -> None:
        """The database's listener: queue one wake-up when a waited LSN is applied."""
        lowest, loop = self._lowest, self._loop
        if not lowest or loop is None or self._db.applied_lsn < lowest:
            return
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
        try:
            loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # the loop closed: nobody waits any more
            with self._lock:
                self._scheduled = False
