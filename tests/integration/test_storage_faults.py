"""An fsync failure (EIO, or ENOSPC: a full disk) inside a running server:
read-only, 503, nothing acknowledged lost.

spec/05-durability.md §11 test 7. The fault is injected through the database's fsync
hook, so the server runs in this process; clients still speak real sockets.
"""

from __future__ import annotations

import asyncio
import errno
import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import brain
from brain.client import AsyncClient
from brain.engine.database import Database, DatabaseOptions
from brain.errors import StorageFault, Unavailable
from brain.server.app import Server
from brain.server.backend import EngineBackend
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.opcodes import Opcode
from tests.integration.conftest import bootstrap_api_key, free_port_config


def _readyz(port: int) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC], ids=["EIO", "ENOSPC"])
def test_fsync_failure_makes_the_server_read_only(tmp_path: Path, code: int) -> None:
    failing = {"on": False}

    def fsync(fd: int) -> None:
        if failing["on"]:
            raise OSError(code, f"injected {errno.errorcode[code]}")

    data = tmp_path / "data"
    config = free_port_config(data)

    async def scenario() -> EncodeOk:
        database = Database.open(data, DatabaseOptions(fsync=fsync))
        server = Server(config, backend=EngineBackend(database))
        await server.start()
        try:
            api_key = bootstrap_api_key(data)
            client = await AsyncClient.connect("127.0.0.1", server.wire_port, api_key=api_key)
            kept = await client.call(Opcode.ENCODE, Encode(request_id=bytes(16), text="kept"))
            assert isinstance(kept, EncodeOk)
            assert (await asyncio.to_thread(_readyz, server.public_port))[0] == 200
            failing["on"] = True
            with pytest.raises(Unavailable):
                await client.call(Opcode.ENCODE, Encode(request_id=b"\x01" * 16, text="lost?"))
            status, body = await asyncio.to_thread(_readyz, server.public_port)
            assert status == 503 and body["ready"] is False
            assert "read-only" in str(body["reason"])
            # Reads keep working.
            got = await client.call(Opcode.MEMORY_GET, MemoryGet(id=kept.memory_id))
            assert isinstance(got, MemoryGetOk) and got.memory.text == "kept"
            with pytest.raises(Unavailable):
                await client.call(Opcode.ENCODE, Encode(request_id=b"\x02" * 16, text="later"))
            await client.close()
            return kept
        finally:
            await server.stop()

    kept = asyncio.run(scenario())
    with brain.open(data) as db:
        got = db.execute("default", Opcode.MEMORY_GET, MemoryGet(id=kept.memory_id))
        assert isinstance(got, MemoryGetOk) and got.memory.text == "kept"


def test_readyz_reports_recovery_until_the_database_is_open(tmp_path: Path) -> None:
    server = Server(free_port_config(tmp_path / "data"))
    before = server.status()
    assert not before.ready and "recovering" in str(before.reason)

    async def scenario() -> None:
        await server.start()
        try:
            assert server.status().ready
            status, body = await asyncio.to_thread(_readyz, server.public_port)
            assert status == 200 and body == {"ready": True, "applied_lsn": 0}
        finally:
            await server.stop()

    asyncio.run(scenario())


def test_a_start_that_fails_after_the_database_opened_closes_it(tmp_path: Path) -> None:
    # The key store opens after the database: when it is damaged the start fails, and
    # the database must not be left running (its indexer inside hnswlib at the
    # interpreter's exit aborted the process instead of exiting 1).
    data = tmp_path / "data"
    first = Server(free_port_config(data))

    async def run_once() -> None:
        await first.start()
        await first.stop()

    asyncio.run(run_once())
    keys_file = data / "keys" / "data.mdb"
    keys_file.write_bytes(keys_file.read_bytes()[: keys_file.stat().st_size // 2])
    server = Server(free_port_config(data))

    async def scenario() -> None:
        with pytest.raises(StorageFault, match="cut short"):
            await server.start()

    asyncio.run(scenario())
    assert isinstance(server.backend, EngineBackend)
    with pytest.raises(Unavailable, match="closed"):
        server.backend.database.execute("default", Opcode.MEMORY_GET, MemoryGet(id=bytes(16)))
    # Released: the same process can open the directory again.
    brain.open(data).close()
