"""Dropping a namespace: every key of it goes, in batches of logged deletes, and no
key of another namespace (or of META) is touched."""

from __future__ import annotations

from brain.engine.admin.namespace_drop import drop_namespace
from brain.engine.database import Database
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.opcodes import Opcode
from tests.request_ids import request_id as rid
from tests.store_rows import namespace_rows


def _keys_of(db: Database, namespace: str) -> int:
    return len(namespace_rows(db, namespace))


def _encode(db: Database, namespace: str, n: int, space: str | None = None) -> None:
    request = Encode(request_id=rid(n), text=f"Alice {n} moved to Globex {n}.", space=space)
    assert isinstance(db.execute(namespace, Opcode.ENCODE, request), EncodeOk)


def test_a_drop_removes_every_key_of_the_namespace_in_batches(db: Database) -> None:
    for n in range(30):
        _encode(db, "gone", n, space="a" if n % 2 else None)
        _encode(db, "kept", 1000 + n)
    assert db.wait_indexed()
    before_kept = _keys_of(db, "kept")
    before_gone = _keys_of(db, "gone")
    assert before_gone > 50 and before_kept > 50
    vectors_before = db.retrieval.indexes.total()
    lsn_before = db.applied_lsn
    deleted = drop_namespace(db.writer, "gone", db.retrieval.indexes, limit=50)
    assert deleted == before_gone
    assert _keys_of(db, "gone") == 0
    assert _keys_of(db, "kept") == before_kept
    # the planner's in-memory graphs lose the dropped namespace's 30 vectors
    assert db.retrieval.indexes.total() == vectors_before - 30
    # one logged record per batch of at most 50 keys, and a last one that found none
    assert db.applied_lsn - lsn_before >= before_gone // 50 + 1


def test_a_dropped_namespace_can_be_written_again(db: Database) -> None:
    _encode(db, "again", 1)
    assert db.wait_indexed()
    assert db.drop_namespace("again") > 0
    assert _keys_of(db, "again") == 0
    _encode(db, "again", 1)  # its idempotency record went with it: a fresh write
    assert _keys_of(db, "again") > 0
