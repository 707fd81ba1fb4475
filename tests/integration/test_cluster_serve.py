"""Any node answers any request (spec/05-durability.md §14.7), with real processes: three
nats-server, three ``brain serve --cluster`` nodes on two shards (s0: b0 planner and b1
follower; s1: b2). A write sent to a follower is forwarded to the planner and answered
with its LSN, and a planner's error keeps its wire code; a transaction through the
follower runs on the planner and is dropped there when its connection closes; a
namespace the shard map puts on s1 is answered from every node (its SUBSCRIBE only on
s1); a write and an answer larger than one NATS message (the servers keep the default
1 MiB limit) are forwarded whole; the planner killed with SIGKILL, a write through the
follower succeeds after the takeover and a retried request id is answered from the
idempotency record, not applied twice."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.peers.nats import NatsCluster, start_cluster
from brain.cbor import MAX_TEXT_BYTES
from brain.engine.replication import JetStreamLogOptions
from brain.engine.replication.jetstream_log import JetStreamLog
from brain.engine.replication.shard_map import CACHE_BOUND_S, ShardMap
from brain.server.key_sync import KEY_SYNC_BOUND_S
from brain.wire.opcodes import RESPONSE_BIT, Opcode
from tests.integration.conftest import ServerProcess, run_brain, start_server
from tests.integration.httpcall import http_call
from tests.integration.rawwire import RawClient, Reply
from tests.request_ids import request_id as rid

TERM_S = "2"
"""The nodes' lease term: a takeover within seconds."""

TAKEOVER_WAIT_S = 20.0
"""How long a client keeps retrying a write after the planner died: a term, the margin,
the polls, and the forwarding's retry advice, with room for a busy machine."""

ENCODE_OK = RESPONSE_BIT | Opcode.ENCODE
FORGET_OK = RESPONSE_BIT | Opcode.FORGET
MEMORY_GET_OK = RESPONSE_BIT | Opcode.MEMORY_GET
TXN_BEGUN = RESPONSE_BIT | Opcode.TXN_BEGIN
TXN_COMMITTED = RESPONSE_BIT | Opcode.TXN_COMMIT


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
    # NATS's default message limit, which a large write or answer is over.
    with start_cluster(root / "nats", max_payload=1024 * 1024) as nats:
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


def test_an_error_from_the_planner_keeps_its_wire_code(cluster: Cluster) -> None:
    # A follower refuses every write itself with UNAVAILABLE: NOT_FOUND can only
    # come from the planner, relayed as it said it.
    follower = connect(cluster.nodes["b1"])
    missing = bytes(16)
    body = {"request_id": rid(2), "memory": missing, "mode": "hard"}
    reply = ask(follower, Opcode.FORGET, body)
    assert reply.error_name == "NOT_FOUND", reply.body
    assert "retry_after_ms" not in reply.body or not reply.body["retry_after_ms"]


def test_a_transaction_through_a_follower_runs_on_the_planner(cluster: Cluster) -> None:
    follower = connect(cluster.nodes["b1"])
    written = encode(follower, 3, "forgotten in a transaction")
    assert written.opcode == ENCODE_OK, written.body
    memory_id = written.body["memory_id"]
    assert get_eventually(follower, memory_id).opcode == MEMORY_GET_OK
    begun = ask(follower, Opcode.TXN_BEGIN, {})
    assert begun.opcode == TXN_BEGUN, begun.body
    txn = begun.body["txn_id"]
    body = {"request_id": rid(4), "memory": memory_id, "mode": "hard", "txn_id": txn}
    forgot = ask(follower, Opcode.FORGET, body)
    assert forgot.opcode == FORGET_OK, forgot.body
    inside = ask(follower, Opcode.MEMORY_GET, {"id": memory_id, "txn_id": txn})
    assert inside.opcode == MEMORY_GET_OK and inside.body["memory"].get("text") is None
    outside = ask(follower, Opcode.MEMORY_GET, {"id": memory_id})
    assert outside.body["memory"]["text"] == "forgotten in a transaction"
    committed = ask(follower, Opcode.TXN_COMMIT, {"txn_id": txn})
    assert committed.opcode == TXN_COMMITTED, committed.body
    deadline = time.monotonic() + 5.0
    for name in ("b0", "b1"):
        client = connect(cluster.nodes[name])
        while ask(client, Opcode.MEMORY_GET, {"id": memory_id}).body["memory"].get("text"):
            assert time.monotonic() < deadline, name
            time.sleep(0.05)


