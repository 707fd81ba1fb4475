"""Back-pressure from the semantic index (spec/04-retrieval.md §3): a namespace whose
embedding backlog reached ``max_embed_backlog`` has its document writes refused with
OVERLOADED, and only its own; forgetting is never refused; the refusals stop once
the indexer catches up; the lag is exported.

The indexer's thread is stopped (``close``) so the queue stays put, and its rounds
are run here, as ``test_recall_scope_wait.py`` does."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Final

import pytest

import brain
from brain.engine.database import Database, DatabaseOptions
from brain.engine.index.indexer import Indexer
from brain.engine.index.pressure import EMBED_BACKLOG_RETRY_MS, RECOUNT_S, EmbedPressure
from brain.errors import Overloaded
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget
from brain.wire.messages.statement_ops import StatementCreate
from brain.wire.messages.txn_ops import TxnBegin, TxnBegun, TxnCommit, TxnCommitted
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.unit.common import rid

LIMIT: Final = 6
"""The test databases' ``max_embed_backlog``."""
BUSY: Final = "busy"
QUIET: Final = "quiet"


def _open(path: Path) -> Database:
    return brain.open(path, DatabaseOptions(max_embed_backlog=LIMIT))


def _encode(db: Database, namespace: str, text: str, space: str | None = None) -> EncodeOk:
    answer = db.execute(namespace, Opcode.ENCODE, Encode(request_id=rid(), text=text, space=space))
    assert isinstance(answer, EncodeOk)
    return answer


def _statement(n: int) -> StatementCreate:
    return StatementCreate(
        request_id=rid(),
        kind="preference",
        subject=NameRef(name=f"Dan {n}", type_="person"),
        predicate="likes",
        object_=TextValue(text="tea"),
    )


def _past_recount() -> None:
    time.sleep(RECOUNT_S * 1.5)


def test_a_full_backlog_refuses_its_namespaces_document_writes_only(tmp_path: Path) -> None:
    db = _open(tmp_path / "d")
    try:
        indexer = db.retrieval.indexer
        indexer.close()  # from here the queue only grows
        made = [_encode(db, BUSY, f"busy note {i}") for i in range(LIMIT - 1)]
        # Spaces of the namespace count together: the last one fills the backlog.
        made.append(_encode(db, BUSY, "busy note in another space", space="elsewhere"))
        _past_recount()
        with pytest.raises(Overloaded) as refused:
            _encode(db, BUSY, "one more")
        assert refused.value.retry_after_ms == EMBED_BACKLOG_RETRY_MS
        assert "max_embed_backlog" in str(refused.value)
        with pytest.raises(Overloaded):
            db.execute(BUSY, Opcode.STATEMENT_CREATE, _statement(1))
        assert db.retrieval.pressure.refused == 2
        # Forgetting adds no embedding and is never held back.
        forget = Forget(request_id=rid(), memory=made[0].memory_id, mode="hard")
        db.execute(BUSY, Opcode.FORGET, forget)
        # Another namespace writes on, though the whole queue is past the limit.
        _encode(db, QUIET, "the quiet tenant keeps bees")
        db.execute(QUIET, Opcode.STATEMENT_CREATE, _statement(2))
        assert db.statistics().embed_refused == 2
        assert db.statistics().index_lag_seconds >= RECOUNT_S

        while indexer._round():  # the indexer catches up
            pass
        _past_recount()
        _encode(db, BUSY, "accepted again")
        db.execute(BUSY, Opcode.STATEMENT_CREATE, _statement(3))
        while indexer._round():
            pass
        assert db.statistics().index_lag_seconds == 0.0
    finally:
        db.close()


