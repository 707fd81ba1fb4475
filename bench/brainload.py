"""Load-generator sessions that speak to our server over the wire protocol.

Each session is one pipelined :class:`~brain.client.AsyncClient` connection;
:mod:`bench.loadgen` builds them in its child processes from ``params``
(``host``, ``port``, ``api_key`` plus what the workload needs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from brain.client import AsyncClient
from brain.wire.messages.statement_ops import StatementCreate
from brain.wire.messages.values import EntityRef, TextValue
from brain.wire.opcodes import Opcode

__all__ = ["BrainSession", "StatementCreateSession", "statement_create"]


class BrainSession:
    """A connection to our server; subclasses say what one step sends."""

    def __init__(self, params: Mapping[str, Any], session_no: int) -> None:
        self.params = params
        self.session_no = session_no
        self._client: AsyncClient | None = None

    @property
    def client(self) -> AsyncClient:
        assert self._client is not None, "open() first"
        return self._client

    async def open(self) -> None:
        """Connect and authenticate."""
        self._client = await AsyncClient.connect(
            self.params["host"], self.params["port"], api_key=self.params["api_key"]
        )

    async def step(self, n: int) -> None:
        """One request; subclasses define it."""
        raise NotImplementedError

    async def close(self) -> None:
        """Close the connection."""
        if self._client is not None:
            await self._client.close()

    def request_id(self, n: int) -> bytes:
        """A request id unique to this session and step (and to the run's ``run`` param)."""
        run = int(self.params.get("run", 0))
        return run.to_bytes(4, "big") + self.session_no.to_bytes(4, "big") + n.to_bytes(8, "big")


class StatementCreateSession(BrainSession):
    """STATEMENT_CREATE of a fact about one of ``params["entities"]`` (entity ids, hex)."""

    async def step(self, n: int) -> None:
        entities = self.params["entities"]
        subject = bytes.fromhex(entities[(self.session_no * 7919 + n) % len(entities)])
        await self.client.call(
            Opcode.STATEMENT_CREATE,
            StatementCreate(
                request_id=self.request_id(n),
                kind="fact",
                subject=EntityRef(entity=subject),
                predicate="works_on",
                object_=TextValue(text=f"task {self.session_no}-{n}"),
            ),
        )


def statement_create(params: Mapping[str, Any], session_no: int) -> StatementCreateSession:
    """Factory for :mod:`bench.loadgen`: ``"bench.brainload:statement_create"``."""
    return StatementCreateSession(params, session_no)
