"""A hard forget reaches the JetStream stream (spec/05-durability.md §14.10): after the
forget and a purge on every node, the planner's purge compacts the shard's stream into
a new generation, and no byte of the forgotten text, its embedding or a hash of a word
only it held survives in any node's data directory or in any ``nats-server``'s
storage directory. Followers that had applied the forget go on; a follower behind
it, open or closed meanwhile, starts again from the base; a fresh node rebuilds from
the compacted stream; a compaction a crash cut short (the stream sealed, a copy
incomplete) is finished by the next planner. Real processes: three ``nats-server``."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import nats
import pytest

from bench.peers.nats import NatsCluster, start_cluster
from brain.embed.hashing import HashingEmbedder
from brain.engine.admin.log_compaction import TRIM_STORE_FACTOR
from brain.engine.database import Database, DatabaseOptions
from brain.engine.index.tokens import tokenize
from brain.engine.replication.follower import FOLLOW_POLL_S
from brain.engine.replication.generations import Compaction, stream_name, stream_subject
from brain.engine.replication.jetstream_log import JetStreamLog
from brain.errors import BrainError
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget, MemoryGet, MemoryGetOk
from brain.wire.messages.recall_ops import ArmWeights, Recall, RecallOk
from brain.wire.opcodes import Opcode
from tests.integration.embedded_nodes import encode, node_options
from tests.request_ids import request_id as rid

TERM_S = 2.0
"""The lease term: short, so that a planner closed uncleanly is replaced in seconds."""

SECRET = "the hangar code is osprey-5531 quillfeather"
FILLER = [f"ordinary hangar note {i} about topic {i % 3}" for i in range(24)]
GONE_WORDS = ("osprey", "5531", "quill")
"""Beginnings of the secret's words that no other text holds: the term hashes of its
tokens that begin so must go too."""

TRIM_AFTER_BYTES = 64 * 1024
"""The trim bound of the trimming test's nodes: far under the default, so that a few
hundred writes pass it."""

SCRATCH = 300
"""Memories written to the namespace the trimming test drops."""

SETTLE_S = 20.0
"""How long the test waits for the servers to delete an old generation's files and
for a follower to catch up: the cluster does both in well under a second."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    """One cluster for every test of this file (each test has a shard of its own)."""
    with start_cluster(tmp_path_factory.mktemp("nats")) as running:
        yield running


def options(cluster: NatsCluster, shard: str, node: str) -> DatabaseOptions:
    return node_options(cluster.servers, shard, node, TERM_S)


def get(db: Database, memory_id: bytes) -> object:
    try:
        return db.execute("default", Opcode.MEMORY_GET, MemoryGet(id=memory_id))
    except BrainError as exc:
        return type(exc).__name__


def recall(db: Database, cue: str) -> RecallOk:
    exact = ArmWeights(semantic=0.0, lexical=1.0, graph=0.0)
    answer = db.read("default", Opcode.RECALL, Recall(cue=cue, top_k=5, arms=exact))
    assert isinstance(answer, RecallOk)
    return answer


def needles() -> dict[str, bytes]:
    """What must leave every file: the text, the first bytes of its vector, and the
    term hash of each word only it held."""
    values = HashingEmbedder().embed([SECRET])[0].astype("<f4")
    # The hashing embedder's vectors are sparse: the window of 16 values holding the
    # most non-zero ones is a needle no other file holds by chance.
    start = max(range(len(values) - 16), key=lambda i: int((values[i : i + 16] != 0).sum()))
    vector = values[start : start + 16].tobytes()
    gone = [token for token in tokenize(SECRET) if token.startswith(GONE_WORDS)]
    assert len(gone) == len(GONE_WORDS)
    found = {"text": SECRET.encode(), "vector": vector}
    for word in gone:
        found[f"term {word}"] = hashlib.blake2b(word.encode(), digest_size=8).digest()
    return found


def holding(roots: list[Path], needle: bytes) -> list[str]:
    """Every file under ``roots`` whose bytes hold ``needle``."""
    held: list[str] = []
    for root in roots:
        for path in root.rglob("*"):
            try:
                if path.is_file() and needle in path.read_bytes():
                    held.append(str(path))
            except FileNotFoundError:  # a server deleted it while the test read
                continue
    return held


def nats_dirs(cluster: NatsCluster) -> list[Path]:
    return [node.directory / "jetstream" for node in cluster.nodes]


def wait_clean(roots: list[Path]) -> dict[str, list[str]]:
    """Wait until no file under ``roots`` holds a needle; what still holds one."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        left = {name: holding(roots, n) for name, n in needles().items()}
        left = {name: files for name, files in left.items() if files}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def secret_and_filler(planner: Database, base: int) -> tuple[EncodeOk, list[EncodeOk]]:
    secret = encode(planner, base, SECRET)
    filler = [encode(planner, base + 1 + i, text) for i, text in enumerate(FILLER)]
    assert planner.wait_indexed(10.0)
    return secret, filler


