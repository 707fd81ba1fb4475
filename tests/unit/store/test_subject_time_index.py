"""``statement_by_subject_time``: kept in step with ``statement_by_subject`` by every write,
written by an import from the rows it follows from, and built when a store of the
previous format is opened (spec/02-data-model.md §2, spec/05-durability.md §2).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

import lmdb
import pytest

import brain
from brain.engine.admin.transfer import Header, Row
from brain.engine.database import Database, DatabaseOptions
from brain.engine.records.entity_rows import ENTITY_ID_BYTES
from brain.engine.records.refs import SUBJECT_KEY_BYTES
from brain.engine.store import meta, upgrade
from brain.engine.store.scan import scan
from brain.engine.store.scope import DEFAULT_SPACE, Scope
from brain.engine.store.statement_keys import BY_SUBJECT_KEY_BYTES, subject_time_key
from brain.engine.store.tables import META, STATEMENT_BY_SUBJECT, STATEMENT_BY_SUBJECT_TIME
from brain.errors import InvalidArgument, StorageFault
from brain.wire.messages.entity_ops import (
    EntityCreate,
    EntityCreateOk,
    EntityMerge,
    EntityMergeOk,
)
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget
from brain.wire.messages.records import Evidence
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementList,
    StatementListOk,
    StatementRetract,
    StatementSupersede,
    StatementTombstone,
)
from brain.wire.messages.values import EntityRef, TextValue
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.unit.common import NS, rid

SPACES: Final = (None, "other")
NAMES: Final = ("Ada", "Bob", "Cy")
FORMAT_KEY: Final = b"format_version"
"""The ``meta`` row holding the layout version (brain/engine/store/meta.py)."""


def _no_fsync(fd: int) -> None:
    """Durability is not under test here; skipping the WAL's fdatasync saves time."""


OPTIONS: Final = DatabaseOptions(fsync=_no_fsync)


def _run(db: Database, opcode: Opcode, request: Message) -> Message:
    return db.execute(NS, opcode, request)


def _fill(db: Database) -> tuple[dict[str | None, list[bytes]], list[int]]:
    """Statements of three entities in two spaces, with supersessions, a tombstone, a
    retraction, a hard forget's cascade and a merge; the entities of each space and
    instants between the writes."""
    entities: dict[str | None, list[bytes]] = {}
    instants: list[int] = []
    for space in SPACES:
        made = []
        for name in NAMES:
            answer = _run(
                db, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), space=space, name=name)
            )
            assert isinstance(answer, EntityCreateOk)
            made.append(answer.entity_id)
        entities[space] = made
        memory = _run(
            db, Opcode.ENCODE, Encode(request_id=rid(), space=space, text=f"note {space}")
        )
        assert isinstance(memory, EncodeOk)
        written: list[bytes] = []
        for i in range(24):
            answer = _run(
                db,
                Opcode.STATEMENT_CREATE,
                StatementCreate(
                    request_id=rid(),
                    space=space,
                    kind="fact",
                    subject=EntityRef(entity=made[i % 3]),
                    predicate=("likes", "knows", "tag")[i % 4 % 3],
                    object_=TextValue(text=f"v{i}"),
                    evidence=(Evidence(memory=memory.memory_id),) if i % 5 == 0 else None,
                ),
            )
            assert isinstance(answer, StatementCreateOk)
            written.append(answer.statement_id)
            if i % 6 == 5:
                instants.append(db.writer.clock.tick())
        draft = StatementDraft(
            kind="fact",
            subject=EntityRef(entity=made[1]),
            predicate="knows",
            object_=TextValue(text="new"),
        )
        _run(
            db,
            Opcode.STATEMENT_SUPERSEDE,
            StatementSupersede(request_id=rid(), space=space, old=written[1], new=draft),
        )
        _run(
            db,
            Opcode.STATEMENT_TOMBSTONE,
            StatementTombstone(request_id=rid(), space=space, id=written[2]),
        )
        _run(
            db,
            Opcode.STATEMENT_RETRACT,
            StatementRetract(request_id=rid(), space=space, id=written[3]),
        )
        instants.append(db.writer.clock.tick())
        _run(
            db,
            Opcode.FORGET,
            Forget(request_id=rid(), space=space, memory=memory.memory_id, mode="hard"),
        )
        merged = _run(
            db,
            Opcode.ENTITY_MERGE,
            EntityMerge(request_id=rid(), space=space, keep=made[0], merge=made[2]),
        )
        assert isinstance(merged, EntityMergeOk)
    return entities, instants


