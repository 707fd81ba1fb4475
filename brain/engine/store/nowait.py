"""A read transaction that never waits: for a caller that must not block.

:meth:`Store.read <brain.engine.store.env.Store.read>` waits while the store is
held exclusively, that is while the writer thread grows the map or rewrites
the data file (a compaction, which can take as long as copying every live
row). A thread that serves others in turns, the server's event loop, must
never wait for that: :func:`read_nowait` gives it the transaction when the
store can be read at once and None when it cannot, so the caller can hand the
read to a thread that may wait.

The entry into the store's reader/writer gate is the same as ``Store.read``'s,
only tried instead of waited for: the gate's lock is taken without blocking,
and the reader is counted only when no exclusive holder is in or waiting.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import lmdb

from brain.engine.store.env import Store

__all__ = ["read_nowait"]


@contextmanager
def read_nowait(store: Store) -> Iterator[lmdb.Transaction | None]:
    """A read-only snapshot of ``store``, or None when reading it now would mean
    waiting for a map resize or a compaction (or for the gate's lock)."""
    gate = store._gate
    # The gate's lock is only ever held for a few statements, but a thread that must
    # not block does not wait even for that.
    if not gate._cond.acquire(blocking=False):
        yield None
        return
    try:
        if gate._resizing:
            entered = False
        else:
            gate._readers += 1
            entered = True
    finally:
        gate._cond.release()
    if not entered:
        yield None
        return
    try:
        with store.env.begin(buffers=False) as txn:
            yield txn
    finally:
        with gate._cond:
            gate._readers -= 1
            gate._cond.notify_all()
