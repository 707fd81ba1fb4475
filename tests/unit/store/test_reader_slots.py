"""A refused read gives back its LMDB reader slot at once.

LMDB frees a read transaction's reader slot only when the transaction object
dies. An error raised inside a read carries a traceback that holds the read's
frames, and the server keeps each answer until its event loop sends it: one
per open stream, up to ``max_streams``. If the errors kept their tracebacks, a
burst of reads of unknown ids would hold that many slots and fill LMDB's
reader table (``MDB_READERS_FULL``), failing every other read.
"""

from __future__ import annotations

import pytest

from brain.engine.database import Database
from brain.engine.store.env import MAX_READERS
from brain.errors import NotFound
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid


def test_refusals_kept_alive_hold_no_reader_slot(db: Database) -> None:
    made = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text="kept"))
    assert isinstance(made, EncodeOk)
    waiting: list[NotFound] = []  # like answers not yet sent
    for _ in range(2 * MAX_READERS):
        with pytest.raises(NotFound) as refused:
            db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=rid()))
        waiting.append(refused.value)
    # Every reader slot is free again: a read still works...
    got = db.execute(NS, Opcode.MEMORY_GET, MemoryGet(id=made.memory_id))
    assert isinstance(got, MemoryGetOk) and got.memory.text == "kept"
    # ...and the errors still say what was wrong.
    assert all(error.field == "id" and "no memory" in error.message for error in waiting)
