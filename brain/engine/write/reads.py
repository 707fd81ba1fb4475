"""What a read handler is given."""

from __future__ import annotations

from dataclasses import dataclass

import lmdb

from brain.engine.store.env import Store
from brain.engine.write.tuning import DEFAULT_RESOLUTION, Resolution

__all__ = ["ReadContext"]


@dataclass(frozen=True, slots=True)
class ReadContext:
    """The store, a read (or nested) transaction, and the record clock's now."""

    store: Store
    txn: lmdb.Transaction
    now: int
    resolution: Resolution = DEFAULT_RESOLUTION
    """How names resolve (the operator's ``[entities]`` settings)."""
    retrieval: object | None = None
    """The embedder and vector indexes RECALL uses: a
    :class:`brain.engine.index.service.Retrieval`, or None where no recall can run.
    Typed ``object`` because this layer sits below the index; the recall readers
    check its type (:func:`brain.engine.recall.search.retrieval_of`)."""
    index_wait_ms: int | None = None
    """How long a RECALL waited for the vector index before this snapshot was taken,
    for its coverage (None: it did not wait)."""
