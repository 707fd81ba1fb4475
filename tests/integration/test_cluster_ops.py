"""Operating a cluster (spec/05-durability.md §14.6, spec/06-operations.md §4, §5): real
``brain serve --cluster`` processes on a real three-node JetStream cluster.

Each node's status in the node registry and on ``GET /v1/cluster``; the replication
metrics; ``/readyz`` and ``/v1/stats`` on a follower; a subscriber on a follower
seeing every write the planner made, in LSN order; snapshots taken on a follower and
on the planner, one restored into a fresh directory that then catches up from the
stream after its LSN; and, after the planner is killed with SIGKILL and another node
takes over, a subscriber resuming with ``from_lsn`` on any node getting every change
after it exactly once, while the killed node's entry turns stale.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
from jsonschema import Draft202012Validator

from bench.peers.nats import NatsCluster, start_cluster
from brain.client import Client
from brain.engine.replication.registry import HEARTBEAT_S, STALE_AFTER_S
from brain.server import http_schemas as schemas
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget, ForgetOk
from brain.wire.messages.subscribe_ops import ChangeEvent, Subscribe
from brain.wire.opcodes import Opcode
from tests.integration.conftest import ServerProcess, run_brain, start_server
from tests.integration.httpcall import http_call

SHARD: Final = "ops"
TERM_S: Final = 2.0
"""The lease term of the tests' nodes: a takeover within seconds."""

ENV: Final = {"BRAIN_RETRIEVAL__EMBEDDER": "hashing", "BRAIN_CLUSTER__LEASE_TERM_S": str(TERM_S)}

WAIT_S: Final = 30.0
"""The longest a test waits for a node to reach a state (catch up, take over): many
times what each takes on loopback."""

WRITES: Final = 40
"""Writes of each phase: enough to span several follower rounds."""


@dataclass
class Nodes:
    """The module's cluster and its brain nodes, by node id."""

    nats: NatsCluster
    servers: dict[str, ServerProcess]
    root: Path


def _start(nats: NatsCluster, data: Path, node: str) -> ServerProcess:
    return start_server(
        data, "--cluster", ",".join(nats.servers), "--node", node, "--shard", SHARD, env=ENV
    )


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    """Three NATS servers, and nodes b0 (the planner: started first), b1 and b2."""
    root = tmp_path_factory.mktemp("cluster-ops")
    with start_cluster(root / "nats") as nats:
        servers: dict[str, ServerProcess] = {}
        try:
            servers["b0"] = _start(nats, root / "b0", "b0")
            for name in ("b1", "b2"):
                servers[name] = _start(nats, root / name, name)
            yield Nodes(nats, servers, root)
        finally:
            for server in servers.values():
                server.stop()


def _admin(server: ServerProcess, method: str, path: str) -> tuple[int, dict[str, Any]]:
    token = server.credentials["admin_token"]
    status, body, _ = http_call(
        method, f"http://{server.host}:{server.admin_port}{path}", token=token
    )
    return status, json.loads(body)


def _cluster(server: ServerProcess) -> dict[str, Any]:
    status, body = _admin(server, "GET", "/v1/cluster")
    assert status == 200, body
    Draft202012Validator(schemas.CLUSTER).validate(body)  # as the OpenAPI document says
    return body


def _me(server: ServerProcess) -> dict[str, Any]:
    node = _cluster(server)["node"]
    assert isinstance(node, dict)
    return node


def _wait_for(what: str, check: object, timeout: float = WAIT_S) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.1)


def _metrics(server: ServerProcess) -> str:
    url = f"http://{server.host}:{server.public_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return str(answer.read().decode())


def _metric(text: str, series: str) -> float:
    """The value of ``series`` (a name, with its labels if any) in ``text``."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[1])
    raise AssertionError(f"no series {series}")


def _client(server: ServerProcess) -> Client:
    return Client.connect(server.host, server.wire_port, api_key=server.credentials["api_key"])


def _write(server: ServerProcess, space: str, count: int, tag: str) -> list[tuple[int, bytes]]:
    """``count`` memories in ``space``: each one's (LSN, memory id)."""
    made: list[tuple[int, bytes]] = []
    with _client(server) as client:
        for i in range(count):
            answer = client.call(
                Opcode.ENCODE,
                Encode(request_id=os.urandom(16), text=f"{tag} note {i}", space=space),
            )
            assert isinstance(answer, EncodeOk)
            made.append((answer.lsn, answer.memory_id))
    return made


