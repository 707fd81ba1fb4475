"""A data directory whose WAL holds writes its store never applied: they were logged
and synced, then the LMDB commit failed, the state a crash between the two leaves
(and a power loss that rolls LMDB back by a commit)."""

from __future__ import annotations

from pathlib import Path

import lmdb
import pytest

import brain
from brain.engine.database import Database
from brain.engine.wal import WalRecord, WriteAheadLog
from brain.errors import Unavailable
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.opcodes import Opcode
from tests.request_ids import request_id as rid
from tests.unit.common import writer_held

LOGGED_ID_BASE = 100
"""The request ids of the logged-only writes start here (``rid(LOGGED_ID_BASE + n)``),
clear of the applied ones' (``rid(n)``)."""


def applied_text(n: int) -> str:
    """The text of applied write ``n``, whose request id is ``rid(n)``."""
    return f"applied {n}"


def logged_text(n: int) -> str:
    """The text of logged-only write ``n``, whose request id is ``rid(LOGGED_ID_BASE + n)``."""
    return f"logged {n}"


def encode_applied(db: Database, n: int) -> EncodeOk:
    """ENCODE applied write ``n`` (again, with the same id: a retry)."""
    answer = db.execute("default", Opcode.ENCODE, Encode(request_id=rid(n), text=applied_text(n)))
    assert isinstance(answer, EncodeOk)
    return answer


def logged_request(n: int) -> Encode:
    """The request of logged-only write ``n``, as its client would retry it."""
    return Encode(request_id=rid(LOGGED_ID_BASE + n), text=logged_text(n))


def store_behind(path: Path, applied: int, logged_only: int) -> tuple[int, list[WalRecord]]:
    """Make ``path``: ``applied`` writes logged and applied (and indexed), then
    ``logged_only`` more logged and synced whose LMDB commit fails. Returns the
    store's applied LSN and every record of the log."""
    db = brain.open(path)
    for n in range(applied):
        encode_applied(db, n)
    assert db.wait_indexed()
    applied_lsn = db.applied_lsn

    def crash() -> None:
        raise lmdb.Error("injected failure between the WAL fsync and the LMDB commit")

    db.writer.inject_fault_before_commit(crash)
    # Queued together, so that one batch logs them all before its commit fails: drawn
    # one at a time, the first failure would turn the writer read-only and the rest
    # would be refused unlogged.
    with writer_held(db):
        futures = [
            db.submit("default", Opcode.ENCODE, logged_request(n)) for n in range(logged_only)
        ]
    for future in futures:
        with pytest.raises(Unavailable):
            future.result()
    db.close()
    with WriteAheadLog.open(path / "wal") as wal:
        records = list(wal.read_from(wal.first_lsn))
    assert records[-1].lsn == applied_lsn + logged_only
    return applied_lsn, records
