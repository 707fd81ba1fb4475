"""One planner per shard, and followers, on a real three-node JetStream cluster
(spec/05-durability.md §14.3, §14.4): the planner lease taken, renewed and taken over;
a follower applying the stream, answering as the planner does, refusing writes,
waiting for a minimum LSN; the takeover when the planner stops renewing; and a
deposed planner that has not noticed refused by the fence."""

from __future__ import annotations

import asyncio
import json
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from bench.peers.nats import NatsCluster, start_cluster
from brain.engine.database import Database, DatabaseOptions
from brain.engine.replication import JetStreamLogOptions
from brain.engine.replication.follower import FOLLOW_POLL_S
from brain.engine.replication.jetstream_log import JetStreamLog
from brain.engine.replication.lease import (
    LEASE_BUCKET,
    RENEW_FRACTION,
    TAKEOVER_MARGIN_S,
    PlannerLease,
)
from brain.errors import StorageFault, Unavailable
from brain.wire.messages.memory_ops import EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.messages.recall_ops import ArmWeights, Recall, RecallOk
from brain.wire.opcodes import Opcode
from tests.integration.embedded_nodes import encode, node_options

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


def options(cluster: NatsCluster, shard: str, node: str) -> DatabaseOptions:
    return node_options(cluster.servers, shard, node, TERM_S)


def get(db: Database, memory_id: bytes) -> object:
    return db.execute("default", Opcode.MEMORY_GET, MemoryGet(id=memory_id))


def recall(db: Database, cue: str) -> RecallOk:
    only_vectors = ArmWeights(semantic=1.0, lexical=0.0, graph=0.0)
    answer = db.read("default", Opcode.RECALL, Recall(cue=cue, top_k=5, arms=only_vectors))
    assert isinstance(answer, RecallOk)
    return answer


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
        a.on_lost = lost.append
        a.keep()
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


