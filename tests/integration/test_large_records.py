"""A write larger than one message of the replicated log (spec/05-durability.md §14.12)
on a NATS cluster whose servers take the default 1 MiB messages: the planner logs its
plan in parts and answers; the shard goes on taking writes; a follower, a fresh node and
a planner taking over read it whole; parts a deposed planner left without the rest are
never applied; a compaction's base holds a large row in parts, and a node starting
from that base has it. Real processes: three ``nats-server``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

import pytest

from bench.peers.nats import NatsCluster, start_cluster
from brain.engine.database import Database, DatabaseOptions
from brain.engine.replication import JetStreamLogOptions
from brain.engine.replication.generations import Compaction
from brain.engine.replication.jetstream_log import JetStreamLog
from brain.engine.wal import WalRecord
from brain.engine.wal.parts import PART_RECORD_KIND, join_parts, record_count, split_record
from brain.engine.write.plan import PLAN_RECORD_KIND
from brain.wire.messages.memory_ops import EncodeOk, Forget, MemoryGet, MemoryGetOk
from brain.wire.opcodes import Opcode
from tests.integration.embedded_nodes import encode, node_options
from tests.request_ids import request_id as rid

MAX_PAYLOAD: Final = 1024 * 1024
"""NATS's default message limit, which a large memory's plan is over."""

TERM_S: Final = 2.0
"""The lease term: short, so that a closed planner is replaced in seconds."""

SETTLE_S: Final = 30.0
"""How long a follower gets to catch up or to take over: it does in seconds."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    """One cluster for every test of this file (each test has a shard of its own)."""
    with start_cluster(tmp_path_factory.mktemp("nats"), max_payload=MAX_PAYLOAD) as running:
        yield running


def options(cluster: NatsCluster, shard: str, node: str) -> DatabaseOptions:
    return node_options(cluster.servers, shard, node, TERM_S)


PLAN_OVER_LIMIT: Final = 160 * 1024
"""A text of distinct words this long makes a plan (text, postings, vector) of over
2 MiB: over one message, and quick to write, apply and read on three nodes."""

ROW_OVER_LIMIT: Final = 900 * 1024
"""A text this long (under the wire's 1 MiB text limit) makes a memory row larger
than a base record holds (seven eighths of a message), so the base has it in parts."""


def big_text(seed: int, size: int = PLAN_OVER_LIMIT) -> str:
    """A text of ``size`` UTF-8 bytes with many distinct words, so that its plan is
    over one message of the log."""
    words: list[str] = []
    total = 0
    i = 0
    while total < size:
        word = f"w{seed}x{i}"
        words.append(word)
        total += len(word) + 1
        i += 1
    return " ".join(words)[:size]


def text_of(db: Database, memory_id: bytes) -> str | None:
    answer = db.execute("default", Opcode.MEMORY_GET, MemoryGet(id=memory_id))
    assert isinstance(answer, MemoryGetOk)
    return answer.memory.text


def wait_planner(db: Database, name: str) -> None:
    """Wait until ``db`` is its shard's planner, taking writes."""
    deadline = time.monotonic() + SETTLE_S
    while db.planner != name or db.read_only_reason is not None:
        assert time.monotonic() < deadline, f"{name} never became the planner"
        time.sleep(0.05)


def log_of(db: Database) -> JetStreamLog:
    assert isinstance(db.wal, JetStreamLog)
    return db.wal


def test_a_write_over_the_message_limit_is_logged_in_parts_and_read_whole(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    with (
        Database.open(tmp_path / "a", options(cluster, "big", "a")) as planner,
        Database.open(tmp_path / "b", options(cluster, "big", "b")) as follower,
    ):
        wal = log_of(planner)
        assert wal.max_record_payload < MAX_PAYLOAD
        before = wal.next_lsn
        text = big_text(1)
        large = encode(planner, 1, text)
        # Its answer's LSN is its first part's; the log went on past its parts.
        assert large.lsn == before
        assert wal.next_lsn > before + 1
        kinds = [record.kind for record in wal.read_from(before)]
        assert kinds[0] == PART_RECORD_KIND and set(kinds) == {PART_RECORD_KIND}
        assert planner.applied_lsn == wal.last_lsn
        # The shard is not stalled: small and large writes in one group commit.
        texts = [f"a small note {i}" for i in range(6)] + [big_text(2), big_text(3)]
        with ThreadPoolExecutor(len(texts)) as pool:
            answers = list(pool.map(lambda n: encode(planner, 10 + n, texts[n]), range(8)))
        assert len({a.lsn for a in answers}) == len(answers)
        written = [(large, text), *zip(answers, texts, strict=True)]
        for answer, expected in written:
            assert text_of(planner, answer.memory_id) == expected
        assert encode(planner, 1, text).memory_id == large.memory_id  # a retry, deduplicated

        follower.wait_applied(planner.applied_lsn, SETTLE_S)
        for answer, expected in written:
            assert text_of(follower, answer.memory_id) == expected

        with Database.open(tmp_path / "c", options(cluster, "big", "c")) as fresh:
            fresh.wait_applied(planner.applied_lsn, SETTLE_S)
            for answer, expected in written:
                assert text_of(fresh, answer.memory_id) == expected


def test_parts_a_deposed_planner_left_are_never_applied(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    with Database.open(tmp_path / "a", options(cluster, "torn", "a")) as planner:
        kept = encode(planner, 1, "written before the torn parts")
    # What a planner deposed while it appended a large plan leaves: its first parts.
    torn_text = "torn plan " * 300_000
    with JetStreamLog.open(JetStreamLogOptions(cluster.servers, shard="torn")) as log:
        lsn = log.next_lsn
        parts = split_record(
            lsn, time.time_ns(), PLAN_RECORD_KIND, torn_text.encode(), log.max_record_payload
        )
        assert len(parts) >= 3
        log.append(parts[:-1])
        torn_end = log.last_lsn
    assert torn_end == lsn + len(parts) - 2
    with (
        Database.open(tmp_path / "a", options(cluster, "torn", "a")) as planner,
        Database.open(tmp_path / "b", options(cluster, "torn", "b")) as follower,
    ):
        wait_planner(planner, "a")
        # The planner applied nothing of the torn parts, and appends after them; the
        # next whole record stands for their LSNs.
        after = encode(planner, 2, "written after the torn parts")
        assert after.lsn > torn_end
        assert planner.applied_lsn >= after.lsn
        wholes = list(join_parts(log_of(planner).read_from(lsn)))
        assert wholes[0].first == lsn and wholes[0].lsn == torn_end + 1
        assert wholes[-1].lsn == after.lsn
        assert all(whole.kind == PLAN_RECORD_KIND for whole in wholes)
        follower.wait_applied(after.lsn, SETTLE_S)
        follows = follower.read_only_reason
        for db in (planner, follower):
            assert text_of(db, kept.memory_id) == "written before the torn parts"
            assert text_of(db, after.memory_id) == "written after the torn parts"
            assert db.applied_lsn >= after.lsn and db.read_only_reason in (None, follows)


def test_a_compaction_base_holds_a_large_row_in_parts(cluster: NatsCluster, tmp_path: Path) -> None:
    with (
        Database.open(tmp_path / "a", options(cluster, "based", "a")) as planner,
        Database.open(tmp_path / "b", options(cluster, "based", "b")) as follower,
    ):
        text = big_text(4, ROW_OVER_LIMIT)
        large = encode(planner, 1, text)
        gone = encode(planner, 2, "a secret to forget")
        planner.execute(
            "default", Opcode.FORGET, Forget(request_id=rid(3), memory=gone.memory_id, mode="hard")
        )
        follower.wait_applied(planner.applied_lsn, SETTLE_S)
        assert follower.purge() == 1
        assert planner.purge() == 1
        wal = log_of(planner)
        made = wal.compaction
        assert wal.generation == 1 and made is not None
        assert made.compacted_to == planner.applied_lsn
        assert PART_RECORD_KIND in {record.kind for record in wal.read_base()}
        later = encode(planner, 4, big_text(5))
        assert later.lsn > made.compacted_to
        with Database.open(tmp_path / "c", options(cluster, "based", "c")) as fresh:
            for db in (follower, fresh):
                db.wait_applied(later.lsn, SETTLE_S)
                assert text_of(db, large.memory_id) == text
                assert text_of(db, later.memory_id) == big_text(5)
                assert text_of(db, gone.memory_id) is None


def test_a_planner_taking_over_reads_and_writes_large_plans(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    planner = Database.open(tmp_path / "a", options(cluster, "over", "a"))
    try:
        with Database.open(tmp_path / "b", options(cluster, "over", "b")) as follower:
            first: EncodeOk = encode(planner, 1, big_text(6))
            planner.close()
            # The planner closed: the follower takes the lease and goes on.
            wait_planner(follower, "b")
            assert text_of(follower, first.memory_id) == big_text(6)
            second = encode(follower, 2, big_text(7))
            assert second.lsn > first.lsn
            assert text_of(follower, second.memory_id) == big_text(7)
    finally:
        planner.close()


def test_a_base_longer_than_the_log_ends_past_its_last_lsn(cluster: NatsCluster) -> None:
    options = JetStreamLogOptions(cluster.servers, shard="longer")
    with JetStreamLog.open(options) as log:
        log.append([WalRecord(lsn, 1, PLAN_RECORD_KIND, b"plan %d" % lsn) for lsn in (1, 2)])
        payloads = [b"small", bytes(2 * log.max_record_payload), b"tail"]
        count = sum(record_count(len(p), log.max_record_payload) for p in payloads)
        assert count == 5
        log.compact(lambda: iter(payloads), count, kind=PLAN_RECORD_KIND, record_time=9)
        assert log.compaction == Compaction(compacted_to=5, base=5)
        assert [whole.payload for whole in join_parts(log.read_base())] == payloads
        assert log.next_lsn == 6
        log.append([WalRecord(6, 10, PLAN_RECORD_KIND, b"after")])
    with JetStreamLog.open(options) as again:
        assert (again.first_lsn, again.last_lsn) == (1, 6)
        assert [r.payload for r in again.read_from(6)] == [b"after"]
        with pytest.raises(ValueError, match="-1 base records"):
            again.compact(lambda: iter([]), -1, kind=PLAN_RECORD_KIND, record_time=9)
