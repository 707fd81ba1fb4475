"""Prometheus metrics of one server (served on the public port at ``/metrics``).

Each server owns its registry rather than using the process-global one, so two
servers in one process (tests) never share counters. The process's own figures
(CPU, memory, file descriptors, start time) come from prometheus_client's
standard process collector, which reads ``/proc/self``; ``brain_build_info``
names the build.
"""

from __future__ import annotations

import platform
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from brain import __version__
from brain.engine.replication.status import ROLES, ReplicationStatus
from brain.engine.write.writer import MAX_BATCH

if TYPE_CHECKING:
    from brain.engine.database import Database

__all__ = [
    "BATCH_SIZE_BUCKETS",
    "LATENCY_BUCKETS_S",
    "ServerMetrics",
    "build_labels",
    "replication_metrics",
]

LATENCY_BUCKETS_S: Final = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
"""From 100 µs (a PING) to 10 s (a large RECALL under load)."""

BATCH_SIZE_BUCKETS: Final = tuple(2**i for i in range(MAX_BATCH.bit_length()))
"""Writes per group commit, by powers of two from a lone write up to ``MAX_BATCH``:
how many clients one fsync serves, to the factor of two that matters."""


def build_labels() -> Mapping[str, str]:
    """The labels of ``brain_build_info``: what runs, as a dashboard groups servers by."""
    return {
        "version": __version__,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
    }


class ServerMetrics:
    """The counters, gauges and histograms the server updates."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        # process_cpu_seconds_total, process_resident_memory_bytes and the rest, read
        # from /proc at every scrape (absent where there is no /proc).
        ProcessCollector(registry=self.registry)
        Info(
            "brain_build",
            "The build this server runs: its version and its Python's.",
            registry=self.registry,
        ).info(dict(build_labels()))
        self.requests = Counter(
            "brain_requests",
            "Requests answered, by opcode and outcome (ok or the error name).",
            ["opcode", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "brain_request_duration_seconds",
            "Time from a request's last byte to its answer, by opcode.",
            ["opcode"],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.connections_open = Gauge(
            "brain_connections_open", "Wire connections open now.", registry=self.registry
        )
        self.connections = Counter(
            "brain_connections", "Wire connections accepted.", registry=self.registry
        )
        self.connections_refused = Counter(
            "brain_connections_refused",
            "Wire connections refused: the server, or their peer address, had every "
            "connection it may.",
            registry=self.registry,
        )
        self.connections_displaced = Counter(
            "brain_connections_displaced",
            "Wire connections closed before AUTH to make room for a newer connection.",
            registry=self.registry,
        )
        self.subscriptions_open = Gauge(
            "brain_subscriptions_open", "SUBSCRIBE streams open now.", registry=self.registry
        )
        self.protocol_errors = Counter(
            "brain_protocol_errors",
            "Connections closed for a broken frame, handshake or credentials, by error.",
            ["error"],
            registry=self.registry,
        )
        self.loop_paced = Counter(
            "brain_loop_paced_seconds",
            "Seconds connections waited because their namespace was over its share "
            "of the event loop while another namespace was active.",
            registry=self.registry,
        )
        # The labelled series observe() updates, looked up once each: finding one
        # through labels() costs more than the point read it counts. Both keys come
        # from fixed sets (opcode names, error names), so these stay small.
        self._counted: dict[tuple[str, str], Counter] = {}
        self._timed: dict[str, Histogram] = {}

    def attach_database(self, database: Database) -> None:
        """Export the database's WAL, writer and store figures at every scrape."""
        self.registry.register(_DatabaseCollector(database))

    def observe(self, opcode: str, outcome: str, seconds: float) -> None:
        """Count one answered request."""
        counted = self._counted.get((opcode, outcome))
        if counted is None:
            counted = self._counted[opcode, outcome] = self.requests.labels(
                opcode=opcode, outcome=outcome
            )
        counted.inc()
        timed = self._timed.get(opcode)
        if timed is None:
            timed = self._timed[opcode] = self.latency.labels(opcode=opcode)
        timed.observe(seconds)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)


