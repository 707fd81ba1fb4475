"""Database.statistics(): each figure moves with its own source, and the reports
(``GET /v1/stats``, ``GET /v1/wal``, ``/metrics``) show that one record."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import lmdb
import pytest

from brain import cbor
from brain.engine.admin.statistics import Statistics
from brain.engine.database import Database
from brain.engine.index.tokens import tokenize
from brain.errors import Unavailable
from brain.server.metrics import ServerMetrics
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget
from brain.wire.messages.recall_ops import Recall, RecallOk
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid, writer_held

TEXTS: Final = (
    "Alice moved to Globex in February",
    "Globex hired Alice as an engineer",
    "Bob stayed at Initech",
    "Carol founded a bakery in Lyon",
    "The bakery in Lyon sells croissants",
)
"""Written in one batch: five records behind a single fsync."""

SETTLE_S: Final = 60.0
"""Longest the indexer may take to catch up with a few short documents on a loaded
machine, so only a stuck indexer fails a test."""


def _one_batch(db: Database, texts: tuple[str, ...]) -> list[EncodeOk]:
    """Write ``texts`` as one group commit: the writer is held between batches
    while every write queues, so it takes them all at once."""
    with writer_held(db):
        futures = [db.submit(NS, Opcode.ENCODE, Encode(request_id=rid(), text=t)) for t in texts]
    return [EncodeOk.from_wire(cbor.decode(f.result())) for f in futures]


def _at_rest(db: Database) -> None:
    """Wait until the indexer has caught up with every write, its own vector writes
    included: from then on no thread moves a figure until the test acts again."""
    while True:
        lsn = db.applied_lsn
        assert db.retrieval.indexer.wait_for(lsn, SETTLE_S)
        if db.applied_lsn == lsn:
            return


def _sources_agree(db: Database, figures: Statistics) -> None:
    """Each figure is the one its source holds (with the database at rest)."""
    writer, wal, retrieval = db.writer, db.wal, db.retrieval
    assert figures.applied_lsn == writer.applied_lsn == db.applied_lsn
    assert figures.durable_lsn == writer.durable_lsn
    assert figures.indexed_lsn == retrieval.indexer.indexed_lsn
    assert (figures.wal_first_lsn, figures.wal_last_lsn) == (wal.first_lsn, wal.last_lsn)
    assert figures.read_only == writer.read_only_reason
    assert figures.wal_appends == writer.records_appended
    assert figures.wal_fsyncs == wal.sync_count
    assert figures.wal_bytes_written == wal.bytes_written
    assert figures.group_commits == writer.batches
    assert figures.group_commit_jobs == writer.batched_jobs
    assert figures.group_commit_last_size == writer.last_batch_size
    assert figures.group_commit_sizes == tuple(writer.batch_sizes)
    assert figures.storage_faults == writer.storage_faults
    assert (figures.lmdb_map_bytes, figures.lmdb_used_bytes) == db._store.usage()
    assert figures.recalls == retrieval.stats.recalls
    assert figures.recalls_abstained == retrieval.stats.abstained
    assert dict(figures.recall_candidates) == retrieval.stats.candidates
    assert figures.index_embedded == retrieval.indexer.embedded
    assert figures.index_vectors == retrieval.indexes.total()
    on_disk = [(p.name, p.stat().st_size) for p in wal.segments]
    assert [(s.name, s.size) for s in figures.wal_segments] == on_disk
    assert figures.wal_bytes == sum(size for _, size in on_disk)
    index_files = sorted((db.path / "index").glob("*"))
    assert figures.index_bytes == sum(p.stat().st_size for p in index_files)


def test_statistics_follow_writes_recalls_and_purges(db: Database) -> None:
    start = db.statistics()
    _sources_agree(db, start)
    assert start.applied_lsn == start.wal_last_lsn == start.group_commits == 0
    assert start.recalls == start.purges == start.index_embedded == start.index_vectors == 0

    made = _one_batch(db, TEXTS)
    _at_rest(db)
    written = db.statistics()
    _sources_agree(db, written)
    _assert_the_batch_counted(start, written, made)
    _assert_recalls_counted(db, written)
    _assert_forget_and_purge_counted(db, made[0].memory_id)


def _assert_the_batch_counted(start: Statistics, written: Statistics, made: list[EncodeOk]) -> None:
    """After one batch of :data:`TEXTS` from ``start``: its progress, its group commit,
    and the store and indexes holding its documents."""
    # Progress: everything logged is applied and searchable, not yet checkpointed.
    assert written.applied_lsn == written.wal_last_lsn >= max(m.lsn for m in made)
    assert written.indexed_lsn >= max(m.lsn for m in made)
    assert written.durable_lsn <= written.applied_lsn
    # The batch: five records and five writes behind one fsync.
    assert written.wal_appends - start.wal_appends >= len(TEXTS)
    assert written.wal_fsyncs - start.wal_fsyncs < written.wal_appends - start.wal_appends
    assert written.wal_bytes_written > sum(len(t) for t in TEXTS)
    assert written.group_commit_jobs - written.group_commits >= len(TEXTS) - 1
    assert any(written.group_commit_sizes[len(TEXTS) :])
    assert sum(written.group_commit_sizes) == written.group_commits
    sizes = enumerate(written.group_commit_sizes)
    assert sum(n * count for n, count in sizes) == written.group_commit_jobs
    # The store and the indexes hold the five documents, and nothing waits.
    assert written.lexical_documents == len(TEXTS)
    assert written.lexical_postings == sum(len(set(tokenize(t))) for t in TEXTS)
    assert written.index_embedded == written.index_vectors == len(TEXTS)
    assert written.embed_backlog == written.purge_pending == 0
    assert written.lmdb_used_bytes > start.lmdb_used_bytes
    assert written.wal_bytes > start.wal_bytes
    assert written.read_only is None and written.storage_faults == 0


def _assert_recalls_counted(db: Database, written: Statistics) -> None:
    """Two recalls after the batch, one that finds and one that abstains (an empty
    space), are counted, and write nothing."""
    found = db.execute(NS, Opcode.RECALL, Recall(cue="Globex"))
    assert isinstance(found, RecallOk) and found.hits
    empty = db.execute(NS, Opcode.RECALL, Recall(cue="Globex", space="nothing-here"))
    assert isinstance(empty, RecallOk) and empty.abstained
    recalled = db.statistics()
    _sources_agree(db, recalled)
    assert recalled.recalls == 2 and recalled.recalls_abstained == 1
    assert dict(recalled.recall_candidates)["lexical"] >= 2  # both Globex documents
    assert recalled.applied_lsn == written.applied_lsn  # a recall writes nothing


def _assert_forget_and_purge_counted(db: Database, gone: bytes) -> None:
    """A hard forget of ``gone`` (one of :data:`TEXTS`) leaves its text to purge; the
    purge takes it out of every file and starts the log afresh."""
    db.execute(NS, Opcode.FORGET, Forget(request_id=rid(), memory=gone, mode="hard"))
    _at_rest(db)
    forgotten = db.statistics()
    _sources_agree(db, forgotten)
    assert forgotten.purge_pending == 1 and forgotten.purges == 0
    assert forgotten.lexical_documents == forgotten.index_vectors == len(TEXTS) - 1
    assert db.purge() == 1
    purged = db.statistics()
    _sources_agree(db, purged)
    assert purged.purge_pending == 0 and purged.purges == 1
    # The purge checkpointed and began a new segment: the old records left the log.
    assert purged.durable_lsn == purged.applied_lsn
    assert purged.wal_first_lsn == purged.applied_lsn + 1
    assert len(purged.wal_segments) == 1
    db.retrieval.indexes.save_dirty()
    saved = db.statistics()
    _sources_agree(db, saved)
    assert saved.index_bytes > 0


def test_a_stopped_indexer_leaves_a_backlog(db: Database) -> None:
    db.retrieval.indexer.close()  # nothing is embedded from here on
    made = _one_batch(db, TEXTS[:3])
    figures = db.statistics()
    _sources_agree(db, figures)
    assert figures.embed_backlog == 3 and figures.index_embedded == figures.index_vectors == 0
    assert figures.indexed_lsn < figures.applied_lsn == max(m.lsn for m in made)
    assert figures.lexical_documents == 3  # the lexical index is written with the record


def test_a_storage_fault_shows_as_read_only(db: Database) -> None:
    def crash() -> None:
        raise lmdb.Error("injected crash before commit")

    db.writer.inject_fault_before_commit(crash)
    with pytest.raises(Unavailable):
        db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text="never committed"))
    figures = db.statistics()
    _sources_agree(db, figures)
    assert figures.storage_faults == 1
    assert figures.read_only is not None and "injected crash" in figures.read_only
    # Logged and synced, never applied.
    assert figures.wal_last_lsn == figures.applied_lsn + 1


def test_the_reports_show_the_statistics(db: Database) -> None:
    _one_batch(db, TEXTS[:2])
    _at_rest(db)
    figures = db.statistics()
    stats = db.stats()
    assert stats["applied_lsn"] == figures.applied_lsn
    assert stats["durable_lsn"] == figures.durable_lsn
    assert stats["indexed_lsn"] == figures.indexed_lsn
    assert stats["read_only"] is None
    assert stats["sizes"] == {
        "lmdb_used_bytes": figures.lmdb_used_bytes,
        "lmdb_map_bytes": figures.lmdb_map_bytes,
        "wal_bytes": figures.wal_bytes,
        "index_bytes": figures.index_bytes,
    }
    assert (stats["embed_backlog"], stats["purge_pending"]) == (0, 0)
    counted = {"memories": 2, "entities": 0, "statements": 0, "relations": 0}
    assert stats["scopes"] == [{"namespace": NS, "space": "default", **counted}]
    assert db.wal_status() == {
        "first_lsn": figures.wal_first_lsn,
        "last_lsn": figures.wal_last_lsn,
        "applied_lsn": figures.applied_lsn,
        "durable_lsn": figures.durable_lsn,
        "segments": [{"name": s.name, "bytes": s.size} for s in figures.wal_segments],
    }


METRIC_FIELDS: Final = {
    "brain_wal_appends_total": "wal_appends",
    "brain_wal_fsyncs_total": "wal_fsyncs",
    "brain_wal_bytes_total": "wal_bytes_written",
    "brain_group_commits_total": "group_commits",
    "brain_group_commit_jobs_total": "group_commit_jobs",
    "brain_storage_faults_total": "storage_faults",
    "brain_writer_paced_seconds_total": "writer_paced_seconds",
    "brain_recalls_total": "recalls",
    "brain_recalls_abstained_total": "recalls_abstained",
    "brain_purges_total": "purges",
    "brain_index_embedded_total": "index_embedded",
    "brain_embed_refused_total": "embed_refused",
    "brain_wal_last_lsn": "wal_last_lsn",
    "brain_group_commit_last_size": "group_commit_last_size",
    "brain_applied_lsn": "applied_lsn",
    "brain_durable_lsn": "durable_lsn",
    "brain_lmdb_map_bytes": "lmdb_map_bytes",
    "brain_lmdb_used_bytes": "lmdb_used_bytes",
    "brain_indexed_lsn": "indexed_lsn",
    "brain_index_vectors": "index_vectors",
    "brain_embed_backlog": "embed_backlog",
    "brain_index_lag_seconds": "index_lag_seconds",
    "brain_purge_pending": "purge_pending",
    "brain_lexical_documents": "lexical_documents",
    "brain_lexical_postings": "lexical_postings",
}
"""Each database metric's sample and the figure it exports."""


def test_metrics_export_the_statistics(tmp_path: Path) -> None:
    with Database.open(tmp_path / "d") as db:
        made = _one_batch(db, TEXTS)
        _at_rest(db)
        db.execute(NS, Opcode.RECALL, Recall(cue="bakery"))
        forget = Forget(request_id=rid(), memory=made[1].memory_id, mode="hard")
        db.execute(NS, Opcode.FORGET, forget)
        _at_rest(db)
        metrics = ServerMetrics()
        metrics.attach_database(db)
        exposition = metrics.render().decode("utf-8")
        figures = db.statistics()
    samples = dict(re.findall(r"^(brain_[a-z_]+(?:\{[^}]*\})?) (\S+)$", exposition, re.MULTILINE))
    for sample, name in METRIC_FIELDS.items():
        assert float(samples[sample]) == getattr(figures, name), sample
    assert float(samples["brain_read_only"]) == 0
    for arm, count in figures.recall_candidates:
        assert float(samples[f'brain_recall_candidates_total{{arm="{arm}"}}']) == count
    assert float(samples["brain_group_commit_size_count"]) == figures.group_commits
    assert float(samples["brain_group_commit_size_sum"]) == figures.group_commit_jobs