def test_a_transaction_left_open_on_a_follower_is_aborted_on_the_planner(
    cluster: Cluster,
) -> None:
    # A transaction is found by its id from any connection of its namespace: while it
    # is open, a read in it answers; once the follower told the planner its
    # connection closed, the planner has dropped it.
    opener = connect(cluster.nodes["b1"])
    begun = ask(opener, Opcode.TXN_BEGIN, {})
    assert begun.opcode == TXN_BEGUN, begun.body
    txn = begun.body["txn_id"]
    other = connect(cluster.nodes["b1"])
    written = encode(other, 5, "read inside a transaction")
    assert written.opcode == ENCODE_OK, written.body
    body = {"id": written.body["memory_id"], "txn_id": txn}
    assert ask(other, Opcode.MEMORY_GET, body).opcode == MEMORY_GET_OK
    opener.close()
    deadline = time.monotonic() + 5.0
    while (reply := ask(other, Opcode.MEMORY_GET, body)).opcode == MEMORY_GET_OK:
        assert time.monotonic() < deadline, "the transaction stayed open on the planner"
        time.sleep(0.05)
    assert reply.error_name == "TXN_EXPIRED", reply.body


def on_s1(cluster: Cluster, namespace: str) -> dict[str, str]:
    """Map ``namespace`` to s1 and make a key for it on every node; the keys by node."""
    with JetStreamLog.open(JetStreamLogOptions(cluster.nats.servers, shard="s0")) as handle:
        shard_map = ShardMap.open(handle, "s0", replicas=3)
        try:
            shard_map.assign(namespace, "s1")
        finally:
            shard_map.close()
    time.sleep(CACHE_BOUND_S)  # every node's cache holds the change by now
    keys: dict[str, str] = {}
    for name, server in cluster.nodes.items():
        made = run_brain("keys", "create", "--data", str(server.data_dir), "--namespace", namespace)
        assert made.returncode == 0, made.stderr
        keys[name] = made.stdout.strip().splitlines()[-1]
    return keys


def test_a_namespace_on_another_shard_is_answered_from_any_node(cluster: Cluster) -> None:
    keys = on_s1(cluster, "elsewhere")
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
    # A subscription is served from the node's own store: on s0 it is refused, on s1
    # it streams the write.
    refused = ask(connect(cluster.nodes["b1"], keys["b1"]), Opcode.SUBSCRIBE, {"from_lsn": 1})
    assert refused.error_name == "UNAVAILABLE" and "s1" in refused.body["message"], refused.body
    streamed = ask(connect(cluster.nodes["b2"], keys["b2"]), Opcode.SUBSCRIBE, {"from_lsn": 1})
    assert streamed.opcode == RESPONSE_BIT | Opcode.SUBSCRIBE, streamed.body


def test_writes_and_answers_larger_than_a_nats_message_are_forwarded(cluster: Cluster) -> None:
    # A text at the wire's 1 MiB limit: its request is over one message, and so
    # are its plan and the MEMORY_GET answer carrying it.
    text = " ".join(f"large{i}" for i in range(130_000))[:MAX_TEXT_BYTES].strip()
    assert len(text.encode()) > MAX_TEXT_BYTES - 10
    follower = connect(cluster.nodes["b1"])
    written = encode(follower, 30, text)  # forwarded to b0, the planner of s0
    assert written.opcode == ENCODE_OK, written.body
    for name in ("b0", "b1"):
        found = get_eventually(connect(cluster.nodes[name]), written.body["memory_id"])
        assert found.opcode == MEMORY_GET_OK and found.body["memory"]["text"] == text, name
    # A namespace on s1, written and read through s0's nodes: every request and
    # answer goes over the link.
    keys = on_s1(cluster, "farther")
    far = encode(connect(cluster.nodes["b1"], keys["b1"]), 31, text)
    assert far.opcode == ENCODE_OK, far.body
    for name in ("b0", "b1", "b2"):
        found = get_eventually(connect(cluster.nodes[name], keys[name]), far.body["memory_id"])
        assert found.opcode == MEMORY_GET_OK and found.body["memory"]["text"] == text, name


