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

__all__ = [
    "FORMAT_VERSION",
    "LOCAL_LOG",
    "OLDEST_FORMAT",
    "Progress",
    "check_format",
    "check_log",
    "clear_compaction_due",
    "compaction_due",
    "get_progress",
    "put_compaction_due",
    "put_progress",
    "stamp_format",
    "stored_format",
]

FORMAT_VERSION: Final = 4
"""Version of the on-disk layout this build writes. Version 2 added
``statement_by_subject_time``; version 3 keys ``memory_by_text`` and ``memory_by_sha``
on the normalised text's SHA-256 (:mod:`brain.engine.store.text_keys`); version 4 added
the entity history (``entity_versions``, ``entity_name_events``,
``entity_absorbed_events``)."""

OLDEST_FORMAT: Final = 1
"""The oldest layout this build opens: a store of a version from here to
:data:`FORMAT_VERSION` is upgraded when opened (:mod:`brain.engine.store.upgrade`), any
other version is refused."""

_APPLIED_LSN: Final = b"applied_lsn"
_LAST_RECORD_TIME: Final = b"last_record_time"
_FORMAT: Final = b"format_version"
_LOG: Final = b"log"
_COMPACTION_DUE: Final = b"log_compaction_due"

LOCAL_LOG: Final = "wal"
"""The log name of a store applied from its own directory's write-ahead log; a store
of a cluster names its shard's stream (``BRAIN_LOG_<shard>``)."""


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


def stored_format(store: Store, txn: lmdb.Transaction) -> int | None:
    """The layout version the store is stamped with (None: a new store)."""
    raw = txn.get(_FORMAT, db=store.table(META))
    return None if raw is None else int.from_bytes(raw, "big")


def stamp_format(store: Store, txn: lmdb.Transaction, version: int) -> None:
    """Stamp the store with layout ``version`` (in the transaction that makes it so)."""
    txn.put(_FORMAT, _u64(version), db=store.table(META))


def check_format(store: Store) -> None:
    """Stamp a new store with the format version; refuse a version this build cannot
    open. A store of an older version this build upgrades is left as it is: its WAL
    is replayed first, by the rules it was written under, and then it is upgraded."""
    with store.env.begin(write=True) as txn:
        version = stored_format(store, txn)
        if version is None:
            stamp_format(store, txn, FORMAT_VERSION)
            return
    if not OLDEST_FORMAT <= version <= FORMAT_VERSION:
        raise StorageFault(
            f"the store at {store.path} has format {version}; this build reads "
            f"{OLDEST_FORMAT} to {FORMAT_VERSION}"
        )


def check_log(store: Store, log_name: str) -> None:
    """Hold the store to the log it is applied from: the first open names it in
    ``meta``, and a store that applied records of one log is refused on another (its
    LSNs would be read as the other's, and the other's records applied on top of
    data they never saw: a snapshot of shard s0 restored on a node of shard s1, say).
    A store that names no log (an empty one, or one of a build that did not name its
    log) takes the log it is opened on."""
    db = store.table(META)
    with store.env.begin(write=True) as txn:
        raw = txn.get(_LOG, db=db)
        named = None if raw is None else bytes(raw).decode("utf-8", "replace")
        if named == log_name:
            return
        applied = get_progress(store, txn).applied_lsn
        if named is not None and applied:
            raise StorageFault(
                f"this store applied {applied} records of the log {named}, not of "
                f"{log_name}: it cannot follow another log (start it on its own log"
                + (
                    ", without --cluster"
                    if named == LOCAL_LOG
                    else f", on the shard of stream {named}"
                )
                + ", or restore a snapshot of this log's shard into a fresh directory)"
            )
        txn.put(_LOG, log_name.encode(), db=db)


def put_compaction_due(store: Store, txn: lmdb.Transaction) -> None:
    """Mark that the replicated log may still hold text this store forgot: a purge of
    a cluster node sets it in the transaction that ends the purge, and the node
    compacts the log the next time it plans (spec/05-durability.md §14.10)."""
    txn.put(_COMPACTION_DUE, b"1", db=store.table(META))


def compaction_due(store: Store, txn: lmdb.Transaction) -> bool:
    """Whether :func:`put_compaction_due` marked the store and no compaction since
    cleared it."""
    return txn.get(_COMPACTION_DUE, db=store.table(META)) is not None


def clear_compaction_due(store: Store, txn: lmdb.Transaction) -> None:
    """Clear the mark: the log was compacted (or the store started again from its base)."""
    txn.delete(_COMPACTION_DUE, db=store.table(META))
