"""What the unit tests that write records share: their namespace, fresh request ids,
and a way to make the writes a test queues one batch."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

from tests.request_ids import fresh_request_id as rid

if TYPE_CHECKING:
    from brain.engine.database import Database

__all__ = ["NS", "WRITER_HOLD_S", "rid", "writer_held"]

NS: Final = "default"
"""The namespace the engine tests write in."""

WRITER_HOLD_S: Final = 60.0
"""Longest the writer is held while a test queues its writes: far past any test's
queueing on a loaded machine, so only a stuck writer fails it."""


@contextmanager
def writer_held(db: Database) -> Iterator[None]:
    """Hold ``db``'s writer between two batches while the body queues work, so all of
    it waits together and the writer draws it when the body ends (its next batch)."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        held.set()
        release.wait(WRITER_HOLD_S)

    holding = db.writer.between_batches(hold)
    assert held.wait(WRITER_HOLD_S)
    try:
        yield
    finally:
        release.set()
        holding.result()
