"""Statistics: the figures of one open database, taken together in one call.

:func:`take_statistics` reads the writer's and the WAL's counters, the store's
sizes and queues, and the retrieval services' totals into one frozen
:class:`Statistics`. ``/metrics`` exports it at every scrape; ``GET /v1/stats``
and ``GET /v1/wal`` show it (:func:`stats_report`, :func:`wal_report`), the
former with the records of each scope beside it (:func:`count_scopes`), which
is a scan of every record table and so is kept out of what metrics take.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import lmdb

from brain import cbor
from brain.engine.index.service import Retrieval
from brain.engine.store.env import Store
from brain.engine.store.scope import SCOPE_PREFIX_BYTES
from brain.engine.store.tables import (
    EMBED_QUEUE,
    ENTITIES,
    LEX_DOCS,
    LEX_POSTINGS,
    MEMORIES,
    PURGE_QUEUE,
    RELATIONS,
    STATEMENTS,
)
from brain.engine.wal import RecordLog
from brain.engine.write.writer import Writer

__all__ = [
    "COUNTED_TABLES",
    "Statistics",
    "WalSegment",
    "count_scopes",
    "stats_report",
    "take_statistics",
    "wal_report",
]

COUNTED_TABLES: Final = {
    MEMORIES: "memories",
    ENTITIES: "entities",
    STATEMENTS: "statements",
    RELATIONS: "relations",
}
"""The record tables ``GET /v1/stats`` counts per scope, with the name it shows."""


@dataclass(frozen=True, slots=True)
class WalSegment:
    """One WAL segment file as it stood when the figures were taken."""

    name: str
    size: int
    """Bytes in the file."""


@dataclass(frozen=True, slots=True)
class Statistics:
    """Every figure ``/metrics``, ``GET /v1/stats`` and ``GET /v1/wal`` show.

    Counters count since the database opened; the rest are levels at the time
    :func:`take_statistics` ran.
    """

    durable_lsn: int
    """Last LSN made durable in the store (by a checkpoint)."""
    indexed_lsn: int
    """Every document up to this LSN is searchable."""
    applied_lsn: int
    """Last LSN applied to the store."""
    wal_first_lsn: int
    """The lowest LSN the WAL still holds."""
    wal_last_lsn: int
    """The LSN of the last WAL record."""
    read_only: str | None
    """Why writes are refused after a storage fault, or None while they are taken."""
    wal_appends: int
    """WAL records appended."""
    wal_fsyncs: int
    """WAL fsyncs (one per group commit)."""
    wal_bytes_written: int
    """Bytes written to the WAL."""
    group_commits: int
    """Write batches committed."""
    group_commit_jobs: int
    """Writes committed in batches."""
    group_commit_last_size: int
    """Writes in the last batch."""
    group_commit_sizes: tuple[int, ...]
    """``group_commit_sizes[n]``: committed batches of n writes."""
    storage_faults: int
    """Storage faults (failed fsync or commit) that turned the database read-only."""
    writer_paced_seconds: float
    """Seconds the writer waited because every namespace with writes waiting was over
    its share while another was active (spec/05-durability.md §1)."""
    lmdb_map_bytes: int
    """LMDB map size."""
    lmdb_used_bytes: int
    """LMDB bytes in use."""
    embed_backlog: int
    """Documents waiting for the indexer (embeddings and HNSW removals)."""
    index_lag_seconds: float
    """How long the oldest entry of the indexer's queue has waited (0.0: none waits)."""
    embed_refused: int
    """Document writes refused because their namespace's embedding backlog was full."""
    purge_pending: int
    """Documents whose text left the store since the last purge."""
    lexical_documents: int
    """Documents in the lexical index of every scope."""
    lexical_postings: int
    """Postings (term, document) in the lexical index of every scope."""
    recalls: int
    """RECALL and EXPLAIN requests served."""
    recalls_abstained: int
    """Recalls that found nothing."""
    recall_candidates: tuple[tuple[str, int], ...]
    """Candidates each arm contributed to recalls, as (arm, count) sorted by arm."""
    index_embedded: int
    """Documents the indexer embedded."""
    index_vectors: int
    """Vectors in the HNSW indexes."""
    index_bytes: int
    """Bytes of the saved HNSW index files."""
    purges: int
    """Purges of forgotten content run."""
    wal_segments: tuple[WalSegment, ...]
    """The WAL's segment files, oldest first."""

    @property
    def wal_bytes(self) -> int:
        """Bytes of the WAL on disk (every segment)."""
        return sum(segment.size for segment in self.wal_segments)


