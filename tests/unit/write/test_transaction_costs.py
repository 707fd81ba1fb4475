"""What a transaction costs the writer and the server's memory: each buffered write is
planned once, however long the buffer; writes pipelined into one batch see each
other; and what one connection or one namespace may buffer is bounded."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import Final

import pytest

from brain import cbor
from brain.engine import dispatch
from brain.engine.database import Database, DatabaseOptions
from brain.engine.store.scope import Scope
from brain.engine.write import budget, transactions
from brain.engine.write.plan import Change
from brain.engine.write.writer import PlanContext
from brain.errors import OverBudget, Overloaded, TxnExpired, TxnTooLarge
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.messages.txn_ops import TxnAbort, TxnBegin, TxnBegun, TxnCommit, TxnCommitted
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.unit.common import NS, rid, writer_held

BUFFERED: Final = 40
"""Writes buffered in the transaction whose plannings are counted."""

BIG_TEXT: Final = 10 * 1024
"""Bytes of text in each write of the buffer-limit tests: about 25 cost units with
the memory row it keeps, so a limit of 60 units holds two such writes."""


def begin(db: Database, namespace: str = NS, owner: bytes = b"conn") -> bytes:
    answer = db.execute(namespace, Opcode.TXN_BEGIN, TxnBegin(), owner=owner)
    assert isinstance(answer, TxnBegun)
    return answer.txn_id


def buffer(db: Database, txn: bytes, text: str, namespace: str = NS) -> EncodeOk:
    answer = db.execute(namespace, Opcode.ENCODE, Encode(request_id=rid(), text=text, txn_id=txn))
    assert isinstance(answer, EncodeOk)
    return answer


def commit(db: Database, txn: bytes, namespace: str = NS) -> TxnCommitted:
    answer = db.execute(namespace, Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))
    assert isinstance(answer, TxnCommitted)
    return answer


@pytest.fixture
def plannings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every run of the ENCODE planner (the real one, called through)."""
    count = [0]
    real = dispatch.WRITES[Opcode.ENCODE]

    def counted(ctx: PlanContext, scope: Scope, request: Message) -> tuple[list[Change], Message]:
        count[0] += 1
        return real(ctx, scope, request)

    monkeypatch.setitem(dispatch.WRITES, Opcode.ENCODE, counted)
    return count


def test_each_buffered_write_and_read_plans_no_earlier_write(
    db: Database, plannings: list[int]
) -> None:
    txn = begin(db)
    written = [buffer(db, txn, f"buffered write {n} " + "words " * 50) for n in range(BUFFERED)]
    # One planning per write: none plans the writes buffered before it again.
    assert plannings[0] == BUFFERED
    for answer in written[::4]:
        read = db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=answer.memory_id, txn_id=txn))
        assert isinstance(read, MemoryGetOk) and read.memory.id == answer.memory_id
    assert plannings[0] == BUFFERED  # reads in the transaction plan nothing
    # A later write still sees the earlier ones: the same text is the same memory.
    again = buffer(db, txn, "buffered write 3 " + "words " * 50)
    assert again.deduplicated and again.memory_id == written[3].memory_id
    done = commit(db, txn)
    # The commit plans every write once more, with the stamps it needs.
    assert plannings[0] == 2 * (BUFFERED + 1)
    results = [EncodeOk.from_wire(r) for r in done.results]
    assert [r.memory_id for r in results[:BUFFERED]] == [w.memory_id for w in written]
    assert all(r.lsn == done.lsn and r.recorded_at > 0 for r in results)


def test_writes_pipelined_into_one_batch_see_each_other_and_their_commit(db: Database) -> None:
    txn = begin(db)

    def encode(text: str) -> Future[bytes]:
        return db.submit(NS, Opcode.ENCODE, Encode(request_id=rid(), text=text, txn_id=txn))

    with writer_held(db):
        first = encode("pipelined one")
        second = encode("pipelined two")
        same = encode("pipelined one")
        committed = db.submit(NS, Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))
        late = encode("after the commit")
    answers = [EncodeOk.from_wire(cbor.decode(f.result())) for f in (first, second, same)]
    # The third write saw the first, buffered in the same batch an instant before.
    assert answers[2].deduplicated and answers[2].memory_id == answers[0].memory_id
    done = TxnCommitted.from_wire(cbor.decode(committed.result()))
    results = [EncodeOk.from_wire(r) for r in done.results]
    assert [r.memory_id for r in results] == [a.memory_id for a in answers]
    with pytest.raises(TxnExpired):
        late.result()
    memory = db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=answers[1].memory_id))
    assert isinstance(memory, MemoryGetOk) and memory.memory.text == "pipelined two"


