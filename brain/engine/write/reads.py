"""What a read handler is given."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import lmdb

from brain.engine.store.env import Store
from brain.engine.write.tuning import DEFAULT_RESOLUTION, Resolution

if TYPE_CHECKING:
    from brain.engine.index.service import Retrieval

__all__ = ["ReadContext"]


@dataclass(frozen=True, slots=True)
class ReadContext:
    """The store, a read (or nested) transaction, and the record clock's now."""

    store: Store
    txn: lmdb.Transaction
    now: int
    resolution: Resolution = DEFAULT_RESOLUTION
    """How names resolve (the operator's ``[entities]`` settings)."""
    retrieval: Retrieval | None = None
    """The embedder and vector indexes RECALL uses (None where no recall can run)."""
