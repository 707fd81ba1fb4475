"""Mentions (spec/02-data-model.md §3.1): what ENCODE links and audits, how the names
resolve, what a forget does to the links, and that they are part of the write (WAL
replay, transactions, export and import)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import lmdb
import pytest

import brain
from brain import cbor
from brain.engine.database import Database, DatabaseOptions
from brain.engine.extract import DEFAULT_EXTRACTORS, Found
from brain.engine.records.mentions import (
    MAX_MEMORY_MENTIONS,
    mentioned_memories,
    name_frequency,
    name_hash,
)
from brain.engine.store.scope import Scope
from brain.engine.store.tables import AUDIT, MENTION_BY_NAME, MENTION_STATS, MENTIONS
from brain.errors import InvalidArgument, Unavailable
from brain.wire.messages.entity_ops import (
    EntityCreate,
    EntityCreateOk,
    EntityMerge,
    EntityTombstone,
)
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget, MemoryGet, MemoryGetOk
from brain.wire.messages.recall_ops import ArmWeights, Recall, RecallOk
from brain.wire.messages.records import Memory, Mention
from brain.wire.messages.txn_ops import TxnBegin, TxnBegun, TxnCommit
from brain.wire.opcodes import Opcode
from tests.unit.admin.test_transfer import _copy
from tests.unit.common import NS, rid

SCOPE = Scope.of(NS, None)


def encode(db: Database, text: str, **kw: object) -> EncodeOk:
    answer = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text=text, **kw))  # type: ignore[arg-type]
    assert isinstance(answer, EncodeOk)
    return answer


def entity(db: Database, name: str, *aliases: str) -> bytes:
    made = db.execute(
        NS, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name=name, aliases=aliases)
    )
    assert isinstance(made, EntityCreateOk)
    return made.entity_id


def memory(db: Database, memory_id: bytes) -> Memory:
    got = db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=memory_id))
    assert isinstance(got, MemoryGetOk)
    return got.memory


def linked(db: Database, memory_id: bytes) -> list[tuple[str, str, bytes | None]]:
    return [(m.name, m.found, m.entity) for m in memory(db, memory_id).mentions or ()]


def forget(db: Database, memory_id: bytes, mode: str) -> None:
    db.execute(NS, Opcode.FORGET, Forget(request_id=rid(), memory=memory_id, mode=mode))


def rows(db: Database, table: bytes) -> dict[bytes, bytes]:
    with db._store.read() as txn:
        return {bytes(k): bytes(v) for k, v in txn.cursor(db=db._store.table(table))}


def stored(db: Database, memory_id: bytes) -> dict[str, Any]:
    """The ``mentions`` row of a memory."""
    row = cbor.decode(rows(db, MENTIONS)[SCOPE.key(memory_id)])
    assert isinstance(row, dict)
    return row


def extract_entries(db: Database) -> list[dict[str, object]]:
    return [e for e in db.audit(NS, 1000) if e["operation"] == "extract"]


def df(db: Database, name: str) -> int:
    with db._store.read() as txn:
        return name_frequency(db._store, txn, SCOPE, name)


def test_encode_links_the_names_and_reads_show_them(db: Database) -> None:
    deborah = entity(db, "Deborah", "Deb")
    text = "Jolene: I saw Deb and Mel at the LGBTQ night."
    made = encode(db, text)
    assert memory(db, made.memory_id).mentions == (
        Mention(name="Jolene", found="speaker", extractor="names/1"),
        Mention(name="Deb", found="proper_name", entity=deborah, extractor="names/1"),
        Mention(name="Mel", found="proper_name", extractor="names/1"),
        Mention(name="LGBTQ", found="proper_name", extractor="names/1"),
    )
    # A memory in a RECALL hit shows them too.
    assert db.wait_indexed()
    found = db.execute(
        NS, Opcode.RECALL, Recall(cue="LGBTQ night", arms=ArmWeights(semantic=0, graph=0))
    )
    assert isinstance(found, RecallOk)
    (hit,) = [h for h in found.hits if h.id == made.memory_id]
    assert hit.memory is not None and hit.memory.mentions == memory(db, made.memory_id).mentions
    # One row per memory, one index key per name, and the counts.
    assert len(rows(db, MENTIONS)) == 1
    assert len(rows(db, MENTION_BY_NAME)) == 4
    assert SCOPE.key(name_hash("lgbtq"), made.memory_id) in rows(db, MENTION_BY_NAME)
    assert [df(db, n) for n in ("jolene", "deb", "mel", "lgbtq", "deborah")] == [1, 1, 1, 1, 0]
    with db._store.read() as txn:
        assert mentioned_memories(db._store, txn, SCOPE) == 1


def test_each_extraction_is_audited_with_hashes_and_no_names(db: Database) -> None:
    deborah = entity(db, "Deborah")
    text = "Jolene: Deborah and I met Quintavius."
    made = encode(db, text)
    (entry,) = extract_entries(db)
    assert entry["records"] == [made.memory_id]
    assert entry["input_sha256"] == hashlib.sha256(text.encode()).digest() == made.sha256
    assert (entry["extractor"], entry["version"]) == ("names", 1)

    def digest(name: str) -> bytes:
        return hashlib.sha256(name.encode()).digest()

    assert entry["outputs"] == [
        {"name_sha256": digest("jolene"), "found": "speaker"},
        {"name_sha256": digest("quintavius"), "found": "proper_name"},
    ]
    assert isinstance(entry["cost_us"], int) and entry["cost_us"] >= 0
    # "Deborah" opens a sentence and no comma follows it: not a mention (§3.1).
    assert deborah not in cbor.encode(entry["outputs"])
    for raw in rows(db, AUDIT).values():
        for name in (b"Jolene", b"Quintavius", b"jolene", b"quintavius"):
            assert name not in raw
    # A repeat of the text is deduplicated: no extraction, no new link.
    again = encode(db, text)
    assert again.deduplicated and len(extract_entries(db)) == 1
    assert df(db, "quintavius") == 1


def test_names_resolve_by_every_tier_and_an_ambiguous_one_links_nothing(db: Database) -> None:
    deborah = entity(db, "Deborah Lane", "Deb")
    entity(db, "Alex")
    entity(db, "Alex")
    debbie = entity(db, "Debbie")
    db.execute(NS, Opcode.ENTITY_MERGE, EntityMerge(request_id=rid(), keep=deborah, merge=debbie))
    gone = entity(db, "Zora")
    db.execute(NS, Opcode.ENTITY_TOMBSTONE, EntityTombstone(request_id=rid(), id=gone))
    made = encode(db, "so Deborah Lane, Deb, Debbie, Deborah Lame, Alex and Zora came")
    assert linked(db, made.memory_id) == [
        ("Deborah Lane", "proper_name", deborah),  # exact
        ("Deb", "proper_name", deborah),  # alias
        ("Debbie", "proper_name", deborah),  # a merged-away name answers as the kept entity
        ("Deborah Lame", "proper_name", deborah),  # fuzzy (ratio 0.92)
        ("Alex", "proper_name", None),  # two entities of that name: ambiguous
        ("Zora", "proper_name", None),  # tombstoned: no candidate
    ]


def test_a_soft_forget_marks_the_links_and_a_hard_one_removes_the_names(db: Database) -> None:
    first = encode(db, "Jolene: I met Mel and Quintavius.")
    second = encode(db, "Tim: so Mel was there too.")
    forget(db, first.memory_id, "soft")
    row = stored(db, first.memory_id)
    assert row["record_invalidated_at"] > row["recorded_at"]
    assert len(row["mentions"]) == 3
    assert linked(db, first.memory_id)[0] == ("Jolene", "speaker", None)
    assert df(db, "quintavius") == 1  # still found by its names; the chain judges it

    forget(db, first.memory_id, "hard")
    assert memory(db, first.memory_id).mentions is None
    husk = stored(db, first.memory_id)
    assert "mentions" not in husk and husk["record_invalidated_at"] == row["record_invalidated_at"]
    assert husk["extractors"] == [["names", 1]]
    index = rows(db, MENTION_BY_NAME)
    assert not any(key.endswith(first.memory_id) for key in index)
    assert [df(db, n) for n in ("jolene", "quintavius", "mel", "tim")] == [0, 0, 1, 1]
    stats = rows(db, MENTION_STATS)
    # Names no memory mentions any more leave no counter row behind.
    assert not any(name_hash(n) in key for key in stats for n in ("jolene", "quintavius"))
    with db._store.read() as txn:
        assert mentioned_memories(db._store, txn, SCOPE) == 1
    assert linked(db, second.memory_id) == [("Tim", "speaker", None), ("Mel", "proper_name", None)]


def test_a_hard_forget_removes_the_names_of_every_memory_with_the_text(db: Database) -> None:
    text = "Jolene: so Quintavius again."
    first = encode(db, text)
    forget(db, first.memory_id, "soft")
    second = encode(db, text)  # the text may be stored again after a soft forget
    assert not second.deduplicated and df(db, "quintavius") == 2
    forget(db, second.memory_id, "hard")
    assert memory(db, first.memory_id).mentions is None
    assert memory(db, second.memory_id).mentions is None
    assert rows(db, MENTION_BY_NAME) == {} and rows(db, MENTION_STATS) == {}


def test_no_extractor_no_links(tmp_path: Path) -> None:
    with Database.open(tmp_path / "d", DatabaseOptions(extractors=())) as db:
        made = encode(db, "Jolene: I met Mel.")
        assert memory(db, made.memory_id).mentions is None
        assert extract_entries(db) == []
        for table in (MENTIONS, MENTION_BY_NAME, MENTION_STATS):
            assert rows(db, table) == {}


def test_the_links_are_in_the_logged_write(tmp_path: Path) -> None:
    # Logged and synced, then the LMDB commit fails: the restart replays the record.
    path = tmp_path / "d"
    db = brain.open(path)
    deborah = entity(db, "Deborah")

    def crash() -> None:
        raise lmdb.Error("injected failure between the WAL fsync and the LMDB commit")

    db.writer.inject_fault_before_commit(crash)
    lost = db.submit(NS, Opcode.ENCODE, Encode(request_id=rid(), text="so Deborah met Mel"))
    with pytest.raises(Unavailable):
        lost.result()
    db.close()
    with brain.open(path) as reopened:
        (memory_id,) = [key[-16:] for key in rows(reopened, MENTIONS)]
        row = stored(reopened, memory_id)
        assert [m[:2] for m in row["mentions"]] == [
            ["Deborah", "proper_name"],
            ["Mel", "proper_name"],
        ]
        assert row["mentions"][0][3] == deborah
        assert df(reopened, "mel") == 1 and len(extract_entries(reopened)) == 1


def test_a_transaction_links_once_at_commit(db: Database) -> None:
    begun = db.execute(NS, Opcode.TXN_BEGIN, TxnBegin())
    assert isinstance(begun, TxnBegun)
    buffered = db.execute(
        NS, Opcode.ENCODE, Encode(request_id=rid(), text="we met Mel", txn_id=begun.txn_id)
    )
    assert isinstance(buffered, EncodeOk)
    assert rows(db, MENTIONS) == {} and extract_entries(db) == []
    db.execute(NS, Opcode.TXN_COMMIT, TxnCommit(txn_id=begun.txn_id))
    assert linked(db, buffered.memory_id) == [("Mel", "proper_name", None)]
    assert len(extract_entries(db)) == 1 and df(db, "mel") == 1


def test_an_import_holds_the_same_links(tmp_path: Path) -> None:
    with brain.open(tmp_path / "a") as source, brain.open(tmp_path / "b") as target:
        deborah = entity(source, "Deborah")
        kept = encode(source, "so Deborah met Mel and Quintavius")
        dropped = encode(source, "Tim: so Quintavius left")
        forget(source, dropped.memory_id, "hard")
        assert source.wait_indexed()
        _copy(source, target)
        assert memory(target, kept.memory_id).mentions == memory(source, kept.memory_id).mentions
        assert linked(target, kept.memory_id)[0] == ("Deborah", "proper_name", deborah)
        assert memory(target, dropped.memory_id).mentions is None
        for table in (MENTIONS, MENTION_BY_NAME, MENTION_STATS):
            assert rows(target, table) == rows(source, table)
        assert df(target, "quintavius") == 1 and df(target, "tim") == 0


def test_the_wire_shape_of_a_mention() -> None:
    shown = Memory.from_wire(
        {
            "id": bytes(16),
            "sha256": bytes(32),
            "recorded_at": 1,
            "mentions": [{"name": "Mel", "found": "speaker", "extractor": "names/1"}],
        }
    )
    assert shown.mentions == (Mention(name="Mel", found="speaker", extractor="names/1"),)
    bad = {"name": "Mel", "found": "guessed", "extractor": "names/1"}
    with pytest.raises(InvalidArgument) as caught:
        Memory.from_wire(
            {"id": bytes(16), "sha256": bytes(32), "recorded_at": 1, "mentions": [bad]}
        )
    assert caught.value.field == "mentions[0].found"
    with pytest.raises(InvalidArgument) as caught:
        replace(shown, forgotten="hard")
    assert caught.value.field == "mentions"


class _Listing:
    """An extractor of the test's own: every word of the text, as written, and a few
    answers no mention can hold."""

    name = "listing"
    version = 3

    def extract(self, text: str) -> tuple[Found, ...]:
        bad = (Found("   ", "proper_name"), Found("x" * 2000, "proper_name"), Found("Ok", "guess"))
        return bad + tuple(Found(word, "proper_name") for word in text.split())


def test_extractors_plug_in_and_the_stored_mentions_are_bounded(tmp_path: Path) -> None:
    options = DatabaseOptions(extractors=(*DEFAULT_EXTRACTORS, _Listing()))
    with Database.open(tmp_path / "d", options) as db:
        made = encode(db, "Jolene: " + " ".join(f"w{i}" for i in range(100)))
        shown = memory(db, made.memory_id).mentions or ()
        assert len(shown) == MAX_MEMORY_MENTIONS
        assert shown[0] == Mention(name="Jolene", found="speaker", extractor="names/1")
        assert shown[1] == Mention(name="Jolene:", found="proper_name", extractor="listing/3")
        assert shown[2].name == "w0"
        entries = extract_entries(db)
        assert sorted((e["extractor"], e["version"]) for e in entries) == [
            ("listing", 3),
            ("names", 1),
        ]
        assert stored(db, made.memory_id)["extractors"] == [["names", 1], ["listing", 3]]
