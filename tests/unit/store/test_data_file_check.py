"""A damaged LMDB data file is refused before LMDB maps it (spec/05-durability.md §5).

LMDB reads its pages straight from the map, so a page past the end of a truncated
file kills the process with SIGBUS. Each test here would crash the test process on a
build without the check; ``tests/integration/test_startup_faults.py`` shows the same
on a real server in a process of its own.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import lmdb
import pytest

import brain
from brain.engine.database import Database, DatabaseOptions
from brain.engine.store.checkpoint import CHECKPOINT_FILE
from brain.engine.store.datafile import (
    DATA_FILE,
    LMDB_MAGIC,
    check_data_file,
    read_data_file_meta,
)
from brain.engine.store.env import Store
from brain.errors import StorageFault
from brain.server.keys import KeyStore
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet
from brain.wire.opcodes import Opcode, Permission
from tests.request_ids import request_id as rid

MEMORIES = 60
"""Enough writes that the data file spans a few hundred pages."""


def _fill(path: Path, options: DatabaseOptions | None = None) -> list[EncodeOk]:
    answers = []
    with Database.open(path, options) as db:
        for n in range(MEMORIES):
            answer = db.execute(
                "default", Opcode.ENCODE, Encode(request_id=rid(n), text=f"memory {n} " * 20)
            )
            assert isinstance(answer, EncodeOk)
            answers.append(answer)
        assert db.wait_indexed()
    return answers


def _halve(path: Path) -> int:
    size = path.stat().st_size
    os.truncate(path, size // 2)
    return size // 2


def test_the_meta_page_read_agrees_with_lmdb(tmp_path: Path) -> None:
    _fill(tmp_path / "d")
    data = tmp_path / "d" / "lmdb" / DATA_FILE
    meta = read_data_file_meta(data)
    assert meta is not None and not isinstance(meta, str)
    env = lmdb.open(str(data.parent), readonly=True, lock=False, max_dbs=64)
    try:
        info, stat = env.info(), env.stat()
    finally:
        env.close()
    assert (meta.last_page, meta.txnid) == (info["last_pgno"], info["last_txnid"])
    assert meta.page_size == stat["psize"]
    assert meta.used_bytes <= data.stat().st_size
    check_data_file(data.parent)  # sound: no complaint


def test_a_store_truncated_to_half_is_refused_naming_the_file_and_the_rebuild(
    tmp_path: Path,
) -> None:
    path = tmp_path / "d"
    answers = _fill(path)
    data = path / "lmdb" / DATA_FILE
    size = _halve(data)
    with pytest.raises(StorageFault) as caught:
        Database.open(path)
    message = str(caught.value)
    assert str(data) in message and "cut short" in message
    # The WAL was never checkpointed past LSN 1, so it can rebuild the store.
    assert "still holds every record from LSN 1" in message
    assert f"move {path / 'lmdb'} aside" in message
    assert data.stat().st_size == size, "a refused start changes nothing"
    # Following the advice brings back every write.
    shutil.move(path / "lmdb", tmp_path / "damaged-lmdb")
    with brain.open(path) as db:
        for answer in answers:
            assert db.execute("default", Opcode.MEMORY_GET, MemoryGet(id=answer.memory_id))


def test_with_a_checkpointed_wal_the_advice_is_a_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "d"
    # Small segments, so checkpoints delete the early ones.
    _fill(path, DatabaseOptions(wal_segment_bytes=4096))
    first = min(int(p.name[4:24]) for p in (path / "wal").glob("wal-*.log"))
    assert first > 1
    _halve(path / "lmdb" / DATA_FILE)
    with pytest.raises(StorageFault) as caught:
        Database.open(path)
    message = str(caught.value)
    assert f"reaches back only to the last checkpoint (it starts at LSN {first})" in message
    assert "brain snapshot restore" in message and f"at least {first - 1}" in message


def test_damaged_meta_pages_are_restored_from_the_checkpoint(tmp_path: Path) -> None:
    Store(tmp_path / "lmdb").close()
    data = tmp_path / "lmdb" / DATA_FILE
    sound = data.read_bytes()
    page_size = struct.unpack_from("=I", sound, 40)[0]
    for offset in (16, page_size + 16, 40, 20):
        damaged = bytearray(sound)
        damaged[offset] ^= 0x40
        data.write_bytes(bytes(damaged))
        store = Store(tmp_path / "lmdb")
        assert store.restored
        store.close()
        assert data.read_bytes()[: 2 * page_size] == sound[: 2 * page_size]


def test_damaged_meta_pages_without_a_checkpoint_are_refused(tmp_path: Path) -> None:
    Store(tmp_path / "lmdb").close()
    (tmp_path / "lmdb" / CHECKPOINT_FILE).unlink()
    data = tmp_path / "lmdb" / DATA_FILE
    sound = data.read_bytes()
    page_size = struct.unpack_from("=I", sound, 40)[0]
    assert struct.unpack_from("=I", sound, 16)[0] == LMDB_MAGIC
    for page, offset, match in [
        (0, 16, "meta page 0 is not an LMDB meta page"),
        (1, page_size + 16, "meta page 1 is not an LMDB meta page"),
        (0, 40, "meta page 0 names an impossible page size"),
        (0, 20, "meta page 0 has LMDB data version"),
    ]:
        damaged = bytearray(sound)
        damaged[offset] ^= 0x40
        data.write_bytes(bytes(damaged))
        with pytest.raises(StorageFault, match=match) as caught:
            Store(tmp_path / "lmdb")
        assert str(data) in str(caught.value), page
    for size in (100, page_size + 100):
        data.write_bytes(sound[:size])
        with pytest.raises(StorageFault, match="cut short"):
            Store(tmp_path / "lmdb")
    data.write_bytes(sound + bytes(page_size))  # longer than used: LMDB's own growth
    Store(tmp_path / "lmdb").close()
    assert (tmp_path / "lmdb" / CHECKPOINT_FILE).exists(), "opening takes a checkpoint"


def test_a_missing_or_empty_data_file_is_a_new_store(tmp_path: Path) -> None:
    assert read_data_file_meta(tmp_path / DATA_FILE) is None
    (tmp_path / DATA_FILE).write_bytes(b"")
    assert read_data_file_meta(tmp_path / DATA_FILE) is None
    Store(tmp_path).close()
    assert read_data_file_meta(tmp_path / DATA_FILE) is not None


def test_a_truncated_key_store_is_refused_naming_the_file(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path)
    for n in range(40):
        keys.create_key(f"tenant-{n}", frozenset({Permission.READ}), via="cli")
    keys.close()
    data = tmp_path / "keys" / DATA_FILE
    size = _halve(data)
    with pytest.raises(StorageFault) as caught:
        KeyStore(tmp_path)
    message = str(caught.value)
    assert str(data) in message and "cut short" in message
    assert "from a snapshot bundle" in message
    assert data.stat().st_size == size
