"""The ``meta`` table: how far the store has applied the WAL, and the record clock.

Both values are written in the same LMDB transaction as the changes they
describe, so after any crash they agree with the data: recovery resumes at
``applied_lsn + 1`` and the record clock resumes above ``last_record_time``.
"""

from __future__ import annotations

from typing import Final

import lmdb

from brain.engine.store.env import Store
from brain.engine.store.tables import META
from brain.errors import StorageFault

__all__ = ["FORMAT_VERSION", "Progress", "check_format", "get_progress", "put_progress"]

FORMAT_VERSION: Final = 1
"""Version of the on-disk layout; a store of another version is refused."""

_APPLIED_LSN: Final = b"applied_lsn"
_LAST_RECORD_TIME: Final = b"last_record_time"
_FORMAT: Final = b"format_version"


class Progress:
    """``applied_lsn`` and ``last_record_time`` as stored."""

    __slots__ = ("applied_lsn", "last_record_time")

    def __init__(self, applied_lsn: int, last_record_time: int) -> None:
        self.applied_lsn = applied_lsn
        self.last_record_time = last_record_time


def _u64(value: int) -> bytes:
    return value.to_bytes(8, "big", signed=False)


def get_progress(store: Store, txn: lmdb.Transaction) -> Progress:
    """Read the stored progress (zeros for a new store)."""
    db = store.table(META)
    applied = txn.get(_APPLIED_LSN, db=db)
    clock = txn.get(_LAST_RECORD_TIME, db=db)
    return Progress(
        int.from_bytes(applied, "big") if applied else 0,
        int.from_bytes(clock, "big", signed=True) if clock else 0,
    )


def put_progress(store: Store, txn: lmdb.Transaction, lsn: int, record_time: int) -> None:
    """Record that everything up to ``lsn`` is applied, at ``record_time``."""
    db = store.table(META)
    txn.put(_APPLIED_LSN, _u64(lsn), db=db)
    txn.put(_LAST_RECORD_TIME, record_time.to_bytes(8, "big", signed=True), db=db)


def check_format(store: Store) -> None:
    """Stamp a new store with the format version; refuse another version."""
    db = store.table(META)
    with store.env.begin(write=True) as txn:
        raw = txn.get(_FORMAT, db=db)
        if raw is None:
            txn.put(_FORMAT, _u64(FORMAT_VERSION), db=db)
            return
        version = int.from_bytes(raw, "big")
    if version != FORMAT_VERSION:
        raise StorageFault(
            f"the store at {store.path} has format {version}; this build reads {FORMAT_VERSION}"
        )