def test_a_batch_planned_again_on_a_grown_map_buffers_each_write_once(tmp_path: Path) -> None:
    with Database.open(tmp_path / "d", DatabaseOptions(map_size=256 * 1024)) as db:
        txn = begin(db)
        with writer_held(db):
            futures = [
                db.submit(
                    NS,
                    Opcode.ENCODE,
                    Encode(request_id=rid(), text=f"{n} " + "y" * 30_000, txn_id=txn),
                )
                for n in range(12)
            ]
        written = [EncodeOk.from_wire(cbor.decode(f.result())) for f in futures]
        assert db.statistics().lmdb_map_bytes > 256 * 1024
        done = commit(db, txn)
        assert [EncodeOk.from_wire(r).memory_id for r in done.results] == [
            w.memory_id for w in written
        ]


def test_the_changes_a_transaction_keeps_are_bounded(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An ENCODE keeps its memory's rows, its mention row, its extraction's audit entry
    # and its idempotency rows: seven changes.
    monkeypatch.setattr(transactions, "MAX_TXN_KEPT_CHANGES", 16)
    txn = begin(db)
    buffer(db, txn, "kept one")
    buffer(db, txn, "kept two")
    with pytest.raises(TxnTooLarge, match="record changes"):
        buffer(db, txn, "one too many")
    assert len(commit(db, txn).results) == 2


def test_the_kept_changes_count_in_the_transaction_budget(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = Encode(request_id=rid(), text="z" * BIG_TEXT)
    estimate = budget.estimate_write(Opcode.ENCODE, request)
    # Room for two requests by their estimates, not for what they keep besides.
    monkeypatch.setattr(budget, "TXN_BUDGET", 2 * estimate + 1)
    txn = begin(db)
    buffer(db, txn, "a" * BIG_TEXT)
    with pytest.raises(OverBudget, match="one transaction"):
        buffer(db, txn, "b" * BIG_TEXT)
    assert len(commit(db, txn).results) == 1


def test_a_connection_buffers_at_most_its_share(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transactions, "MAX_TXN_BUFFER_PER_CONNECTION", 60)
    first, second = begin(db, owner=b"greedy"), begin(db, owner=b"greedy")
    buffer(db, first, "a" * BIG_TEXT)
    buffer(db, second, "b" * BIG_TEXT)
    # The limit spans the connection's transactions: a third write fits in neither.
    with pytest.raises(Overloaded, match="connection") as refused:
        buffer(db, second, "c" * BIG_TEXT)
    assert refused.value.retry_after_ms is not None
    other = begin(db, owner=b"modest")  # another connection still buffers
    buffer(db, other, "d" * BIG_TEXT)
    db.execute(NS, Opcode.TXN_ABORT, TxnAbort(txn_id=first))
    buffer(db, second, "c" * BIG_TEXT)  # the abort gave the room back
    assert len(commit(db, second).results) == 2
    # The embedded API's transactions, opened with no owner, are no connection's.
    unowned = begin(db, owner=b"")
    for n in range(3):
        buffer(db, unowned, f"{n}" * BIG_TEXT)


def test_a_namespace_buffers_at_most_its_share(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transactions, "MAX_TXN_BUFFER_PER_NAMESPACE", 60)
    mine, yours = begin(db, owner=b"one"), begin(db, owner=b"two")
    buffer(db, mine, "a" * BIG_TEXT)
    buffer(db, yours, "b" * BIG_TEXT)
    with pytest.raises(Overloaded, match="namespace"):
        buffer(db, begin(db, owner=b"three"), "c" * BIG_TEXT)
    # Another tenant is not held back by this one's transactions.
    elsewhere = begin(db, namespace="other", owner=b"four")
    buffer(db, elsewhere, "c" * BIG_TEXT, namespace="other")
    commit(db, mine)  # committed, its writes leave the buffers
    buffer(db, yours, "c" * BIG_TEXT)
    assert len(commit(db, yours).results) == 2
