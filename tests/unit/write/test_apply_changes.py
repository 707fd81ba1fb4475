"""Applying a plan's changes: puts, counter additions and deletes land as logged, and
a change naming a table this build does not have is refused as a storage fault
(a logged plan from another build, or a damaged one), not applied elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain.engine.store.env import Store
from brain.engine.store.tables import TABLES
from brain.engine.write.plan import Add, Delete, Put, apply_changes, read_counter
from brain.errors import StorageFault

TABLE, COUNTERS = TABLES[0], TABLES[1]


def test_each_kind_of_change_lands(tmp_path: Path) -> None:
    store = Store(tmp_path, fsync=lambda _fd: None)
    try:
        with store.write() as txn:
            apply_changes(
                store,
                txn,
                [
                    Put(TABLE, b"kept", b"1"),
                    Put(TABLE, b"dropped", b"2"),
                    Add(COUNTERS, b"count", 5),
                    Add(COUNTERS, b"count", -2),
                    Delete(TABLE, b"dropped"),
                    Delete(TABLE, b"never there"),
                ],
            )
        with store.read() as txn:
            assert txn.get(b"kept", db=store.table(TABLE)) == b"1"
            assert txn.get(b"dropped", db=store.table(TABLE)) is None
            raw = txn.get(b"count", db=store.table(COUNTERS))
            assert raw is not None and read_counter(bytes(raw)) == 3
    finally:
        store.close()


def test_an_unknown_table_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path, fsync=lambda _fd: None)
    try:
        txn = store.write()
        try:
            with pytest.raises(StorageFault, match="unknown table"):
                apply_changes(store, txn, [Put(b"no such table", b"k", b"v")])
        finally:
            txn.abort()
    finally:
        store.close()