class _DatabaseCollector(Collector):
    """Reads the engine's figures (one :meth:`Database.statistics` each) when
    Prometheus scrapes, so nothing is double-kept."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def collect(
        self,
    ) -> Iterator[GaugeMetricFamily | CounterMetricFamily | HistogramMetricFamily]:
        figures = self._db.statistics()
        counters: list[tuple[str, str, int]] = [
            ("brain_wal_appends", "WAL records appended by this process.", figures.wal_appends),
            ("brain_wal_fsyncs", "WAL fsyncs (one per group commit).", figures.wal_fsyncs),
            (
                "brain_wal_bytes",
                "Bytes written to the WAL by this process.",
                figures.wal_bytes_written,
            ),
            ("brain_group_commits", "Write batches committed.", figures.group_commits),
            ("brain_group_commit_jobs", "Writes committed in batches.", figures.group_commit_jobs),
            (
                "brain_storage_faults",
                "Storage faults (failed fsync or commit) that turned the server read-only.",
                figures.storage_faults,
            ),
            ("brain_recalls", "RECALL and EXPLAIN requests served.", figures.recalls),
            ("brain_recalls_abstained", "Recalls that found nothing.", figures.recalls_abstained),
            ("brain_purges", "Purges of forgotten content run.", figures.purges),
            ("brain_index_embedded", "Documents the indexer embedded.", figures.index_embedded),
            (
                "brain_embed_refused",
                "Document writes refused with OVERLOADED: their namespace's embedding"
                " backlog was at retrieval.max_embed_backlog.",
                figures.embed_refused,
            ),
        ]
        gauges: list[tuple[str, str, int]] = [
            ("brain_wal_last_lsn", "LSN of the last WAL record.", figures.wal_last_lsn),
            (
                "brain_group_commit_last_size",
                "Writes in the last batch.",
                figures.group_commit_last_size,
            ),
            ("brain_applied_lsn", "Last LSN applied to the store.", figures.applied_lsn),
            ("brain_durable_lsn", "Last LSN made durable in the store.", figures.durable_lsn),
            (
                "brain_read_only",
                "1 while writes are refused after a storage fault.",
                0 if figures.read_only is None else 1,
            ),
            ("brain_lmdb_map_bytes", "LMDB map size.", figures.lmdb_map_bytes),
            ("brain_lmdb_used_bytes", "LMDB bytes in use.", figures.lmdb_used_bytes),
            (
                "brain_indexed_lsn",
                "Every document up to this LSN is searchable.",
                figures.indexed_lsn,
            ),
            ("brain_index_vectors", "Vectors in the HNSW indexes.", figures.index_vectors),
            ("brain_embed_backlog", "Documents waiting for the indexer.", figures.embed_backlog),
            (
                "brain_purge_pending",
                "Documents forgotten since the last purge.",
                figures.purge_pending,
            ),
            (
                "brain_lexical_documents",
                "Documents in the lexical index of every scope.",
                figures.lexical_documents,
            ),
            (
                "brain_lexical_postings",
                "Postings (term, document) in the lexical index of every scope.",
                figures.lexical_postings,
            ),
        ]
        for name, text, value in counters:
            yield CounterMetricFamily(name, text, value=value)
        yield GaugeMetricFamily(
            "brain_index_lag_seconds",
            "How long the oldest entry of the indexer's queue has waited.",
            value=figures.index_lag_seconds,
        )
        yield CounterMetricFamily(
            "brain_writer_paced_seconds",
            "Seconds the writer waited: one namespace over its share while another was active.",
            value=figures.writer_paced_seconds,
        )
        for name, text, value in gauges:
            yield GaugeMetricFamily(name, text, value=value)
        candidates = CounterMetricFamily(
            "brain_recall_candidates", "Candidates each arm contributed to recalls.", labels=["arm"]
        )
        for arm, count in figures.recall_candidates:
            candidates.add_metric([arm], count)
        yield candidates
        yield _batch_sizes(figures.group_commit_sizes)
        yield from replication_metrics(self._db.replication_status())


def replication_metrics(
    status: ReplicationStatus,
) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """A cluster node's replication figures (spec/05-durability.md §14.6); none on a
    single node, which replicates nothing."""
    if not status.cluster:
        return
    role = GaugeMetricFamily(
        "brain_replication_role",
        "1 for this node's role in its shard (planner, follower, read-only), 0 for the others.",
        labels=["role"],
    )
    for name in ROLES:
        if name != "single":
            role.add_metric([name], 1 if status.role == name else 0)
    yield role
    for name, text, value in (
        (
            "brain_replication_applied_lsn",
            "Last LSN of the shard's log applied to this node's store.",
            float(status.applied_lsn),
        ),
        (
            "brain_replication_log_last_lsn",
            "Last LSN of the shard's log as this node knows it.",
            float(status.last_lsn),
        ),
        (
            "brain_replication_lag_records",
            "Records of the log this node knows of and has not applied.",
            float(status.lag_records),
        ),
        (
            "brain_replication_lag_seconds",
            "0 while caught up; else the time since this node last was.",
            status.lag_seconds,
        ),
    ):
        yield GaugeMetricFamily(name, text, value=value)
    yield CounterMetricFamily(
        "brain_planner_lease_renewals",
        "Renewals of the planner lease this node made.",
        value=status.lease_renewals,
    )
    yield CounterMetricFamily(
        "brain_planner_takeovers",
        "Times this node took the planner lease from a holder that let its term pass.",
        value=status.takeovers,
    )


def _batch_sizes(by_size: Sequence[int]) -> HistogramMetricFamily:
    """The group-commit size histogram from ``by_size[n]``, the batches of n writes."""
    buckets: list[tuple[str, float]] = []
    for bound in BATCH_SIZE_BUCKETS:
        buckets.append((f"{float(bound)}", sum(by_size[: bound + 1])))
    buckets.append(("+Inf", sum(by_size)))
    total = sum(size * count for size, count in enumerate(by_size))
    return HistogramMetricFamily(
        "brain_group_commit_size",
        "Writes per committed batch (one WAL fsync each).",
        buckets=buckets,
        sum_value=total,
    )