def _follow(server: ServerProcess, space: str, from_lsn: int, creates: int) -> list[ChangeEvent]:
    """The changes of ``space`` a subscriber on ``server`` receives from ``from_lsn``
    until ``creates`` memories were created (each write here creates one)."""
    seen: list[ChangeEvent] = []
    with _client(server) as client:
        for event in client.stream(
            Opcode.SUBSCRIBE, Subscribe(space=space, from_lsn=from_lsn), timeout=WAIT_S
        ):
            assert isinstance(event, ChangeEvent)
            seen.append(event)
            if len(_created(seen)) >= creates:
                break
    return seen


def _created(events: list[ChangeEvent]) -> list[tuple[int, bytes]]:
    return [(e.lsn, e.id) for e in events if e.op == "create" and e.record == "memory"]


def _assert_exactly(events: list[ChangeEvent], made: list[tuple[int, bytes]]) -> None:
    """``events`` are exactly the changes ``made`` caused: each once, in LSN order."""
    lsns = [e.lsn for e in events]
    assert lsns == sorted(lsns)
    keys = [(e.lsn, e.record, e.id) for e in events]
    assert len(keys) == len(set(keys)), "a change delivered twice"
    assert _created(events) == sorted(made)
    assert {e.lsn for e in events} == {lsn for lsn, _ in made}


def test_every_node_registers_and_shows_the_cluster(nodes: Nodes) -> None:
    planner, follower = nodes.servers["b0"], nodes.servers["b1"]
    made = _write(planner, "reg", 5, "registry")
    last = made[-1][0]
    _wait_for(
        "b1 and b2 caught up in their entries",
        lambda: (
            all(
                entry["applied_lsn"] >= last and entry["state"] == "live"
                for entry in _nodes_of(_cluster(follower))
            )
            and {e["node"] for e in _nodes_of(_cluster(follower))} == {"b0", "b1", "b2"}
        ),
    )
    shown = _cluster(follower)
    assert shown["cluster"] is True and shown["planner"] == "b0"
    me = shown["node"]
    assert isinstance(me, dict)
    assert me["role"] == "follower" and me["node"] == "b1" and me["shard"] == SHARD
    assert me["stream"] == f"BRAIN_LOG_{SHARD}" and me["applied_lsn"] >= last
    assert shown["stale_after_s"] == STALE_AFTER_S and shown["heartbeat_s"] == HEARTBEAT_S
    by_node = {e["node"]: e for e in _nodes_of(shown)}
    assert by_node["b0"]["role"] == "planner" and by_node["b1"]["role"] == "follower"
    # One spell of planning on b0 (it took the free lease at open), none on b1.
    assert (by_node["b0"]["promotions"], me["promotions"]) == (1, 0)
    assert by_node["b0"]["wire"] == f"{planner.host}:{planner.wire_port}"
    assert by_node["b1"]["admin"] == f"{follower.host}:{follower.admin_port}"
    assert all(e["shard"] == SHARD and e["lag_records"] == 0 for e in by_node.values())
    # Entries are rewritten every heartbeat: a later look shows a later revision.
    revision = by_node["b2"]["revision"]
    _wait_for(
        "a newer heartbeat of b2",
        lambda: {e["node"]: e for e in _nodes_of(_cluster(planner))}["b2"]["revision"] > revision,
    )


def _nodes_of(shown: dict[str, Any]) -> list[dict[str, Any]]:
    entries = shown["nodes"]
    assert isinstance(entries, list)
    return entries


def test_a_follower_is_ready_and_reports_replication_in_stats_and_metrics(
    nodes: Nodes,
) -> None:
    planner, follower = nodes.servers["b0"], nodes.servers["b1"]
    made = _write(planner, "metrics", 10, "metrics")
    last = made[-1][0]
    _wait_for("b1 applied the writes", lambda: _me(follower)["applied_lsn"] >= last)
    status, body, _ = http_call("GET", f"http://{follower.host}:{follower.public_port}/readyz")
    assert status == 200, body
    assert json.loads(body)["applied_lsn"] >= last
    code, stats = _admin(follower, "GET", "/v1/stats")
    assert code == 200
    Draft202012Validator(schemas.STATS).validate(stats)
    replication = stats["replication"]
    assert isinstance(replication, dict)
    assert replication["role"] == "follower" and replication["planner"] == "b0"
    assert replication["applied_lsn"] >= last and replication["lag_records"] == 0
    on_follower, on_planner = _metrics(follower), _metrics(planner)
    assert _metric(on_follower, 'brain_replication_role{role="follower"}') == 1
    assert _metric(on_follower, 'brain_replication_role{role="planner"}') == 0
    assert _metric(on_planner, 'brain_replication_role{role="planner"}') == 1
    assert _metric(on_follower, "brain_replication_applied_lsn") >= last
    assert _metric(on_follower, "brain_replication_log_last_lsn") >= last
    assert _metric(on_follower, "brain_replication_lag_records") == 0
    assert _metric(on_follower, "brain_replication_lag_seconds") == 0
    # The planner renews every third of a term: after seconds of serving, several times.
    assert _metric(on_planner, "brain_planner_lease_renewals_total") >= 2
    assert _metric(on_follower, "brain_planner_lease_renewals_total") == 0
    assert _metric(on_planner, "brain_planner_takeovers_total") == 0


