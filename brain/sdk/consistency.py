"""Read-your-writes for a facade: the ``min_lsn`` its reads carry.

A read may name ``min_lsn`` (spec/01-wire.md §4): the node answers only once it
has applied the log up to that LSN, so a read on a follower sees a write whose
answer carried that LSN. :class:`ReadYourWrites` is what a facade made with
``read_your_writes=True`` keeps: the highest ``lsn`` any answer gave it, sent as
the ``min_lsn`` of every later read that names none itself. A facade and the
ones :meth:`~brain.sdk.sync.Brain.joined` makes from it share one.
"""

from __future__ import annotations

import dataclasses
import threading

from brain.wire.messages.common import ReadRequest
from brain.wire.schema import Message

__all__ = ["ReadYourWrites"]


class ReadYourWrites:
    """The highest LSN a facade's answers carried, and whether its reads send it."""

    def __init__(self, enabled: bool) -> None:
        """``enabled``: reads that name no ``min_lsn`` carry :attr:`last_lsn`."""
        self.enabled = enabled
        self.last_lsn = 0
        """The highest ``lsn`` an answer carried so far (0: none yet)."""
        self._lock = threading.Lock()

    def saw(self, answer: Message) -> None:
        """Note the ``lsn`` of ``answer`` (a write's, a commit's), if it has one."""
        lsn = getattr(answer, "lsn", None)
        if isinstance(lsn, int) and not isinstance(lsn, bool) and lsn > self.last_lsn:
            with self._lock:
                self.last_lsn = max(self.last_lsn, lsn)

    def apply(self, request: Message, asked: int | None) -> Message:
        """``request`` as sent: a read carries ``asked`` (the ``min_lsn`` its call
        named), else, when enabled, the last LSN seen, never less than a ``min_lsn``
        it already carries; any other request goes unchanged."""
        if not isinstance(request, ReadRequest):
            return request
        lsn = asked if asked is not None else (self.last_lsn if self.enabled else 0)
        if not lsn or (request.min_lsn is not None and request.min_lsn >= lsn):
            return request
        return dataclasses.replace(request, min_lsn=lsn)
