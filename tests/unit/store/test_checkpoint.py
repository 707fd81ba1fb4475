"""The store's checkpoint: the state a restart returns to, and the refusals that
keep a checkpoint from being laid over a data file it does not belong to."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest

from brain.engine.store.checkpoint import CHECKPOINT_FILE, load_checkpoint
from brain.engine.store.datafile import DATA_FILE, read_data_file_meta
from brain.engine.store.env import Store
from brain.engine.store.tables import TABLES
from brain.errors import StorageFault

TABLE = TABLES[0]


def _put(store: Store, count: int, start: int = 0) -> None:
    with store.write() as txn:
        for n in range(start, start + count):
            txn.put(b"k%06d" % n, b"v" * 300, db=store.table(TABLE))


def _keys(store: Store) -> set[bytes]:
    with store.read() as txn:
        return {bytes(k) for k, _ in txn.cursor(db=store.table(TABLE))}


def test_a_restart_without_a_checkpoint_returns_to_the_last_one(tmp_path: Path) -> None:
    store = Store(tmp_path)
    _put(store, 50)
    store.checkpoint()
    for start in range(50, 250, 50):  # commits after it, never checkpointed
        _put(store, 50, start)
    assert len(_keys(store)) == 250
    store.close()  # as a crash would: no checkpoint
    reopened = Store(tmp_path)
    try:
        assert reopened.restored
        assert _keys(reopened) == {b"k%06d" % n for n in range(50)}
        _put(reopened, 10, 1000)  # and it goes on from there
        assert len(_keys(reopened)) == 60
    finally:
        reopened.close()


def test_a_clean_stop_restores_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path)
    _put(store, 20)
    store.checkpoint()
    store.close()
    reopened = Store(tmp_path)
    try:
        assert not reopened.restored and len(_keys(reopened)) == 20
    finally:
        reopened.close()


def test_a_checkpoint_with_nothing_new_writes_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path)
    try:
        _put(store, 5)
        store.checkpoint()
        before = (tmp_path / CHECKPOINT_FILE).stat().st_mtime_ns
        taken = store.checkpoints
        store.checkpoint()
        assert store.checkpoints == taken
        assert (tmp_path / CHECKPOINT_FILE).stat().st_mtime_ns == before
    finally:
        store.close()


def test_growing_the_map_keeps_a_checkpoint_that_restores(tmp_path: Path) -> None:
    store = Store(tmp_path, map_size=1 << 20)
    _put(store, 30)
    store.checkpoint()
    _put(store, 30, 30)
    store.grow()  # ends the pin: a new checkpoint covers the state at the resize
    _put(store, 30, 60)
    store.close()
    reopened = Store(tmp_path)
    try:
        assert reopened.restored
        assert _keys(reopened) == {b"k%06d" % n for n in range(60)}
    finally:
        reopened.close()


def test_a_damaged_checkpoint_file_refuses_the_start(tmp_path: Path) -> None:
    store = Store(tmp_path)
    _put(store, 5)
    store.checkpoint()
    _put(store, 5, 5)
    store.close()
    path = tmp_path / CHECKPOINT_FILE
    blob = bytearray(path.read_bytes())
    blob[40] ^= 0x01
    path.write_bytes(bytes(blob))
    data_before = (tmp_path / DATA_FILE).read_bytes()
    with pytest.raises(StorageFault, match=r"checkpoint .* is damaged"):
        Store(tmp_path)
    assert (tmp_path / DATA_FILE).read_bytes() == data_before


def test_a_checkpoint_of_another_data_file_refuses_the_start(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for path, count in ((first, 10), (second, 400)):
        store = Store(path)
        for start in range(0, count, 10):
            _put(store, 10, start)
        store.checkpoint()
        _put(store, 1, 10_000)  # moved on since its checkpoint
        store.close()
    # The data file replaced by hand, the checkpoint left behind.
    shutil.copy(second / DATA_FILE, first / DATA_FILE)
    data_before = (first / DATA_FILE).read_bytes()
    with pytest.raises(StorageFault, match="does not belong to") as refused:
        Store(first, remedy="ask the operator")
    assert "delete the checkpoint file" in str(refused.value)
    assert str(refused.value).endswith("ask the operator")
    assert (first / DATA_FILE).read_bytes() == data_before


def test_a_data_file_cut_below_its_checkpoint_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for start in range(0, 300, 10):
        _put(store, 10, start)
    store.checkpoint()
    _put(store, 1, 10_000)
    store.close()
    data = tmp_path / DATA_FILE
    meta = load_checkpoint(tmp_path)
    assert meta is not None
    with data.open("r+b") as fh:
        fh.truncate(data.stat().st_size // 3)
    with pytest.raises(StorageFault, match="cut short") as refused:
        Store(tmp_path, remedy="restore the bundle")
    assert str(refused.value).endswith("restore the bundle")


def test_a_failed_checkpoint_write_keeps_the_old_one(tmp_path: Path) -> None:
    state = {"fail": False}

    def fsync(fd: int) -> None:
        if state["fail"]:
            raise OSError(errno.EIO, "injected EIO")

    store = Store(tmp_path, fsync=fsync)
    _put(store, 10)
    store.checkpoint()
    kept = (tmp_path / CHECKPOINT_FILE).read_bytes()
    _put(store, 10, 10)
    state["fail"] = True
    with pytest.raises(StorageFault, match="injected EIO"):
        store.checkpoint()
    assert (tmp_path / CHECKPOINT_FILE).read_bytes() == kept
    _put(store, 10, 20)
    store.close()
    reopened = Store(tmp_path)
    try:
        assert reopened.restored
        assert _keys(reopened) == {b"k%06d" % n for n in range(10)}
    finally:
        reopened.close()


def test_compaction_leaves_a_checkpoint_of_the_new_file(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for start in range(0, 200, 20):
        _put(store, 20, start)
    with store.write() as txn:
        for n in range(0, 200, 2):
            txn.delete(b"k%06d" % n, db=store.table(TABLE))
    store.compact()
    meta = read_data_file_meta(tmp_path / DATA_FILE)
    checkpoint = load_checkpoint(tmp_path)
    assert checkpoint is not None and not isinstance(meta, str) and meta is not None
    assert checkpoint.txnid == meta.txnid
    _put(store, 5, 5000)
    store.close()
    reopened = Store(tmp_path)
    try:
        assert reopened.restored
        assert len(_keys(reopened)) == 100
    finally:
        reopened.close()


def test_growth_counts_the_pages_written_since_the_checkpoint(tmp_path: Path) -> None:
    store = Store(tmp_path)
    try:
        store.checkpoint()
        assert store.growth() == 0
        for _ in range(20):  # rewrites: with the pin, no freed page is reused
            _put(store, 50)
        grown = store.growth()
        assert grown >= 20 * 4096
        store.checkpoint()
        assert store.growth() == 0
        for _ in range(20):  # the pages freed before the checkpoint are reused now
            _put(store, 50)
        assert store.growth() < grown
    finally:
        store.close()
