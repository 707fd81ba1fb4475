"""Subscriptions are woken by the commits of their own scope only, once per commit at
most, and one key holds at most ``MAX_SUBSCRIPTIONS_PER_KEY`` of them.

The subscriptions run on a real :class:`EngineBackend` over a real database, in an
event loop that counts every ``call_soon_threadsafe``: the calls worker threads
make into the loop (a wake-up from the writer thread, a change-log read finishing
on the read pool) are the cost an idle subscription must not add to other
tenants' writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextvars import Context
from pathlib import Path
from typing import Final, TypeVar, TypeVarTuple, Unpack

import pytest

import brain
from brain.engine.database import Database
from brain.errors import Overloaded
from brain.server.backend import EngineBackend
from brain.server.fanout import MAX_SUBSCRIPTIONS_PER_KEY
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.messages.subscribe_ops import ChangeEvent, Subscribe
from brain.wire.opcodes import Opcode, Permission
from brain.wire.session import Principal
from tests.unit.common import rid

IDLE: Final = 200
"""Subscriptions in a namespace nobody writes to."""

WRITES: Final = 30
"""Commits in another namespace while they wait."""

SETTLE_S: Final = 60.0
"""Longest the subscriptions may take to make their first read (a loaded machine)."""

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class CountingLoop(asyncio.SelectorEventLoop):
    """An event loop that counts the callbacks other threads hand it."""

    def __init__(self) -> None:
        super().__init__()
        self._count_lock = threading.Lock()
        self.threadsafe_calls = 0

    def call_soon_threadsafe(
        self,
        callback: Callable[[Unpack[Ts]], object],
        *args: *Ts,
        context: Context | None = None,
    ) -> asyncio.Handle:
        with self._count_lock:
            self.threadsafe_calls += 1
        return super().call_soon_threadsafe(callback, *args, context=context)


def _principal(namespace: str, key: int) -> Principal:
    return Principal(namespace, bytes([key]) * 16, frozenset(Permission), bytes([key]) * 16)


def _run(database: Database, scenario: Callable[[EngineBackend, CountingLoop], Awaitable[T]]) -> T:
    loop = CountingLoop()
    backend = EngineBackend(database)

    async def main() -> T:
        try:
            return await scenario(backend, loop)
        finally:
            await backend.close()

    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


async def _collect(
    changes: AsyncGenerator[tuple[int, list[ChangeEvent]], None], into: list[int]
) -> None:
    async with contextlib.aclosing(changes):
        async for lsn, _ in changes:
            into.append(lsn)


async def _until(condition: Callable[[], bool]) -> None:
    """Wait (at most :data:`SETTLE_S`) until ``condition`` holds."""
    deadline = asyncio.get_running_loop().time() + SETTLE_S
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the subscriptions never settled"
        await asyncio.sleep(0.01)


def _write(database: Database, namespace: str, count: int) -> list[int]:
    """Commit ``count`` ENCODEs of new texts one by one; their LSNs."""
    lsns = []
    for _ in range(count):
        text = f"note {rid().hex()}"  # a text seen before would be the same memory
        answer = database.execute(namespace, Opcode.ENCODE, Encode(request_id=rid(), text=text))
        assert isinstance(answer, EncodeOk)
        lsns.append(answer.lsn)
    return lsns


def test_commits_elsewhere_wake_no_idle_subscription(tmp_path: Path) -> None:
    database = brain.open(tmp_path / "d")

    async def scenario(backend: EngineBackend, loop: CountingLoop) -> None:
        quiet = _principal("quiet", 1)
        seen: list[list[int]] = [[] for _ in range(IDLE)]
        tasks = [
            asyncio.create_task(_collect(backend.subscribe(quiet, Subscribe()), seen[i]))
            for i in range(IDLE)
        ]
        # Each subscription's first change-log read comes back through one call.
        await _until(lambda: loop.threadsafe_calls >= IDLE)
        await asyncio.sleep(0.1)  # their callbacks run; each now waits for a wake-up
        before = loop.threadsafe_calls
        # The loop is blocked while these commit: whatever the writer hands it queues.
        _write(database, "busy", WRITES)
        assert loop.threadsafe_calls - before == 0
        await asyncio.sleep(0.1)
        assert loop.threadsafe_calls - before == 0
        assert all(not lsns for lsns in seen)

        # A follower of the written scope is woken, with one callback per commit at most.
        follower: list[int] = []
        task = asyncio.create_task(
            _collect(backend.subscribe(_principal("busy", 2), Subscribe()), follower)
        )
        await _until(lambda: loop.threadsafe_calls > before)
        await asyncio.sleep(0.1)
        callbacks = backend.fanout.callbacks
        lsns = await asyncio.to_thread(_write, database, "busy", WRITES)
        await _until(lambda: follower[-1:] == lsns[-1:])
        assert follower == lsns
        assert 1 <= backend.fanout.callbacks - callbacks <= WRITES
        assert all(not lsns for lsns in seen)
        for pending in [*tasks, task]:
            pending.cancel()
        await asyncio.gather(*tasks, task, return_exceptions=True)

    try:
        _run(database, scenario)
    finally:
        database.close()


def test_one_key_holds_a_bounded_number_of_subscriptions(tmp_path: Path) -> None:
    database = brain.open(tmp_path / "d")

    async def scenario(backend: EngineBackend, loop: CountingLoop) -> None:
        greedy, other = _principal("quiet", 1), _principal("quiet", 2)
        streams = [backend.subscribe(greedy, Subscribe()) for _ in range(MAX_SUBSCRIPTIONS_PER_KEY)]
        tasks = [asyncio.create_task(_collect(s, [])) for s in streams]
        # Each has made its first read, so each holds its place.
        await _until(lambda: loop.threadsafe_calls >= len(tasks))
        with pytest.raises(Overloaded, match="subscriptions open") as refused:
            one_more = backend.subscribe(greedy, Subscribe(space="elsewhere"))
            await asyncio.wait_for(anext(one_more), SETTLE_S)
        assert refused.value.retry_after_ms is not None and refused.value.retry_after_ms > 0
        # Another key is not affected, and an ended subscription frees its place.
        extra = asyncio.create_task(_collect(backend.subscribe(other, Subscribe()), []))
        await _until(lambda: backend.fanout.subscriptions(other.key_id) == 1)
        tasks[0].cancel()
        await _until(lambda: backend.fanout.subscriptions(greedy.key_id) == len(tasks) - 1)
        again = asyncio.create_task(_collect(backend.subscribe(greedy, Subscribe()), []))
        await _until(lambda: backend.fanout.subscriptions(greedy.key_id) == len(tasks))
        for task in [*tasks, extra, again]:
            task.cancel()
        await asyncio.gather(*tasks, extra, again, return_exceptions=True)
        assert backend.fanout.subscriptions(greedy.key_id) == 0

    try:
        _run(database, scenario)
    finally:
        database.close()