def forget(planner: Database, n: int, memory_id: bytes) -> None:
    planner.execute(
        "default", Opcode.FORGET, Forget(request_id=rid(n), memory=memory_id, mode="hard")
    )
    assert planner.wait_indexed(10.0)


def stream_files_hold_it(cluster: NatsCluster) -> None:
    """Before the forget: the test can see the text in every server's storage."""
    deadline = time.monotonic() + SETTLE_S
    while (
        len({p.split("/jetstream/")[0] for p in holding(nats_dirs(cluster), SECRET.encode())}) < 3
    ):
        assert time.monotonic() < deadline, "the stream's files never held the text"
        time.sleep(0.2)


def same_answers(a: Database, b: Database, ids: list[bytes]) -> None:
    assert [get(b, i) for i in ids] == [get(a, i) for i in ids]
    for cue in ("ordinary hangar note 7", "topic 2"):
        # The hits; how long each waited for its index is its own.
        assert recall(b, cue).hits == recall(a, cue).hits


def test_a_hard_forget_leaves_no_byte_in_any_node_or_nats_server(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    a_dir, b_dir, c_dir = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    with (
        Database.open(a_dir, options(cluster, "purge", "a")) as planner,
        Database.open(b_dir, options(cluster, "purge", "b")) as follower,
    ):
        secret, filler = secret_and_filler(planner, 0)
        follower.wait_applied(planner.applied_lsn, SETTLE_S)
        for db in (planner, follower):
            db.retrieval.indexes.save_dirty()
        stream_files_hold_it(cluster)
        for name, needle in needles().items():
            assert holding([a_dir, b_dir], needle), f"the nodes never held the {name}"

        forget(planner, 100, secret.memory_id)
        follower.wait_applied(planner.applied_lsn, SETTLE_S)
        assert follower.purge() == 1
        assert planner.purge() == 1
        assert isinstance(planner.wal, JetStreamLog)
        made = planner.wal.compaction
        assert planner.wal.generation == 1 and made is not None
        assert made.compacted_to == planner.applied_lsn

        assert wait_clean([a_dir, b_dir, *nats_dirs(cluster)]) == {}

        # Every node still answers alike, and takes the writes after the compaction.
        later = encode(planner, 200, "written after the compaction")
        follower.wait_applied(later.lsn, SETTLE_S)
        ids = [w.memory_id for w in filler] + [later.memory_id, secret.memory_id]
        same_answers(planner, follower, ids)
        husk = get(follower, secret.memory_id)
        assert isinstance(husk, MemoryGetOk) and husk.memory.forgotten == "hard"
        assert husk.memory.text is None
        assert isinstance(follower.wal, JetStreamLog) and follower.wal.generation == 1
        assert follower.replication_status().log_generation == 1
        assert planner.replication_status().log_generation == 1

        # A node that never saw the first generation rebuilds from the base.
        with Database.open(c_dir, options(cluster, "purge", "c")) as fresh:
            fresh.wait_applied(later.lsn, SETTLE_S)
            same_answers(planner, fresh, ids)
            assert wait_clean([c_dir]) == {}
        assert encode(planner, 200, "written after the compaction").lsn == later.lsn


def test_a_node_closed_during_the_compaction_starts_again_from_the_base(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with Database.open(a_dir, options(cluster, "closed", "a")) as planner:
        with Database.open(b_dir, options(cluster, "closed", "b")) as follower:
            secret, filler = secret_and_filler(planner, 0)
            follower.wait_applied(planner.applied_lsn, SETTLE_S)
            follower.retrieval.indexes.save_dirty()
        assert holding([b_dir], SECRET.encode())
        more = [encode(planner, 50 + i, f"while b is away {i}") for i in range(5)]
        forget(planner, 100, secret.memory_id)
        assert planner.purge() == 1
        with Database.open(b_dir, options(cluster, "closed", "b")) as back:
            back.wait_applied(planner.applied_lsn, SETTLE_S)
            assert wait_clean([b_dir]) == {}
            ids = [w.memory_id for w in filler + more] + [secret.memory_id]
            same_answers(planner, back, ids)
            later = encode(planner, 200, "after b came back")
            back.wait_applied(later.lsn, SETTLE_S)
            assert get(back, later.memory_id) == get(planner, later.memory_id)


def test_a_follower_behind_the_compaction_starts_again_while_it_runs(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with (
        Database.open(a_dir, options(cluster, "behind", "a")) as planner,
        Database.open(b_dir, options(cluster, "behind", "b")) as follower,
    ):
        secret, filler = secret_and_filler(planner, 0)
        follower.wait_applied(planner.applied_lsn, SETTLE_S)
        held_at = follower.applied_lsn
        # The follower's writer is held, so it applies nothing of what follows: it
        # reads the first write and waits to apply it while the rest is written.
        release = threading.Event()
        follower.writer.between_batches(lambda: release.wait(60))
        more = [encode(planner, 50, "while b is held 0")]
        time.sleep(10 * FOLLOW_POLL_S)
        more += [encode(planner, 50 + i, f"while b is held {i}") for i in range(1, 5)]
        forget(planner, 100, secret.memory_id)
        assert planner.purge() == 1
        assert follower.applied_lsn == held_at
        assert follower.follower is not None and follower.follower.restarts == 0
        release.set()
        follower.wait_applied(planner.applied_lsn, SETTLE_S)
        assert follower.follower.restarts == 1
        assert isinstance(follower.wal, JetStreamLog) and follower.wal.generation == 1
        ids = [w.memory_id for w in filler + more] + [secret.memory_id]
        same_answers(planner, follower, ids)
        follower.retrieval.indexes.save_dirty()
        assert wait_clean([a_dir, b_dir, *nats_dirs(cluster)]) == {}
        vectors = ArmWeights(semantic=1.0, lexical=0.0, graph=0.0)
        cue = Recall(cue=FILLER[5], top_k=3, arms=vectors)
        found = follower.read("default", Opcode.RECALL, cue)
        assert isinstance(found, RecallOk) and found.hits
        assert found.hits[0].memory is not None and found.hits[0].memory.id == filler[5].memory_id


async def _seal_and_leave_a_copy(servers: tuple[str, ...], shard: str, lsn: int) -> None:
    """What a planner killed in the middle of a compaction leaves: its stream sealed,
    and the next generation created with only part of its base."""
    client = await nats.connect(list(servers))
    try:
        js = client.jetstream()
        info = await js.stream_info(stream_name(shard, 0))
        config = info.config
        config.sealed = True
        await js.update_stream(config)
        copy = info.config
        copy.name = stream_name(shard, 1)
        copy.subjects = [stream_subject(shard, 1)]
        copy.sealed = False
        copy.description = Compaction(lsn, 5).describe()
        await js.add_stream(copy)
        await js.publish(stream_subject(shard, 1), b"part of a base", stream=copy.name)
    finally:
        await client.close()


def test_a_compaction_cut_short_is_finished_by_the_next_planner(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    a_dir = tmp_path / "a"
    with Database.open(a_dir, options(cluster, "cut", "a")) as planner:
        written = [encode(planner, i, text) for i, text in enumerate(FILLER)]
        assert planner.wait_indexed(10.0)
        before = [get(planner, w.memory_id) for w in written]
        last = planner.applied_lsn
    asyncio.run(_seal_and_leave_a_copy(cluster.servers, "cut", last))
    with Database.open(a_dir, options(cluster, "cut", "a")) as planner:
        # At open it takes the lease and finds its stream sealed: it compacts it.
        deadline = time.monotonic() + SETTLE_S
        assert isinstance(planner.wal, JetStreamLog)
        while planner.wal.generation < 2:
            assert time.monotonic() < deadline, "the sealed stream was not compacted"
            time.sleep(0.1)
        made = planner.wal.compaction
        assert made is not None and made.compacted_to == last
        after = encode(planner, 100, "after the compaction was finished")
        assert after.lsn == last + 1
        with Database.open(tmp_path / "b", options(cluster, "cut", "b")) as fresh:
            fresh.wait_applied(after.lsn, SETTLE_S)
            assert [get(fresh, w.memory_id) for w in written] == before
            assert get(fresh, after.memory_id) == get(planner, after.memory_id)
    names = asyncio.run(_stream_names(cluster.servers))
    assert [n for n in names if n.startswith("BRAIN_LOG_cut")] == [stream_name("cut", 2)]


async def _stream_names(servers: tuple[str, ...]) -> list[str]:
    client = await nats.connect(list(servers))
    try:
        answer = await client.request("$JS.API.STREAM.NAMES", b"{}", timeout=5)
        return sorted(json.loads(answer.data).get("streams") or [])
    finally:
        await client.close()


def test_an_old_generation_left_behind_is_deleted_by_the_follower_that_finds_it(
    cluster: NatsCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with (
        Database.open(tmp_path / "a", options(cluster, "left", "a")) as planner,
        Database.open(tmp_path / "b", options(cluster, "left", "b")) as follower,
    ):
        secret, filler = secret_and_filler(planner, 0)
        forget(planner, 100, secret.memory_id)
        follower.wait_applied(planner.applied_lsn, SETTLE_S)

        async def cannot_delete(number: int) -> None:
            raise OSError("the cluster did not answer")

        # As if the planner lost the cluster right after the copy was complete.
        monkeypatch.setattr(planner.wal, "_delete_older", cannot_delete)
        with caplog.at_level(logging.WARNING, logger="brain.engine"):
            assert planner.purge() == 1
        assert "deleting the generations before BRAIN_LOG_left~1" in caplog.text
        assert isinstance(planner.wal, JetStreamLog) and planner.wal.generation == 1
        deadline = time.monotonic() + SETTLE_S
        while stream_name("left", 0) in asyncio.run(_stream_names(cluster.servers)):
            assert time.monotonic() < deadline, "the follower did not delete the old generation"
            time.sleep(0.2)
        assert isinstance(follower.wal, JetStreamLog) and follower.wal.generation == 1
        later = encode(planner, 200, "after the old generation went")
        follower.wait_applied(later.lsn, SETTLE_S)
        same_answers(planner, follower, [w.memory_id for w in filler] + [later.memory_id])


def trimming(cluster: NatsCluster, node: str) -> DatabaseOptions:
    """Options of a node of shard ``trim`` that trims its stream past 64 KiB."""
    opts = options(cluster, "trim", node)
    assert opts.jetstream is not None
    return replace(opts, jetstream=replace(opts.jetstream, trim_after_bytes=TRIM_AFTER_BYTES))


def test_a_stream_far_larger_than_the_store_is_trimmed_at_a_checkpoint(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    with (
        Database.open(tmp_path / "a", trimming(cluster, "a")) as planner,
        Database.open(tmp_path / "b", trimming(cluster, "b")) as follower,
    ):
        assert isinstance(planner.wal, JetStreamLog)
        kept = [encode(planner, i, text) for i, text in enumerate(FILLER)]
        for i in range(SCRATCH):
            scratch = Encode(request_id=rid(1000 + i), text=f"scratch note {i} of many")
            planner.execute("scratch", Opcode.ENCODE, scratch)
        # A stream no larger than what it built is not trimmed: a copy saves nothing.
        planner.checkpoint()
        grown = planner.wal.stream_bytes
        assert grown > TRIM_AFTER_BYTES
        assert grown < TRIM_STORE_FACTOR * planner._store.live_bytes()
        assert planner.wal.generation == 0

        # Dropped, the scratch namespace leaves its records in the stream and not in
        # the store: the next checkpoint compacts the stream to the store's rows.
        assert planner.drop_namespace("scratch") > 0
        assert planner.wal.stream_bytes >= TRIM_STORE_FACTOR * planner._store.live_bytes()
        planner.checkpoint()
        made = planner.wal.compaction
        assert planner.wal.generation == 1 and made is not None
        assert made.compacted_to == planner.applied_lsn
        assert planner.wal.stream_bytes < grown // 2
        # Nothing written since: the next checkpoint has nothing to trim.
        planner.checkpoint()
        assert planner.wal.generation == 1

        later = encode(planner, 200, "written after the trim")
        follower.wait_applied(later.lsn, SETTLE_S)
        assert isinstance(follower.wal, JetStreamLog) and follower.wal.generation == 1
        ids = [w.memory_id for w in kept] + [later.memory_id]
        same_answers(planner, follower, ids)
        with Database.open(tmp_path / "c", trimming(cluster, "c")) as fresh:
            fresh.wait_applied(later.lsn, SETTLE_S)
            same_answers(planner, fresh, ids)
