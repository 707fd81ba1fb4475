"""The idle timeout of spec/01-wire.md §3, kept by one deadline per connection.

A connection with nothing in flight that sends nothing for ``idle_timeout_s``
is closed, counted from its last answer, whether that answer came from the
event loop (a point read) or a read thread (a LIST); the idle timeout starts
at AUTH even when it is shorter than what is left of the handshake's; work in
flight (a subscription) keeps a connection open however long it lasts.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Final

import pytest

from brain.wire.opcodes import Opcode
from tests.unit.server.live_server import Peer, live_server

IDLE_S: Final = 0.5
"""The idle timeout the tests configure."""

STREAMED_FRAMES: Final = 40
"""PINGs sent as one stream, half a frame off each write's end."""

STREAM_GAP_S: Final = 0.05
"""Between two writes of the stream: 40 of them last four idle timeouts."""

SLACK_S: Final = 2.0
"""How much later than the timeout a close may come on a loaded machine: far less
than the handshake's 10 s, so a close that waited for that is told apart."""


async def _lived_after(peer: Peer, mark: float) -> float | None:
    """Seconds from ``mark`` until the server closed ``peer`` (None: it stayed open past
    the idle timeout and its slack); the peer is closed either way."""
    closed = await peer.closed_within(IDLE_S + SLACK_S)
    await peer.close()
    return None if closed is None else closed - mark


def _closed_idle(lived: float | None) -> None:
    assert lived is not None, "an idle connection outlived the idle timeout"
    assert IDLE_S - 0.1 < lived < IDLE_S + SLACK_S, lived


@pytest.mark.parametrize(
    ("opcode", "body"),
    [(Opcode.MEMORY_GET, {"id": bytes(16)}), (Opcode.STATEMENT_LIST, {"limit": 5})],
    ids=["point read", "list"],
)
def test_idle_time_counts_from_the_last_answer(
    tmp_path: Path, opcode: Opcode, body: dict[str, object]
) -> None:
    async def main() -> float | None:
        async with live_server(tmp_path / "d", idle_timeout_s=IDLE_S) as (server, key):
            peer = await Peer.connect(server, key)
            # Half the timeout apart: the idle time is not counted from AUTH.
            await asyncio.sleep(IDLE_S / 2)
            peer.send(opcode, 1, body)
            await peer.recv()
            return await _lived_after(peer, time.monotonic())

    _closed_idle(asyncio.run(main()))


def test_the_idle_timeout_starts_at_auth(tmp_path: Path) -> None:
    async def main() -> float | None:
        async with live_server(tmp_path / "d", idle_timeout_s=IDLE_S) as (server, key):
            peer = await Peer.connect(server, key)
            return await _lived_after(peer, time.monotonic())

    lived = asyncio.run(main())
    assert lived is not None and lived < IDLE_S + SLACK_S, lived


def test_work_in_flight_keeps_the_connection_open(tmp_path: Path) -> None:
    async def main() -> None:
        async with live_server(tmp_path / "d", idle_timeout_s=IDLE_S) as (server, key):
            peer = await Peer.connect(server, key)
            peer.send(Opcode.SUBSCRIBE, 1, {})
            assert await peer.closed_within(3 * IDLE_S) is None
            pong = await peer.call(Opcode.PING, 0, {"nonce": 1})
            assert pong.body["nonce"] == 1
            # The subscription ends, its last frame is sent: from then on it is idle.
            peer.send(Opcode.CANCEL_STREAM, 3, {"stream": 1})
            ended, cancelled = await peer.recv(), await peer.recv()
            assert (ended.stream_id, cancelled.body) == (1, {"cancelled": True})
            assert await peer.closed_within(IDLE_S + SLACK_S) is not None
            await peer.close()

    asyncio.run(main())


def test_frames_streamed_back_to_back_are_each_timed_alone(tmp_path: Path) -> None:
    """Every write ends in the middle of a frame, the next write completes it: each
    frame arrives whole at once, so however long the stream lasts, nothing times out
    (a frame is given the idle timeout from its own first byte, not the stream's)."""

    async def main() -> tuple[int, float | None]:
        async with live_server(tmp_path / "d", idle_timeout_s=IDLE_S) as (server, key):
            peer = await Peer.connect(server, key)
            # Nonces of one size (100 to 139), so that every frame has the same length.
            frames = [
                Peer.frame(Opcode.PING, 0, {"nonce": 100 + n}) for n in range(STREAMED_FRAMES)
            ]
            size = len(frames[0])
            assert {len(f) for f in frames} == {size}
            stream = b"".join(frames)
            # Half a frame first, then a frame's length at a time: every write ends
            # half-way through a frame.
            peer.send_bytes(stream[: size // 2])
            for at in range(size // 2, len(stream), size):
                await asyncio.sleep(STREAM_GAP_S)
                peer.send_bytes(stream[at : at + size])
            answered = 0
            for _ in range(STREAMED_FRAMES):
                pong = await peer.recv()
                assert pong.error is None, pong
                answered += 1
            closed = peer.closed_at
            await peer.close()
            return answered, closed

    answered, closed = asyncio.run(main())
    assert answered == STREAMED_FRAMES
    assert closed is None


def test_a_write_then_silence_is_closed(tmp_path: Path) -> None:
    async def main() -> float | None:
        async with live_server(tmp_path / "d", idle_timeout_s=IDLE_S) as (server, key):
            peer = await Peer.connect(server, key)
            await peer.call(
                Opcode.ENTITY_CREATE, 1, {"request_id": os.urandom(16), "name": "Ada Lovelace"}
            )
            return await _lived_after(peer, time.monotonic())

    _closed_idle(asyncio.run(main()))
