"""Read-your-writes across nodes on a real cluster (spec/05-durability.md §14.4): three
``nats-server`` processes, a planner and a follower ``brain serve --cluster``. A
client writes on the planner and reads on the follower with the LSN it got, and
always sees its write; a ``min_lsn`` ahead of the log answers UNAVAILABLE on the
follower within the bound, naming the planner, and INVALID_ARGUMENT at once on the
planner."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.peers.nats import start_cluster
from brain.errors import InvalidArgument, Unavailable
from brain.sdk import Brain
from brain.server.min_lsn import MIN_LSN_RETRY_MS
from brain.wire.messages.common import MIN_LSN_WAIT_S
from tests.integration.conftest import ServerProcess, start_server

NODE_ENV = {"BRAIN_RETRIEVAL__EMBEDDER": "hashing", "BRAIN_CLUSTER__LEASE_TERM_S": "2"}

WRITES = 25
"""Write-then-read rounds: each reads on the follower right after the planner's
answer, before the follower's next poll in most rounds, so the wait is exercised."""

SLACK_S = 3.0
"""Scheduling slack on a shared two-core machine over the wait bound."""


@dataclass
class Shard:
    planner: ServerProcess
    follower: ServerProcess


def _node(root: Path, servers: tuple[str, ...], node: str) -> ServerProcess:
    return start_server(
        root / node,
        "--cluster",
        ",".join(servers),
        "--node",
        node,
        "--shard",
        "s0",
        env=NODE_ENV,
    )


@pytest.fixture
def shard(tmp_path: Path) -> Iterator[Shard]:
    with start_cluster(tmp_path / "nats") as nats:
        planner = _node(tmp_path, nats.servers, "b0")
        try:
            follower = _node(tmp_path, nats.servers, "b1")
            try:
                yield Shard(planner, follower)
            finally:
                follower.stop()
        finally:
            planner.stop()


def _connect(node: ServerProcess) -> Brain:
    return Brain.connect(node.host, node.wire_port, api_key=node.credentials["api_key"])


def test_reads_on_the_follower_see_the_clients_writes(shard: Shard) -> None:
    with _connect(shard.planner) as writer, _connect(shard.follower) as reader:
        for round_ in range(WRITES):
            written = writer.remember(f"note {round_}: the kettle is in cupboard {round_}")
            # A point read (answered on the event loop when already applied) …
            assert reader.get_memory(written.id, min_lsn=written.lsn).id == written.id
        # … and a recall, through the read pool, see the last write too.
        last = writer.remember("the spare key hangs behind the door")
        found = reader.recall("spare key", min_lsn=last.lsn, records=["memory"])
        assert any(hit.id == last.id for hit in found.hits)
        assert reader.list_entities(min_lsn=last.lsn).entities == ()


def test_min_lsn_ahead_of_the_log(shard: Shard) -> None:
    with _connect(shard.planner) as writer, _connect(shard.follower) as reader:
        written = writer.remember("the boiler was serviced in March")
        ahead = written.lsn + 1000
        began = time.monotonic()
        with pytest.raises(Unavailable) as refused:
            reader.get_memory(written.id, min_lsn=ahead)
        waited = time.monotonic() - began
        assert MIN_LSN_WAIT_S - 0.5 <= waited <= MIN_LSN_WAIT_S + SLACK_S
        assert refused.value.retry_after_ms == MIN_LSN_RETRY_MS
        message = refused.value.message
        assert f"min_lsn {ahead}" in message and "the planner is b0" in message
        # The follower still serves the reads it can, during and after the refusal.
        assert reader.get_memory(written.id, min_lsn=written.lsn).id == written.id
        # The planner holds the whole log: no wait can reach the LSN, refused at once.
        began = time.monotonic()
        with pytest.raises(InvalidArgument) as beyond:
            writer.get_memory(written.id, min_lsn=ahead)
        assert time.monotonic() - began < 1.0
        assert beyond.value.field == "min_lsn"
