"""Point reads are answered on the event loop, and only where that is safe
(spec/06-operations.md §11).

A GET by id takes no read thread; a LIST does. A read inside a transaction
still waits for the writer, which replays the transaction's writes. While the
store is held for a compaction or a map resize, a point read is handed to a
read thread instead of waiting on the loop, so other connections are served
meanwhile. A client pipelining a thousand GETs is answered in slices, between
which another connection's PING is answered.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any, Final

import pytest

from brain.engine.database import Database
from brain.engine.store.env import MAX_READERS
from brain.errors import NotFound
from brain.server import connection as connection_module
from brain.server.app import Server
from brain.server.backend import EngineBackend
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.messages.statement_ops import StatementGet, StatementList
from brain.wire.opcodes import Opcode, Permission, response_opcode
from tests.unit.common import NS, rid
from tests.unit.server.live_server import Peer, live_server

FLOOD: Final = 1000
"""GETs one client pipelines in one write: tens of milliseconds of work, far more
than :data:`~brain.server.connection.INLINE_SLICE_S`."""

FLOOD_ROUNDS: Final = 3
"""Bursts of :data:`FLOOD` GETs the pacing test sends, one after the other."""

NEIGHBOUR_EVERY: Final = 50
"""The other namespace's PING comes once per this many of the flood's answers."""

HELD_S: Final = 0.5
"""How long the test holds the store, as a compaction would."""

BUSY_THREADS: Final = 64
"""Blocked jobs given to asyncio's default pool: more than it has threads."""


def _read_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("brain-read")]


def _database(server: Server) -> Database:
    assert isinstance(server.backend, EngineBackend)
    return server.backend.database


async def _statement(peer: Peer, stream: int) -> bytes:
    """A new statement about a new entity; its id."""
    made = await peer.call(
        Opcode.ENTITY_CREATE, stream, {"request_id": os.urandom(16), "name": "Ada Lovelace"}
    )
    written = await peer.call(
        Opcode.STATEMENT_CREATE,
        stream + 2,
        {
            "request_id": os.urandom(16),
            "kind": "fact",
            "subject": {"entity": made.body["entity_id"]},
            "predicate": "likes",
            "object": {"text": "tea"},
        },
    )
    statement_id = written.body["statement_id"]
    assert isinstance(statement_id, bytes)
    return statement_id


def _get(statement_id: bytes, **more: Any) -> dict[str, Any]:
    return {"id": statement_id, **more}


def test_a_get_takes_no_read_thread_and_a_list_does(tmp_path: Path) -> None:
    async def main() -> tuple[list[str], list[str]]:
        async with live_server(tmp_path / "d") as (server, key):
            peer = await Peer.connect(server, key)
            statement_id = await _statement(peer, 1)
            for n in range(20):
                got = await peer.call(Opcode.STATEMENT_GET, 11 + 2 * n, _get(statement_id))
                assert got.body["statement"]["id"] == statement_id
            peer.send(Opcode.MEMORY_GET, 101, {"id": bytes(16)})
            assert (await peer.recv()).error == "NOT_FOUND"
            after_gets = _read_threads()
            await peer.call(Opcode.STATEMENT_LIST, 103, {"limit": 5})
            after_list = _read_threads()
            await peer.close()
            return after_gets, after_list

    after_gets, after_list = asyncio.run(main())
    assert after_gets == []
    assert after_list != []


def test_auth_waits_for_no_thread(tmp_path: Path) -> None:
    """AUTH's key lookup is answered on the loop: with every thread of asyncio's own
    pool busy, a new connection still completes HELLO and AUTH at once."""

    async def main() -> float:
        async with live_server(tmp_path / "d") as (server, key):
            loop = asyncio.get_running_loop()
            release = threading.Event()
            busy = [loop.run_in_executor(None, release.wait) for _ in range(BUSY_THREADS)]
            try:
                started = time.monotonic()
                peer = await Peer.connect(server, key)
                took = time.monotonic() - started
                await peer.close()
            finally:
                release.set()
                await asyncio.gather(*busy)
            return took

    assert asyncio.run(main()) < HELD_S


def test_which_requests_are_point_reads() -> None:
    some = bytes(16)
    assert Database.is_point_read(Opcode.STATEMENT_GET, StatementGet(id=some))
    # Inside a transaction a read waits for the writer: never on the loop.
    assert not Database.is_point_read(Opcode.STATEMENT_GET, StatementGet(id=some, txn_id=some))
    assert not Database.is_point_read(Opcode.STATEMENT_LIST, StatementList())


def test_point_read_refusals_kept_alive_hold_no_reader_slot(db: Database) -> None:
    """As tests/unit/store/test_reader_slots.py, for the loop's own reads."""
    made = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text="kept"))
    assert isinstance(made, EncodeOk)
    waiting: list[NotFound] = []  # like answers not yet sent
    for _ in range(2 * MAX_READERS):
        with pytest.raises(NotFound) as refused:
            db.read_point(NS, Opcode.MEMORY_GET, MemoryGet(id=rid()))
        waiting.append(refused.value)
    got = db.read_point(NS, Opcode.MEMORY_GET, MemoryGet(id=made.memory_id))
    assert isinstance(got, MemoryGetOk) and got.memory.text == "kept"