def test_a_subscriber_on_a_follower_sees_every_write_of_the_planner_in_order(
    nodes: Nodes,
) -> None:
    planner, follower = nodes.servers["b0"], nodes.servers["b2"]
    first = _write(planner, "feed", 1, "feed first")
    seen: list[ChangeEvent] = []
    # Subscribed on the follower while the planner writes: a replay from the first
    # write, then live.
    subscriber = threading.Thread(
        target=lambda: seen.extend(_follow(follower, "feed", first[0][0], WRITES + 1))
    )
    subscriber.start()
    try:
        made = first + _write(planner, "feed", WRITES, "feed")
    finally:
        subscriber.join(timeout=WAIT_S + 10)
    assert not subscriber.is_alive()
    _assert_exactly(seen, made)


def test_snapshots_on_a_follower_and_the_planner_restore_and_catch_up_from_the_stream(
    nodes: Nodes,
) -> None:
    planner, follower = nodes.servers["b0"], nodes.servers["b1"]
    made = _write(planner, "snap", 10, "before")
    _wait_for("b1 applied the writes", lambda: _me(follower)["applied_lsn"] >= made[-1][0])
    code, taken = _admin(follower, "POST", "/v1/snapshots")
    assert code == 201, taken
    Draft202012Validator(schemas.SNAPSHOT).validate(taken)
    assert taken["log"] == {
        "kind": "jetstream",
        "stream": f"BRAIN_LOG_{SHARD}",
        "shard": SHARD,
        "node": "b1",
    }
    snap_lsn = taken["lsn"]
    assert isinstance(snap_lsn, int) and snap_lsn >= made[-1][0]
    manifest = json.loads((Path(str(taken["path"])) / "MANIFEST.json").read_text())
    assert manifest["log"]["stream"] == f"BRAIN_LOG_{SHARD}" and manifest["lsn"] == snap_lsn
    assert manifest["store_lsn"] == snap_lsn
    code, on_planner = _admin(planner, "POST", "/v1/snapshots")
    assert code == 201, on_planner
    assert on_planner["log"] == {**taken["log"], "node": "b0"}
    assert isinstance(on_planner["lsn"], int) and on_planner["lsn"] >= snap_lsn
    # Written after the follower's snapshot: only the stream holds them for it.
    later = _write(planner, "snap", 10, "after")
    restored = nodes.root / "b3"
    done = run_brain("snapshot", "restore", str(taken["path"]), "--data", str(restored))
    assert done.returncode == 0, done.stderr
    assert f"stream BRAIN_LOG_{SHARD} up to LSN {snap_lsn}" in done.stdout
    assert f"catches up from LSN {snap_lsn + 1}" in done.stdout
    # The restored key store is b1's: so are the secrets that open it.
    shutil.copy(follower.data_dir / "credentials.toml", restored / "credentials.toml")
    node = _start(nodes.nats, restored, "b3")
    nodes.servers["b3"] = node  # stopped with the others
    _wait_for("b3 caught up", lambda: _me(node)["applied_lsn"] >= later[-1][0])
    replayed = [
        line for line in node.output if "recovery applied" in line or "applied the log" in line
    ]
    match = re.search(r"recovery applied (\d+) WAL records, up to LSN (\d+)", "".join(replayed))
    assert match is not None, "".join(node.output)[-3000:]
    count, upto = int(match.group(1)), int(match.group(2))
    assert upto - count == snap_lsn, "recovery did not start after the snapshot's LSN"
    # Every write is there: the ones before the snapshot from it, the rest from the stream.
    _assert_exactly(_follow(node, "snap", 1, len(made) + len(later)), made + later)


SECRET: Final = "the gate phrase is marmoset-7719 brackenwold"
"""A text the forget test writes and hard-forgets: no other text holds its words."""


def _files_holding(root: Path, needle: bytes) -> list[str]:
    held = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and needle in path.read_bytes():
                held.append(str(path.relative_to(root)))
        except FileNotFoundError:  # a server deleted it while the test read
            continue
    return held


