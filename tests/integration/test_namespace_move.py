"""Moving a namespace between shards while it is written (spec/05-durability.md §14.9),
with real processes: three nats-server and four ``brain serve --cluster`` nodes, s0 (a0
planner, a1 follower) and s1 (c0 planner, c1 follower). A client writes to namespace
``default`` through a1 without pause while c0 moves it to s1: every write acknowledged
before, during and after the move is on s1's nodes once and readable from every node,
its memories found by RECALL, a retried request answered from its idempotency record;
s0's nodes keep no row of it; and a move asked of the wrong node, or to the shard the
namespace is on, is refused."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from bench.peers.nats import NatsCluster, start_cluster
from brain.client import Client
from brain.errors import NotFound, Unavailable
from brain.server import http_schemas as schemas
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.messages.recall_ops import Recall, RecallOk
from brain.wire.opcodes import Opcode
from tests.integration.conftest import ServerProcess, start_server
from tests.integration.httpcall import http_call

ENV = {
    "BRAIN_RETRIEVAL__EMBEDDER": "hashing",
    "BRAIN_CLUSTER__LEASE_TERM_S": "2",
    "BRAIN_CLUSTER__DEFAULT_SHARD": "s0",
}

WAIT_S = 30.0
"""The longest a check waits for a follower to apply, or a write to get through."""

MOVE_TIMEOUT_S = 120.0
"""The move's own longest wait: copying a few hundred records takes a second or two."""


@dataclass
class Cluster:
    nats: NatsCluster
    nodes: dict[str, ServerProcess]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("move")
    with start_cluster(root / "nats") as nats:
        nodes: dict[str, ServerProcess] = {}
        try:
            for name, shard in (("a0", "s0"), ("a1", "s0"), ("c0", "s1"), ("c1", "s1")):
                args = ("--cluster", ",".join(nats.servers), "--node", name, "--shard", shard)
                nodes[name] = start_server(root / name, *args, env=ENV)
            yield Cluster(nats, nodes)
        finally:
            for running in nodes.values():
                running.stop()


def _client(server: ServerProcess) -> Client:
    return Client.connect(
        server.host, server.wire_port, api_key=server.credentials["api_key"], timeout=WAIT_S
    )


