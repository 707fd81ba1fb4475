"""A namespace dropped on a shard's planner is dropped on its followers too, and on
a node rebuilt from the stream: the drop is logged records like any write
(spec/05-durability.md §14.5), on a real three-node JetStream cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.peers.nats import NatsCluster, start_cluster
from brain.engine.database import Database, DatabaseOptions
from brain.engine.replication import JetStreamLogOptions
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.opcodes import Opcode
from tests.request_ids import request_id as rid
from tests.store_rows import namespace_rows

APPLY_WAIT_S = 15.0
"""How long a follower may take to apply the planner's records on loopback."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    with start_cluster(tmp_path_factory.mktemp("nats")) as running:
        yield running


def options(cluster: NatsCluster, node: str) -> DatabaseOptions:
    return DatabaseOptions(
        embedder="hashing",
        jetstream=JetStreamLogOptions(cluster.servers, shard="drop", node=node, lease_term_s=2.0),
    )


def keys_of(db: Database, namespace: str) -> list[tuple[bytes, bytes]]:
    """Every (table, key) of ``namespace`` in the store."""
    return [(table, key) for table, key, _ in namespace_rows(db, namespace)]


def test_a_drop_reaches_the_follower_and_a_rebuilt_node(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    with Database.open(tmp_path / "a", options(cluster, "a")) as planner:
        for n in range(20):
            for ns in ("gone", "kept"):
                request = Encode(request_id=rid(n), text=f"{ns} note {n} on topic {n % 4}")
                assert isinstance(planner.execute(ns, Opcode.ENCODE, request), EncodeOk)
        assert planner.wait_indexed()
        with Database.open(tmp_path / "b", options(cluster, "b")) as follower:
            assert follower.planner == "a"
            follower.wait_applied(planner.wal.last_lsn, APPLY_WAIT_S)
            assert keys_of(follower, "gone") == keys_of(planner, "gone") != []
            kept = keys_of(planner, "kept")
            # The follower recovered the records from the stream; its vector indexes
            # load from its store after that.
            assert follower.retrieval.indexer.wait_loaded(APPLY_WAIT_S)
            vectors = follower.retrieval.indexes.total()
            assert vectors == planner.retrieval.indexes.total() == 40
            assert planner.drop_namespace("gone") == len(keys_of(follower, "gone"))
            follower.wait_applied(planner.wal.last_lsn, APPLY_WAIT_S)
            assert keys_of(planner, "gone") == keys_of(follower, "gone") == []
            assert keys_of(follower, "kept") == kept
            assert follower.retrieval.indexes.total() == planner.retrieval.indexes.total() == 20
        last = planner.wal.last_lsn
        # A fresh store on the same stream (a follower while a holds the lease).
        with Database.open(tmp_path / "c", options(cluster, "c")) as rebuilt:
            rebuilt.wait_applied(last, APPLY_WAIT_S)
            assert keys_of(rebuilt, "gone") == []
            assert keys_of(rebuilt, "kept") == kept
