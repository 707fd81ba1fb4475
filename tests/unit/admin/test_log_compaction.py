"""The base of a compacted log (spec/05-durability.md §14.10): plans of puts holding
every row the log put, none larger than the limit unless one row is; applied to a
store that held other rows, in one transaction, they leave it holding exactly the
source's rows, applied up to the LSN compacted to."""

from __future__ import annotations

from pathlib import Path

import pytest

import brain
from brain.engine.admin.log_compaction import (
    TRIM_STORE_FACTOR,
    base_plans,
    base_record_bytes,
    reset_to_base,
    trim_due,
)
from brain.engine.database import Database
from brain.engine.store.env import Store
from brain.engine.store.meta import compaction_due, get_progress, put_compaction_due
from brain.engine.store.tables import MEMORIES, META, TABLES
from brain.engine.wal.format import WalRecord
from brain.engine.wal.parts import (
    MIN_PART_ROOM,
    PART_HEADER,
    join_parts,
    record_count,
    split_record,
)
from brain.engine.write.frozen import FROZEN_PREFIX, freeze
from brain.engine.write.plan import (
    PLAN_RECORD_KIND,
    Plan,
    Put,
    apply_changes,
    decode_plan,
    encode_plan,
)
from brain.errors import StorageFault
from brain.wire.messages.memory_ops import Encode
from brain.wire.messages.statement_ops import StatementCreate
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid

BIG_ROW = 300 * 1024

RECORD_LIMIT = 256 * 1024
"""The log's record limit the base is made for: below the big row."""
"""A value larger than a base record's limit."""


def rows(store: Store) -> dict[bytes, list[tuple[bytes, bytes]]]:
    """Every row the log put, by table (``meta``: the freezes only)."""
    held: dict[bytes, list[tuple[bytes, bytes]]] = {}
    with store.read() as txn:
        for table in TABLES:
            found = [(bytes(k), bytes(v)) for k, v in txn.cursor(db=store.table(table))]
            if table == META:
                found = [(k, v) for k, v in found if k.startswith(FROZEN_PREFIX)]
            held[table] = found
    return held


def fill(db: Database) -> None:
    for i in range(40):
        db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text=f"note {i} on the base"))
    db.execute(
        NS,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            request_id=rid(),
            kind="fact",
            subject=NameRef(name="Ada"),
            predicate="likes",
            object_=TextValue(text="tea"),
        ),
    )
    db.freeze_namespace("elsewhere", "s2")
    assert db.wait_indexed()


def put_big_row(store: Store) -> None:
    with store.env.begin(write=True) as txn:
        apply_changes(store, txn, [Put(MEMORIES, b"\xff" * 40, b"x" * BIG_ROW)])


def test_the_base_holds_every_logged_row_in_records_under_the_limit(tmp_path: Path) -> None:
    with brain.open(tmp_path / "source") as db:
        fill(db)
        store = db._store
        put_big_row(store)
        source = rows(store)
        with store.read() as txn:
            payloads = list(base_plans(store, txn, RECORD_LIMIT))
    assert len(payloads) > 1
    sizes = []
    for payload in payloads:
        plan = decode_plan(payload)
        assert plan.answers == () and all(isinstance(c, Put) for c in plan.changes)
        held = sum(len(c.key) + len(c.value) for c in plan.changes if isinstance(c, Put))
        sizes.append(held)
        # Only a record of one row may be over the limit: the big row, alone; every
        # other is one record of the log.
        assert held <= base_record_bytes(RECORD_LIMIT) or len(plan.changes) == 1
        assert len(payload) <= RECORD_LIMIT or len(plan.changes) == 1
    assert max(sizes) >= BIG_ROW
    assert source[META] and source[MEMORIES]

    # A store holding other rows (another history, a stale freeze) starts again.
    target = Store(tmp_path / "target")
    try:
        with target.env.begin(write=True) as txn:
            apply_changes(target, txn, [Put(MEMORIES, b"stale", b"row"), freeze("gone", "s9")])
            put_compaction_due(target, txn)
        # Logged where a record holds less than the big row, which goes in parts.
        compacted_to = 500
        limit = MIN_PART_ROOM + PART_HEADER.size
        assert limit < BIG_ROW
        lsn = compacted_to - sum(record_count(len(p), limit) for p in payloads) + 1
        records: list[WalRecord] = []
        for i, payload in enumerate(payloads):
            records += split_record(lsn, 1234 + i, PLAN_RECORD_KIND, payload, limit)
            lsn = records[-1].lsn + 1
        assert len(records) > len(payloads)
        record_time = reset_to_base(target, lambda: join_parts(records), compacted_to, 5)
        assert record_time == 1234 + len(payloads) - 1
        assert rows(target) == source
        with target.read() as txn:
            progress = get_progress(target, txn)
            assert (progress.applied_lsn, progress.last_record_time) == (compacted_to, record_time)
            assert not compaction_due(target, txn)
    finally:
        target.close()


def test_a_base_ending_elsewhere_changes_nothing(tmp_path: Path) -> None:
    target = Store(tmp_path / "target")
    try:
        with target.env.begin(write=True) as txn:
            apply_changes(target, txn, [Put(MEMORIES, b"kept", b"row")])
        before = rows(target)
        payload = encode_plan(Plan((Put(MEMORIES, b"new", b"row"),), ()))
        short = WalRecord(3, 1, PLAN_RECORD_KIND, payload)
        with pytest.raises(StorageFault, match="ends at LSN 3, not at 10"):
            reset_to_base(target, lambda: join_parts([short]), 10, 5)
        assert rows(target) == before
    finally:
        target.close()


@pytest.mark.parametrize(
    ("stream", "store", "bound", "after_base", "due"),
    [
        (10_000, 4_000, 8_000, 5, True),  # past the bound and twice the store
        (7_999, 1_000, 8_000, 5, False),  # under the bound
        (10_000, 5_001, 8_000, 5, False),  # under twice the store: a copy saves little
        (10_000, 5_000, 8_000, 5, True),  # exactly twice
        (10_000, 1_000, 8_000, 0, False),  # nothing written since the base
        (10**12, 1, 0, 5, False),  # a bound of 0 never trims
    ],
)
def test_a_stream_is_trimmed_past_its_bound_and_twice_the_store(
    stream: int, store: int, bound: int, after_base: int, due: bool
) -> None:
    assert TRIM_STORE_FACTOR == 2
    assert trim_due(stream, store, bound, after_base) is due


def test_the_store_s_live_bytes_count_its_rows_pages_not_its_file(db: Database) -> None:
    empty = db._store.live_bytes()
    for i in range(200):
        db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text=f"note {i} " * 20))
    full = db._store.live_bytes()
    assert full > empty + 200 * 100
    # The file's high water holds the free pages and the checkpoint's copies too.
    assert full < db._store.usage()[1]