def _admin(server: ServerProcess, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    url = f"http://{server.host}:{server.admin_port}{path}"
    status, raw, _ = http_call(
        method, url, body, token=server.credentials["admin_token"], timeout=MOVE_TIMEOUT_S
    )
    return status, json.loads(raw)


def _encode(client: Client, request_id: bytes, text: str) -> EncodeOk:
    """ENCODE, retried with the same request id while a node answers UNAVAILABLE (a
    frozen namespace, a map still being learnt)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            answer = client.call(Opcode.ENCODE, Encode(request_id=request_id, text=text))
        except Unavailable as refused:
            assert time.monotonic() < deadline, refused
            time.sleep((refused.retry_after_ms or 100) / 1000)
            continue
        assert isinstance(answer, EncodeOk)
        return answer


@dataclass
class _Writer:
    """Writes through one node until told to stop; every acknowledged write kept."""

    client: Client
    acked: dict[str, tuple[bytes, bytes]] = field(default_factory=dict)
    """text → (request id, memory id)."""
    refused: int = 0
    failed: list[BaseException] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        try:
            self._write()
        except BaseException as exc:  # reported by the test, not lost with the thread
            self.failed.append(exc)

    def _write(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            request_id, text = os.urandom(16), f"moving note {n} about topic {n % 7}"
            try:
                answer = self.client.call(Opcode.ENCODE, Encode(request_id=request_id, text=text))
            except Unavailable as refused:
                self.refused += 1
                time.sleep((refused.retry_after_ms or 100) / 1000)
                answer = _encode(self.client, request_id, text)
            assert isinstance(answer, EncodeOk)
            self.acked[text] = (request_id, answer.memory_id)
            time.sleep(0.005)


def _get_eventually(server: ServerProcess, memory_id: bytes) -> MemoryGetOk:
    deadline = time.monotonic() + WAIT_S
    with _client(server) as client:
        while True:
            try:
                found = client.call(Opcode.MEMORY_GET, MemoryGet(id=memory_id))
            except (NotFound, Unavailable):
                assert time.monotonic() < deadline, f"{memory_id.hex()} not on {server}"
                time.sleep(0.1)
                continue
            assert isinstance(found, MemoryGetOk)
            return found


def _namespaces(server: ServerProcess) -> set[str]:
    status, body = _admin(server, "GET", "/v1/stats")
    assert status == 200, body
    return {str(scope["namespace"]) for scope in body["scopes"]}


def test_a_namespace_moves_while_it_is_written(cluster: Cluster) -> None:
    nodes = cluster.nodes
    with _client(nodes["a1"]) as before_client:
        first = _encode(before_client, b"\x01" * 16, "the first note, before any move")
    writer = _Writer(_client(nodes["a1"]))
    thread = threading.Thread(target=writer.run, name="move-writer")
    thread.start()
    try:
        time.sleep(1.5)  # writes go on for a while before the move
        status, report = _admin(
            nodes["c0"], "POST", "/v1/cluster/moves", {"namespace": "default", "to_shard": "s1"}
        )
        assert status == 200, report
        Draft202012Validator(schemas.MOVE).validate(report)
        time.sleep(1.5)  # and after it, now on s1
    finally:
        writer.stop.set()
        thread.join(WAIT_S)
        writer.client.close()
    assert writer.failed == []
    assert report["from_shard"] == "s0" and report["to_shard"] == "s1"
    assert report["copied_changes"] > len(writer.acked) and report["dropped_keys"] > 0
    assert len(writer.acked) > 50
    # Every acknowledged write is on every node of s1, and read alike through s0's.
    texts = sorted(writer.acked)
    for name in ("c0", "c1", "a0", "a1"):
        for text in texts[:: max(1, len(texts) // 25)]:
            found = _get_eventually(nodes[name], writer.acked[text][1])
            assert found.memory.text == text, name
    # Exactly once: s1 holds one memory per acknowledged write, and the first one.
    deadline = time.monotonic() + WAIT_S
    while True:
        status, stats = _admin(nodes["c1"], "GET", "/v1/stats")
        held = sum(int(s["memories"]) for s in stats["scopes"] if s["namespace"] == "default")
        if held == len(writer.acked) + 1 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert held == len(writer.acked) + 1
    # s0 dropped it: no row of it is left on its nodes.
    assert "default" not in _namespaces(nodes["a0"])
    deadline = time.monotonic() + WAIT_S
    while "default" in _namespaces(nodes["a1"]):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    with _client(nodes["a0"]) as client:
        # A request acknowledged by s0 before the move, retried now: its record came along.
        again = _encode(client, b"\x01" * 16, "the first note, before any move")
        assert again.memory_id == first.memory_id
        # Recall finds what was written before the move, through a node of s0.
        hits = client.call(Opcode.RECALL, Recall(cue="the first note before any move", top_k=3))
        assert isinstance(hits, RecallOk)
        assert first.memory_id in [h.memory.id for h in hits.hits if h.memory is not None]


def test_a_move_is_refused_where_it_cannot_run(cluster: Cluster) -> None:
    nodes = cluster.nodes
    move = {"namespace": "elsewhere", "to_shard": "s1"}
    status, body = _admin(nodes["a0"], "POST", "/v1/cluster/moves", move)
    assert status == 503 and "not on node a0 of shard s0" in body["message"], body
    status, body = _admin(nodes["c1"], "POST", "/v1/cluster/moves", move)
    assert status == 503 and "node c0, not on node c1" in body["message"], body
    status, body = _admin(
        nodes["c0"], "POST", "/v1/cluster/moves", {"namespace": "elsewhere", "to_shard": "s0"}
    )
    assert status == 503, body  # c0 plans s1, not s0
    status, body = _admin(nodes["a0"], "POST", "/v1/cluster/moves", {"namespace": "x"})
    assert status == 400 and body["field"] == "to_shard", body
    status, body = _admin(
        nodes["a0"], "POST", "/v1/cluster/moves", {"namespace": "x", "to_shard": "s0"}
    )
    assert status == 409, body  # x is on the default shard, s0, already
