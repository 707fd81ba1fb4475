"""The planner lease on a real three-node JetStream cluster (spec/05-durability.md
§14.3): taken, renewed and taken over."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from brain.engine.replication import JetStreamLogOptions
from brain.engine.replication.jetstream_log import JetStreamLog
from brain.engine.replication.lease import RENEW_FRACTION, TAKEOVER_MARGIN_S, PlannerLease
from tests.integration.nats_cluster import NatsCluster, start_cluster

FOLLOW_POLL_S = 0.1
"""How often the test looks at the lease, as a follower would."""

TERM_S = 2.0
"""The tests' lease term: short, so a takeover takes seconds, and still many times
the cluster's round trip on loopback."""

TAKEOVER_BOUND_S = TERM_S + TAKEOVER_MARGIN_S + TERM_S * RENEW_FRACTION + 10 * FOLLOW_POLL_S + 1.0
"""The most a takeover may take after the holder's last renewal: a whole term and
the margin of an unchanged revision, plus one renewal interval (the holder's last
renewal may come just before it stops), the follower's polling, and a second of
slack for the requests themselves."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    """One cluster for every test of this file."""
    with start_cluster(tmp_path_factory.mktemp("nats")) as running:
        yield running


def test_the_lease_is_held_by_one_node_renewed_and_taken_over_after_a_term(
    cluster: NatsCluster,
) -> None:
    log_options = JetStreamLogOptions(cluster.servers, shard="lease")
    with JetStreamLog.open(log_options) as first, JetStreamLog.open(log_options) as second:
        a = PlannerLease.open(first, "a", TERM_S)
        b = PlannerLease.open(second, "b", TERM_S)
        assert a.try_take() is None and a.held and a.refusal() is None
        assert b.try_take() == "a" and not b.held
        assert "does not hold" in (b.refusal() or "")
        lost: list[str] = []
        a.keep(lost.append)
        # Two terms: a renews every third of one, so b never sees a term unchanged.
        deadline = time.monotonic() + 2 * TERM_S
        while time.monotonic() < deadline:
            assert b.try_take() == "a"
            time.sleep(FOLLOW_POLL_S)
        assert a.held and not lost
        # a stops renewing, as a crashed holder would.
        a.abandon()
        stopped = time.monotonic()
        while b.try_take() is not None:
            assert time.monotonic() - stopped < TAKEOVER_BOUND_S
            time.sleep(FOLLOW_POLL_S)
        taken_after = time.monotonic() - stopped
        assert b.held and b.holder == "b"
        # Never before a's own term ran out: a full term of b watching, and the margin.
        assert taken_after >= TERM_S
        assert not a.held and a.try_take() == "b"
        b.release()
        assert not b.held
        # Released: free at once, no term to wait.
        assert a.try_take() is None and a.held
        a.release()
