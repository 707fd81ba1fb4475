"""The cluster's key table on a real three-node JetStream cluster (spec/05-durability.md
§14.11): a node that was down while a key was deleted drops it when it starts again,
and a key made on its data directory meanwhile reaches the others; a store restored
with a key the cluster deleted never brings it back; a key change the bucket cannot
take (no quorum) is refused UNAVAILABLE and leaves nothing behind."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.peers.nats import NatsCluster, start_cluster
from brain.errors import Unavailable
from brain.server.cluster_link import ClusterLink
from brain.server.key_sync import KEY_SYNC_BOUND_S, KeySync
from brain.server.keys import KeyRecord, KeyStore, parse_permissions

READ_WRITE = parse_permissions(["read", "write"])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    """One cluster for every test of this file."""
    with start_cluster(tmp_path_factory.mktemp("nats")) as running:
        yield running


class Node:
    """One node's key store and, while it runs, its key table link."""

    def __init__(self, cluster: NatsCluster, directory: Path, name: str) -> None:
        self.cluster = cluster
        self.name = name
        self.keys = KeyStore(directory / name)
        self.link: ClusterLink | None = None
        self.sync: KeySync | None = None

    async def start(self) -> None:
        self.link = await ClusterLink.connect(self.cluster.servers, self.name, "s0")
        self.sync = await KeySync.open(self.link, self.keys, replicas=3)

    async def stop(self) -> None:
        if self.sync is not None:
            await self.sync.close()
            self.sync = None
        if self.link is not None:
            await self.link.close()
            self.link = None

    async def close(self) -> None:
        await self.stop()
        self.keys.close()

    def has(self, key_id: bytes) -> bool:
        return self.keys.find(key_id) is not None


async def held_within_bound(node: Node, key_id: bytes, *, held: bool = True) -> bool:
    """Whether ``node``'s store holds ``key_id`` (or, ``held`` False, no longer does)
    within the key table's bound."""
    deadline = time.monotonic() + KEY_SYNC_BOUND_S
    while node.has(key_id) != held:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def vias(node: Node, namespace: str) -> list[tuple[object, object]]:
    return [(e["operation"], e["via"]) for e in node.keys.key_audit(namespace, 20)]


def test_a_node_that_was_down_catches_up_both_ways(cluster: NatsCluster, tmp_path: Path) -> None:
    async def scenario() -> None:
        a, b = Node(cluster, tmp_path, "a"), Node(cluster, tmp_path, "b")
        # A key made on a's directory before it joined is published when it does.
        _, early = a.keys.create_key("ns-down", READ_WRITE, via="cli")
        await a.start()
        await b.start()
        try:
            assert b.has(early.key_id)  # loaded before b's start returned
            await b.stop()
            # While b is down, the key is deleted through a, and one is made on b's
            # directory.
            assert a.sync is not None
            await asyncio.to_thread(a.sync.delete_key, early.key_id, via="admin")
            _, offline = b.keys.create_key("ns-down", READ_WRITE, via="cli")
            await b.start()
            assert not b.has(early.key_id)  # dropped before b's start returned
            assert await held_within_bound(a, offline.key_id)
            assert ("key_delete", "cluster") in vias(b, "ns-down")
            assert ("key_delete", "admin") in vias(a, "ns-down")
        finally:
            await a.close()
            await b.close()

    asyncio.run(scenario())


def test_a_key_the_cluster_deleted_never_comes_back(cluster: NatsCluster, tmp_path: Path) -> None:
    async def scenario() -> None:
        a, restored = Node(cluster, tmp_path, "a"), Node(cluster, tmp_path, "restored")
        await a.start()
        try:
            assert a.sync is not None
            _, record = await asyncio.to_thread(
                a.sync.create_key, "ns-restore", READ_WRITE, via="admin"
            )
            digest = next(d for d, r in a.keys.entries() if r.key_id == record.key_id)
            await asyncio.to_thread(a.sync.delete_key, record.key_id, via="admin")
            # A store brought back from a bundle made before the delete still has it.
            restored.keys.adopt([(digest, record)], via="cli")
            await restored.start()
            assert not restored.has(record.key_id)
            await asyncio.sleep(KEY_SYNC_BOUND_S)
            assert not a.has(record.key_id)
        finally:
            await a.close()
            await restored.close()

    asyncio.run(scenario())


def test_an_unreadable_entry_is_ignored(cluster: NatsCluster, tmp_path: Path) -> None:
    async def scenario() -> None:
        a = Node(cluster, tmp_path, "a")
        await a.start()
        try:
            assert a.link is not None
            kv = await a.link.jetstream.key_value("BRAIN_KEYS")
            await kv.put("k.00", b"not json")
            await kv.put("elsewhere", b"{}")
            _, record = await asyncio.to_thread(
                a.keys.create_key, "ns-garbled", READ_WRITE, via="cli"
            )
            # The garbled entries change nothing; the next key still goes out.
            b = Node(cluster, tmp_path, "b")
            await b.start()
            try:
                assert await held_within_bound(b, record.key_id)
                assert all(isinstance(r, KeyRecord) for r in b.keys.list_keys())
            finally:
                await b.close()
        finally:
            await a.close()

    asyncio.run(scenario())


def test_a_key_change_without_a_quorum_is_refused_and_leaves_nothing(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    async def scenario() -> None:
        a = Node(cluster, tmp_path, "a")
        await a.start()
        stopped = cluster.nodes[1:]
        try:
            assert a.sync is not None
            for node in stopped:
                cluster.stop(node)
            sync = a.sync
            with pytest.raises(Unavailable, match="key table"):
                await asyncio.to_thread(sync.create_key, "ns-quorum", READ_WRITE, via="admin")
            assert all(r.namespace != "ns-quorum" for r in a.keys.list_keys())
        finally:
            for node in stopped:
                cluster.start(node)
            await a.close()

    asyncio.run(scenario())
