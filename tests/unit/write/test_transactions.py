"""Transactions in the engine: buffering, all-or-none commit, abort, expiry, limits."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import brain
from brain.engine.database import Database, DatabaseOptions
from brain.engine.write import budget
from brain.engine.write.transactions import (
    MAX_OPEN_TXNS_PER_CONNECTION,
    MAX_OPEN_TXNS_PER_NAMESPACE,
)
from brain.errors import (
    IdempotencyConflict,
    NotFound,
    OverBudget,
    Overloaded,
    TxnExpired,
    TxnTooLarge,
)
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.messages.txn_ops import TxnAbort, TxnBegin, TxnBegun, TxnCommit, TxnCommitted
from brain.wire.opcodes import Opcode
from tests.request_ids import request_id as rid

NS = "default"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database.open(tmp_path / "d", DatabaseOptions(txn_max_writes=5))
    try:
        yield database
    finally:
        database.close()


def begin(db: Database, timeout_ms: int | None = None, owner: bytes = b"conn-1") -> bytes:
    answer = db.execute(NS, Opcode.TXN_BEGIN, TxnBegin(timeout_ms=timeout_ms), owner=owner)
    assert isinstance(answer, TxnBegun)
    return answer.txn_id


def buffered(db: Database, txn: bytes, n: int, text: str) -> EncodeOk:
    answer = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(n), text=text, txn_id=txn))
    assert isinstance(answer, EncodeOk)
    return answer


def commit(db: Database, txn: bytes) -> TxnCommitted:
    answer = db.execute(NS, Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))
    assert isinstance(answer, TxnCommitted)
    return answer


def exists(db: Database, memory_id: bytes) -> bool:
    try:
        got = db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=memory_id))
    except NotFound:
        return False
    assert isinstance(got, MemoryGetOk)
    return True


def test_commit_applies_everything_with_the_buffered_ids(db: Database) -> None:
    txn = begin(db)
    first = buffered(db, txn, 1, "alpha")
    second = buffered(db, txn, 2, "beta")
    # Buffered answers carry final ids but no LSN or record time yet.
    assert first.lsn == 0 and first.recorded_at == 0 and not first.deduplicated
    assert not exists(db, first.memory_id)
    # A later write in the transaction sees the earlier ones.
    again = buffered(db, txn, 3, "alpha")
    assert again.deduplicated and again.memory_id == first.memory_id
    done = commit(db, txn)
    assert done.lsn == 1  # the first record of the log, for the whole transaction
    results = [EncodeOk.from_wire(r) for r in done.results]
    assert [r.memory_id for r in results] == [first.memory_id, second.memory_id, first.memory_id]
    assert all(r.lsn == done.lsn for r in results)
    assert results[0].recorded_at == results[1].recorded_at > 0
    assert exists(db, first.memory_id) and exists(db, second.memory_id)
    # Each write of the transaction is idempotent on its own afterwards.
    replay = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(2), text="beta"))
    assert replay == results[1]
    # A commit asked again (its answer was lost) gets the same answer, and writes nothing.
    assert db.wait_indexed()
    settled = db.applied_lsn
    assert commit(db, txn) == done
    assert db.applied_lsn == settled
    with pytest.raises(TxnExpired):  # another namespace never sees it
        db.execute("other-ns", Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))


def test_abort_leaves_nothing(db: Database) -> None:
    txn = begin(db)
    answer = buffered(db, txn, 1, "gone")
    db.execute(NS, Opcode.TXN_ABORT, TxnAbort(txn_id=txn))
    with pytest.raises(TxnExpired):
        commit(db, txn)
    with pytest.raises(TxnExpired):
        buffered(db, txn, 2, "late")
    assert not exists(db, answer.memory_id) and db.applied_lsn == 0


def test_commit_is_all_or_none(db: Database) -> None:
    txn = begin(db)
    buffered(db, txn, 1, "one")
    buffered(db, txn, 2, "two")
    # Between buffering and commit, request_id 2 is used for other content.
    db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(2), text="elsewhere"))
    assert db.wait_indexed()
    settled = db.applied_lsn
    with pytest.raises(IdempotencyConflict) as info:
        commit(db, txn)
    assert "write 1 of the transaction" in info.value.message
    assert db.applied_lsn == settled
    with pytest.raises(NotFound):
        db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=rid(99)))
    fresh = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(1), text="one"))
    assert isinstance(fresh, EncodeOk) and not fresh.deduplicated  # "one" was never stored


def test_buffering_reports_errors_at_once(db: Database) -> None:
    db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(1), text="taken"))
    txn = begin(db)
    with pytest.raises(IdempotencyConflict):
        buffered(db, txn, 1, "different")
    assert commit(db, txn).results == ()


def test_unknown_foreign_and_expired_transactions(db: Database) -> None:
    with pytest.raises(TxnExpired):
        buffered(db, rid(12345), 1, "x")
    txn = begin(db)
    with pytest.raises(TxnExpired):
        db.execute("other-ns", Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))
    short = begin(db, timeout_ms=1)
    time.sleep(0.01)
    with pytest.raises(TxnExpired):
        buffered(db, short, 1, "too late")


def test_too_many_writes(db: Database) -> None:
    txn = begin(db)
    for n in range(5):
        buffered(db, txn, n, f"w{n}")
    with pytest.raises(TxnTooLarge):
        buffered(db, txn, 99, "one too many")
    assert len(commit(db, txn).results) == 5


def test_closing_the_owner_aborts(db: Database) -> None:
    mine = begin(db, owner=b"a")
    theirs = begin(db, owner=b"b")
    buffered(db, mine, 1, "mine")
    assert db.abort_owner(b"a") == 1
    with pytest.raises(TxnExpired):
        commit(db, mine)
    assert commit(db, theirs).results == ()


def test_committed_transaction_survives_reopen(tmp_path: Path) -> None:
    with brain.open(tmp_path / "d") as db:
        txn = begin(db)
        ids = [buffered(db, txn, n, f"t{n}").memory_id for n in range(3)]
        done = commit(db, txn)
        uncommitted = begin(db)
        lost = buffered(db, uncommitted, 10, "never committed").memory_id
    with brain.open(tmp_path / "d") as db:
        assert all(exists(db, m) for m in ids)
        assert not exists(db, lost)
        with pytest.raises(TxnExpired):
            commit(db, uncommitted)
        # The answer of the commit that went through outlives the restart.
        assert commit(db, txn) == done


def test_estimates_and_budgets() -> None:
    small = Encode(request_id=rid(1), text="x")
    big = Encode(request_id=rid(1), text="x" * (1024 * 1024))
    assert budget.estimate_write(Opcode.ENCODE, small) == budget.BASE_WRITE_COST
    assert budget.estimate_write(Opcode.ENCODE, big) >= 1024
    assert budget.check_write(Opcode.ENCODE, big, budget=budget.WRITE_BUDGET) > 1024
    with pytest.raises(OverBudget):
        budget.check_write(Opcode.ENCODE, big, budget=1000)


def test_transaction_over_budget(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "TXN_BUDGET", 3 * budget.BASE_WRITE_COST + 1)
    txn = begin(db)
    for n in range(3):
        buffered(db, txn, n, f"fits {n}")
    with pytest.raises(OverBudget):
        buffered(db, txn, 3, "does not fit")
    assert len(commit(db, txn).results) == 3


def test_a_retried_buffered_write_is_buffered_once(db: Database) -> None:
    txn = begin(db)
    first = buffered(db, txn, 1, "once")
    assert buffered(db, txn, 1, "once") == first
    with pytest.raises(IdempotencyConflict):
        buffered(db, txn, 1, "changed")
    assert len(commit(db, txn).results) == 1


def test_commit_that_needs_a_bigger_map(tmp_path: Path) -> None:
    options = DatabaseOptions(map_size=256 * 1024)
    with Database.open(tmp_path / "d", options) as db:
        txn = begin(db)
        written = [buffered(db, txn, n, f"{n}" + "y" * 30_000) for n in range(12)]
        done = commit(db, txn)
        assert [EncodeOk.from_wire(r).memory_id for r in done.results] == [
            w.memory_id for w in written
        ]
        assert all(exists(db, w.memory_id) for w in written)
        assert db.statistics().lmdb_map_bytes > 256 * 1024
        assert commit(db, txn) == done  # the grown map kept the commit's answer too


def test_reads_inside_a_transaction_see_its_writes(db: Database) -> None:
    txn = begin(db)
    pending = buffered(db, txn, 1, "only in the transaction")
    inside = db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=pending.memory_id, txn_id=txn))
    assert isinstance(inside, MemoryGetOk) and inside.memory.text == "only in the transaction"
    assert not exists(db, pending.memory_id)  # outside, nothing yet
    db.execute(NS, Opcode.TXN_ABORT, TxnAbort(txn_id=txn))
    with pytest.raises(TxnExpired):
        db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=pending.memory_id, txn_id=txn))


def test_a_namespace_takes_at_most_its_share_of_transaction_slots(db: Database) -> None:
    for index in range(MAX_OPEN_TXNS_PER_NAMESPACE):
        # Each from a connection of its own, so only the namespace's limit is met.
        begin(db, timeout_ms=3_600_000, owner=index.to_bytes(4, "big"))
    with pytest.raises(Overloaded, match="namespace") as refused:
        begin(db, owner=b"one more")
    assert refused.value.retry_after_ms is not None
    # Another tenant still opens and commits a transaction.
    other = db.execute("other", Opcode.TXN_BEGIN, TxnBegin(), owner=b"other")
    assert isinstance(other, TxnBegun)
    done = db.execute("other", Opcode.TXN_COMMIT, TxnCommit(txn_id=other.txn_id), owner=b"other")
    assert isinstance(done, TxnCommitted)


def test_a_connection_takes_at_most_its_share_of_transaction_slots(db: Database) -> None:
    held = [begin(db, owner=b"greedy") for _ in range(MAX_OPEN_TXNS_PER_CONNECTION)]
    with pytest.raises(Overloaded, match="connection"):
        begin(db, owner=b"greedy")
    begin(db, owner=b"modest")  # another connection of the same namespace still may
    commit(db, held[0])
    begin(db, owner=b"greedy")  # one ended: the connection has room again
    # The embedded API's transactions, opened with no owner, are no connection's.
    for _ in range(MAX_OPEN_TXNS_PER_CONNECTION + 1):
        begin(db, owner=b"")