def test_a_get_inside_a_transaction_sees_its_writes(tmp_path: Path) -> None:
    async def main() -> None:
        async with live_server(tmp_path / "d") as (server, key):
            peer = await Peer.connect(server, key)
            made = await peer.call(
                Opcode.ENTITY_CREATE, 1, {"request_id": os.urandom(16), "name": "Grace Hopper"}
            )
            begun = await peer.call(Opcode.TXN_BEGIN, 3, {})
            txn = begun.body["txn_id"]
            written = await peer.call(
                Opcode.STATEMENT_CREATE,
                5,
                {
                    "request_id": os.urandom(16),
                    "kind": "fact",
                    "subject": {"entity": made.body["entity_id"]},
                    "predicate": "wrote",
                    "object": {"text": "a compiler"},
                    "txn_id": txn,
                },
            )
            statement_id = written.body["statement_id"]
            inside = await peer.call(Opcode.STATEMENT_GET, 7, _get(statement_id, txn_id=txn))
            assert inside.body["statement"]["id"] == statement_id
            peer.send(Opcode.STATEMENT_GET, 9, _get(statement_id))
            outside = await peer.recv()
            assert outside.error == "NOT_FOUND"
            await peer.close()

    asyncio.run(main())


def test_a_held_store_sends_point_reads_to_a_thread(tmp_path: Path) -> None:
    """A compaction or a resize holds the store: the loop must not wait for it."""

    async def main() -> None:
        async with live_server(tmp_path / "d") as (server, key):
            reader = await Peer.connect(server, key)
            other = await Peer.connect(server, key)
            statement_id = await _statement(reader, 1)
            database = _database(server)
            held = threading.Event()
            release = threading.Event()

            def hold() -> None:
                with database._store._gate.exclusive():
                    held.set()
                    release.wait()

            holder = threading.Thread(target=hold)
            holder.start()
            try:
                assert await asyncio.to_thread(held.wait, 10)
                started = time.monotonic()
                assert (
                    database.read_point(
                        "default", Opcode.STATEMENT_GET, StatementGet(id=statement_id)
                    )
                    is None
                )
                assert time.monotonic() - started < HELD_S
                reader.send(Opcode.STATEMENT_GET, 5, _get(statement_id))
                pong = await other.call(Opcode.PING, 0, {"nonce": 1})
                assert pong.at - started < HELD_S, "the loop waited for the store"
                await asyncio.sleep(HELD_S)
            finally:
                release.set()
                await asyncio.to_thread(holder.join)
            got = await reader.recv()
            assert got.opcode == response_opcode(Opcode.STATEMENT_GET), got
            assert got.at - started >= HELD_S
            assert got.body["statement"]["id"] == statement_id
            await reader.close()
            await other.close()

    asyncio.run(main())


@pytest.mark.parametrize("sliced", [True, False])
def test_a_pipelining_client_is_served_in_slices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sliced: bool
) -> None:
    """Between two slices of one client's GETs, another connection's PING is answered;
    with slices longer than the whole flood (the control), it waits for the flood."""
    if not sliced:
        monkeypatch.setattr(connection_module, "INLINE_SLICE_S", 3600.0)

    async def main() -> int:
        async with live_server(tmp_path / "d", max_streams=FLOOD) as (server, key):
            flooder = await Peer.connect(server, key)
            quiet = await Peer.connect(server, key)
            statement_id = await _statement(flooder, 1)
            burst = b"".join(
                Peer.frame(Opcode.STATEMENT_GET, 11 + 2 * n, _get(statement_id))
                for n in range(FLOOD)
            )
            flooder.send_bytes(burst)
            first = await flooder.recv()
            assert first.error is None, first
            # The flood is being answered: the PING arrives in the middle of it.
            pong = await quiet.call(Opcode.PING, 0, {"nonce": 2})
            answers = [first] + [await flooder.recv() for _ in range(FLOOD - 1)]
            assert all(a.error is None for a in answers)
            await flooder.close()
            await quiet.close()
            return sum(1 for a in answers if a.at > pong.at)

    after_pong = asyncio.run(main())
    if sliced:
        assert after_pong >= FLOOD // 4, after_pong
    else:
        assert after_pong < FLOOD // 4, after_pong


@pytest.mark.parametrize("neighbour", [True, False], ids=["with a neighbour", "alone"])
def test_a_flooding_namespace_gets_half_the_loop_while_another_is_active(
    tmp_path: Path, neighbour: bool
) -> None:
    """A namespace pipelining GETs is held back while another namespace sends
    requests, and never when it is alone."""

    async def main() -> float:
        async with live_server(tmp_path / "d", max_streams=FLOOD) as (server, key):
            assert server.keys is not None
            other_key, _ = server.keys.create_key("other", frozenset(Permission), via="admin")
            flooder = await Peer.connect(server, key)
            statement_id = await _statement(flooder, 1)
            other = await Peer.connect(server, other_key)
            burst = b"".join(
                Peer.frame(Opcode.STATEMENT_GET, 11 + 2 * n, _get(statement_id))
                for n in range(FLOOD)
            )
            for _ in range(FLOOD_ROUNDS):
                flooder.send_bytes(burst)
                for n in range(FLOOD):
                    if neighbour and n % NEIGHBOUR_EVERY == 0:
                        await other.call(Opcode.PING, 0, {"nonce": n})
                    assert (await flooder.recv()).error is None
            await flooder.close()
            await other.close()
            paced = server.metrics.registry.get_sample_value("brain_loop_paced_seconds_total")
            assert paced is not None
            return paced

    paced = asyncio.run(main())
    if neighbour:
        assert paced > 0
    else:
        assert paced == 0
