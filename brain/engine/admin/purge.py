"""Purge: forgotten content physically leaves every file of the data directory.

A hard forget or a retraction removes a text from the records at once, but its
bytes stay in freed LMDB pages, in WAL segments and in the HNSW indexes until
a purge (``spec/06-operations.md`` §7). A purge runs on the writer thread
between batches; the database also starts one on its own when the writer is
idle and :data:`PURGE_INTERVAL_S` has passed since the last. It also scrubs
the bundles in the database's ``snapshots/`` directory
(:func:`~brain.engine.admin.snapshot.scrub_bundles`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from brain.engine.admin.snapshot import scrub_bundles
from brain.engine.index.lexical import orphan_changes
from brain.engine.index.vectors import VectorIndexes
from brain.engine.store.env import Store
from brain.engine.store.meta import put_compaction_due
from brain.engine.store.tables import PURGE_QUEUE
from brain.engine.write.plan import apply_changes
from brain.engine.write.writer import Writer

__all__ = ["PURGE_INTERVAL_S", "Purger"]

log = logging.getLogger("brain.engine")

PURGE_INTERVAL_S: Final = 300.0
"""Least time between two purges the database starts on its own after a hard
forget or a retraction: a purge rewrites the whole data file, so a burst of
forgets is purged together, within five minutes."""


class Purger:
    """The purges of one open database: on demand, and on its own schedule."""

    def __init__(
        self, store: Store, writer: Writer, indexes: VectorIndexes, snapshots: Path | None = None
    ) -> None:
        self.compact_log: Callable[[], None] | None = None
        """Set by a node of a replicated log: run after a purge that removed forgotten
        text, on the writer thread, to compact the shard's stream when this node plans
        (spec/05-durability.md §14.10). The purge first marks the store
        (:func:`~brain.engine.store.meta.put_compaction_due`) in the transaction that
        ends it, so a crash before the compaction leaves it due."""
        self._store = store
        self._writer = writer
        self._indexes = indexes
        self._snapshots = snapshots
        """The directory of the database's own snapshot bundles (None: it has none)."""
        self._last = time.monotonic()
        self.count = 0
        """Purges run since the database opened (written on the writer thread only)."""

    def pending(self) -> int:
        """Documents whose text left the store since the last purge."""
        with self._store.read() as txn:
            return int(txn.stat(self._store.table(PURGE_QUEUE))["entries"])

    def purge(self) -> int:
        """Purge now, between two batches of the writer; return how many documents'
        texts were pending (see :meth:`_purge_now`)."""
        result = self._writer.between_batches(self._purge_now).result()
        assert isinstance(result, int)
        return result

    def on_idle(self) -> None:
        """The periodic purge (the writer's idle hook: its thread, between batches)."""
        # Read at each call, not bound at import: tests shorten the interval.
        if time.monotonic() - self._last < PURGE_INTERVAL_S:
            return
        if self.pending():
            self._purge_now()

    def _purge_now(self) -> int:
        """On the writer thread, between batches: every record logged so far leaves
        the WAL (a new segment, then a checkpoint); version rows of terms no document
        holds any more (left by earlier builds) are deleted; the LMDB file is
        rewritten with its live pages only; the HNSW indexes holding deleted vectors
        are rebuilt and saved; and every bundle in the snapshot directory whose WAL
        holds records its LMDB copy already has is rewritten without them. A
        snapshot taken before a forget stays a backup of what was then live."""
        pending = self.pending()
        self._writer.force_checkpoint()
        with self._store.env.begin(write=True) as txn:
            # Bookkeeping and derived rows, not data: nothing to log. Every later
            # write is planned on this state, and the compaction below makes it
            # durable; a crash before that only purges again.
            txn.drop(self._store.table(PURGE_QUEUE), delete=False)
            apply_changes(self._store, txn, orphan_changes(self._store, txn))
            if pending and self.compact_log is not None:
                put_compaction_due(self._store, txn)
        self._store.compact()
        self._indexes.rebuild_deleted(self._store)
        scrubbed = scrub_bundles(self._snapshots) if self._snapshots is not None else 0
        self._last = time.monotonic()
        self.count += 1
        log.info(
            "purged forgotten content of %d documents (%d snapshots scrubbed)", pending, scrubbed
        )
        if self.compact_log is not None:
            self.compact_log()
        return pending
