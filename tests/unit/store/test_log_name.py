"""A store is held to the log it is applied from (spec/05-durability.md §14.6): a
single node's store names the local WAL, and one that applied another log's records
is refused rather than read with that log's LSNs."""

from __future__ import annotations

from pathlib import Path

import pytest

import brain
from brain.engine.store.env import Store
from brain.engine.store.meta import LOCAL_LOG, check_log
from brain.engine.store.tables import META
from brain.errors import StorageFault
from brain.wire.messages.memory_ops import Encode
from brain.wire.opcodes import Opcode
from tests.request_ids import request_id as rid


def _named(path: Path) -> bytes | None:
    store = Store(path / "lmdb")
    try:
        return _name_in(store)
    finally:
        store.close()


def test_a_single_node_store_names_the_local_wal_and_opens_again(tmp_path: Path) -> None:
    with brain.open(tmp_path / "d") as db:
        db.execute("default", Opcode.ENCODE, Encode(request_id=rid(1), text="a note"))
    assert _named(tmp_path / "d") == LOCAL_LOG.encode()
    with brain.open(tmp_path / "d") as db:
        assert db.applied_lsn >= 1


def test_a_store_that_applied_another_log_is_refused(tmp_path: Path) -> None:
    with brain.open(tmp_path / "d") as db:
        db.execute("default", Opcode.ENCODE, Encode(request_id=rid(1), text="a note"))
    store = Store(tmp_path / "d" / "lmdb")
    try:
        with pytest.raises(StorageFault, match=r"applied \d+ records of the log wal, not of X"):
            check_log(store, "X")
    finally:
        store.close()
    with brain.open(tmp_path / "d") as db:  # still opens on its own log
        assert db.applied_lsn >= 1


def _unnamed(store: Store) -> None:
    with store.env.begin(write=True) as txn:
        txn.delete(b"log", db=store.table(META))


def _name_in(store: Store) -> bytes | None:
    with store.read() as txn:
        raw = txn.get(b"log", db=store.table(META))
        return None if raw is None else bytes(raw)


def test_a_store_that_names_no_log_takes_the_one_it_is_opened_on(tmp_path: Path) -> None:
    # An empty store, and one of a build that named no log (records applied, no name).
    with brain.open(tmp_path / "e"):
        pass
    with brain.open(tmp_path / "d") as db:
        db.execute("default", Opcode.ENCODE, Encode(request_id=rid(1), text="a note"))
    for directory in ("e", "d"):
        store = Store(tmp_path / directory / "lmdb")
        try:
            _unnamed(store)
            check_log(store, "BRAIN_LOG_s1")
            assert _name_in(store) == b"BRAIN_LOG_s1"
            check_log(store, "BRAIN_LOG_s1")  # and is held to it from then on
            if directory == "d":
                with pytest.raises(StorageFault, match="not of wal"):
                    check_log(store, "wal")
        finally:
            store.close()
