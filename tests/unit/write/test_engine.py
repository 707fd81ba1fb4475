"""The embedded engine: writes, reads, idempotency, recovery, faults, scope isolation."""

from __future__ import annotations

import errno
import hashlib
from pathlib import Path

import lmdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import brain
from brain import cbor
from brain.engine.database import Database, DatabaseOptions
from brain.engine.store.env import TABLES
from brain.engine.store.scope import Scope
from brain.engine.write.idempotency import Swept, sweep
from brain.errors import IdempotencyConflict, NotFound, Unavailable
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.opcodes import Opcode
from tests.request_ids import request_id as rid


def encode(
    db: Database, n: int, text: str, ns: str = "default", space: str | None = None
) -> EncodeOk:
    answer = db.execute(ns, Opcode.ENCODE, Encode(request_id=rid(n), text=text, space=space))
    assert isinstance(answer, EncodeOk)
    return answer


def get(
    db: Database, memory_id: bytes, ns: str = "default", space: str | None = None
) -> MemoryGetOk:
    answer = db.execute(ns, Opcode.MEMORY_GET, MemoryGet(id=memory_id, space=space))
    assert isinstance(answer, MemoryGetOk)
    return answer


def test_encode_and_get(db: Database) -> None:
    first = encode(db, 1, "Alice moved to Globex.")
    assert first.lsn == 1 and not first.deduplicated
    assert first.sha256 == hashlib.sha256(b"Alice moved to Globex.").digest()
    memory = get(db, first.memory_id).memory
    assert memory.text == "Alice moved to Globex." and memory.recorded_at == first.recorded_at
    again = encode(db, 2, "Alice moved to Globex.")
    assert again.deduplicated and again.memory_id == first.memory_id and again.lsn > first.lsn


def test_record_times_strictly_increase(db: Database) -> None:
    times = [encode(db, i, f"text {i}").recorded_at for i in range(50)]
    assert times == sorted(set(times))


def test_idempotent_repeat_returns_the_first_bytes(db: Database) -> None:
    request = Encode(request_id=rid(7), text="once")
    first = db.submit("default", Opcode.ENCODE, request).result()
    assert db.wait_indexed()
    written = db.applied_lsn  # the write, and the indexer's vector for it
    second = db.submit("default", Opcode.ENCODE, request).result()
    assert first == second
    assert db.wait_indexed() and db.applied_lsn == written  # the repeat wrote nothing
    with pytest.raises(IdempotencyConflict) as info:
        db.submit("default", Opcode.ENCODE, Encode(request_id=rid(7), text="twice")).result()
    assert info.value.field == "request_id"


def memory_count(db: Database) -> int:
    """How many memory rows the store holds, over every scope."""
    with db._store.read() as txn:
        return sum(1 for _ in txn.cursor(db=db._store.table(b"memories")))


def test_duplicate_request_ids_in_one_batch(db: Database) -> None:
    request = Encode(request_id=rid(9), text="racing")
    futures = [db.submit("default", Opcode.ENCODE, request) for _ in range(50)]
    answers = {f.result() for f in futures}
    assert len(answers) == 1
    assert db.wait_indexed()
    assert memory_count(db) == 1


def test_scopes_do_not_see_each_other(db: Database) -> None:
    a = encode(db, 1, "shared text", ns="alpha")
    b = encode(db, 1, "shared text", ns="beta")  # same request_id and text, other namespace
    c = encode(db, 1, "shared text", ns="alpha", space="work")
    assert len({a.memory_id, b.memory_id, c.memory_id}) == 3
    assert not (a.deduplicated or b.deduplicated or c.deduplicated)
    with pytest.raises(NotFound):
        get(db, a.memory_id, ns="beta")
    with pytest.raises(NotFound):
        get(db, a.memory_id, ns="alpha", space="work")
    assert get(db, c.memory_id, ns="alpha", space="work").memory.text == "shared text"


