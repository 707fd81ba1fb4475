"""What a read handler is given."""

from __future__ import annotations

from dataclasses import dataclass

import lmdb

from brain.engine.store.env import Store
from brain.engine.tuning import DEFAULT_RESOLUTION, Resolution

__all__ = ["ReadContext"]


@dataclass(frozen=True, slots=True)
class ReadContext:
    """The store, a read (or nested) transaction, and the record clock's now."""

    store: Store
    txn: lmdb.Transaction
    now: int
    resolution: Resolution = DEFAULT_RESOLUTION
    """How names resolve (the operator's ``[entities]`` settings)."""
