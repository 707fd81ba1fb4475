"""FORGET, soft and hard, with its cascades to statements and the forget ledger."""

from __future__ import annotations

import pytest

from brain.engine.database import Database
from brain.errors import Forgotten, NotFound
from brain.wire.messages.memory_ops import (
    Encode,
    EncodeOk,
    Forget,
    ForgetOk,
    MemoryGet,
    MemoryGetOk,
)
from brain.wire.messages.records import Evidence
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementGet,
    StatementGetOk,
    StatementList,
    StatementListOk,
)
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid


def remember(db: Database, text: str, **kw: object) -> EncodeOk:
    answer = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text=text, **kw))  # type: ignore[arg-type]
    assert isinstance(answer, EncodeOk)
    return answer


def claim(db: Database, value: str, *memories: EncodeOk) -> bytes:
    evidence = tuple(Evidence(memory=m.memory_id) for m in memories)
    answer = db.execute(
        NS,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            request_id=rid(),
            kind="fact",
            subject=NameRef(name="Zoe"),
            predicate="said",
            object_=TextValue(text=value),
            evidence=evidence,
        ),
    )
    assert isinstance(answer, StatementCreateOk)
    return answer.statement_id


def forget(db: Database, memory: EncodeOk, mode: str) -> ForgetOk:
    answer = db.execute(
        NS, Opcode.FORGET, Forget(request_id=rid(), memory=memory.memory_id, mode=mode)
    )
    assert isinstance(answer, ForgetOk)
    return answer


def statement(db: Database, statement_id: bytes) -> StatementGetOk:
    answer = db.execute(NS, Opcode.STATEMENT_GET, StatementGet(id=statement_id))
    assert isinstance(answer, StatementGetOk)
    return answer


def visible(db: Database, **kw: object) -> set[bytes]:
    answer = db.execute(NS, Opcode.STATEMENT_LIST, StatementList(**kw))  # type: ignore[arg-type]
    assert isinstance(answer, StatementListOk)
    return {s.id for s in answer.statements}


def test_soft_forget_tombstones_statements_it_alone_supported(db: Database) -> None:
    a, b = remember(db, "source a"), remember(db, "source b")
    only_a = claim(db, "only a", a)
    both = claim(db, "a and b", a, b)
    before = db.writer.clock.tick()
    done = forget(db, a, "soft")
    assert not done.already_forgotten and done.statements_tombstoned == 1
    assert statement(db, only_a).statement.tombstone_reason == "source_forgotten"
    assert visible(db) == {both}
    assert visible(db, include_tombstoned=True) == {only_a, both}
    assert visible(db, as_of=before) == {only_a, both}
    memory = db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=a.memory_id))
    assert isinstance(memory, MemoryGetOk)
    assert memory.memory.forgotten == "soft" and memory.memory.text == "source a"
    assert forget(db, a, "soft").already_forgotten
    # The text is free to be stored again, as a new memory.
    again = remember(db, "source a")
    assert not again.deduplicated and again.memory_id != a.memory_id


def test_hard_forget_retracts_and_blocks_the_text(db: Database) -> None:
    secret = remember(db, "my secret text")
    other = remember(db, "public text")
    gone = claim(db, "secret claim", secret)
    kept = claim(db, "mixed claim", secret, other)
    before = db.writer.clock.tick()
    done = forget(db, secret, "hard")
    assert done.statements_tombstoned == 1
    husk = statement(db, gone).statement
    assert husk.tombstone_reason == "retracted" and husk.object_ is None
    assert visible(db, include_tombstoned=True) == {kept}
    assert visible(db, as_of=before, include_tombstoned=True) == {kept}  # never restored
    memory = db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=secret.memory_id))
    assert isinstance(memory, MemoryGetOk)
    assert memory.memory.forgotten == "hard" and memory.memory.text is None
    with pytest.raises(Forgotten) as info:
        remember(db, "my secret text")
    assert info.value.field == "text"
    allowed = remember(db, "my secret text", override_forgotten=True)
    assert not allowed.deduplicated
    # Another space never saw it.
    elsewhere = db.execute(
        NS, Opcode.ENCODE, Encode(request_id=rid(), text="my secret text", space="s2")
    )
    assert isinstance(elsewhere, EncodeOk)


def test_soft_then_hard(db: Database) -> None:
    m = remember(db, "two steps")
    s = claim(db, "claim", m)
    assert forget(db, m, "soft").statements_tombstoned == 1
    assert forget(db, m, "hard").statements_tombstoned == 1  # the tombstoned one becomes a husk
    assert statement(db, s).statement.tombstone_reason == "retracted"
    assert forget(db, m, "soft").already_forgotten
    with pytest.raises(NotFound):
        db.execute(NS, Opcode.FORGET, Forget(request_id=rid(), memory=rid(), mode="soft"))


def test_hard_forget_reaches_every_copy_of_the_text(db: Database) -> None:
    first = remember(db, "said twice")
    forget(db, first, "soft")
    second = remember(db, "said twice")
    claim_second = claim(db, "claim on the second copy", second)
    assert second.memory_id != first.memory_id
    done = forget(db, first, "hard")
    assert done.statements_tombstoned == 1
    for copy in (first, second):
        got = db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=copy.memory_id))
        assert isinstance(got, MemoryGetOk)
        assert got.memory.forgotten == "hard" and got.memory.text is None
    assert statement(db, claim_second).statement.tombstone_reason == "retracted"
    with pytest.raises(Forgotten):
        remember(db, "said twice")
