"""A power loss loses nothing acknowledged and never leaves LMDB unreadable.

LMDB's commits are not synced: the WAL makes a write durable and checkpoints make
LMDB durable (spec/05-durability.md §5). The fault layer (:mod:`tests.unit.store.powerloss`)
records what each file held at its last sync while writes and checkpoints run, and at a
random WAL fsync builds the disk a power loss there would leave: every unsynced write
dropped, or, for LMDB's data file, any subset of its unsynced pages surviving too.
Each image must open, read whole, and hold every write acknowledged before the loss.
"""

from __future__ import annotations

import random
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

from brain import cbor
from brain.engine.database import Database, DatabaseOptions
from brain.engine.store.tables import TABLES
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.opcodes import Opcode
from tests.request_ids import request_id as request_id_of
from tests.unit.common import NS
from tests.unit.store.powerloss import PowerLoss

WRITERS = 3
BURST = 6
"""Writes each client has in flight at once, so that batches hold several."""
ROUNDS = 12
"""The loss comes at one of the first 3 x ROUNDS WAL fsyncs after the start."""
MAX_ROUNDS = 500
"""Bursts each client sends at most: the loss comes long before."""
TORN_IMAGES = 4


def _run_until_loss(root: Path, seed: int, images: Path) -> tuple[dict[bytes, str], int]:
    """Run writes and checkpoints in ``root`` until the chosen WAL fsync, building the
    images there; the acknowledged writes (request id to text) and how many torn
    images were written."""
    rng = random.Random(seed)
    loss = PowerLoss(root)
    db = Database.open(root, DatabaseOptions(fsync=loss.fsync, wal_segment_bytes=16 * 1024))
    loss.watch(db)
    texts: dict[bytes, str] = {}
    futures: list[tuple[bytes, Future[bytes]]] = []
    taken = threading.Event()
    acknowledged: dict[bytes, str] = {}
    crash_at = loss.syncs + rng.randrange(3, 3 * ROUNDS)

    def crash(count: int) -> None:
        if count != crash_at or taken.is_set():
            return
        # On the writer thread, before this fsync: every answer given so far is final.
        for request_id, future in list(futures):
            if future.done() and future.exception() is None:
                acknowledged[request_id] = texts[request_id]
        loss.image(images / "dropped")
        for n in range(TORN_IMAGES):
            loss.image(images / f"torn-{n}", torn=random.Random(seed * 100 + n))
        taken.set()

    loss.on_wal_sync = crash

    def client(c: int) -> None:
        for r in range(MAX_ROUNDS):
            burst = []
            for b in range(BURST):
                request_id = request_id_of(seed * 1_000_000 + c * 10_000 + r * BURST + b)
                text = f"client {c} round {r} write {b} " + "x" * rng.randrange(10, 400)
                texts[request_id] = text
                future = db.submit(NS, Opcode.ENCODE, Encode(request_id=request_id, text=text))
                futures.append((request_id, future))
                burst.append(future)
            for future in burst:
                future.result()
            if taken.is_set():
                return

    threads = [threading.Thread(target=client, args=(c,)) for c in range(WRITERS)]
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        db.checkpoint()
        for thread in threads:
            thread.join(timeout=0.02)
    db.close()
    assert taken.is_set(), "the chosen fsync never came"
    return acknowledged, TORN_IMAGES


def _check_image(path: Path, acknowledged: dict[bytes, str]) -> bool:
    """Open the image, read every row of every table, and find every acknowledged
    write with its text, also by retrying it; whether the store was restored."""
    with Database.open(path) as db:
        restored = db._store.restored
        with db._store.read() as txn:
            for name in TABLES:
                for key, value in txn.cursor(db=db._store.table(name)):
                    assert isinstance(key, bytes) and isinstance(value, bytes)
        for request_id, text in acknowledged.items():
            retried = db.submit(NS, Opcode.ENCODE, Encode(request_id=request_id, text=text))
            answer = EncodeOk.from_wire(cbor.decode(retried.result()))
            got = db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=answer.memory_id))
            assert isinstance(got, MemoryGetOk) and got.memory.text == text
        assert db.applied_lsn >= len(acknowledged)
    return restored


@pytest.mark.parametrize("seed", range(6))
def test_a_power_loss_keeps_every_acknowledged_write(tmp_path: Path, seed: int) -> None:
    images = tmp_path / "images"
    images.mkdir()
    acknowledged, torn = _run_until_loss(tmp_path / "d", seed, images)
    assert acknowledged, "the loss came before any write was answered"
    _check_image(images / "dropped", acknowledged)
    for n in range(torn):
        _check_image(images / f"torn-{n}", acknowledged)


def test_torn_images_need_the_checkpoint(tmp_path: Path) -> None:
    """The torn images do hold LMDB commits past the checkpoint whose pages are
    missing: opening them returns the store to its checkpoint (without which it would
    read a later meta page over a tree that never reached the disk)."""
    images = tmp_path / "images"
    images.mkdir()
    acknowledged, torn = _run_until_loss(tmp_path / "d", 99, images)
    restored = [_check_image(images / f"torn-{n}", acknowledged) for n in range(torn)]
    assert any(restored)
