"""A real server in the test's own event loop, and a raw wire peer to talk to it.

:func:`live_server` starts :class:`~brain.server.app.Server` on free loopback
ports over a fresh data directory (the hashing embedder); :class:`Peer` is one
TCP connection speaking frames, which records when each answer arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import tomllib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from brain import cbor
from brain.server.app import Server
from brain.server.config import load_config
from brain.wire.frame import FrameReader, encode_frame
from brain.wire.opcodes import ERROR_OPCODE, Opcode, response_opcode

__all__ = ["READ_S", "Answer", "Peer", "live_server"]

READ_S: Final = 30.0
"""Longest a test waits for one answer: far more than any answer takes."""


@contextlib.asynccontextmanager
async def live_server(data: Path, **server: object) -> AsyncIterator[tuple[Server, str]]:
    """A started server on ``data`` with the ``[server]`` settings ``server``, and
    its first API key; stopped when the block ends."""
    overrides: dict[str, object] = {
        "server.data_dir": str(data),
        "server.port": 0,
        "server.public_port": 0,
        "server.admin_port": 0,
        "retrieval.embedder": "hashing",
    }
    overrides.update({f"server.{key}": value for key, value in server.items()})
    running = Server(load_config(environ={}, overrides=overrides))
    await running.start()
    try:
        credentials = tomllib.loads((data / "credentials.toml").read_text(encoding="utf-8"))
        yield running, str(credentials["api_key"])
    finally:
        await running.stop()


@dataclass(frozen=True)
class Answer:
    """One frame the server sent, and when it arrived (``time.monotonic``)."""

    opcode: int
    stream_id: int
    body: dict[str, Any]
    at: float

    @property
    def error(self) -> str | None:
        """The error's wire name when the frame is an ERROR."""
        return str(self.body["name"]) if self.opcode == ERROR_OPCODE else None


class Peer:
    """One raw connection to a server. A task of its own reads the socket, so each
    answer's time is when it arrived, not when the test looked."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._answers: asyncio.Queue[Answer | None] = asyncio.Queue()
        self.closed_at: float | None = None
        """When the server closed the connection (None while it is open)."""
        self._reading = asyncio.create_task(self._read())

    async def _read(self) -> None:
        frames = FrameReader()
        try:
            while data := await self._reader.read(65536):
                now = time.monotonic()
                for frame in frames.feed(data):
                    body = cbor.decode(frame.payload) if frame.payload else {}
                    assert isinstance(body, dict)
                    self._answers.put_nowait(Answer(frame.opcode, frame.stream_id, body, now))
        except ConnectionError:
            pass
        self.closed_at = time.monotonic()
        self._answers.put_nowait(None)

    @classmethod
    async def connect(cls, server: Server, api_key: str | None = None) -> Peer:
        """Connect; with ``api_key``, also complete HELLO and AUTH."""
        reader, writer = await asyncio.open_connection("127.0.0.1", server.wire_port)
        peer = cls(reader, writer)
        if api_key is not None:
            peer.send(Opcode.HELLO, 0, {"client": "test/1", "versions": [1]})
            assert (await peer.recv()).error is None
            peer.send(Opcode.AUTH, 0, {"api_key": api_key})
            assert (await peer.recv()).error is None
        return peer

    @staticmethod
    def frame(opcode: Opcode, stream_id: int, body: dict[str, Any]) -> bytes:
        """The bytes of one request frame."""
        return encode_frame(opcode, stream_id, cbor.encode(body) if body else b"")

    def send(self, opcode: Opcode, stream_id: int, body: dict[str, Any]) -> None:
        """Queue one request frame."""
        self._writer.write(self.frame(opcode, stream_id, body))

    def send_bytes(self, data: bytes) -> None:
        """Queue raw bytes."""
        self._writer.write(data)

    async def recv(self) -> Answer:
        """The next frame from the server (AssertionError if the connection closes)."""
        answer = await asyncio.wait_for(self._answers.get(), READ_S)
        assert answer is not None, "the server closed the connection"
        return answer

    async def call(self, opcode: Opcode, stream_id: int, body: dict[str, Any]) -> Answer:
        """Send one request and wait for its answer, which must not be an error."""
        self.send(opcode, stream_id, body)
        answer = await self.recv()
        assert answer.opcode == response_opcode(opcode), answer
        return answer

    async def closed_within(self, seconds: float) -> float | None:
        """When the server closed the connection, waiting up to ``seconds`` for it
        (None: still open); answers that come meanwhile are dropped."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._reading), seconds)
        return self.closed_at

    async def close(self) -> None:
        """Close the connection."""
        self._writer.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()
        with contextlib.suppress(asyncio.CancelledError):
            self._reading.cancel()
            await self._reading
