"""The replication metrics (spec/06-operations.md §5) read a node's replication
status: one role gauge set, the LSNs, lag and lease counts as the status says, every
family documented; none on a single node."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from brain.engine.replication.status import ReplicationStatus
from brain.server.metrics import replication_metrics
from tests.unit.repository.test_docs import OPERATIONS, _exposed_families

FOLLOWER = ReplicationStatus(
    cluster=True,
    role="follower",
    node="b1",
    shard="s0",
    stream="BRAIN_LOG_s0",
    log_generation=0,
    planner="b0",
    applied_lsn=40,
    last_lsn=47,
    lag_records=7,
    lag_seconds=0.25,
    read_only_reason="node b1 follows shard s0",
    lease_renewals=0,
    takeovers=2,
    promotions=1,
)


class _Status(Collector):
    def __init__(self, status: ReplicationStatus) -> None:
        self._status = status

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield from replication_metrics(self._status)


def _exposition(status: ReplicationStatus) -> str:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_Status(status))
    return generate_latest(registry).decode()


def test_a_cluster_node_exposes_its_status_and_every_family_is_documented() -> None:
    text = _exposition(FOLLOWER)
    assert 'brain_replication_role{role="follower"} 1.0' in text
    assert 'brain_replication_role{role="planner"} 0.0' in text
    assert 'brain_replication_role{role="read-only"} 0.0' in text
    assert "brain_replication_applied_lsn 40.0" in text
    assert "brain_replication_log_last_lsn 47.0" in text
    assert "brain_replication_lag_records 7.0" in text
    assert "brain_replication_lag_seconds 0.25" in text
    assert "brain_planner_lease_renewals_total 0.0" in text
    assert "brain_planner_takeovers_total 2.0" in text
    families = _exposed_families(text)
    assert len(families) == 7
    for name in families:
        assert f"| `{name}` |" in OPERATIONS, name


def test_a_planner_sets_its_own_role() -> None:
    planner = dataclasses.replace(FOLLOWER, role="planner", lease_renewals=9)
    text = _exposition(planner)
    assert 'brain_replication_role{role="planner"} 1.0' in text
    assert 'brain_replication_role{role="follower"} 0.0' in text
    assert "brain_planner_lease_renewals_total 9.0" in text


def test_a_single_node_exposes_no_replication_metric() -> None:
    single = dataclasses.replace(FOLLOWER, cluster=False, role="single")
    assert "brain_replication" not in _exposition(single)
    assert "brain_planner" not in _exposition(single)
