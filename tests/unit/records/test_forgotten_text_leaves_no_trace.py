"""Forgetting, proven (spec/02-data-model.md §3): after a hard forget and a retraction, and a
purge, no byte of the data directory (LMDB, WAL, index files, a snapshot taken
after the forget) holds the text, its context or its embedding; no read returns it, now or
as of before; and encoding the text again answers FORGOTTEN."""

from __future__ import annotations

from pathlib import Path

import pytest

import brain
from brain.embed.hashing import HashingEmbedder
from brain.engine.database import Database
from brain.errors import Forgotten, NotFound
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget, MemoryGet, MemoryGetOk
from brain.wire.messages.recall_ops import Recall, RecallOk
from brain.wire.messages.records import Evidence
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementGet,
    StatementGetOk,
    StatementHistory,
    StatementHistoryOk,
    StatementList,
    StatementListOk,
    StatementRetract,
)
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid

SECRET = "the vault opens with walrus-9981"
CLAIM = "combination walrus-9981"
CONTEXT = "read off the vault door, memo kestrel-4471"


def _holding(root: Path, needle: bytes) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and needle in p.read_bytes()
    )


def _recall_ids(db: Database, **kw: object) -> set[bytes]:
    answer = db.execute(NS, Opcode.RECALL, Recall(cue="vault walrus-9981", top_k=50, **kw))  # type: ignore[arg-type]
    assert isinstance(answer, RecallOk)
    return {h.id for h in answer.hits}


def test_forgotten_content_leaves_every_byte_and_every_answer(tmp_path: Path) -> None:
    root = tmp_path / "d"
    needles = {
        "text": SECRET.encode(),
        "claim": CLAIM.encode(),
        "context": CONTEXT.encode(),
        "text vector": HashingEmbedder().embed([SECRET])[0].astype("<f4").tobytes()[:64],
    }
    with brain.open(root) as db:
        memory = db.execute(
            NS, Opcode.ENCODE, Encode(request_id=rid(), text=SECRET, context=CONTEXT)
        )
        assert isinstance(memory, EncodeOk)
        cited = db.execute(
            NS,
            Opcode.STATEMENT_CREATE,
            StatementCreate(
                request_id=rid(),
                kind="fact",
                subject=NameRef(name="Vault"),
                predicate="opens_with",
                object_=TextValue(text=CLAIM),
                evidence=(Evidence(memory=memory.memory_id),),
            ),
        )
        assert isinstance(cited, StatementCreateOk)
        standalone = db.execute(
            NS,
            Opcode.STATEMENT_CREATE,
            StatementCreate(
                request_id=rid(),
                kind="fact",
                subject=NameRef(name="Safe"),
                predicate="code",
                object_=TextValue(text=f"also {CLAIM}"),
            ),
        )
        assert isinstance(standalone, StatementCreateOk)
        for i in range(20):
            db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text=f"ordinary note {i}"))
        assert db.wait_indexed()
        before = cited.recorded_at
        db.retrieval.indexes.save_dirty()
        for name, needle in needles.items():
            assert _holding(root, needle), f"the test cannot see the {name}"
        assert {memory.memory_id, cited.statement_id} <= _recall_ids(db)

        db.execute(
            NS, Opcode.FORGET, Forget(request_id=rid(), memory=memory.memory_id, mode="hard")
        )
        db.execute(
            NS,
            Opcode.STATEMENT_RETRACT,
            StatementRetract(request_id=rid(), id=standalone.statement_id),
        )
        assert db.wait_indexed()
        assert db.purge() == 3  # the memory and both statements
        db.snapshot(root.parent / "snapshot-after")

        gone = {memory.memory_id, cited.statement_id, standalone.statement_id}
        for kw in ({}, {"as_of": before}, {"include_tombstoned": True, "include_superseded": True}):
            assert not (_recall_ids(db, **kw) & gone), kw
        got = db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=memory.memory_id))
        assert isinstance(got, MemoryGetOk) and got.memory.text is None
        assert got.memory.context is None
        for statement_id in (cited.statement_id, standalone.statement_id):
            shown = db.execute(NS, Opcode.STATEMENT_GET, StatementGet(id=statement_id))
            assert isinstance(shown, StatementGetOk) and shown.statement.object_ is None
            chain = db.execute(NS, Opcode.STATEMENT_HISTORY, StatementHistory(id=statement_id))
            assert isinstance(chain, StatementHistoryOk)
            assert all(v.object_ is None for v in chain.versions)
        vault = NameRef(name="Vault")
        for question in (
            StatementList(subject=vault),
            StatementList(subject=vault, as_of=before, include_tombstoned=True),
        ):
            listed = db.execute(NS, Opcode.STATEMENT_LIST, question)
            assert isinstance(listed, StatementListOk) and listed.statements == ()
        with pytest.raises(Forgotten):
            db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text=SECRET))
    for place in (root, root.parent / "snapshot-after"):
        for name, needle in needles.items():
            assert _holding(place, needle) == [], (name, place)
    with brain.open(root) as db:
        with pytest.raises(NotFound):
            db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=bytes(16)))
        assert not (_recall_ids(db, as_of=before) & {memory.memory_id, cited.statement_id})
