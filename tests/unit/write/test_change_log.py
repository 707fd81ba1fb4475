"""The change log SUBSCRIBE reads: one entry per record per write, with its verb."""

from __future__ import annotations

from brain.engine.database import Database
from brain.wire.messages.entity_ops import EntityCreate, EntityCreateOk, EntityMerge
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget
from brain.wire.messages.records import Evidence
from brain.wire.messages.schema_ops import SchemaPut
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementSupersede,
    StatementSupersedeOk,
)
from brain.wire.messages.txn_ops import TxnBegin, TxnBegun, TxnCommit
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid


def _log(db: Database, space: str | None = None) -> list[tuple[int, str, str, bytes]]:
    return [(c.lsn, c.op, c.record, c.id) for _, c in db.changes(NS, space, b"", 1000)]


def _say(db: Database, text: str, **kw: object) -> StatementCreateOk:
    made = db.execute(
        NS,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            request_id=rid(),
            kind="fact",
            subject=NameRef(name="Lou"),
            predicate="said",
            object_=TextValue(text=text),
            **kw,  # type: ignore[arg-type]
        ),
    )
    assert isinstance(made, StatementCreateOk)
    return made


def test_verbs_of_the_writes(db: Database) -> None:
    memory = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text="Lou said hi"))
    assert isinstance(memory, EncodeOk)
    first = _say(db, "hi", evidence=(Evidence(memory=memory.memory_id),))
    lou = [e for e in _log(db) if e[2] == "entity"]
    assert [e[1] for e in lou] == ["create"]  # the name created the entity
    newer = db.execute(
        NS,
        Opcode.STATEMENT_SUPERSEDE,
        StatementSupersede(
            request_id=rid(),
            old=first.statement_id,
            new=StatementDraft(
                kind="fact",
                subject=NameRef(name="Lou"),
                predicate="said",
                object_=TextValue(text="hello"),
                evidence=(Evidence(memory=memory.memory_id),),
            ),
        ),
    )
    assert isinstance(newer, StatementSupersedeOk)
    assert (newer.lsn, "supersede", "statement", first.statement_id) in _log(db)
    assert (newer.lsn, "create", "statement", newer.statement_id) in _log(db)
    forgot = db.execute(
        NS, Opcode.FORGET, Forget(request_id=rid(), memory=memory.memory_id, mode="hard")
    )
    lsn = forgot.lsn  # type: ignore[attr-defined]
    at_forget = {(op, record, rid_) for l_, op, record, rid_ in _log(db) if l_ == lsn}
    assert ("forget", "memory", memory.memory_id) in at_forget
    assert ("retract", "statement", newer.statement_id) in at_forget
    # The schema has no record in the feed; the log is in LSN order, nothing twice.
    db.execute(NS, Opcode.SCHEMA_PUT, SchemaPut())
    entries = _log(db)
    assert [e[0] for e in entries] == sorted(e[0] for e in entries)
    assert len({(e[0], e[2], e[3]) for e in entries}) == len(entries)


def test_merge_and_transactions_and_scopes(db: Database) -> None:
    a = db.execute(NS, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name="A"))
    b = db.execute(NS, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name="B"))
    assert isinstance(a, EntityCreateOk) and isinstance(b, EntityCreateOk)
    merged = db.execute(
        NS, Opcode.ENTITY_MERGE, EntityMerge(request_id=rid(), keep=a.entity_id, merge=b.entity_id)
    )
    ops = {(op, rid_) for l_, op, _, rid_ in _log(db) if l_ == merged.lsn}  # type: ignore[attr-defined]
    assert ops == {("merge", a.entity_id), ("merge", b.entity_id)}
    # A transaction that creates then supersedes: one entry per record, "create" kept.
    txn = db.execute(NS, Opcode.TXN_BEGIN, TxnBegin())
    assert isinstance(txn, TxnBegun)
    made = db.execute(
        NS,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            request_id=rid(),
            txn_id=txn.txn_id,
            kind="fact",
            subject=NameRef(name="T"),
            predicate="p",
            object_=TextValue(text="v1"),
        ),
    )
    assert isinstance(made, StatementCreateOk)
    db.execute(
        NS,
        Opcode.STATEMENT_SUPERSEDE,
        StatementSupersede(
            request_id=rid(),
            txn_id=txn.txn_id,
            old=made.statement_id,
            new=StatementDraft(
                kind="fact", subject=NameRef(name="T"), predicate="p", object_=TextValue(text="v2")
            ),
        ),
    )
    done = db.execute(NS, Opcode.TXN_COMMIT, TxnCommit(txn_id=txn.txn_id))
    lsn = done.lsn  # type: ignore[attr-defined]
    at_commit = [(op, record, rid_) for l_, op, record, rid_ in _log(db) if l_ == lsn]
    assert ("create", "statement", made.statement_id) in at_commit
    assert len(at_commit) == len({e[2] for e in at_commit})
    # Another space's log is its own.
    other = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text="elsewhere", space="x"))
    assert isinstance(other, EncodeOk)
    assert [e[3] for e in _log(db, "x")] == [other.memory_id]
    assert other.memory_id not in [e[3] for e in _log(db)]
