"""The memory indexes and the forget ledger keyed on the normalised text
(brain/engine/store/text_keys.py), and a store of the previous format, keyed on the
exact bytes, opened by this build (spec/02-data-model.md §3, spec/05-durability.md §2).
"""

from __future__ import annotations

import logging
import unicodedata
from pathlib import Path
from typing import Final

import lmdb
import pytest

import brain
from brain.engine.admin.jsonl_import import read_jsonl
from brain.engine.database import Database, DatabaseOptions
from brain.engine.store import meta
from brain.engine.store.scope import DEFAULT_SPACE, SCOPE_PREFIX_BYTES, Scope
from brain.engine.store.tables import FORGET_LEDGER, MEMORY_BY_SHA, MEMORY_BY_TEXT
from brain.engine.store.text_keys import exact_digest, normalise_text, text_key
from brain.errors import Forgotten
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget, MemoryGet, MemoryGetOk
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.unit.common import NS, rid

SCOPE: Final = Scope(NS, DEFAULT_SPACE)
KEPT: Final = "Old note\n"
LATER: Final = "Old note"
OTHER: Final = "Another  note"
GONE: Final = "Gone text "


def _no_fsync(fd: int) -> None:
    """Durability is not under test here; skipping the WAL's fdatasync saves time."""


OPTIONS: Final = DatabaseOptions(fsync=_no_fsync)


def _run(db: Database, opcode: Opcode, request: Message) -> Message:
    return db.execute(NS, opcode, request)


def _encode(db: Database, text: str) -> EncodeOk:
    answer = _run(db, Opcode.ENCODE, Encode(request_id=rid(), text=text))
    assert isinstance(answer, EncodeOk)
    return answer


def _forget(db: Database, memory_id: bytes) -> None:
    _run(db, Opcode.FORGET, Forget(request_id=rid(), memory=memory_id, mode="hard"))


def _forgotten(db: Database, memory_id: bytes) -> str | None:
    answer = _run(db, Opcode.MEMORY_GET, MemoryGet(id=memory_id))
    assert isinstance(answer, MemoryGetOk)
    return answer.memory.forgotten


def _table(path: Path, table: bytes) -> dict[bytes, bytes]:
    """Every row of ``table`` in the closed database at ``path``."""
    env = lmdb.open(str(path / "lmdb"), max_dbs=100, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            db = env.open_db(table, txn=txn, create=False)
            return {bytes(k): bytes(v) for k, v in txn.cursor(db=db).iternext()}
    finally:
        env.close()


def test_normalising_composes_and_collapses_whitespace() -> None:
    decomposed = unicodedata.normalize("NFD", "\u00e9t\u00e9")
    assert normalise_text(f" \t{decomposed}\u00a0 \n\n at  noon \r\n") == "\u00e9t\u00e9 at noon"
    assert normalise_text("no change") == "no change"
    assert text_key("a  b ") == text_key("a b") == exact_digest("a b")
    assert text_key("a b") != text_key("ab")


def _old_store(path: Path) -> dict[str, bytes]:
    """A store as the previous build left it: format 2, the memory indexes and the
    ledger keyed on the exact bytes' SHA-256, and two active memories whose texts
    normalise alike (that build stored each). The memories' ids by text."""
    ids: dict[str, bytes] = {}
    with brain.open(path, OPTIONS) as db:
        store = db._store
        ids[KEPT] = _encode(db, KEPT).memory_id

        def free_the_text() -> None:
            with store.env.begin(write=True) as txn:
                txn.delete(SCOPE.key(text_key(KEPT)), db=store.table(MEMORY_BY_SHA))

        db.writer.between_batches(free_the_text).result()
        ids[LATER] = _encode(db, LATER).memory_id
        ids[OTHER] = _encode(db, OTHER).memory_id
        ids[GONE] = _encode(db, GONE).memory_id
        _forget(db, ids[GONE])

        def exact_keys() -> None:
            with store.env.begin(write=True) as txn:
                by_sha, by_text = store.table(MEMORY_BY_SHA), store.table(MEMORY_BY_TEXT)
                ledger = store.table(FORGET_LEDGER)
                for table in (by_sha, by_text, ledger):
                    txn.drop(table, delete=False)
                for text, memory_id in ids.items():
                    txn.put(SCOPE.key(exact_digest(text), memory_id), b"", db=by_text)
                    if text != GONE:
                        txn.put(SCOPE.key(exact_digest(text)), memory_id, db=by_sha)
                txn.put(SCOPE.key(exact_digest(GONE)), (1).to_bytes(8, "big"), db=ledger)
                meta.stamp_format(store, txn, 2)

        db.writer.between_batches(exact_keys).result()
        db.checkpoint()
    return ids


def test_a_store_keyed_on_exact_bytes_is_rekeyed_and_its_ledger_still_refuses(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "d"
    ids = _old_store(path)
    with caplog.at_level(logging.INFO, logger="brain.engine"), brain.open(path, OPTIONS):
        pass
    assert f"upgraded from format 2 to {meta.FORMAT_VERSION}" in caplog.text
    # Re-keyed: the text's memory is the one recorded first; the hard-forgotten
    # memory, whose text is gone, keeps its entry.
    assert _table(path, MEMORY_BY_SHA) == {
        SCOPE.key(text_key(KEPT)): ids[KEPT],
        SCOPE.key(text_key(OTHER)): ids[OTHER],
    }
    assert set(_table(path, MEMORY_BY_TEXT)) == {
        SCOPE.key(text_key(KEPT), ids[KEPT]),
        SCOPE.key(text_key(LATER), ids[LATER]),
        SCOPE.key(text_key(OTHER), ids[OTHER]),
        SCOPE.key(exact_digest(GONE), ids[GONE]),
    }
    with brain.open(path, OPTIONS) as db:
        again = _encode(db, "Old   note ")
        assert again.deduplicated and again.memory_id == ids[KEPT]
        assert _encode(db, "Another note").memory_id == ids[OTHER]
        # The old ledger entry, of the exact bytes, still refuses those bytes.
        with pytest.raises(Forgotten):
            _encode(db, GONE)
        # A hard forget reaches both old memories of the text, and every variant of it
        # is refused from then on.
        _forget(db, ids[LATER])
        assert (_forgotten(db, ids[KEPT]), _forgotten(db, ids[LATER])) == ("hard", "hard")
        for variant in (KEPT, LATER, " Old note"):
            with pytest.raises(Forgotten):
                _encode(db, variant)
    ledger = _table(path, FORGET_LEDGER)
    assert set(ledger) == {SCOPE.key(exact_digest(GONE)), SCOPE.key(text_key(LATER))}
    assert all(len(k) == SCOPE_PREFIX_BYTES + 32 for k in ledger)


def test_an_export_of_such_a_store_imports_to_the_same_memory_indexes(tmp_path: Path) -> None:
    """An import rebuilds the memory indexes by the upgrade's rule: of two active
    memories normalising alike, the one recorded first is the text's."""
    source, target = tmp_path / "a", tmp_path / "b"
    _old_store(source)
    with brain.open(source, OPTIONS) as db:
        data = "".join(line + "\n" for line in db.export_jsonl(NS, vectors="none")).encode()
    with brain.open(target, OPTIONS) as db:
        read = read_jsonl(data)
        db.import_rows(read.header, read.rows, 0)
        db.finish_import(read.header, len(read.rows), read.scopes)
        assert db.wait_indexed()
    for table in (MEMORY_BY_SHA, MEMORY_BY_TEXT, FORGET_LEDGER):
        assert _table(target, table) == _table(source, table), table