def _answers(
    db: Database, entities: dict[str | None, list[bytes]], instants: list[int]
) -> list[list[bytes]]:
    """The ids of every LIST by subject (with and without a predicate) and without one,
    as of each instant and now, in pages of three."""
    answers = []
    for space, made in entities.items():
        for subject in (None, *made):
            for predicate in (None, "likes", "knows"):
                for as_of in (*instants, None):
                    ids: list[bytes] = []
                    cursor = None
                    while True:
                        answer = _run(
                            db,
                            Opcode.STATEMENT_LIST,
                            StatementList(
                                space=space,
                                subject=None if subject is None else EntityRef(entity=subject),
                                predicate=predicate,
                                as_of=as_of,
                                include_superseded=True,
                                include_tombstoned=True,
                                limit=3,
                                cursor=cursor,
                            ),
                        )
                        assert isinstance(answer, StatementListOk)
                        ids += [s.id for s in answer.statements]
                        if answer.cursor is None:
                            break
                        cursor = answer.cursor
                    answers.append(ids)
    return answers


def _keys(path: Path, table: bytes) -> set[bytes]:
    """Every key of ``table`` in the closed database at ``path`` (none when it has no
    such table)."""
    env = lmdb.open(str(path / "lmdb"), max_dbs=100, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            try:
                db = env.open_db(table, txn=txn, create=False)
            except lmdb.NotFoundError:
                return set()
            return {bytes(key) for key in txn.cursor(db=db).iternext(values=False)}
    finally:
        env.close()


def _to_old_layout(db: Database, *, leftover: bytes | None = None) -> None:
    """Make ``db`` (closed next) what the previous build wrote: format 1, without
    ``statement_by_subject_time`` (or holding only ``leftover``). The store is changed
    on the writer thread between batches and checkpointed, as the engine's own
    maintenance changes it."""
    store = db._store

    def strip() -> None:
        with store.env.begin(write=True) as txn:
            txn.drop(store.table(STATEMENT_BY_SUBJECT_TIME), delete=leftover is None)
            if leftover is not None:
                txn.put(leftover, b"", db=store.table(STATEMENT_BY_SUBJECT_TIME))
            meta.stamp_format(store, txn, 1)

    db.writer.between_batches(strip).result()
    db.checkpoint()


def _format(path: Path) -> int:
    env = lmdb.open(str(path / "lmdb"), max_dbs=100, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            raw = txn.get(FORMAT_KEY, db=env.open_db(META, txn=txn, create=False))
    finally:
        env.close()
    assert raw is not None
    return int.from_bytes(raw, "big")


def _derived(path: Path) -> set[bytes]:
    return {subject_time_key(key) for key in _keys(path, STATEMENT_BY_SUBJECT)}


def test_every_write_keeps_the_index_in_step(tmp_path: Path) -> None:
    path = tmp_path / "d"
    with brain.open(path, OPTIONS) as db:
        _fill(db)
    held = _keys(path, STATEMENT_BY_SUBJECT_TIME)
    assert held and held == _derived(path)
    assert _format(path) == meta.FORMAT_VERSION


def test_a_store_of_the_previous_format_opens_and_answers_the_same(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "d"
    with brain.open(path, OPTIONS) as db:
        entities, instants = _fill(db)
        before = _answers(db, entities, instants)
        with db._store.read() as txn:
            index = {
                bytes(k) for k, _ in scan(txn, db._store.table(STATEMENT_BY_SUBJECT_TIME), b"")
            }
        # A key the table could hold only by mistake: the upgrade writes exactly what follows.
        stray = next(iter(index))[:-1] + b"\xff"
        _to_old_layout(db, leftover=stray)
    assert _keys(path, STATEMENT_BY_SUBJECT_TIME) == {stray}
    assert _format(path) == 1
    with caplog.at_level(logging.INFO, logger="brain.engine"), brain.open(path, OPTIONS) as db:
        assert _answers(db, entities, instants) == before
    assert f"upgraded from format 1 to {meta.FORMAT_VERSION}" in caplog.text
    assert _format(path) == meta.FORMAT_VERSION
    assert _keys(path, STATEMENT_BY_SUBJECT_TIME) == index
    # Opened again, an upgraded store is left as it is.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="brain.engine"), brain.open(path, OPTIONS) as db:
        assert _answers(db, entities, instants) == before
    assert "upgraded" not in caplog.text


def test_a_store_of_the_previous_format_without_the_table_opens(tmp_path: Path) -> None:
    path = tmp_path / "d"
    with brain.open(path, OPTIONS) as db:
        entities, instants = _fill(db)
        before = _answers(db, entities, instants)
        with db._store.read() as txn:
            index = {
                bytes(k) for k, _ in scan(txn, db._store.table(STATEMENT_BY_SUBJECT_TIME), b"")
            }
        _to_old_layout(db)
    assert _keys(path, STATEMENT_BY_SUBJECT_TIME) == set()
    with brain.open(path, OPTIONS) as db:
        assert _answers(db, entities, instants) == before
    assert _keys(path, STATEMENT_BY_SUBJECT_TIME) == index


@pytest.mark.parametrize("version", [0, meta.FORMAT_VERSION + 1])
def test_a_store_of_an_unknown_format_is_refused(tmp_path: Path, version: int) -> None:
    path = tmp_path / "d"
    with brain.open(path, OPTIONS) as db:
        store = db._store

        def stamp() -> None:
            with store.env.begin(write=True) as txn:
                meta.stamp_format(store, txn, version)

        db.writer.between_batches(stamp).result()
        db.checkpoint()
    with pytest.raises(StorageFault, match=f"has format {version}"):
        brain.open(path, OPTIONS)


def test_an_import_writes_the_index_from_the_subject_rows(tmp_path: Path) -> None:
    """An export leaves the table out (it follows from ``statement_by_subject``, and an
    export made before it existed has none); the import writes it."""
    source_path, target_path = tmp_path / "a", tmp_path / "b"
    with brain.open(source_path, OPTIONS) as source, brain.open(target_path, OPTIONS) as target:
        entities, instants = _fill(source)
        lines = list(source.export(NS))
        header, rows, trailer = lines[0], lines[1:-1], lines[-1]
        assert {r["table"] for r in rows} >= {STATEMENT_BY_SUBJECT.decode()}
        assert STATEMENT_BY_SUBJECT_TIME.decode() not in {r["table"] for r in rows}
        head = Header(NS, bytes.fromhex(str(header["export_id"])), int(str(header["clock"])))
        parsed = [
            Row(
                str(r["table"]).encode(),
                bytes.fromhex(str(r["key"])),
                bytes.fromhex(str(r["value"])),
            )
            for r in rows
        ]
        for start in range(0, len(parsed), 40):
            target.import_rows(head, parsed[start : start + 40], start)
        scopes = trailer["scopes"]
        assert isinstance(scopes, list)
        target.finish_import(head, len(parsed), [bytes.fromhex(str(s)) for s in scopes])
        assert _answers(target, entities, instants) == _answers(source, entities, instants)
    assert _keys(target_path, STATEMENT_BY_SUBJECT_TIME) == _keys(
        source_path, STATEMENT_BY_SUBJECT_TIME
    )


def test_an_import_refuses_a_subject_row_of_another_shape(tmp_path: Path) -> None:
    """The row the index is written from must be a whole key (a damaged file is not)."""
    with brain.open(tmp_path / "d", OPTIONS) as db:
        key = Scope(NS, DEFAULT_SPACE).key(b"e", b"\x01" * ENTITY_ID_BYTES)
        with pytest.raises(InvalidArgument, match="statement_by_subject"):
            db.import_rows(Header(NS, b"\x02" * 16, 1), [Row(STATEMENT_BY_SUBJECT, key, b"")], 0)


def test_the_key_layouts_agree() -> None:
    assert SUBJECT_KEY_BYTES == 1 + ENTITY_ID_BYTES
    assert set(upgrade.STEPS) == set(range(meta.OLDEST_FORMAT + 1, meta.FORMAT_VERSION + 1))
    key = bytes(range(BY_SUBJECT_KEY_BYTES))
    derived = subject_time_key(key)
    assert derived == key[: 32 + SUBJECT_KEY_BYTES] + key[32 + SUBJECT_KEY_BYTES + 8 :]
    with pytest.raises(ValueError, match="statement_by_subject key"):
        subject_time_key(key[:-1])