def test_every_key_starts_with_its_scope(tmp_path: Path) -> None:
    scopes = [Scope("alpha", "default"), Scope("beta", "default"), Scope("alpha", "work")]
    with brain.open(tmp_path / "d") as db:
        for i, scope in enumerate(scopes):
            for j in range(5):
                encode(db, j, f"t{j}", ns=scope.namespace, space=scope.space)
            encode(db, 100 + i, "t0", ns=scope.namespace, space=scope.space)
    env = lmdb.open(
        str(tmp_path / "d" / "lmdb"), max_dbs=len(TABLES) + 4, readonly=True, lock=False
    )
    prefixes = {s.prefix for s in scopes}
    try:
        for name in TABLES:
            if name == b"meta":
                continue
            with env.begin() as txn:
                for key, _ in txn.cursor(db=env.open_db(name, txn=txn, create=False)):
                    raw = bytes(key)
                    assert raw[:32] in prefixes, (name, raw.hex())
    finally:
        env.close()


def test_recovery_applies_each_record_once(tmp_path: Path) -> None:
    path = tmp_path / "d"
    db = brain.open(path)
    answers = [
        db.submit("default", Opcode.ENCODE, Encode(request_id=rid(i), text=f"m{i}"))
        for i in range(100)
    ]
    payloads = [f.result() for f in answers]
    assert db.wait_indexed()
    logged_lsn = db.applied_lsn + 1

    # Crash between the WAL sync and the LMDB commit: the batch is only in the log.
    def crash() -> None:
        raise lmdb.Error("injected crash before commit")

    db.writer.inject_fault_before_commit(crash)
    with pytest.raises(Unavailable):
        db.submit("default", Opcode.ENCODE, Encode(request_id=rid(500), text="logged")).result()
    assert db.read_only_reason is not None
    db.close()

    db = brain.open(path)
    try:
        assert db.applied_lsn >= logged_lsn  # replayed (the indexer may have written since)
        assert db.wait_indexed()
        settled = db.applied_lsn
        retried = db.submit(
            "default", Opcode.ENCODE, Encode(request_id=rid(500), text="logged")
        ).result()
        first = EncodeOk.from_wire(cbor.decode(retried))
        assert first.lsn == logged_lsn and get(db, first.memory_id).memory.text == "logged"
        assert db.applied_lsn == settled  # the retry created nothing
        for i, payload in enumerate(payloads):
            again = db.submit("default", Opcode.ENCODE, Encode(request_id=rid(i), text=f"m{i}"))
            assert again.result() == payload
        later = encode(db, 1000, "after recovery")
        assert later.lsn > settled and later.recorded_at > first.recorded_at
    finally:
        db.close()


def test_reopen_replays_wal_after_lost_lmdb_commit(tmp_path: Path) -> None:
    # The store keeps its state, the WAL its records; reopening twice changes nothing.
    path = tmp_path / "d"
    with brain.open(path) as db:
        ids = [encode(db, i, f"x{i}").memory_id for i in range(20)]
        assert db.wait_indexed()
        final = db.applied_lsn
    for _ in range(2):
        with brain.open(path) as db:
            assert db.applied_lsn == final
            assert [get(db, m).memory.text for m in ids] == [f"x{i}" for i in range(20)]


def test_fsync_failure_turns_read_only_and_keeps_what_was_acknowledged(tmp_path: Path) -> None:
    calls = {"n": 0, "fail": False}

    def fsync(fd: int) -> None:
        calls["n"] += 1
        if calls["fail"]:
            raise OSError(errno.EIO, "injected EIO")

    path = tmp_path / "d"
    db = Database.open(path, DatabaseOptions(fsync=fsync))
    kept = encode(db, 1, "acknowledged before the fault")
    calls["fail"] = True
    with pytest.raises(Unavailable):
        encode(db, 2, "during the fault")
    assert db.read_only_reason is not None and "EIO" in db.read_only_reason
    failures = calls["n"]
    with pytest.raises(Unavailable):
        encode(db, 3, "after the fault")
    assert calls["n"] == failures  # never retries the fsync
    assert get(db, kept.memory_id).memory.text == "acknowledged before the fault"  # reads work
    db.close()
    with brain.open(path) as reopened:
        assert get(reopened, kept.memory_id).memory.text == "acknowledged before the fault"
        # The failed batch reached the file but not (we were told) the disk: it may or
        # may not be there after a restart, and a retry settles it either way, once.
        retried = encode(reopened, 2, "during the fault")
        assert get(reopened, retried.memory_id).memory.text == "during the fault"
        assert encode(reopened, 2, "during the fault") == retried
        again = encode(reopened, 4, "writable again")
        # Applied, and readable; the indexer may have logged its own write after it.
        assert again.lsn <= reopened.applied_lsn
        assert get(reopened, again.memory_id).memory.text == "writable again"


