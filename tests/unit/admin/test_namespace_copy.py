"""The engine's half of moving a namespace (spec/05-durability.md §14.9): a frozen
namespace takes no new key from any plan until it is thawed, and a namespace copied
from another store's log lands row for row as the source holds it, nothing of another
namespace with it, its vectors searchable."""

from __future__ import annotations

from pathlib import Path

import pytest

import brain
from brain import cbor
from brain.engine.database import Database
from brain.engine.store.tables import CHANGE_LOG, VECTOR_SCOPES
from brain.errors import Unavailable
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.messages.recall_ops import ArmWeights, Recall, RecallOk
from brain.wire.messages.statement_ops import StatementCreate, StatementCreateOk
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.request_ids import request_id as rid
from tests.store_rows import namespace_rows


def _encode(db: Database, namespace: str, n: int) -> EncodeOk:
    request = Encode(request_id=rid(n), text=f"Alice {n} moved to Globex {n}.")
    answer = db.execute(namespace, Opcode.ENCODE, request)
    assert isinstance(answer, EncodeOk)
    return answer


def _state(db: Database, n: int) -> StatementCreateOk:
    request = StatementCreate(
        request_id=rid(n),
        kind="fact",
        subject=NameRef(name=f"Alice {n}"),
        predicate="works_at",
        object_=TextValue(text=f"Globex {n}"),
    )
    answer = db.execute("moving", Opcode.STATEMENT_CREATE, request)
    assert isinstance(answer, StatementCreateOk)
    return answer


def test_a_frozen_namespace_takes_no_write_until_thawed(db: Database) -> None:
    _encode(db, "moving", 1)
    lsn = db.freeze_namespace("moving", "s1")
    assert lsn == db.applied_lsn
    with pytest.raises(Unavailable, match="'moving' is frozen while it moves to shard s1") as no:
        _encode(db, "moving", 2)
    assert no.value.retry_after_ms == 200
    with pytest.raises(Unavailable, match="frozen"):
        _state(db, 3)
    _encode(db, "other", 4)  # another namespace writes on
    # Its drop (deletes only) passes, and takes the namespace's keys.
    assert db.drop_namespace("moving") > 0
    assert namespace_rows(db, "moving") == []
    db.thaw_namespace("moving")
    _encode(db, "moving", 2)


def test_a_freeze_holds_after_a_restart(tmp_path: Path) -> None:
    with brain.open(tmp_path / "d") as db:
        _encode(db, "moving", 1)
        db.freeze_namespace("moving", "s1")
    with brain.open(tmp_path / "d") as db:  # recovered from the log and the store
        with pytest.raises(Unavailable, match="frozen"):
            _encode(db, "moving", 2)
        db.thaw_namespace("moving")
        _encode(db, "moving", 2)


def test_a_copied_namespace_lands_row_for_row(tmp_path: Path) -> None:
    with brain.open(tmp_path / "source") as source, brain.open(tmp_path / "target") as target:
        made = [_encode(source, "moving", n) for n in range(12)]
        stated = [_state(source, 100 + n) for n in range(5)]
        for n in range(8):
            _encode(source, "staying", 200 + n)
        assert source.wait_indexed()
        _encode(target, "theirs", 300)  # the target's own data stays as it is
        assert target.wait_indexed()
        theirs = namespace_rows(target, "theirs")
        assert source.wal.first_lsn == 1  # the whole log is still there to copy
        before = target.applied_lsn
        copied, last = target.copy_namespace("moving", source.wal.read_from(1))
        assert last == source.wal.last_lsn
        assert copied > len(made)
        assert target.wait_indexed()
        # Row for row, but for the change log (its keys carry the source's LSNs) and
        # the vector scopes' LSN, which names the target's own record.
        ours = [r for r in namespace_rows(source, "moving") if r[0] != CHANGE_LOG]
        got = [r for r in namespace_rows(target, "moving") if r[0] != CHANGE_LOG]
        assert [r[:2] for r in got] == [r[:2] for r in ours]
        assert [r for r in got if r[0] != VECTOR_SCOPES] == [
            r for r in ours if r[0] != VECTOR_SCOPES
        ]
        scopes = [cbor.decode(r[2]) for r in got if r[0] == VECTOR_SCOPES]
        lsns = [s["lsn"] for s in scopes if isinstance(s, dict)]
        assert lsns and all(before < lsn <= target.applied_lsn for lsn in lsns)
        assert namespace_rows(target, "staying") == []
        assert namespace_rows(target, "theirs") == theirs
        for answer in made:
            got_here = target.execute("moving", Opcode.MEMORY_GET, MemoryGet(id=answer.memory_id))
            there = source.execute("moving", Opcode.MEMORY_GET, MemoryGet(id=answer.memory_id))
            assert isinstance(got_here, MemoryGetOk) and got_here == there
        assert stated[0].statement_id
        # The vectors came along: a vector-only search ranks alike on both.
        vectors = ArmWeights(semantic=1.0, lexical=0.0, graph=0.0)
        cue = Recall(cue="Alice 7 moved to Globex 7.", top_k=3, arms=vectors)
        here = target.read("moving", Opcode.RECALL, cue)
        there = source.read("moving", Opcode.RECALL, cue)
        assert isinstance(here, RecallOk) and here.hits and here == there
        # The target's clock went past the copied records: a later write there is
        # recorded after every one of them.
        later = _encode(target, "moving", 999)
        newest = max(
            m.memory.recorded_at
            for m in (
                target.execute("moving", Opcode.MEMORY_GET, MemoryGet(id=a.memory_id)) for a in made
            )
            if isinstance(m, MemoryGetOk)
        )
        fresh = target.execute("moving", Opcode.MEMORY_GET, MemoryGet(id=later.memory_id))
        assert isinstance(fresh, MemoryGetOk) and fresh.memory.recorded_at > newest
    # Reopened, the target's vector index file matches its scope's LSN and loads as is.
    with brain.open(tmp_path / "target") as again:
        assert again.wait_indexed()
        found = again.read("moving", Opcode.RECALL, cue)
        assert isinstance(found, RecallOk) and found.hits[0] == here.hits[0]
