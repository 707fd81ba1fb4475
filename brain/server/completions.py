"""Writes' answers handed from the writer thread to the event loop, a batch at a time.

``asyncio.wrap_future`` wakes the loop once per future: each completion calls
``call_soon_threadsafe``, which writes a byte to the loop's self-pipe. A group
commit answers all its writes in a row, so with 16 writes in flight it paid 16
such writes on the writer thread, the single thread every write waits for (8.5%
of its time under the ingest benchmark). :class:`Completions` queues the answers
instead, and wakes the loop for the first of them only: the loop then takes what
has arrived at each of its turns until a turn finds none.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from concurrent.futures import Future

__all__ = ["Completions"]


class Completions:
    """Delivers concurrent futures' outcomes to asyncio futures of one loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        """Deliver on ``loop`` (the loop that awaits the answers)."""
        self.loop = loop
        self._lock = threading.Lock()
        self._ready: deque[tuple[Future[bytes], asyncio.Future[bytes]]] = deque()
        self._scheduled = False

    def wait(self, future: Future[bytes]) -> asyncio.Future[bytes]:
        """An asyncio future of this loop with ``future``'s outcome. Call it on the loop."""
        waiter: asyncio.Future[bytes] = self.loop.create_future()
        future.add_done_callback(lambda done: self._arrived(done, waiter))
        # A caller that gives up (its connection closed) cancels the write too, as
        # asyncio.wrap_future does: the writer then drops it unless it began planning it.
        waiter.add_done_callback(lambda given_up: future.cancel() if given_up.cancelled() else None)
        return waiter

    def _arrived(self, done: Future[bytes], waiter: asyncio.Future[bytes]) -> None:
        # On whichever thread finished the future (the writer), or on the loop when
        # it was done already.
        with self._lock:
            self._ready.append((done, waiter))
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the loop is closed: nobody awaits the answers any more
            with self._lock:
                self._ready.clear()
                self._scheduled = False

    def _deliver(self) -> None:
        with self._lock:
            ready = list(self._ready)
            self._ready.clear()
            if not ready:
                self._scheduled = False
                return
        # Stay scheduled, and look again at the loop's next turn, not at the next
        # answer's: the writer is usually still answering the rest of its batch (its
        # first wake-up let this thread run), and those answers then need no wake-up.
        self.loop.call_soon(self._deliver)
        for done, waiter in ready:
            if waiter.cancelled():
                continue
            error = done.exception()
            if error is not None:
                waiter.set_exception(error)
            else:
                waiter.set_result(done.result())