def test_map_grows_when_full(tmp_path: Path) -> None:
    with Database.open(tmp_path / "d", DatabaseOptions(map_size=256 * 1024)) as db:
        big = "x" * 20_000
        ids = [encode(db, i, f"{i}{big}").memory_id for i in range(60)]
        assert db.statistics().lmdb_map_bytes > 256 * 1024
        assert get(db, ids[-1]).memory.text == f"59{big}"


def test_idempotency_sweep_leaves_a_mark_that_refuses_a_late_retry(tmp_path: Path) -> None:
    with brain.open(tmp_path / "d") as db:
        encode(db, 1, "old")
        stamp = encode(db, 2, "new").recorded_at
        assert sweep(db._store, older_than=stamp) == Swept(marked=1, removed=0)
        # The swept request is refused, whatever it asks: it may have been done.
        with pytest.raises(IdempotencyConflict, match="idempotency retention"):
            encode(db, 1, "old")
        with pytest.raises(IdempotencyConflict, match="idempotency retention"):
            encode(db, 1, "other")
        # A young one still replays, and still refuses other content.
        assert encode(db, 2, "new").recorded_at == stamp
        with pytest.raises(IdempotencyConflict, match="different request"):
            encode(db, 2, "changed")
        # Sweeping again finds nothing new to mark; the mark goes at its own horizon.
        assert sweep(db._store, older_than=stamp, marks_older_than=0) == Swept(0, 0)
        assert sweep(db._store, older_than=stamp, marks_older_than=stamp) == Swept(0, 1)
        # With the mark gone the request_id is new again (the text is deduplicated).
        assert db.wait_indexed()
        settled = db.applied_lsn
        again = encode(db, 1, "old")
        assert again.deduplicated and again.lsn == settled + 1


def test_idempotency_retention_is_an_option(tmp_path: Path) -> None:
    """The database sweeps at each checkpoint by its own retention, and the sweep is
    kept by that checkpoint: after a reopen the late retry is still refused."""
    options = DatabaseOptions(idempotency_retention_ns=1)
    with Database.open(tmp_path / "d", options) as db:
        encode(db, 1, "old")
        encode(db, 2, "young")
        db.checkpoint()
        with pytest.raises(IdempotencyConflict, match="idempotency retention"):
            encode(db, 1, "old")
    with (
        Database.open(tmp_path / "d") as db,
        pytest.raises(IdempotencyConflict, match="idempotency retention"),
    ):
        encode(db, 2, "young")


def test_closed_database_refuses(tmp_path: Path) -> None:
    db = brain.open(tmp_path / "d")
    db.close()
    with pytest.raises(Unavailable):
        encode(db, 1, "late")


