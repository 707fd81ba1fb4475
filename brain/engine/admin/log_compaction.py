"""Compacting a shard's replicated log, and starting a store again from its base
(spec/05-durability.md §14.10).

A hard forget's purge removes the text from one node's files; the shard's stream
still holds every record that carried it. The planner compacts the stream after
its purge: the store's rows as they are now become the **base**, plans of puts
(:func:`base_plans`, each about one record of the log), published into a new
generation of the stream that ends at the same LSN (or later, when the base takes
more records than the log had, spec/05-durability.md §14.12), and the old generation is
deleted with every record in it (:func:`compact_log`). A node that applied less of
the old generation than the LSN it was compacted to starts its store again from the
base (:func:`reset_to_base`): in one transaction every row goes and the base's rows
come in, so a reader sees the store before or after, never between.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Final

import lmdb

from brain.engine.store.env import Store
from brain.engine.store.meta import (
    FORMAT_VERSION,
    clear_compaction_due,
    get_progress,
    put_progress,
    stamp_format,
)
from brain.engine.store.tables import META, TABLES
from brain.engine.wal.parts import Whole, record_count
from brain.engine.write.frozen import FROZEN_PREFIX
from brain.engine.write.plan import (
    PLAN_RECORD_KIND,
    Plan,
    Put,
    apply_changes,
    decode_plan,
    encode_plan,
)
from brain.errors import StorageFault

if TYPE_CHECKING:  # the NATS client loads only for a database on the replicated log
    from brain.engine.replication.jetstream_log import JetStreamLog

__all__ = [
    "BASE_RECORD_SHARE",
    "TRIM_STORE_FACTOR",
    "base_plans",
    "base_record_bytes",
    "compact_log",
    "reset_to_base",
    "trim_due",
]

log = logging.getLogger("brain.engine")

BASE_RECORD_SHARE: Final = 8
"""A base record holds rows up to all but one ``BASE_RECORD_SHARE``-th of the log's
record limit: the rest is room for the plan's own encoding beyond the estimate, so
that a base record is one record of the log (a larger row is logged in parts). Full
records keep the base near the log's own length in records."""

TRIM_STORE_FACTOR: Final = 2
"""A stream is trimmed once it holds this many times the store's bytes (and at least
the node's ``trim_after_bytes``): a compaction copies about the store, so trimming
costs at most about half a byte copied per byte appended, and the base it leaves
(no larger than the store) never calls for the next compaction by itself."""

_ROW_OVERHEAD: Final = 16
"""Bytes a row adds to a plan beyond its table name, key and value (CBOR heads)."""


def _logged_rows(store: Store, txn: lmdb.Transaction) -> Iterator[Put]:
    """Every row the log put there, as a put: every table's rows but ``meta``'s own
    (progress, format, the log's name, marks), of which only the freezes are logged."""
    for table in TABLES:
        for key, value in txn.cursor(db=store.table(table)):
            if table == META and not bytes(key).startswith(FROZEN_PREFIX):
                continue
            yield Put(table, bytes(key), bytes(value))


def base_plans(store: Store, txn: lmdb.Transaction, limit: int) -> Iterator[bytes]:
    """The base of the store as ``txn`` sees it, for a log whose records hold at most
    ``limit`` bytes: payloads of plans that put every row the log put, in table and
    key order, each of at most :func:`base_record_bytes` of rows (one larger row
    alone). Applied in order to an empty store they give these rows, byte for byte."""
    most = base_record_bytes(limit)
    batch: list[Put] = []
    size = 0
    for put in _logged_rows(store, txn):
        cost = len(put.table) + len(put.key) + len(put.value) + _ROW_OVERHEAD
        if batch and size + cost > most:
            yield _payload(batch)
            batch, size = [], 0
        batch.append(put)
        size += cost
    if batch:
        yield _payload(batch)


def base_record_bytes(limit: int) -> int:
    """The most bytes of rows one base record holds in a log of ``limit``-byte records."""
    return limit - limit // BASE_RECORD_SHARE


def _payload(batch: list[Put]) -> bytes:
    return encode_plan(Plan(tuple(batch), ()))