def test_a_follower_applies_the_stream_answers_alike_and_refuses_writes(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    with Database.open(tmp_path / "a", options(cluster, "follow", "a")) as planner:
        assert planner.planner == "a" and planner.read_only_reason is None
        written = [encode(planner, i, f"memory {i} about topic {i % 4}") for i in range(20)]
        with Database.open(tmp_path / "b", options(cluster, "follow", "b")) as follower:
            assert follower.planner == "a"
            answers = [get(planner, w.memory_id) for w in written]
            assert all(isinstance(a, MemoryGetOk) for a in answers)
            assert [get(follower, w.memory_id) for w in written] == answers
            assert follower.stats()["scopes"] == planner.stats()["scopes"]
            assert follower.applied_time <= planner.applied_time
            refused = "follows shard follow, whose writes node a plans"
            with pytest.raises(Unavailable, match=refused):
                encode(follower, 100, "written to a follower")
            assert follower.read_only_reason is not None

            # A minimum LSN nobody wrote yet: refused after the bound, saying so.
            ahead = planner.wal.last_lsn + 1
            started = time.monotonic()
            with pytest.raises(Unavailable, match=f"behind LSN {ahead}.*the planner is a"):
                follower.wait_applied(ahead, 0.5)
            assert 0.5 <= time.monotonic() - started < 2.0

            # The same minimum, written meanwhile: the read waits, then sees it.
            later: list[EncodeOk] = []
            writing = threading.Timer(0.3, lambda: later.append(encode(planner, 200, "late")))
            writing.start()
            try:
                follower.wait_applied(ahead, 10.0)
            finally:
                writing.join()
            assert later and later[0].lsn >= ahead
            follower.wait_applied(later[0].lsn, 10.0)
            assert get(follower, later[0].memory_id) == get(planner, later[0].memory_id)

            # Written while the follower runs: the planner's indexer logs the vectors,
            # and the follower's HNSW index takes them from the stream, so a search on
            # vectors alone ranks alike.
            texts = [f"fresh note {i} on subject {i % 2}" for i in range(6)]
            fresh = [encode(planner, 300 + i, text) for i, text in enumerate(texts)]
            assert planner.wait_indexed(10.0)
            follower.wait_applied(planner.wal.last_lsn, 10.0)
            for cue in ("fresh note 4 on subject 0", "memory 3 about topic 3"):
                found = recall(planner, cue)
                assert found.hits and recall(follower, cue) == found
            top = recall(follower, "fresh note 4 on subject 0").hits[0].memory
            assert top is not None and top.id == fresh[4].memory_id


def test_a_follower_takes_over_when_the_planner_stops_renewing(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    with (
        Database.open(tmp_path / "a", options(cluster, "takeover", "a")) as old,
        Database.open(tmp_path / "b", options(cluster, "takeover", "b")) as new,
    ):
        first = [encode(old, i, f"before the takeover {i}") for i in range(10)]
        new.wait_applied(old.applied_lsn, 10.0)
        lease, follower = old.lease, new.follower
        assert lease is not None and follower is not None
        # The planner stops renewing (as if its process hung), and has not noticed:
        # its own check of the lease is off, so only the fence can stop it.
        lease.abandon()
        assert isinstance(old.wal, JetStreamLog)
        old.wal.may_append = None
        stopped = time.monotonic()
        assert follower.promoted.wait(TAKEOVER_BOUND_S)
        took = time.monotonic() - stopped
        assert TERM_S <= took < TAKEOVER_BOUND_S
        assert new.planner == "b" and new.read_only_reason is None

        # The new planner has every record the old one wrote, and writes after them.
        assert [get(new, w.memory_id) for w in first] == [get(old, w.memory_id) for w in first]
        repeat = encode(new, 0, "before the takeover 0")
        assert repeat.memory_id == first[0].memory_id  # its idempotency record came along
        after = encode(new, 50, "after the takeover")
        assert after.lsn > max(w.lsn for w in first)

        # The deposed planner's next write is refused by the stream's fence, and it
        # follows the shard again: it has the new planner's writes, refuses its own.
        with pytest.raises(Unavailable, match="another writer appended"):
            encode(old, 51, "from the deposed planner")
        assert old.read_only_reason is not None
        latest = encode(new, 52, "the new planner writes on")
        old.wait_applied(latest.lsn, 10.0)
        assert get(old, latest.memory_id) == get(new, latest.memory_id)
        assert get(old, after.memory_id) == get(new, after.memory_id)
        deadline = time.monotonic() + TERM_S  # its next look at the lease names b
        while old.planner != "b":
            assert time.monotonic() < deadline
            time.sleep(FOLLOW_POLL_S)
        with pytest.raises(Unavailable, match="whose writes node b plans"):
            encode(old, 53, "written to the deposed planner")


def test_a_planner_whose_renewal_is_refused_follows_then_takes_the_lease_back(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    with Database.open(tmp_path / "a", options(cluster, "lost", "a")) as planner:
        encode(planner, 1, "while the lease holds")

        async def take_the_key() -> None:
            # Another node writes the key (as a takeover would): the holder's next
            # renewal, fenced at the revision it wrote, is refused.
            client = await nats.connect(servers=list(cluster.servers))
            try:
                kv = await client.jetstream().key_value(LEASE_BUCKET)
                await kv.put("lost", b'{"node": "x", "term_s": 2.0}')
            finally:
                await client.close()

        asyncio.run(take_the_key())
        deadline = time.monotonic() + TERM_S
        while planner.read_only_reason is None:
            assert time.monotonic() < deadline
            time.sleep(FOLLOW_POLL_S)
        lease = planner.lease
        assert lease is not None and not lease.held
        # It follows the node that took the key: its writes are refused, naming it.
        deadline = time.monotonic() + TERM_S
        while planner.planner != "x":
            assert time.monotonic() < deadline
            time.sleep(FOLLOW_POLL_S)
        with pytest.raises(Unavailable, match="whose writes node x plans"):
            encode(planner, 2, "after the lease is lost")
        assert planner.stats()["scopes"]  # reads go on
        # x never renews: a whole term later the node takes the lease back and plans.
        follower = planner.follower
        assert follower is not None and follower.promoted.wait(TAKEOVER_BOUND_S)
        assert planner.planner == "a" and planner.read_only_reason is None
        assert lease.takeovers == 1
        encode(planner, 3, "after the lease came back")


PLANNER_PROCESS = """
import json, sys, time
from brain.engine.database import Database, DatabaseOptions
from brain.engine.replication import JetStreamLogOptions
from brain.wire.messages.memory_ops import Encode
from brain.wire.opcodes import Opcode

servers, shard, path, term = sys.argv[1].split(","), sys.argv[2], sys.argv[3], float(sys.argv[4])
options = DatabaseOptions(
    embedder="hashing",
    jetstream=JetStreamLogOptions(tuple(servers), shard=shard, node="p", lease_term_s=term),
)
db = Database.open(path, options)
ids = []
for n in range(5):
    answer = db.execute(
        "default", Opcode.ENCODE, Encode(request_id=n.to_bytes(16, "big"), text=f"note {n}")
    )
    ids.append(answer.memory_id.hex())
print(json.dumps({"planner": db.planner, "lsn": db.wal.last_lsn, "ids": ids}), flush=True)
time.sleep(600)
"""
"""A planner in a process of its own: it takes the lease, writes, reports, and waits
to be killed."""

PROCESS_START_S = 60.0
"""Time for the planner process to import, open and write: a few seconds."""


def test_a_follower_takes_over_from_a_planner_process_killed_with_sigkill(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    errors = (tmp_path / "planner.err").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            PLANNER_PROCESS,
            ",".join(cluster.servers),
            "killed",
            str(tmp_path / "p"),
            str(TERM_S),
        ],
        stdout=subprocess.PIPE,
        stderr=errors,
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], PROCESS_START_S)
        line = process.stdout.readline() if ready else b""
        assert line, (tmp_path / "planner.err").read_text(errors="replace")[-2000:]
        report = json.loads(line)
        assert report["planner"] == "p"
        with Database.open(tmp_path / "b", options(cluster, "killed", "b")) as new:
            assert new.planner == "p"
            new.wait_applied(report["lsn"], 10.0)
            process.send_signal(signal.SIGKILL)
            process.wait(10.0)
            killed = time.monotonic()
            follower = new.follower
            assert follower is not None and follower.promoted.wait(TAKEOVER_BOUND_S)
            assert time.monotonic() - killed < TAKEOVER_BOUND_S
            assert new.planner == "b"
            for n, memory_id in enumerate(report["ids"]):
                again = encode(new, n, f"note {n}")  # a repeat: answered as written
                assert again.memory_id.hex() == memory_id
            assert encode(new, 99, "after the kill").lsn > report["lsn"]
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10.0)
        if process.stdout is not None:
            process.stdout.close()
        errors.close()


def test_a_store_of_one_shard_is_refused_on_another(cluster: NatsCluster, tmp_path: Path) -> None:
    with Database.open(tmp_path / "a", options(cluster, "guard-one", "a")) as db:
        encode(db, 1, "on shard guard-one")
    # A store that applied records of one stream would read another's LSNs as its own.
    with pytest.raises(StorageFault, match=r"not of BRAIN_LOG_guard-two.*on the shard of stream"):
        Database.open(tmp_path / "a", options(cluster, "guard-two", "a"))
    with pytest.raises(StorageFault, match=r"log BRAIN_LOG_guard-one.*its own log"):
        Database.open(tmp_path / "a", DatabaseOptions(embedder="hashing"))
    with Database.open(tmp_path / "a", options(cluster, "guard-one", "a")) as db:
        assert db.applied_lsn >= 1  # on its own shard it opens as before
