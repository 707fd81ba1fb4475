"""The replicated log on a real three-node JetStream cluster (spec/05-durability.md §14):
acknowledged appends read back, deduplicated retries, the fence, the loss of one
server, and a database rebuilt from the stream on a fresh store."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.js.errors import APIError

from bench.peers.nats import NatsCluster, free_port, start_cluster
from brain.engine.database import Database, DatabaseOptions
from brain.engine.replication import JetStreamLogOptions, jetstream_log
from brain.engine.replication.jetstream_log import (
    CONNECT_DEADLINE_S,
    WRONG_LAST_SEQUENCE,
    JetStreamLog,
)
from brain.engine.wal import RecordLog, WalRecord, encode_record
from brain.errors import LogFenced, StorageFault, Unavailable, WalSyncFailed
from brain.wire.messages.memory_ops import MemoryGet, MemoryGetOk
from brain.wire.opcodes import Opcode
from tests.integration.embedded_nodes import encode


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    """One cluster for the tests that leave all three servers up."""
    with start_cluster(tmp_path_factory.mktemp("nats")) as running:
        yield running


def records(first: int, count: int, tag: bytes = b"") -> list[WalRecord]:
    """``count`` records from LSN ``first`` with distinct payloads."""
    return [
        WalRecord(lsn, 1_700_000_000_000_000_000 + lsn, 1, b"payload %d " % lsn + tag)
        for lsn in range(first, first + count)
    ]


def open_log(cluster: NatsCluster, shard: str) -> JetStreamLog:
    return JetStreamLog.open(JetStreamLogOptions(cluster.servers, shard=shard))


def test_appends_are_acknowledged_by_a_quorum_and_read_back(cluster: NatsCluster) -> None:
    written = records(1, 300)
    with open_log(cluster, "basic") as log:
        assert (log.first_lsn, log.last_lsn, log.next_lsn) == (1, 0, 1)
        assert list(log.read_from(1)) == []
        log.append(written[:1])
        log.append(written[1:])
        log.sync()
        assert log.next_lsn == 301 and log.sync_count == 2
        info = log.info()
        assert info.state.messages == 300 and info.state.last_seq == 300
        assert info.config.num_replicas == 3
        assert info.cluster is not None and len(info.cluster.replicas or []) == 2
        # More than one fetch round (READ_BATCH) and a start in the middle.
        assert list(log.read_from(1)) == written
        assert list(log.read_from(290)) == written[289:]
        with pytest.raises(ValueError, match="LSN 7 where LSN 301 is next"):
            log.append(records(7, 1))
    with open_log(cluster, "basic") as again:
        assert (again.first_lsn, again.last_lsn) == (1, 300)
        assert list(again.read_from(299)) == written[298:]


def test_a_duplicate_message_id_is_stored_once(cluster: NatsCluster) -> None:
    record = records(1, 1)[0]
    with open_log(cluster, "dedupe") as writer, open_log(cluster, "dedupe") as retrying:
        writer.append([record], ids=["request-digest-1"])
        # A retry of the same publish (same id, same fence) from a handle that never
        # saw its acknowledgement: the stream answers it as the record it holds.
        retrying.append([record], ids=["request-digest-1"])
        assert retrying.next_lsn == 2
        assert writer.info().state.messages == 1

        async def publish_again() -> tuple[int, bool | None]:
            client = await nats.connect(servers=list(cluster.servers))
            try:
                ack = await client.jetstream().publish(
                    "brain.log.dedupe",
                    encode_record(record),
                    headers={"Nats-Msg-Id": "request-digest-1"},
                )
                return ack.seq, ack.duplicate
            finally:
                await client.close()

        assert asyncio.run(publish_again()) == (1, True)
        assert writer.info().state.messages == 1
        assert list(writer.read_from(1)) == [record]


def test_a_publish_fenced_at_a_stale_sequence_is_refused(cluster: NatsCluster) -> None:
    with open_log(cluster, "fence") as first, open_log(cluster, "fence") as stale:
        first.append(records(1, 2))
        # ``stale`` opened when the stream was empty: it expects last sequence 0.
        with pytest.raises(LogFenced, match="last sequence 0") as refused:
            stale.append(records(1, 1, b"other"))
        assert refused.value.expected == 0
        assert stale.failed
        with pytest.raises(WalSyncFailed, match="failed earlier"):
            stale.append(records(1, 1, b"other"))
        assert first.info().state.messages == 2
        assert list(first.read_from(1)) == records(1, 2)
        first.append(records(3, 1))

    async def publish_stale() -> int | None:
        client = await nats.connect(servers=list(cluster.servers))
        try:
            await client.jetstream().publish(
                "brain.log.fence",
                b"x",
                headers={"Nats-Expected-Last-Sequence": "1", "Nats-Msg-Id": "new"},
            )
        except APIError as exc:
            return exc.err_code
        finally:
            await client.close()
        return None

    assert asyncio.run(publish_stale()) == WRONG_LAST_SEQUENCE


def test_appends_and_reads_go_on_when_one_server_is_killed(tmp_path: Path) -> None:
    with start_cluster(tmp_path / "nats") as cluster, open_log(cluster, "failover") as log:
        log.append(records(1, 10))
        info = log.info()
        assert info.cluster is not None and info.cluster.leader is not None
        # The stream's leader: the server whose loss asks most of the rest.
        cluster.kill(cluster.node_named(info.cluster.leader))
        started = time.monotonic()
        log.append(records(11, 10))
        failover_s = time.monotonic() - started
        assert log.last_lsn == 20 and not log.failed
        assert list(log.read_from(1)) == records(1, 20)
        after = log.info()
        assert after.state.messages == 20
        assert after.cluster is not None and after.cluster.leader != info.cluster.leader
        assert failover_s < 20


def test_an_unreachable_cluster_is_reported_within_the_connect_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A shorter deadline than the real one: what is under test is that it bounds the wait.
    deadline = CONNECT_DEADLINE_S / 5
    monkeypatch.setattr(jetstream_log, "CONNECT_DEADLINE_S", deadline)
    started = time.monotonic()
    with pytest.raises(StorageFault, match="cannot reach the JetStream cluster"):
        JetStreamLog.open(JetStreamLogOptions((f"nats://127.0.0.1:{free_port()}",)))
    assert time.monotonic() - started < deadline + 2


def test_a_database_on_the_stream_rebuilds_from_it_on_a_fresh_store(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    options = DatabaseOptions(
        embedder="hashing", jetstream=JetStreamLogOptions(cluster.servers, shard="db")
    )
    texts = [f"memory number {i} about topic {i % 3}" for i in range(30)]
    with Database.open(tmp_path / "first", options) as db:
        log: RecordLog = db.wal
        assert isinstance(log, JetStreamLog)
        written = [encode(db, i, text) for i, text in enumerate(texts)]
        applied = db.applied_lsn
        answers = [
            db.execute("default", Opcode.MEMORY_GET, MemoryGet(id=w.memory_id)) for w in written
        ]
        counts = db.stats()["scopes"]
    # Closing may log a little more (the indexer's progress): the stream has it all.
    assert log.last_lsn >= applied >= len(texts)
    applied = log.last_lsn
    # A new store directory: everything comes back from the stream.
    with Database.open(tmp_path / "second", options) as rebuilt:
        assert rebuilt.applied_lsn == applied
        again = [
            rebuilt.execute("default", Opcode.MEMORY_GET, MemoryGet(id=w.memory_id))
            for w in written
        ]
        assert again == answers
        assert all(isinstance(a, MemoryGetOk) for a in again)
        assert rebuilt.stats()["scopes"] == counts
        # It writes on from where the stream ends, deduplicating a repeated request.
        repeat = encode(rebuilt, 0, texts[0])
        assert repeat.memory_id == written[0].memory_id
        assert encode(rebuilt, 100, "one more").lsn > applied


def test_a_second_database_on_the_same_stream_is_fenced_out(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    options = DatabaseOptions(
        embedder="hashing", jetstream=JetStreamLogOptions(cluster.servers, shard="two")
    )
    with (
        Database.open(tmp_path / "a", options) as first,
        Database.open(tmp_path / "b", options) as second,
    ):
        encode(first, 1, "written by the first")
        # The second planned against a log it saw empty: the stream refuses it.
        with pytest.raises(Unavailable, match="another writer appended"):
            encode(second, 2, "written by the second")
        assert second.read_only_reason is not None
        assert first.read_only_reason is None
        encode(first, 3, "the first writes on")
