"""Forgetting reaches the mentions (spec/02-data-model.md §3.1), as
``test_forgotten_text_leaves_no_trace.py`` proves for the text: after a hard forget
the names a memory mentioned are in no row, no index key and no counter, an export or
a snapshot made then holds none of them, and after the purge no byte of the data
directory (LMDB, WAL, index files, snapshots in it) or of a snapshot taken after the
forget does; the graph arm no longer finds the memory by them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import brain
from brain.engine.admin.snapshot import SNAPSHOT_DIR
from brain.engine.database import Database
from brain.engine.index.documents import MEMORY_DOC
from brain.engine.recall.graph import graph_search
from brain.engine.records.filters import Filters
from brain.engine.records.mentions import name_hash
from brain.engine.store.scope import Scope
from brain.engine.store.tables import MENTION_BY_NAME, MENTION_STATS, MENTIONS
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget, MemoryGet, MemoryGetOk
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid

TEXT: Final = "Jolene Quixby: I met Zebulon Marchetti and the XQZVW crew."
NAMES: Final = ("Jolene Quixby", "Zebulon Marchetti", "XQZVW")
FILLER: Final = [f"so Mel came by, note {i}" for i in range(10)]
SCOPE: Final = Scope.of(NS, None)


def _holding(root: Path, needle: bytes) -> list[str]:
    files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
    return sorted(str(p.relative_to(root.parent)) for p in files if needle in p.read_bytes())


def _needles() -> dict[str, bytes]:
    """Each name as written and as normalised (the form the index hashes)."""
    return {form: form.encode() for name in NAMES for form in (name, name.casefold())}


def _table(db: Database, table: bytes) -> dict[bytes, bytes]:
    with db._store.read() as txn:
        return {bytes(k): bytes(v) for k, v in txn.cursor(db=db._store.table(table))}


def _found(db: Database, cue: str) -> set[bytes]:
    with db._store.read() as txn:
        found = graph_search(
            db._store, txn, SCOPE, starts=set(), filters=Filters(), limit=99, cue=cue
        )
    return {key[1:] for key, _ in found if key[:1] == MEMORY_DOC}


def test_forgotten_mentions_leave_every_row_and_every_byte(tmp_path: Path) -> None:
    root = tmp_path / "d"
    hashes = [name_hash(name.casefold()) for name in NAMES]
    with brain.open(root) as db:
        made = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text=TEXT))
        assert isinstance(made, EncodeOk)
        filler = set()
        for text in FILLER:
            answer = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text=text))
            assert isinstance(answer, EncodeOk)
            filler.add(answer.memory_id)
        assert db.wait_indexed()
        db.retrieval.indexes.save_dirty()
        mentions = _table(db, MENTIONS)[SCOPE.key(made.memory_id)]
        for name, needle in _needles().items():
            if name in NAMES:  # the test can see them: the row holds the names as written
                assert needle in mentions, name
        assert all(any(h in key for key in _table(db, MENTION_BY_NAME)) for h in hashes)
        assert _found(db, "Zebulon Marchetti") == {made.memory_id}

        db.execute(NS, Opcode.FORGET, Forget(request_id=rid(), memory=made.memory_id, mode="hard"))
        got = db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=made.memory_id))
        assert isinstance(got, MemoryGetOk) and got.memory.mentions is None
        for table in (MENTIONS, MENTION_BY_NAME, MENTION_STATS):
            for key, value in _table(db, table).items():
                assert not any(h in key for h in hashes), table
                assert not any(needle in value for needle in _needles().values()), table
        assert _found(db, "Zebulon Marchetti Jolene Quixby XQZVW") == set()
        assert _found(db, "Mel") == filler

        # Before the purge: an export and a snapshot already hold none of the names.
        exported = tmp_path / "export.jsonl"
        exported.write_text("".join(json.dumps(line) + "\n" for line in db.export(NS)))
        between = db.path / SNAPSHOT_DIR / "between"
        db.snapshot(between)
        for name, needle in _needles().items():
            assert _holding(between, needle) == [], name
            assert _holding(exported, needle) == [], name
            assert _holding(exported, needle.hex().encode()) == [], name
        assert db.purge() == 1
        db.snapshot(root.parent / "snapshot-after")
    for place in (root, between, root.parent / "snapshot-after"):
        for name, needle in _needles().items():
            assert _holding(place, needle) == [], (name, place)