def test_a_hard_forget_and_every_node_s_purge_leave_no_byte_of_it_anywhere(
    nodes: Nodes,
) -> None:
    planner = nodes.servers["b0"]
    with _client(planner) as client:
        made = client.call(Opcode.ENCODE, Encode(request_id=os.urandom(16), text=SECRET, space="f"))
        assert isinstance(made, EncodeOk)
    filler = _write(planner, "f", 10, "forget filler")
    for server in nodes.servers.values():
        _wait_for("every node applied it", lambda s=server: _me(s)["applied_lsn"] >= filler[-1][0])
    _wait_for("the text is in files", lambda: len(_files_holding(nodes.root, SECRET.encode())) > 3)
    generation = _me(planner)["log_generation"]
    with _client(planner) as client:
        gone = client.call(
            Opcode.FORGET,
            Forget(request_id=os.urandom(16), memory=made.memory_id, mode="hard", space="f"),
        )
        assert isinstance(gone, ForgetOk)
    for server in nodes.servers.values():
        _wait_for("every node forgot it", lambda s=server: _me(s)["applied_lsn"] >= gone.lsn)
    # The followers purge their own files; the planner's purge compacts the stream.
    for server in sorted(nodes.servers.values(), key=lambda s: s is planner):
        code, purged = _admin(server, "POST", "/v1/purge")
        assert code == 200 and purged == {"purged": 1}, purged
    assert _me(planner)["log_generation"] == generation + 1
    _wait_for("no file holds the text", lambda: not _files_holding(nodes.root, SECRET.encode()))
    # The shard goes on: every node follows the new generation.
    after = _write(planner, "f", 5, "after the compaction")
    for server in nodes.servers.values():
        _wait_for("every node applied it", lambda s=server: _me(s)["applied_lsn"] >= after[-1][0])
        assert _me(server)["log_generation"] == generation + 1
    # A subscriber from the start sees every creation, the forgotten one's included:
    # the change log came along in the base.
    created = [(made.lsn, made.memory_id), *filler, *after]
    assert _created(_follow(nodes.servers["b1"], "f", 1, len(created))) == created


def test_after_the_planner_is_killed_a_resumed_subscriber_gets_every_change_once(
    nodes: Nodes,
) -> None:
    planner = nodes.servers["b0"]
    before = _write(planner, "resume", WRITES, "before")
    middle = before[len(before) // 2][0]
    early = [m for m in before if m[0] <= middle]
    _assert_exactly(_follow(nodes.servers["b1"], "resume", before[0][0], len(early)), early)
    planner.process.send_signal(signal.SIGKILL)
    planner.process.wait(10)
    # Every other node may take over: b3 too, when the snapshot test restored it.
    survivors = [server for name, server in nodes.servers.items() if name != "b0"]
    _wait_for(
        "another node took over",
        lambda: any(_me(s)["role"] == "planner" for s in survivors),
    )
    new = next(s for s in survivors if _me(s)["role"] == "planner")
    assert _metric(_metrics(new), "brain_planner_takeovers_total") == 1
    assert _me(new)["promotions"] == 1
    assert _metric(_metrics(new), 'brain_replication_role{role="planner"}') == 1
    after = _write(new, "resume", WRITES, "after")
    expected = [m for m in before + after if m[0] > middle]
    for server in survivors:
        resumed = _follow(server, "resume", middle + 1, len(expected))
        _assert_exactly(resumed, expected)
        assert _cluster(server)["planner"] == _me(new)["node"]
    # The killed node put nothing since: its entry turns stale against the others'.
    _wait_for(
        "b0's entry is stale",
        lambda: {e["node"]: e for e in _nodes_of(_cluster(survivors[0]))}["b0"]["state"] == "stale",
        timeout=STALE_AFTER_S + 4 * HEARTBEAT_S + 15,
    )
    live = {e["node"]: e["state"] for e in _nodes_of(_cluster(survivors[-1]))}
    assert all(live[name] == "live" for name in nodes.servers if name != "b0")


def test_a_single_node_answers_cluster_false(tmp_path: Path) -> None:
    alone = start_server(tmp_path / "alone", env={"BRAIN_RETRIEVAL__EMBEDDER": "hashing"})
    try:
        shown = _cluster(alone)
        assert shown["cluster"] is False and shown["nodes"] == [] and shown["planner"] is None
        me = shown["node"]
        assert isinstance(me, dict) and me["role"] == "single" and me["node"] is None
        assert "brain_replication_role" not in _metrics(alone)
    finally:
        alone.stop()