def test_a_refused_write_is_not_stored_and_its_retry_is_taken(tmp_path: Path) -> None:
    db = _open(tmp_path / "d")
    try:
        indexer = db.retrieval.indexer
        indexer.close()
        for i in range(LIMIT):
            _encode(db, BUSY, f"busy note {i}")
        _past_recount()
        request = Encode(request_id=rid(), text="kept for later")
        with pytest.raises(Overloaded):
            db.execute(BUSY, Opcode.ENCODE, request)
        applied = db.applied_lsn
        while indexer._round():
            pass
        assert db.applied_lsn > applied  # only the indexer's own writes
        _past_recount()
        again = db.execute(BUSY, Opcode.ENCODE, request)  # the same request id
        assert isinstance(again, EncodeOk) and not again.deduplicated
    finally:
        db.close()


def test_a_repeat_of_a_done_write_gets_its_first_answer_past_a_full_backlog(
    tmp_path: Path,
) -> None:
    """A client that lost its answer, say to a crash, asks again: the write adds no
    document the second time, so the backlog must not refuse it (spec/01-wire.md §4)."""
    db = _open(tmp_path / "d")
    try:
        db.retrieval.indexer.close()
        begun = db.execute(BUSY, Opcode.TXN_BEGIN, TxnBegin(), owner=b"conn")
        assert isinstance(begun, TxnBegun)
        db.execute(
            BUSY, Opcode.ENCODE, Encode(request_id=rid(), text="in a txn", txn_id=begun.txn_id)
        )
        commit = TxnCommit(txn_id=begun.txn_id)
        committed = db.execute(BUSY, Opcode.TXN_COMMIT, commit)
        assert isinstance(committed, TxnCommitted)
        requests = [Encode(request_id=rid(), text=f"busy note {i}") for i in range(LIMIT - 1)]
        first = [db.execute(BUSY, Opcode.ENCODE, request) for request in requests]
        statement = _statement(4)
        stated = None
        _past_recount()
        with pytest.raises(Overloaded):
            stated = db.execute(BUSY, Opcode.STATEMENT_CREATE, statement)
        assert stated is None
        assert [db.execute(BUSY, Opcode.ENCODE, request) for request in requests] == first
        assert db.execute(BUSY, Opcode.TXN_COMMIT, commit) == committed
        # A new write, and a request id never answered, are still refused.
        with pytest.raises(Overloaded):
            db.execute(BUSY, Opcode.STATEMENT_CREATE, statement)
        with pytest.raises(Overloaded):
            _encode(db, BUSY, "one more")
        assert db.retrieval.pressure.refused == 3
    finally:
        db.close()


def test_the_limit_must_be_positive(tmp_path: Path) -> None:
    with brain.open(tmp_path / "d") as db, pytest.raises(ValueError, match="at least 1"):
        EmbedPressure(db._store, 0)


def test_the_lag_is_the_age_of_the_oldest_queued_entry(tmp_path: Path) -> None:
    """Not the age of the first write the index has not wholly caught up with: under a
    steady backlog the oldest entries are embedded first and the lag stays flat."""
    db = _open(tmp_path / "d")
    try:
        indexer = db.retrieval.indexer
        indexer.close()
        assert indexer.lag_seconds() == 0.0
        older = _encode(db, QUIET, "the first note, to be forgotten unembedded")
        time.sleep(0.5)
        _encode(db, QUIET, "the second note")
        assert indexer.lag_seconds() >= 0.5
        # The first entry leaves the queue (its memory is forgotten before it was
        # embedded): the lag is now the second's, younger by the pause.
        db.execute(
            QUIET, Opcode.FORGET, Forget(request_id=rid(), memory=older.memory_id, mode="hard")
        )
        assert indexer.lag_seconds() < 0.4
        while indexer._round():
            pass
        assert indexer.lag_seconds() == 0.0
    finally:
        db.close()


def test_entries_queued_before_the_open_count_from_the_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _open(tmp_path / "d")
    db.retrieval.indexer.close()
    _encode(db, QUIET, "left in the queue at the stop")
    db.close()
    monkeypatch.setattr(Indexer, "start", lambda self: None)  # it must not embed it yet
    again = _open(tmp_path / "d")
    try:
        time.sleep(0.2)
        assert 0.2 <= again.retrieval.indexer.lag_seconds() < 60
    finally:
        again.close()
