"""The shard map on a real three-node JetStream cluster (spec/05-durability.md §14.7):
namespaces mapped to shards by compare-and-set, two racing cut-overs of which one wins,
and every node's cache following a change within its bound."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from bench.peers.nats import NatsCluster, start_cluster
from brain.engine.replication import JetStreamLogOptions
from brain.engine.replication.jetstream_log import JetStreamLog
from brain.engine.replication.shard_map import (
    CACHE_BOUND_S,
    Placement,
    ShardMap,
    namespace_key,
    namespace_of,
)
from brain.errors import Conflict, InvalidArgument


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    """One cluster for every test of this file."""
    with start_cluster(tmp_path_factory.mktemp("nats")) as running:
        yield running


@pytest.fixture
def two_maps(cluster: NatsCluster) -> Iterator[tuple[ShardMap, ShardMap]]:
    """Two nodes' views of the map, each on a connection of its own."""
    logs = [JetStreamLog.open(JetStreamLogOptions(cluster.servers, shard="map")) for _ in range(2)]
    maps = [ShardMap.open(log, "s0", replicas=3) for log in logs]
    try:
        yield maps[0], maps[1]
    finally:
        for shard_map in maps:
            shard_map.close()
        for log in logs:
            log.close()


def wait_for(shard_map: ShardMap, namespace: str, shard: str, bound: float) -> float:
    """Seconds until ``shard_map``'s cache puts ``namespace`` on ``shard``."""
    started = time.monotonic()
    while shard_map.shard_of(namespace).shard != shard:
        elapsed = time.monotonic() - started
        assert elapsed < bound, f"{namespace} not on {shard} after {elapsed:.2f} s"
        time.sleep(0.005)
    return time.monotonic() - started


def test_keys_encode_any_namespace() -> None:
    for namespace in ("default", "a.b-c_d", "café ☕", "x" * 64):
        key = namespace_key(namespace)
        assert all(c.isalnum() or c in "-/_=." for c in key)
        assert namespace_of(key) == namespace
    assert namespace_of("other") is None


def test_unmapped_namespace_lives_on_the_default_shard(two_maps: tuple[ShardMap, ShardMap]) -> None:
    first, _ = two_maps
    assert first.shard_of("never-mapped") == Placement("s0", "active", 0, 0)


def test_assign_freeze_and_cut_over(two_maps: tuple[ShardMap, ShardMap]) -> None:
    first, second = two_maps
    changes: list[tuple[str, Placement | None]] = []
    seen = threading.Event()

    def on_change(namespace: str, placement: Placement | None) -> None:
        changes.append((namespace, placement))
        seen.set()

    second.on_change = on_change
    placed = first.assign("alpha", "s1")
    assert (placed.shard, placed.state, placed.epoch) == ("s1", "active", 1)
    assert first.shard_of("alpha") == placed  # the writer's own cache at once
    assert wait_for(second, "alpha", "s1", CACHE_BOUND_S) < CACHE_BOUND_S
    assert seen.wait(CACHE_BOUND_S) and changes[-1] == ("alpha", placed)

    frozen = second.freeze("alpha")
    assert (frozen.shard, frozen.state, frozen.epoch) == ("s1", "frozen", 2)
    assert frozen.revision > placed.revision
    with pytest.raises(Conflict):
        first.cut_over("alpha", "s2", placed.revision)  # a stale revision
    moved = first.cut_over("alpha", "s2", frozen.revision)
    assert (moved.shard, moved.state, moved.epoch) == ("s2", "active", 3)
    assert wait_for(second, "alpha", "s2", CACHE_BOUND_S) < CACHE_BOUND_S
    assert second.wait_current()
    assert second.entries()["alpha"] == moved
    with pytest.raises(InvalidArgument):
        first.assign("alpha", "no spaces")


RACES = 8
"""Rounds of the race: two cut-overs sent at once raced through on a server whose
bucket updates were not serialisable in about one round of four."""


@pytest.mark.parametrize("round_", range(RACES))
def test_two_cut_overs_race_and_one_wins(two_maps: tuple[ShardMap, ShardMap], round_: int) -> None:
    first, second = two_maps
    namespace = f"racing-{round_}"
    base = first.freeze(namespace)  # not mapped before: created frozen on s0
    assert base.shard == "s0"
    second.wait_current()
    results: dict[str, Placement | Conflict] = {}
    start = threading.Barrier(2)

    def cut(shard_map: ShardMap, to: str) -> None:
        start.wait()
        try:
            results[to] = shard_map.cut_over(namespace, to, base.revision)
        except Conflict as exc:
            results[to] = exc

    threads = [
        threading.Thread(target=cut, args=(first, "s1")),
        threading.Thread(target=cut, args=(second, "s2")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = [shard for shard, result in results.items() if isinstance(result, Placement)]
    lost = [shard for shard, result in results.items() if isinstance(result, Conflict)]
    assert len(won) == 1 and len(lost) == 1, (base, results)
    for shard_map in (first, second):
        wait_for(shard_map, namespace, won[0], CACHE_BOUND_S)
        assert shard_map.shard_of(namespace).epoch == base.epoch + 1


def test_a_new_node_loads_the_whole_map(
    cluster: NatsCluster, two_maps: tuple[ShardMap, ShardMap]
) -> None:
    first, _ = two_maps
    placed = first.assign("loaded", "s3")
    with JetStreamLog.open(JetStreamLogOptions(cluster.servers, shard="map")) as log:
        late = ShardMap.open(log, "s0", replicas=3)
        try:
            assert late.shard_of("loaded") == placed  # open returns with the map loaded
        finally:
            late.close()