def admin(server: ServerProcess, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    url = f"http://127.0.0.1:{server.admin_port}{path}"
    status, raw, _ = http_call(method, url, body, server.credentials["admin_token"])
    return status, json.loads(raw) if raw else None


def authenticates(server: ServerProcess, api_key: str) -> bool:
    """Whether AUTH with ``api_key`` succeeds on ``server``."""
    client = server.client()
    try:
        return client.handshake(api_key).error_name is None
    finally:
        client.close()


def within_bound(server: ServerProcess, api_key: str, *, opens: bool = True) -> bool:
    """Whether AUTH with ``api_key`` succeeds on ``server`` (fails, with ``opens``
    False) within the key table's bound."""
    deadline = time.monotonic() + KEY_SYNC_BOUND_S
    while authenticates(server, api_key) != opens:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_key_is_one_key_on_every_node(cluster: Cluster) -> None:
    b0, b1, b2 = (cluster.nodes[name] for name in ("b0", "b1", "b2"))
    # Made on b0's admin port: AUTH takes it on every node, the other shard's too.
    status, made = admin(b0, "POST", "/v1/keys", {"namespace": "everywhere"})
    assert status == 201, made
    api_key, key_id = made["api_key"], made["key_id"]
    for server in (b1, b2):
        assert within_bound(server, api_key)
        _, listed = admin(server, "GET", "/v1/keys")
        assert key_id in [row["key_id"] for row in listed["keys"]]
    # Every node's first-start key is the cluster's too.
    assert authenticates(b2, b0.credentials["api_key"])
    # Used on b0 while it is deleted through b2: b0 refuses the open connection's next
    # request and every node refuses a new AUTH.
    held = connect(b0, api_key)
    assert encode(held, 40, "written with the cluster's key").opcode == ENCODE_OK
    status, _ = admin(b2, "DELETE", f"/v1/keys/{key_id}")
    assert status == 204
    for server in (b0, b1, b2):
        assert within_bound(server, api_key, opens=False), server
    refused = encode(held, 41, "after the key was deleted")
    assert refused.error_name == "UNAUTHENTICATED", refused.body
    status, gone = admin(b1, "DELETE", f"/v1/keys/{key_id}")
    assert status == 404, gone
    # A key made by `brain keys create` on b1's data directory while b1 runs reaches
    # the others too.
    made_here = run_brain("keys", "create", "--data", str(b1.data_dir), "--namespace", "everywhere")
    assert made_here.returncode == 0, made_here.stderr
    cli_key = made_here.stdout.strip().splitlines()[-1]
    for server in (b0, b2):
        assert within_bound(server, cli_key), server
    # The audit says where each change came from.
    _, audit = admin(b0, "GET", "/v1/audit?namespace=everywhere&limit=10")
    vias = [(entry["operation"], entry["via"]) for entry in audit["entries"] if "via" in entry]
    assert ("key_create", "admin") in vias and ("key_delete", "cluster") in vias, vias


def test_a_write_through_a_follower_after_the_planner_is_killed(cluster: Cluster) -> None:
    follower = connect(cluster.nodes["b1"])
    before = encode(follower, 19, "acknowledged before the kill")
    assert before.opcode == ENCODE_OK, before.body
    planner = cluster.nodes["b0"]
    planner.process.send_signal(signal.SIGKILL)
    planner.process.wait()
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
    # Acknowledged by the dead planner, retried through the follower: the new planner
    # answers from the idempotency record it replayed from the log.
    retried = encode(follower, 19, "acknowledged before the kill")
    assert retried.opcode == ENCODE_OK, retried.body
    assert retried.body["lsn"] == before.body["lsn"]
    assert retried.body["memory_id"] == before.body["memory_id"]
