"""spec/05-durability.md §11 test 1 through the whole engine: cut the WAL inside its last
records, reopen, and check that recovery applied exactly the whole records and that
the store agrees with the log."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest

import brain
from brain import cbor
from brain.engine.database import Database
from brain.engine.wal import encode_record
from brain.errors import NotFound
from brain.wire.messages.memory_ops import EncodeOk, MemoryGet
from brain.wire.opcodes import Opcode
from tests.request_ids import request_id as rid
from tests.unit.write.store_behind import encode_applied, logged_request, store_behind

APPLIED = 5
"""Memories both logged and applied before the crash (with the indexer's own records
for them, the applied LSN is higher: :func:`_crashed_directory` returns it)."""

LOGGED_ONLY = 3
"""Records logged (fsynced) whose LMDB commit never happened."""

EDGE_BYTES = 64
"""Every cut this close to a record boundary is tried: the frame header and the first
bytes of the body, where a parser would go wrong, and the last bytes before the next."""

FIRST_STRIDE = 7
"""Inside the first unapplied record's body, one cut in this many (a torn record is the
same case at every byte of a body, and this still tries some 250 of them)."""

STRIDE = 53
"""Inside the later records' bodies, one cut in this many. Trying every byte of all
three records (5,263 cuts) took over a minute and a half of the default run."""


def _cuts(bounds: list[int]) -> list[int]:
    """Around every boundary every byte, inside the bodies a stride (the first record's
    finer), and the whole file."""
    cuts: set[int] = set()
    for index, (start, stop) in enumerate(itertools.pairwise(bounds)):
        cuts.update(range(start, min(stop, start + EDGE_BYTES)))
        cuts.update(range(max(start, stop - EDGE_BYTES), stop))
        cuts.update(range(start, stop, FIRST_STRIDE if index == 0 else STRIDE))
    cuts.add(bounds[-1])
    return sorted(cuts)


def _crashed_directory(root: Path) -> tuple[Path, list[int], int]:
    """A data directory whose WAL holds LOGGED_ONLY records the store never applied."""
    path = root / "crashed"
    applied, records = store_behind(path, APPLIED, LOGGED_ONLY)
    segment = sorted((path / "wal").glob("wal-*.log"))[-1]
    data = segment.read_bytes()
    # Byte offsets where each logged-only record starts, then the end of the file.
    bounds: list[int] = []
    offset = len(data)
    for record in reversed(records[applied:]):
        offset -= len(encode_record(record))
        bounds.insert(0, offset)
    bounds.append(len(data))
    return path, bounds, applied


def test_cut_anywhere_in_the_unapplied_tail(tmp_path: Path) -> None:
    path, bounds, applied = _crashed_directory(tmp_path)
    segment = sorted((path / "wal").glob("wal-*.log"))[-1]
    logged = len(bounds) - 1
    for cut in _cuts(bounds):
        trial = tmp_path / f"cut-{cut}"
        shutil.copytree(path, trial)
        with (trial / "wal" / segment.name).open("r+b") as fh:
            fh.truncate(cut)
        whole = sum(1 for b in bounds[1:] if b <= cut)
        db = Database.open(trial)
        try:
            # The indexer may write as soon as the database is open: at least this.
            assert db.applied_lsn >= applied + whole, cut
            for n in range(APPLIED):
                encode_applied(db, n)
            present = 0
            for n in range(logged):
                retried = db.submit("default", Opcode.ENCODE, logged_request(n)).result()
                answer = EncodeOk.from_wire(cbor.decode(retried))
                if answer.lsn <= applied + whole:
                    present += 1  # recovered: the retry got the logged answer back
                got = db.execute("default", Opcode.MEMORY_GET, MemoryGet(id=answer.memory_id))
                assert got is not None
            assert present == whole, cut
        finally:
            db.close()
        shutil.rmtree(trial)


def test_store_never_ahead_of_the_log(tmp_path: Path) -> None:
    path, bounds, applied = _crashed_directory(tmp_path)
    with brain.open(path) as db:
        assert db.applied_lsn >= applied + len(bounds) - 1
        with pytest.raises(NotFound):
            db.execute("default", Opcode.MEMORY_GET, MemoryGet(id=rid(5000)))
