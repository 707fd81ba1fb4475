"""The compare-and-set of the cluster's key-value buckets
(brain/engine/replication/kv_cas.py; spec/05-durability.md §14.3), on a real
three-node JetStream cluster: of writers racing from one revision exactly one wins,
another key's change does not refuse it, and a delete marker reads as no value and
is itself a revision to set from."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import nats
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext

from bench.peers.nats import NatsCluster, start_cluster
from brain.engine.replication.buckets import open_bucket
from brain.engine.replication.kv_cas import KeyChanged, compare_and_set, read_last

BUCKET = "CAS_TEST"
RACERS = 3
ROUNDS = 25


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    with start_cluster(tmp_path_factory.mktemp("nats")) as running:
        yield running


async def _contexts(
    cluster: NatsCluster, count: int
) -> tuple[list[Client], list[JetStreamContext]]:
    # Each racer on a connection of its own, to a different server where it can.
    clients = [
        await nats.connect(servers=[cluster.servers[i % len(cluster.servers)]])
        for i in range(count)
    ]
    return clients, [client.jetstream() for client in clients]


def test_of_writers_racing_from_one_revision_exactly_one_wins(cluster: NatsCluster) -> None:
    async def run() -> None:
        clients, js = await _contexts(cluster, RACERS)
        try:
            await open_bucket(js[0], BUCKET, history=1, replicas=3, what="the test bucket")
            revision = await compare_and_set(js[0], BUCKET, "k", b"start", 0)
            for round_ in range(ROUNDS):
                values = [f"{round_}:{i}".encode() for i in range(RACERS)]
                outcomes = await asyncio.gather(
                    *(
                        compare_and_set(j, BUCKET, "k", value, revision)
                        for j, value in zip(js, values, strict=True)
                    ),
                    return_exceptions=True,
                )
                won = [(i, o) for i, o in enumerate(outcomes) if isinstance(o, int)]
                assert len(won) == 1, outcomes
                assert all(isinstance(o, (int, KeyChanged)) for o in outcomes), outcomes
                winner, revision = won[0]
                current, last = await read_last(js[1], BUCKET, "k")
                assert current.revision == revision <= last
                assert current.value == values[winner]
        finally:
            for client in clients:
                await client.close()

    asyncio.run(run())


def test_another_keys_change_does_not_refuse_it_and_a_stale_revision_does(
    cluster: NatsCluster,
) -> None:
    async def run() -> None:
        clients, js = await _contexts(cluster, 2)
        try:
            await open_bucket(js[0], BUCKET, history=1, replicas=3, what="the test bucket")
            mine = await compare_and_set(js[0], BUCKET, "mine", b"1", 0)
            # Other keys change in between: the bucket's last sequence moves on, the
            # key's revision does not, and the change is stored.
            for n in range(5):
                await js[1].publish(f"$KV.{BUCKET}.other", str(n).encode())
            later = await compare_and_set(js[0], BUCKET, "mine", b"2", mine)
            assert later > mine
            with pytest.raises(KeyChanged) as refused:
                await compare_and_set(js[1], BUCKET, "mine", b"stale", mine)
            assert refused.value.revision == later
            current, _ = await read_last(js[1], BUCKET, "mine")
            assert (current.revision, current.value) == (later, b"2")
        finally:
            for client in clients:
                await client.close()

    asyncio.run(run())


def test_a_delete_marker_reads_as_no_value_and_is_set_from_its_revision(
    cluster: NatsCluster,
) -> None:
    async def run() -> None:
        clients, js = await _contexts(cluster, 1)
        try:
            await open_bucket(js[0], BUCKET, history=1, replicas=3, what="the test bucket")
            never, _ = await read_last(js[0], BUCKET, "gone")
            assert (never.revision, never.value) == (0, None)
            first = await compare_and_set(js[0], BUCKET, "gone", b"here", 0)
            deleted = await compare_and_set(js[0], BUCKET, "gone", b"", first, delete=True)
            marker, _ = await read_last(js[0], BUCKET, "gone")
            assert (marker.revision, marker.value) == (deleted, None)
            with pytest.raises(KeyChanged):
                await compare_and_set(js[0], BUCKET, "gone", b"again", 0)
            again = await compare_and_set(js[0], BUCKET, "gone", b"again", deleted)
            current, _ = await read_last(js[0], BUCKET, "gone")
            assert (current.revision, current.value) == (again, b"again")
        finally:
            for client in clients:
                await client.close()

    asyncio.run(run())
