"""Load-generator sessions that speak to our server over the wire protocol.

Each session is one pipelined :class:`~brain.client.AsyncClient` connection;
:mod:`bench.loadgen` builds them in its child processes from ``params``
(``host``, ``port``, ``api_key`` plus what the workload needs).

:class:`BrainWriter` writes a generated world (entities, statements and
supersessions) for the suites that need data in place before they measure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Final

from bench.datagen import Entity, StatementSpec
from brain.client import AsyncClient
from brain.errors import Overloaded
from brain.wire.messages.entity_ops import EntityCreate, EntityCreateOk
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementDraft,
    StatementGet,
    StatementList,
    StatementSupersede,
    StatementWritten,
)
from brain.wire.messages.values import EntityRef, TextValue
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = [
    "LIST_LIMIT",
    "OVERLOADED_RETRIES",
    "BrainSession",
    "BrainWriter",
    "StatementCreateSession",
    "StatementGetSession",
    "StatementListSession",
    "call_obeying",
    "create_entities",
    "statement_create",
    "statement_get",
    "statement_list",
]

LIST_LIMIT: Final = 100
"""Rows per STATEMENT_LIST: the server's default page, named so both sides of a
comparison ask for the same page size."""


OVERLOADED_RETRIES: Final = 10_000
"""Refusals one write may meet before a loader gives up: at ``retry_after_ms`` = 1 s,
hours, far longer than any embedding backlog takes to drain."""


async def call_obeying(client: AsyncClient, opcode: Opcode, request: Message) -> Message:
    """``client.call`` that, refused with OVERLOADED, waits the ``retry_after_ms`` it
    was told and sends the same request again (its request id makes a retry safe):
    what a client that obeys the server's back-pressure does (spec/04-retrieval.md
    §3, a full embedding backlog)."""
    for _ in range(OVERLOADED_RETRIES):
        try:
            return await client.call(opcode, request)
        except Overloaded as exc:
            await asyncio.sleep((exc.retry_after_ms or 1000) / 1000)
    raise RuntimeError(f"{opcode.name} was refused {OVERLOADED_RETRIES} times")


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

    def pick(self, n: int, count: int) -> int:
        """The item of a ``count``-long list step ``n`` asks for (a fixed walk, the same
        for every system measured)."""
        return (self.session_no * 7919 + n * 104_729) % count


class StatementCreateSession(BrainSession):
    """STATEMENT_CREATE of a fact about one of ``params["entities"]`` (entity ids, hex)."""

    async def step(self, n: int) -> None:
        await self.client.call(Opcode.STATEMENT_CREATE, self.request(n))

    def request(self, n: int) -> StatementCreate:
        """The write step ``n`` sends."""
        entities = self.params["entities"]
        subject = bytes.fromhex(entities[(self.session_no * 7919 + n) % len(entities)])
        return StatementCreate(
            request_id=self.request_id(n),
            kind="fact",
            subject=EntityRef(entity=subject),
            predicate="works_on",
            object_=TextValue(text=f"task {self.session_no}-{n}"),
        )


def statement_create(params: Mapping[str, Any], session_no: int) -> StatementCreateSession:
    """Factory for :mod:`bench.loadgen`: ``"bench.brainload:statement_create"``."""
    return StatementCreateSession(params, session_no)


class StatementGetSession(BrainSession):
    """STATEMENT_GET of one of ``params["ids"]`` (statement ids, hex)."""

    async def step(self, n: int) -> None:
        ids = self.params["ids"]
        statement_id = bytes.fromhex(ids[self.pick(n, len(ids))])
        await self.client.call(Opcode.STATEMENT_GET, StatementGet(id=statement_id))


class StatementListSession(BrainSession):
    """STATEMENT_LIST of one of ``params["pairs"]`` (subject id hex, predicate) as of
    ``params["as_of"]`` (ns), one page of :data:`LIST_LIMIT`."""

    async def step(self, n: int) -> None:
        pairs = self.params["pairs"]
        subject, predicate = pairs[self.pick(n, len(pairs))]
        await self.client.call(
            Opcode.STATEMENT_LIST,
            StatementList(
                subject=EntityRef(entity=bytes.fromhex(subject)),
                predicate=predicate,
                as_of=int(self.params["as_of"]),
                limit=LIST_LIMIT,
            ),
        )


def statement_get(params: Mapping[str, Any], session_no: int) -> StatementGetSession:
    """Factory for :mod:`bench.loadgen`: ``"bench.brainload:statement_get"``."""
    return StatementGetSession(params, session_no)


def statement_list(params: Mapping[str, Any], session_no: int) -> StatementListSession:
    """Factory for :mod:`bench.loadgen`: ``"bench.brainload:statement_list"``."""
    return StatementListSession(params, session_no)


async def create_entities(client: AsyncClient, entities: Sequence[Entity]) -> list[bytes]:
    """ENTITY_CREATE for each of the world's entities, pipelined on one connection (so
    they share group commits); their ids, in the world's order."""

    async def create(entity: Entity) -> bytes:
        answer = await client.call(
            Opcode.ENTITY_CREATE,
            EntityCreate(
                request_id=b"entity--" + entity.index.to_bytes(8, "big"),
                name=entity.name,
                type_=entity.type_,
            ),
        )
        assert isinstance(answer, EntityCreateOk)
        return answer.entity_id

    return list(await asyncio.gather(*(create(e) for e in entities)))


class BrainWriter:
    """Writes one statement at a time on its own connection (a loader's worker)."""

    def __init__(self, params: Mapping[str, Any], entity_ids: Sequence[bytes]) -> None:
        self.params = params
        self.entity_ids = entity_ids
        self._client: AsyncClient | None = None

    async def open(self) -> None:
        """Connect and authenticate."""
        self._client = await AsyncClient.connect(
            self.params["host"], self.params["port"], api_key=self.params["api_key"]
        )

    async def close(self) -> None:
        """Close the connection."""
        if self._client is not None:
            await self._client.close()

    async def write(
        self, spec: StatementSpec, old: bytes | None, request_id: bytes
    ) -> tuple[bytes, int]:
        """STATEMENT_CREATE of ``spec``, or STATEMENT_SUPERSEDE of ``old`` by it; the new
        statement's id and record time (ns)."""
        assert self._client is not None, "open() first"
        subject = EntityRef(entity=self.entity_ids[spec.subject])
        text = TextValue(text=spec.object_)
        answer: object
        if old is None:
            answer = await call_obeying(
                self._client,
                Opcode.STATEMENT_CREATE,
                StatementCreate(
                    request_id=request_id, kind=spec.kind, subject=subject,
                    predicate=spec.predicate, object_=text,
                    valid_from=spec.valid_from, event_at=spec.event_at,
                ),
            )  # fmt: skip
        else:
            draft = StatementDraft(
                kind=spec.kind, subject=subject, predicate=spec.predicate, object_=text,
                valid_from=spec.valid_from, event_at=spec.event_at,
            )  # fmt: skip
            answer = await call_obeying(
                self._client,
                Opcode.STATEMENT_SUPERSEDE,
                StatementSupersede(request_id=request_id, old=old, new=draft),
            )
        assert isinstance(answer, StatementWritten)
        return answer.statement_id, answer.recorded_at