def trim_due(
    stream_bytes: int, store_bytes: int, trim_after_bytes: int, appended_after_base: int
) -> bool:
    """Whether a stream of ``stream_bytes`` should be compacted though nothing was
    forgotten (spec/05-durability.md §14.10, "Trimming"): it holds at least
    ``trim_after_bytes`` (0: never trim) and :data:`TRIM_STORE_FACTOR` times the
    store's ``store_bytes``, and records were appended after its base (so that two
    compactions always have writes between them)."""
    return (
        trim_after_bytes > 0
        and appended_after_base > 0
        and stream_bytes >= trim_after_bytes
        and stream_bytes >= TRIM_STORE_FACTOR * store_bytes
    )


def compact_log(wal: JetStreamLog, store: Store, record_time: int) -> int:
    """Compact ``wal`` with the store's base (on the writer thread, between batches,
    the store having applied every record of the log); clear the store's compaction
    mark and put its progress at the compaction's ``compacted_to``. Returns the number
    of base records (a plan larger than one record of the log counts as its parts,
    spec/05-durability.md §14.12)."""
    with store.read() as txn:
        limit = wal.max_record_payload
        count = sum(record_count(len(p), limit) for p in base_plans(store, txn, limit))

        def base() -> Iterator[bytes]:
            return base_plans(store, txn, limit)

        wal.compact(base, count, kind=PLAN_RECORD_KIND, record_time=record_time)
    made = wal.compaction
    assert made is not None
    with store.env.begin(write=True) as txn:
        clear_compaction_due(store, txn)
        # A base longer than the log ends past its last LSN: the store, whose rows it
        # is, stands at its end too (its answer is the same at every LSN in between).
        put_progress(store, txn, made.compacted_to, record_time)
    return count


def reset_to_base(
    store: Store, base: Callable[[], Iterable[Whole]], compacted_to: int, grow_attempts: int
) -> int:
    """Start ``store`` again from a compacted log's base: in one transaction, delete
    every row the log put (every table but ``meta``'s own rows), apply the base
    records ``base()`` gives (LSNs up to ``compacted_to``), and record the store as
    applied up to ``compacted_to``; then compact the data file, so that no dropped
    row's bytes stay in its free pages (forgotten text among them; also at applied
    LSN 0, for a store returned to its last checkpoint keeps the pages of what it
    applied after it). Returns the record time of the base."""
    with store.read() as txn:
        applied = get_progress(store, txn).applied_lsn
    log.info(
        "the log was compacted to LSN %d, past LSN %d applied here: starting the store "
        "again from its base",
        compacted_to,
        applied,
    )
    record_time = _replace_rows(store, base, compacted_to, grow_attempts)
    store.compact()
    return record_time


def _replace_rows(
    store: Store, base: Callable[[], Iterable[Whole]], compacted_to: int, grow_attempts: int
) -> int:
    """The transaction of :func:`reset_to_base`, tried again on a larger map."""
    for _ in range(grow_attempts):
        try:
            with store.env.begin(write=True) as txn:
                for table in TABLES:
                    if table != META:
                        txn.drop(store.table(table), delete=False)
                meta = store.table(META)
                frozen = [
                    bytes(k) for k, _ in txn.cursor(db=meta) if bytes(k).startswith(FROZEN_PREFIX)
                ]
                for key in frozen:
                    txn.delete(key, db=meta)
                last, record_time = 0, 0
                for record in base():
                    if record.kind != PLAN_RECORD_KIND:
                        raise StorageFault(f"base record {record.lsn} has kind {record.kind}")
                    apply_changes(store, txn, decode_plan(record.payload).changes)
                    last, record_time = record.last, max(record_time, record.record_time)
                if last and last != compacted_to:
                    raise StorageFault(f"the log's base ends at LSN {last}, not at {compacted_to}")
                put_progress(store, txn, compacted_to, record_time)
                # The base's rows are of the planner's layout, this build's.
                stamp_format(store, txn, FORMAT_VERSION)
                clear_compaction_due(store, txn)
        except lmdb.MapFullError:
            store.grow()
            continue
        return record_time
    raise StorageFault("starting the store again from the log's base could not grow its map")
