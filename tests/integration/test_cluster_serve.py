"""Any node answers any request (spec/05-durability.md §14.6), with real processes: three
nats-server, three ``brain serve --cluster`` nodes on two shards (s0: b0 planner and b1
follower; s1: b2). A write sent to a follower is forwarded to the planner and answered
with its LSN; a namespace the shard map puts on s1 is answered from every node; the
planner killed with SIGKILL, a write through the follower succeeds after the takeover
and a retried request id is answered from the idempotency record, not applied twice."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.peers.nats import NatsCluster, start_cluster
from brain.engine.replication import JetStreamLogOptions
from brain.engine.replication.jetstream_log import JetStreamLog
from brain.engine.replication.shard_map import CACHE_BOUND_S, ShardMap
from brain.wire.opcodes import Opcode
from tests.integration.conftest import ServerProcess, run_brain, start_server
from tests.integration.rawwire import RawClient, Reply
from tests.request_ids import request_id as rid

TERM_S = "2"
"""The nodes' lease term: a takeover within seconds."""

TAKEOVER_WAIT_S = 20.0
"""How long a client keeps retrying a write after the planner died: a term, the margin,
the polls, and the forwarding's retry advice, with room for a busy machine."""

ENCODE_OK = 0x0080 | Opcode.ENCODE
MEMORY_GET_OK = 0x0080 | Opcode.MEMORY_GET
ERROR = 0x00FF


@dataclass
class Cluster:
    nats: NatsCluster
    nodes: dict[str, ServerProcess]


def node(nats: NatsCluster, root: Path, name: str, shard: str) -> ServerProcess:
    env = {
        "BRAIN_RETRIEVAL__EMBEDDER": "hashing",
        "BRAIN_CLUSTER__LEASE_TERM_S": TERM_S,
        "BRAIN_CLUSTER__DEFAULT_SHARD": "s0",
    }
    servers = ",".join(nats.servers)
    args = ("--cluster", servers, "--node", name, "--shard", shard)
    return start_server(root / name, *args, env=env)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One NATS cluster and three nodes for the whole file; b0 starts first and plans s0."""
    root = tmp_path_factory.mktemp("serve")
    with start_cluster(root / "nats") as nats:
        nodes: dict[str, ServerProcess] = {}
        try:
            nodes["b0"] = node(nats, root, "b0", "s0")
            nodes["b1"] = node(nats, root, "b1", "s0")
            nodes["b2"] = node(nats, root, "b2", "s1")
            yield Cluster(nats, nodes)
        finally:
            for running in nodes.values():
                running.stop()


def connect(server: ServerProcess, api_key: str | None = None) -> RawClient:
    client = server.client()
    auth = client.handshake(api_key or server.credentials["api_key"])
    assert auth.error_name is None, auth.body
    return client


def ask(client: RawClient, opcode: int, body: dict[str, Any], stream: int = 1) -> Reply:
    client.send(opcode, stream, body)
    return client.recv()


def encode(client: RawClient, n: int, text: str) -> Reply:
    return ask(client, Opcode.ENCODE, {"request_id": rid(n), "text": text})


def get_eventually(client: RawClient, memory_id: bytes) -> Reply:
    """MEMORY_GET until found: a follower applies the log within a poll or so."""
    deadline = time.monotonic() + 5.0
    while True:
        reply = ask(client, Opcode.MEMORY_GET, {"id": memory_id})
        if reply.opcode == MEMORY_GET_OK or time.monotonic() > deadline:
            return reply
        time.sleep(0.05)


def test_a_write_sent_to_a_follower_is_answered_by_the_planner(cluster: Cluster) -> None:
    follower = connect(cluster.nodes["b1"])
    reply = encode(follower, 1, "written through the follower")
    assert reply.opcode == ENCODE_OK, reply.body
    assert reply.body["lsn"] >= 1
    memory_id = reply.body["memory_id"]
    for name in ("b0", "b1"):
        found = get_eventually(connect(cluster.nodes[name]), memory_id)
        assert found.opcode == MEMORY_GET_OK, (name, found.body)
        assert found.body["memory"]["text"] == "written through the follower"


def test_a_namespace_on_another_shard_is_answered_from_any_node(cluster: Cluster) -> None:
    with JetStreamLog.open(JetStreamLogOptions(cluster.nats.servers, shard="s0")) as handle:
        shard_map = ShardMap.open(handle, "s0", replicas=3)
        try:
            shard_map.assign("elsewhere", "s1")
        finally:
            shard_map.close()
    time.sleep(CACHE_BOUND_S)  # every node's cache holds the change by now
    keys: dict[str, str] = {}
    for name, server in cluster.nodes.items():
        made = run_brain(
            "keys", "create", "--data", str(server.data_dir), "--namespace", "elsewhere"
        )
        assert made.returncode == 0, made.stderr
        keys[name] = made.stdout.strip().splitlines()[-1]
    # Written through a node of s0 (the follower): it lands on s1's planner.
    reply = encode(connect(cluster.nodes["b1"], keys["b1"]), 10, "kept on shard s1")
    assert reply.opcode == ENCODE_OK, reply.body
    memory_id = reply.body["memory_id"]
    for name in ("b0", "b1", "b2"):
        found = get_eventually(connect(cluster.nodes[name], keys[name]), memory_id)
        assert found.opcode == MEMORY_GET_OK, (name, found.body)
    # And nothing of it is on s0's own store: its nodes answered by forwarding.
    plain = get_eventually(connect(cluster.nodes["b0"]), memory_id)
    assert plain.error_name == "NOT_FOUND", plain.body


def test_a_write_through_a_follower_after_the_planner_is_killed(cluster: Cluster) -> None:
    planner = cluster.nodes["b0"]
    planner.process.send_signal(signal.SIGKILL)
    planner.process.wait()
    follower = connect(cluster.nodes["b1"])
    deadline = time.monotonic() + TAKEOVER_WAIT_S
    refused = 0
    while True:
        reply = encode(follower, 20, "after the takeover")
        if reply.opcode == ENCODE_OK:
            break
        assert reply.error_name == "UNAVAILABLE", reply.body
        assert reply.body.get("retry_after_ms") or reply.body.get("retryable"), reply.body
        refused += 1
        assert time.monotonic() < deadline, reply.body
        time.sleep((reply.body.get("retry_after_ms") or 200) / 1000)
    first = reply.body
    again = encode(follower, 20, "after the takeover")
    assert again.opcode == ENCODE_OK, again.body
    assert again.body["lsn"] == first["lsn"]  # the stored answer, not a second write
    assert again.body["memory_id"] == first["memory_id"]
