"""A full disk in a running server: the indexer's write fails with ENOSPC, the
database turns read-only, a RECALL answers at once saying what it could not see,
and the stop is clean although the vector indexes cannot be saved.

The faults are the kernel's own ENOSPC: the WAL's fsync hook raises it (as
``test_storage_faults.py`` does), and the index file the stop would write is a
link to ``/dev/full``, which answers every write with ENOSPC. The server runs
in this process; the client speaks over a real socket.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import time
from pathlib import Path
from typing import Final

import pytest

from brain.client import AsyncClient
from brain.engine.database import Database, DatabaseOptions
from brain.engine.store.scope import Scope
from brain.errors import Unavailable
from brain.server.app import Server
from brain.server.backend import EngineBackend
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.messages.recall_ops import Recall, RecallOk
from brain.wire.opcodes import Opcode
from tests.integration.conftest import bootstrap_api_key, free_port_config

FULL: Final = Path("/dev/full")
WAIT_S: Final = 30.0
"""``retrieval.index_wait_s``, its default: what a recall waited before."""
AT_ONCE_S: Final = WAIT_S / 3
"""Far above a recall that does not wait, far below one that waits it out."""


class FillingDisk:
    """The WAL's fsync hook: every sync passes until :attr:`passes` is set, then that
    many more pass and every later one fails with ENOSPC."""

    def __init__(self) -> None:
        self.passes: int | None = None

    def fsync(self, fd: int) -> None:
        """Sync ``fd``, or fail as a full disk does."""
        if self.passes is not None:
            if self.passes == 0:
                raise OSError(errno.ENOSPC, "injected ENOSPC")
            self.passes -= 1
        os.fdatasync(fd)


@pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full (Linux)")
def test_a_full_disk_leaves_recall_prompt_and_the_stop_clean(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    disk = FillingDisk()
    data = tmp_path / "data"
    config = free_port_config(data)
    options = DatabaseOptions(fsync=disk.fsync, embedder="hashing", index_wait_s=WAIT_S)

    async def scenario() -> None:
        database = Database.open(data, options)
        server = Server(config, backend=EngineBackend(database))
        await server.start()
        try:
            api_key = bootstrap_api_key(data)
            client = await AsyncClient.connect("127.0.0.1", server.wire_port, api_key=api_key)
            kept = await client.call(Opcode.ENCODE, Encode(request_id=bytes(16), text="kept"))
            assert isinstance(kept, EncodeOk)
            assert await asyncio.to_thread(database.wait_indexed)
            # The stop saves the scope's changed index: its description cannot be written.
            prefix = Scope.of("default", None).prefix
            (data / "index" / f"{prefix.hex()}.json.tmp").symlink_to(FULL)

            disk.passes = 1  # this ENCODE is synced; the indexer's write after it is not
            late = await client.call(Opcode.ENCODE, Encode(request_id=b"\x01" * 16, text="late"))
            assert isinstance(late, EncodeOk)
            deadline = time.monotonic() + WAIT_S
            while database.read_only_reason is None:
                assert time.monotonic() < deadline, "the indexer's write never failed"
                await asyncio.sleep(0.01)
            with pytest.raises(Unavailable):
                await client.call(Opcode.ENCODE, Encode(request_id=b"\x02" * 16, text="refused"))

            started = time.monotonic()
            found = await client.call(Opcode.RECALL, Recall(cue="late kept"))
            assert time.monotonic() - started < AT_ONCE_S
            assert isinstance(found, RecallOk)
            assert found.coverage.embed_backlog == 1  # "late" is not in the vector index
            assert {hit.id for hit in found.hits} == {kept.memory_id, late.memory_id}
            await client.close()
        finally:
            with caplog.at_level(logging.WARNING, logger="brain.engine.index"):
                await server.stop()  # raised the ENOSPC of the index save before

    asyncio.run(scenario())
    saves = [r for r in caplog.records if "vector indexes not saved" in r.getMessage()]
    assert len(saves) == 1 and "No space left on device" in saves[0].getMessage()
    assert saves[0].exc_info is None  # one line, no traceback
    # With room again, the next start rebuilds the index from LMDB and indexes what
    # was left queued.
    prefix = Scope.of("default", None).prefix
    (data / "index" / f"{prefix.hex()}.json.tmp").unlink()
    with Database.open(data, DatabaseOptions(embedder="hashing")) as again:
        assert again.wait_indexed()
        assert again.retrieval.indexes.size(prefix) == 2