def test_second_process_is_locked_out(tmp_path: Path) -> None:
    from brain.errors import StorageFault

    with brain.open(tmp_path / "d"), pytest.raises(StorageFault):
        brain.open(tmp_path / "d")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.sampled_from(["default", "s1"]),
            st.sampled_from(["one", "two", "three"]),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_isolation_property(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, str, str]]
) -> None:
    path = tmp_path_factory.mktemp("iso")
    seen: dict[tuple[str, str], dict[str, bytes]] = {}
    with brain.open(path) as db:
        for n, (ns, space, text) in enumerate(ops):
            answer = encode(db, n, text, ns=ns, space=space)
            scope_texts = seen.setdefault((ns, space), {})
            assert answer.deduplicated == (text in scope_texts)
            scope_texts.setdefault(text, answer.memory_id)
            assert answer.memory_id == scope_texts[text]
        for (ns, space), texts in seen.items():
            for text, memory_id in texts.items():
                assert get(db, memory_id, ns=ns, space=space).memory.text == text
                for other_ns, other_space in {
                    ("a", "default"),
                    ("a", "s1"),
                    ("b", "default"),
                    ("b", "s1"),
                } - {(ns, space)}:
                    with pytest.raises(NotFound):
                        get(db, memory_id, ns=other_ns, space=other_space)


def test_sweep_visits_every_scope(tmp_path: Path) -> None:
    with brain.open(tmp_path / "d") as db:
        for ns in ("a", "b", "c"):
            encode(db, 1, "old", ns=ns)
        cutoff = encode(db, 2, "new", ns="b").recorded_at
        for ns in ("a", "c"):
            encode(db, 3, "newer", ns=ns)
        assert sweep(db._store, older_than=cutoff) == Swept(marked=3, removed=0)
        assert sweep(db._store, older_than=cutoff) == Swept(marked=0, removed=0)
        with pytest.raises(IdempotencyConflict, match="different request"):
            encode(db, 2, "changed", ns="b")  # young rows stay
        # The marks of every scope go at their horizon.
        assert sweep(db._store, older_than=cutoff, marks_older_than=cutoff) == Swept(0, 3)


def test_absent_space_and_default_space_are_the_same_request(db: Database) -> None:
    implicit = db.submit("default", Opcode.ENCODE, Encode(request_id=rid(1), text="t")).result()
    explicit = db.submit(
        "default", Opcode.ENCODE, Encode(request_id=rid(1), text="t", space="default")
    ).result()
    assert implicit == explicit


def test_every_data_opcode_is_served() -> None:
    """No opcode of spec/01-wire.md §6 answers "not available in this build": the database
    serves every data opcode but the subscription pair, which the connection serves."""
    from brain.wire.opcodes import CONTROL_OPCODES

    streamed = {Opcode.SUBSCRIBE, Opcode.UNSUBSCRIBE}
    for opcode in Opcode:
        if opcode in CONTROL_OPCODES or opcode in streamed:
            continue
        assert Database.handles(opcode), opcode.name


def test_a_full_disk_during_a_checkpoint_keeps_what_was_acknowledged(tmp_path: Path) -> None:
    """The WAL's fsync fails while a checkpoint deletes segments (ENOSPC on the
    directory sync): the database turns read-only, reads go on, and after the fault
    clears a restart recovers everything acknowledged."""
    state = {"fail": False}

    def fsync(fd: int) -> None:
        if state["fail"]:
            raise OSError(errno.ENOSPC, "injected ENOSPC")

    path = tmp_path / "d"
    db = Database.open(path, DatabaseOptions(fsync=fsync, wal_segment_bytes=4096))
    kept = [encode(db, i, f"kept {i} " + "x" * 200) for i in range(40)]
    assert len(db.wal.segments) > 1  # a checkpoint has segments to delete
    state["fail"] = True
    db.checkpoint()
    assert db.read_only_reason is not None and "ENOSPC" in db.read_only_reason
    with pytest.raises(Unavailable):
        encode(db, 100, "refused")
    assert get(db, kept[-1].memory_id).memory.text.startswith("kept 39")  # type: ignore[union-attr]
    db.close()
    state["fail"] = False
    with brain.open(path) as reopened:
        assert [get(reopened, k.memory_id).memory.text for k in kept] == [
            f"kept {i} " + "x" * 200 for i in range(40)
        ]
        again = encode(reopened, 101, "writable again")
        # Applied, and readable; the indexer may have logged its own write after it.
        assert again.lsn <= reopened.applied_lsn
        assert get(reopened, again.memory_id).memory.text == "writable again"
