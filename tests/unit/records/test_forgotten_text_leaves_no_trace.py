"""Forgetting, proven (spec/02-data-model.md §3): after a hard forget and a retraction, and a
purge, no byte of the data directory (LMDB, WAL, index files, the snapshots in it) or of a
snapshot taken after the forget holds the text, its context, its embedding or a hash of a
word no other document holds; an export or a snapshot made after the forget holds none of
them even before the purge; no read returns it, now or as of before; and encoding the text
again answers FORGOTTEN."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import brain
from brain.embed.hashing import HashingEmbedder
from brain.engine.admin.snapshot import SNAPSHOT_DIR, restore_snapshot
from brain.engine.database import Database
from brain.engine.index.tokens import tokenize
from brain.engine.store.tables import LEX_DOCS, LEX_POSTINGS, LEX_STATS
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
FILLER = [f"ordinary note {i}" for i in range(20)]


def _holding(root: Path, needle: bytes) -> list[str]:
    files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
    return sorted(str(p.relative_to(root.parent)) for p in files if needle in p.read_bytes())


def _term_hash(token: str) -> bytes:
    """The lexical index's term hash: the first 8 bytes of BLAKE2b of the token."""
    return hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()


def _forgotten_tokens() -> set[str]:
    """The words of the forgotten texts that no remaining document holds."""
    gone = {
        t
        for text in (SECRET, CLAIM, CONTEXT, "Vault opens_with", "Safe code")
        for t in tokenize(text)
    }
    return gone - {t for text in FILLER for t in tokenize(text)}


def _lexical_hashes(db: Database) -> set[bytes]:
    """Every 8-byte string of the lexical tables' keys and rows (term hashes among them)."""
    found: set[bytes] = set()
    with db._store.read() as txn:
        for table in (LEX_STATS, LEX_POSTINGS, LEX_DOCS):
            for key, value in txn.cursor(db=db._store.table(table)):
                for raw in (bytes(key), bytes(value)):
                    found |= {raw[i : i + 8] for i in range(len(raw) - 7)}
    return found


def _pins(hashes: set[bytes]) -> set[str]:
    """The four-digit numbers whose term hash is among ``hashes``: the search an
    attacker holding the file would run."""
    return {pin for n in range(10_000) if _term_hash(pin := f"{n:04d}") in hashes}


def _export(db: Database, path: Path) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in db.export(NS)), encoding="utf-8")
    return path


def _recall_ids(db: Database, **kw: object) -> set[bytes]:
    answer = db.execute(NS, Opcode.RECALL, Recall(cue="vault walrus-9981", top_k=50, **kw))  # type: ignore[arg-type]
    assert isinstance(answer, RecallOk)
    return {h.id for h in answer.hits}


def _nothing_before_the_purge(db: Database, tmp_path: Path, needles: dict[str, bytes]) -> Path:
    """After the forget, before the purge: the lexical tables, an export and a snapshot
    (one of the server's own, in the data directory) already hold none of ``needles``;
    return the snapshot."""
    assert not _lexical_hashes(db) & set(needles.values())
    assert _pins(_lexical_hashes(db)) == set()
    exported = _export(db, tmp_path / "export.jsonl")
    between = db.path / SNAPSHOT_DIR / "between"
    db.snapshot(between)
    for name, needle in needles.items():
        assert _holding(between, needle) == [], name
        assert _holding(exported, needle) == [], name
        assert _holding(exported, needle.hex().encode()) == [], name
    return between


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
        for text in FILLER:
            db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text=text))
        assert db.wait_indexed()
        before = cited.recorded_at
        db.retrieval.indexes.save_dirty()
        for name, needle in needles.items():
            assert _holding(root, needle), f"the test cannot see the {name}"
        assert {memory.memory_id, cited.statement_id} <= _recall_ids(db)
        indexed = {t for t in _forgotten_tokens() if _term_hash(t) in _lexical_hashes(db)}
        assert {"walrus", "9981", "vault", "combin"} <= indexed  # the test can see them
        assert _pins(_lexical_hashes(db)) == {"9981"}
        hashes = {f"hash of {t!r}": _term_hash(t) for t in _forgotten_tokens()}

        db.execute(
            NS, Opcode.FORGET, Forget(request_id=rid(), memory=memory.memory_id, mode="hard")
        )
        db.execute(
            NS,
            Opcode.STATEMENT_RETRACT,
            StatementRetract(request_id=rid(), id=standalone.statement_id),
        )
        assert db.wait_indexed()
        between = _nothing_before_the_purge(db, tmp_path, needles | hashes)
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
    for place in (root, between, root.parent / "snapshot-after"):
        for name, needle in (needles | hashes).items():
            assert _holding(place, needle) == [], (name, place)
    with brain.open(root) as db:
        with pytest.raises(NotFound):
            db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=bytes(16)))
        assert not (_recall_ids(db, as_of=before) & {memory.memory_id, cited.statement_id})
    # The snapshot taken between the forget and the purge still restores.
    restore_snapshot(between, tmp_path / "restored")
    with brain.open(tmp_path / "restored") as db:
        got = db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=memory.memory_id))
        assert isinstance(got, MemoryGetOk) and got.memory.text is None
        assert len(_recall_ids(db) - gone) == len(FILLER) == len(_recall_ids(db))