def take_statistics(
    *, writer: Writer, wal: RecordLog, store: Store, retrieval: Retrieval, purges: int
) -> Statistics:
    """The figures of one database now.

    The progress marks are read laggard first (durable, indexed, applied, then
    the WAL's end), so that however the threads move meanwhile the record never
    shows one ahead of a mark that leads it. The store's figures come from one
    read transaction.
    """
    durable_lsn = writer.durable_lsn
    indexed_lsn = retrieval.indexer.indexed_lsn
    applied_lsn = writer.applied_lsn
    wal_first_lsn, wal_last_lsn = wal.first_lsn, wal.last_lsn
    map_bytes, used_bytes = store.usage()
    with store.read() as txn:
        embed_backlog = _entries(store, txn, EMBED_QUEUE)
        purge_pending = _entries(store, txn, PURGE_QUEUE)
        lexical_documents = _entries(store, txn, LEX_DOCS)
        lexical_postings = _entries(store, txn, LEX_POSTINGS)
    recall = retrieval.stats
    return Statistics(
        durable_lsn=durable_lsn,
        indexed_lsn=indexed_lsn,
        applied_lsn=applied_lsn,
        wal_first_lsn=wal_first_lsn,
        wal_last_lsn=wal_last_lsn,
        read_only=writer.read_only_reason,
        wal_appends=writer.records_appended,
        wal_fsyncs=wal.sync_count,
        wal_bytes_written=wal.bytes_written,
        group_commits=writer.batches,
        group_commit_jobs=writer.batched_jobs,
        group_commit_last_size=writer.last_batch_size,
        # One copy, so that the histogram's buckets, count and sum agree.
        group_commit_sizes=tuple(writer.batch_sizes),
        storage_faults=writer.storage_faults,
        writer_paced_seconds=writer.paced_seconds,
        lmdb_map_bytes=map_bytes,
        lmdb_used_bytes=used_bytes,
        embed_backlog=embed_backlog,
        index_lag_seconds=retrieval.indexer.lag_seconds(),
        embed_refused=retrieval.pressure.refused,
        purge_pending=purge_pending,
        lexical_documents=lexical_documents,
        lexical_postings=lexical_postings,
        recalls=recall.recalls,
        recalls_abstained=recall.abstained,
        recall_candidates=tuple(sorted(dict(recall.candidates).items())),
        index_embedded=retrieval.indexer.embedded,
        index_vectors=retrieval.indexes.total(),
        index_bytes=_file_bytes(retrieval.indexes.directory.glob("*")),
        purges=purges,
        wal_segments=tuple(WalSegment(path.name, size) for path, size in _sizes(wal.segments)),
    )


def _entries(store: Store, txn: lmdb.Transaction, table: bytes) -> int:
    """Rows in one table, read from its header without a scan."""
    return int(txn.stat(store.table(table))["entries"])


def _sizes(paths: Iterable[Path]) -> list[tuple[Path, int]]:
    """Each file with its size; a file deleted meanwhile (a WAL segment a checkpoint
    removed, an index file replaced by its next save) holds nothing and is left out."""
    sized: list[tuple[Path, int]] = []
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            sized.append((path, path.stat().st_size))
    return sized


def _file_bytes(paths: Iterable[Path]) -> int:
    return sum(size for _, size in _sizes(paths))


def count_scopes(store: Store) -> list[dict[str, object]]:
    """The records of each scope (``COUNTED_TABLES``), sorted by namespace and space."""
    scopes: dict[bytes, dict[str, object]] = {}
    with store.read() as txn:
        for table, label in COUNTED_TABLES.items():
            for key, value in txn.cursor(db=store.table(table)):
                prefix = bytes(key)[:SCOPE_PREFIX_BYTES]
                entry = scopes.get(prefix)
                if entry is None:
                    row = cbor.decode_stored(bytes(value))
                    names = row if isinstance(row, dict) else {}
                    entry = scopes[prefix] = {
                        "namespace": names.get("namespace"),
                        "space": names.get("space"),
                        **dict.fromkeys(COUNTED_TABLES.values(), 0),
                    }
                count = entry[label]
                assert isinstance(count, int)
                entry[label] = count + 1
    return sorted(scopes.values(), key=lambda s: (str(s["namespace"]), str(s["space"])))


def stats_report(figures: Statistics, scopes: list[dict[str, object]]) -> dict[str, object]:
    """What ``GET /v1/stats`` shows: records per scope, progress, sizes, backlogs."""
    return {
        "applied_lsn": figures.applied_lsn,
        "durable_lsn": figures.durable_lsn,
        "indexed_lsn": figures.indexed_lsn,
        "read_only": figures.read_only,
        "scopes": scopes,
        "sizes": {
            "lmdb_used_bytes": figures.lmdb_used_bytes,
            "lmdb_map_bytes": figures.lmdb_map_bytes,
            "wal_bytes": figures.wal_bytes,
            "index_bytes": figures.index_bytes,
        },
        "embed_backlog": figures.embed_backlog,
        "index_lag_seconds": round(figures.index_lag_seconds, 3),
        "purge_pending": figures.purge_pending,
    }


def wal_report(figures: Statistics) -> dict[str, object]:
    """What ``GET /v1/wal`` shows: the log's extent, progress and segments."""
    return {
        "first_lsn": figures.wal_first_lsn,
        "last_lsn": figures.wal_last_lsn,
        "applied_lsn": figures.applied_lsn,
        "durable_lsn": figures.durable_lsn,
        "segments": [{"name": s.name, "bytes": s.size} for s in figures.wal_segments],
    }
