"""``AsyncBrain``: the asyncio twin of :class:`~brain.sdk.sync.Brain`, the same methods
as coroutines, over a socket or an embedded database.

::

    async with await AsyncBrain.connect(api_key=key) as db:   # or AsyncBrain.open("my-data")
        m = await db.remember("Dan: I moved to Berlin in May.")
        await db.create_statement("Dan", "lives_in", "Berlin", evidence=[m])
        print(await db.render(await db.recall("where does Dan live?")))

Both facades build their requests and convert their answers in
:mod:`brain.sdk.operations` and follow the same retry rules
(:mod:`brain.sdk.retry`); this one waits with ``await``. Over the wire, the
tasks sharing a facade share one pipelined connection
(:class:`~brain.client.AsyncClient`); embedded, each request runs in a worker
thread (``asyncio.to_thread``), since the database's calls block.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, Self, TypeVar, overload

from brain.client import AsyncClient
from brain.client.render import render_hits
from brain.client.sync import DEFAULT_PORT, DEFAULT_TIMEOUT_S
from brain.errors import BrainError, ConnectionClosed, InvalidArgument, NotFound, Overloaded
from brain.sdk import operations, requests, results
from brain.sdk.consistency import ReadYourWrites
from brain.sdk.operations import Decision, Direction, Op
from brain.sdk.requests import EvidenceLike, IdLike, ObjectLike, SubjectLike
from brain.sdk.retry import Attempts
from brain.sdk.sync import DEFAULT_SPACE
from brain.sdk.times import TimeLike
from brain.sdk.transport import embedded_request
from brain.wire.messages import (
    entity_ops,
    memory_ops,
    recall_ops,
    relation_ops,
    review_ops,
    schema_ops,
    statement_ops,
    txn_ops,
)
from brain.wire.messages.schema_ops import PredicateDecl, RelationTypeDecl, Schema
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

if TYPE_CHECKING:
    from brain.engine.database import Database, DatabaseOptions

__all__ = [
    "AsyncBrain",
    "AsyncEmbeddedTransport",
    "AsyncTransaction",
    "AsyncTransport",
    "AsyncWireTransport",
]

T = TypeVar("T")


class AsyncTransport(Protocol):
    """What :class:`AsyncBrain` needs of a way to reach a database: the coroutine
    form of :class:`~brain.sdk.transport.Transport`."""

    async def request(self, opcode: Opcode, message: Message) -> Message:
        """Run one request and return its answer, or raise the BrainError it ended in."""
        ...

    async def reconnect(self) -> bool:
        """Replace a lost connection by a fresh one; False when there is none to replace."""
        ...

    async def close(self) -> None:
        """Release what the transport holds; closing twice is harmless."""
        ...


class AsyncWireTransport:
    """One pipelined connection to a Brain server, made again on :meth:`reconnect`;
    make one with :meth:`connect`."""

    def __init__(
        self,
        client: AsyncClient,
        host: str,
        port: int,
        *,
        api_key: str,
        timeout: float | None = DEFAULT_TIMEOUT_S,
    ) -> None:
        """Use the connected ``client``; the rest is how to connect again."""
        self._host, self._port, self._api_key, self._timeout = host, port, api_key, timeout
        self._client: AsyncClient | None = client

    @classmethod
    async def connect(
        cls,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        api_key: str,
        timeout: float | None = DEFAULT_TIMEOUT_S,
    ) -> AsyncWireTransport:
        """Connect and authenticate; raises the server's error, or ConnectionClosed."""
        client = await AsyncClient.connect(host, port, api_key=api_key, timeout=timeout)
        return cls(client, host, port, api_key=api_key, timeout=timeout)

    @property
    def client(self) -> AsyncClient:
        """The current connection (a new one after a reconnect)."""
        if self._client is None:
            raise ConnectionClosed("the connection is closed")
        return self._client

    async def request(self, opcode: Opcode, message: Message) -> Message:
        """Send ``message`` as ``opcode`` and wait for its answer."""
        return await self.client.call(opcode, message)

    async def reconnect(self) -> bool:
        """Drop the broken connection and open a new one with the same key."""
        if self._client is None:
            return False  # closed by its owner: nothing to reconnect
        old, self._client = self._client, None
        await old.close()
        self._client = await AsyncClient.connect(
            self._host, self._port, api_key=self._api_key, timeout=self._timeout
        )
        return True

    async def close(self) -> None:
        """Say BYE and close the connection."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()


class AsyncEmbeddedTransport:
    """A database in this process, used as ``namespace``; each request runs in a worker
    thread so that the event loop keeps running while the database works."""

    def __init__(
        self, database: Database, *, namespace: str = "default", owns: bool = False
    ) -> None:
        """Serve requests from ``database``; ``owns`` closes it with the transport."""
        self.database = database
        self.namespace = namespace
        self._owns = owns

    async def request(self, opcode: Opcode, message: Message) -> Message:
        """Run the request in the database, in a worker thread."""
        return await asyncio.to_thread(
            embedded_request, self.database, self.namespace, opcode, message
        )

    async def reconnect(self) -> bool:
        """An embedded database has no connection to lose."""
        return False

    async def close(self) -> None:
        """Close the database when this transport opened it."""
        if self._owns:
            self._owns = False
            await asyncio.to_thread(self.database.close)


class AsyncBrain:
    """A Brain database for asyncio code: over the wire (:meth:`connect`) or in this
    process (:meth:`open`). Its methods are :class:`~brain.sdk.sync.Brain`'s, awaited.

    Many tasks may share one: over the wire their requests are pipelined on one
    connection.
    """

    def __init__(
        self,
        transport: AsyncTransport,
        *,
        space: str = DEFAULT_SPACE,
        read_your_writes: bool = False,
    ) -> None:
        """Use ``transport``; ``space`` is the space of every request that names none.
        With ``read_your_writes`` every read that names no ``min_lsn`` carries the
        highest LSN an answer gave this facade (:mod:`brain.sdk.consistency`), so it
        sees this facade's writes on any node of the shard, a follower included."""
        self.transport = transport
        self.space = space
        self.consistency = ReadYourWrites(read_your_writes)
        """The last LSN this facade's answers carried, and whether reads send it."""
        self.txn_id: bytes | None = None
        """The transaction every request of this facade joins (see :meth:`transaction`)."""

    @classmethod
    async def connect(
        cls,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        api_key: str,
        space: str = DEFAULT_SPACE,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        read_your_writes: bool = False,
    ) -> AsyncBrain:
        """Connect to a server and authenticate with ``api_key``; ``read_your_writes``
        as for the constructor."""
        transport = await AsyncWireTransport.connect(host, port, api_key=api_key, timeout=timeout)
        return cls(transport, space=space, read_your_writes=read_your_writes)

    @classmethod
    async def open(
        cls,
        path: Path | str,
        *,
        namespace: str = "default",
        space: str = DEFAULT_SPACE,
        options: DatabaseOptions | None = None,
    ) -> AsyncBrain:
        """Open the embedded database in directory ``path`` (creating it, in a worker
        thread: recovery may take a while), used as ``namespace``; :meth:`close`
        closes it."""
        from brain.engine.database import Database

        database = await asyncio.to_thread(Database.open, path, options)
        return cls(AsyncEmbeddedTransport(database, namespace=namespace, owns=True), space=space)

    async def close(self) -> None:
        """Close the connection, or the embedded database this facade opened."""
        await self.transport.close()

    async def __aenter__(self) -> Self:
        """Use the facade in an ``async with`` block that closes it."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the facade."""
        await self.close()

    # --- sending --------------------------------------------------------------------

    async def _send(self, opcode: Opcode, message: Message) -> Message:
        """Send with the retry rules of :mod:`brain.sdk.retry`; the same message, and so
        the same ``request_id``, on every attempt."""
        attempts = Attempts(opcode, message)
        while True:
            try:
                return await self.transport.request(opcode, message)
            except Overloaded as refused:
                wait = attempts.wait_after(refused)
                if wait is None:
                    raise
                await asyncio.sleep(wait)
            except ConnectionClosed:
                if not attempts.may_reconnect() or not await self.transport.reconnect():
                    raise

    async def _run(self, op: Op[T], *, min_lsn: int | None = None) -> T:
        """Send ``op`` (in this facade's transaction, if any; a read with ``min_lsn``,
        or the last LSN seen under read-your-writes) and convert its answer."""
        if self.txn_id is not None:
            op = operations.joined(op, self.txn_id)
        request = self.consistency.apply(op.request, min_lsn)
        answer = await self._send(op.opcode, request)
        self.consistency.saw(answer)
        return op.finish(answer)

    def _space(self, space: str | None) -> str:
        return self.space if space is None else space

    # --- transactions ---------------------------------------------------------------

    def transaction(self, *, timeout_ms: int | None = None) -> AsyncTransaction:
        """A transaction (spec/05-durability.md §8) for an ``async with`` block::

            async with db.transaction() as tx:
                await tx.create_statement("Dan", "lives_in", "Berlin")

        ``tx`` is this facade joined to the transaction: its writes are buffered and
        applied together when the block ends, or dropped when it raises."""
        if self.txn_id is not None:
            raise InvalidArgument("transactions do not nest", field="txn_id")
        return AsyncTransaction(self, timeout_ms=timeout_ms)

    def joined(self, txn_id: bytes) -> Self:
        """This facade, sharing its transport, with every request joining ``txn_id``
        (writes are buffered, reads by id see them; a write that cannot be part of a
        transaction raises InvalidArgument)."""
        bound = copy.copy(self)
        bound.txn_id = txn_id
        return bound

    async def ping(self, nonce: object = None) -> results.Pong:
        """PING: the server's clock, and ``nonce`` echoed; embedded, this process's clock."""
        return await self._run(operations.ping(nonce))

    # --- memories -------------------------------------------------------------------

    async def remember(
        self,
        text: str,
        *,
        occurred_at: TimeLike | None = None,
        context: str | None = None,
        vector: bytes | None = None,
        override_forgotten: bool | None = None,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.Remembered:
        """ENCODE: store a memory (the same text in a space is stored once)."""
        return await self._run(
            operations.remember(
                text,
                occurred_at=occurred_at,
                context=context,
                vector=vector,
                override_forgotten=override_forgotten,
                space=self._space(space),
                request_id=request_id,
            )
        )

    async def get_memory(
        self, memory: IdLike, *, min_lsn: int | None = None, space: str | None = None
    ) -> results.Memory:
        """MEMORY_GET: one memory by id."""
        return await self._run(
            operations.get_memory(memory, space=self._space(space)), min_lsn=min_lsn
        )

    async def forget(
        self,
        memory: IdLike,
        *,
        hard: bool = False,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.ForgetResult:
        """FORGET: forget a memory, softly (recall no longer finds it) or ``hard``
        (its text is gone for good); statements resting on it alone are tombstoned."""
        return await self._run(
            operations.forget(memory, hard=hard, space=self._space(space), request_id=request_id)
        )

    # --- recall ---------------------------------------------------------------------

    async def recall(
        self,
        cue: str,
        *,
        top_k: int | None = None,
        as_of: TimeLike | None = None,
        valid_at: TimeLike | None = None,
        valid_from: TimeLike | None = None,
        valid_to: TimeLike | None = None,
        records: Iterable[str] | None = None,
        kinds: Iterable[str] | None = None,
        predicates: Iterable[str] | None = None,
        min_confidence: float | None = None,
        min_relevance: float | None = None,
        include_superseded: bool | None = None,
        include_tombstoned: bool | None = None,
        entity_anchor: IdLike | None = None,
        explain: bool | None = None,
        min_lsn: int | None = None,
        space: str | None = None,
    ) -> results.Recalled:
        """RECALL: statements and memories for ``cue``, best first (spec/04-retrieval.md).

        ``as_of`` asks what was believed at an instant; ``valid_at`` what was true
        in the world then. Left-out arguments take the server's defaults."""
        return await self._run(
            operations.recall(
                cue,
                top_k=top_k,
                as_of=as_of,
                valid_at=valid_at,
                valid_from=valid_from,
                valid_to=valid_to,
                records=records,
                kinds=kinds,
                predicates=predicates,
                min_confidence=min_confidence,
                min_relevance=min_relevance,
                include_superseded=include_superseded,
                include_tombstoned=include_tombstoned,
                entity_anchor=entity_anchor,
                explain=explain,
                space=self._space(space),
            ),
            min_lsn=min_lsn,
        )

    async def explain(
        self,
        cue: str,
        *,
        top_k: int | None = None,
        as_of: TimeLike | None = None,
        valid_at: TimeLike | None = None,
        valid_from: TimeLike | None = None,
        valid_to: TimeLike | None = None,
        records: Iterable[str] | None = None,
        kinds: Iterable[str] | None = None,
        predicates: Iterable[str] | None = None,
        min_confidence: float | None = None,
        min_relevance: float | None = None,
        include_superseded: bool | None = None,
        include_tombstoned: bool | None = None,
        entity_anchor: IdLike | None = None,
        min_lsn: int | None = None,
        space: str | None = None,
    ) -> results.Explained:
        """EXPLAIN: how :meth:`recall` with these arguments is served (survivors per
        step, timings) and what it ranks, without the records."""
        return await self._run(
            operations.explain(
                cue,
                top_k=top_k,
                as_of=as_of,
                valid_at=valid_at,
                valid_from=valid_from,
                valid_to=valid_to,
                records=records,
                kinds=kinds,
                predicates=predicates,
                min_confidence=min_confidence,
                min_relevance=min_relevance,
                include_superseded=include_superseded,
                include_tombstoned=include_tombstoned,
                entity_anchor=entity_anchor,
                space=self._space(space),
            ),
            min_lsn=min_lsn,
        )

    async def render(
        self,
        found: results.Recalled | Iterable[results.Hit],
        *,
        max_chars: int | None = None,
        space: str | None = None,
    ) -> str:
        """The hits as prompt text that marks stored text as data
        (:func:`brain.client.render.render_hits`), entities shown by name: each entity
        the hits name is looked up once (ENTITY_GET), the lookups sent together."""
        hits = requests.hits_of(found)
        entities = requests.entity_ids(hits)
        looked_up = await asyncio.gather(
            *(self.get_entity(entity, space=space) for entity in entities),
            return_exceptions=True,
        )
        names: dict[bytes, str] = {}
        for entity, answer in zip(entities, looked_up, strict=True):
            if isinstance(answer, results.Entity):
                names[entity] = answer.name
            elif not isinstance(answer, NotFound):
                # An entity gone since the recall is shown by its id; anything else
                # is the caller's to see.
                raise answer
        return render_hits([hit.wire for hit in hits], max_chars=max_chars, names=names)

    # --- statements -----------------------------------------------------------------

    async def create_statement(
        self,
        subject: SubjectLike,
        predicate: str,
        object_: ObjectLike,
        *,
        kind: str = "fact",
        subject_type: str | None = None,
        confidence: float | None = None,
        evidence: Iterable[EvidenceLike] | None = None,
        source: str | None = None,
        valid_from: TimeLike | None = None,
        valid_to: TimeLike | None = None,
        event_at: TimeLike | None = None,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.StatementWritten:
        """STATEMENT_CREATE: record that ``subject predicate object_``.

        ``subject`` given by name finds the entity of that name (of
        ``subject_type``, when given) or creates it."""
        return await self._run(
            operations.create_statement(
                subject,
                predicate,
                object_,
                kind=kind,
                subject_type=subject_type,
                confidence=confidence,
                evidence=evidence,
                source=source,
                valid_from=valid_from,
                valid_to=valid_to,
                event_at=event_at,
                space=self._space(space),
                request_id=request_id,
            )
        )

    async def supersede_statement(
        self,
        old: IdLike,
        subject: SubjectLike,
        predicate: str,
        object_: ObjectLike,
        *,
        kind: str = "fact",
        subject_type: str | None = None,
        confidence: float | None = None,
        evidence: Iterable[EvidenceLike] | None = None,
        source: str | None = None,
        valid_from: TimeLike | None = None,
        valid_to: TimeLike | None = None,
        event_at: TimeLike | None = None,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.StatementWritten:
        """STATEMENT_SUPERSEDE: replace the current statement ``old`` by a new version
        (spec/03-time.md §4); ``old`` stays in the chain's history."""
        return await self._run(
            operations.supersede_statement(
                old,
                subject,
                predicate,
                object_,
                kind=kind,
                subject_type=subject_type,
                confidence=confidence,
                evidence=evidence,
                source=source,
                valid_from=valid_from,
                valid_to=valid_to,
                event_at=event_at,
                space=self._space(space),
                request_id=request_id,
            )
        )

    async def tombstone_statement(
        self,
        statement: IdLike,
        *,
        reason: str | None = None,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.TombstoneResult:
        """STATEMENT_TOMBSTONE: soft-delete a statement; ``reason`` goes to the audit log."""
        return await self._run(
            operations.tombstone_statement(
                statement, reason=reason, space=self._space(space), request_id=request_id
            )
        )

    async def retract_statement(
        self,
        statement: IdLike,
        *,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.TombstoneResult:
        """STATEMENT_RETRACT: withdraw a statement and erase its content, keeping only
        its ids, chain links and times."""
        return await self._run(
            operations.retract_statement(statement, space=self._space(space), request_id=request_id)
        )

    async def get_statement(
        self, statement: IdLike, *, min_lsn: int | None = None, space: str | None = None
    ) -> results.Statement:
        """STATEMENT_GET: one statement by id."""
        return await self._run(
            operations.get_statement(statement, space=self._space(space)), min_lsn=min_lsn
        )

    async def list_statements(
        self,
        *,
        subject: SubjectLike | None = None,
        subject_type: str | None = None,
        predicate: str | None = None,
        kind: str | None = None,
        valid_at: TimeLike | None = None,
        as_of: TimeLike | None = None,
        include_superseded: bool | None = None,
        include_tombstoned: bool | None = None,
        limit: int | None = None,
        cursor: bytes | None = None,
        min_lsn: int | None = None,
        space: str | None = None,
    ) -> results.StatementPage:
        """STATEMENT_LIST: statements through the filter chain, oldest record first;
        pass the page's ``cursor`` back for the next page."""
        return await self._run(
            operations.list_statements(
                subject=subject,
                subject_type=subject_type,
                predicate=predicate,
                kind=kind,
                valid_at=valid_at,
                as_of=as_of,
                include_superseded=include_superseded,
                include_tombstoned=include_tombstoned,
                limit=limit,
                cursor=cursor,
                space=self._space(space),
            ),
            min_lsn=min_lsn,
        )

    async def statement_history(
        self, statement: IdLike, *, min_lsn: int | None = None, space: str | None = None
    ) -> tuple[results.Statement, ...]:
        """STATEMENT_HISTORY: every version of the chain holding ``statement``, oldest first."""
        return await self._run(
            operations.statement_history(statement, space=self._space(space)), min_lsn=min_lsn
        )

    # --- entities -------------------------------------------------------------------

    async def create_entity(
        self,
        name: str,
        *,
        type_: str | None = None,
        aliases: Iterable[str] | None = None,
        attributes: Mapping[str, object] | None = None,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.EntityMade:
        """ENTITY_CREATE: a new entity with a name, optional type, aliases and attributes."""
        return await self._run(
            operations.create_entity(
                name,
                type_=type_,
                aliases=aliases,
                attributes=attributes,
                space=self._space(space),
                request_id=request_id,
            )
        )

    async def get_entity(
        self,
        entity: IdLike,
        *,
        as_of: TimeLike | None = None,
        min_lsn: int | None = None,
        space: str | None = None,
    ) -> results.Entity:
        """ENTITY_GET: one entity by id, as it is now or as it was believed at ``as_of``."""
        return await self._run(
            operations.get_entity(entity, as_of=as_of, space=self._space(space)), min_lsn=min_lsn
        )

    async def entity_history(
        self, entity: IdLike, *, min_lsn: int | None = None, space: str | None = None
    ) -> tuple[results.Entity, ...]:
        """ENTITY_HISTORY: every version of the entity on the record axis, oldest first."""
        return await self._run(
            operations.entity_history(entity, space=self._space(space)), min_lsn=min_lsn
        )

    async def update_entity(
        self,
        entity: IdLike,
        *,
        name: str | None = None,
        add_aliases: Iterable[str] | None = None,
        remove_aliases: Iterable[str] | None = None,
        attributes: Mapping[str, object] | None = None,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.Entity:
        """ENTITY_UPDATE: rename, add or remove aliases, replace the attributes; returns
        the entity as it is now."""
        return await self._run(
            operations.update_entity(
                entity,
                name=name,
                add_aliases=add_aliases,
                remove_aliases=remove_aliases,
                attributes=attributes,
                space=self._space(space),
                request_id=request_id,
            )
        )

    async def merge_entities(
        self,
        keep: IdLike,
        merge: IdLike,
        *,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.Merged:
        """ENTITY_MERGE: ``merge`` becomes an alias of ``keep`` (spec/02-data-model.md §4)."""
        return await self._run(
            operations.merge_entities(keep, merge, space=self._space(space), request_id=request_id)
        )

    async def unmerge_entities(
        self,
        merged: IdLike | results.Merged,
        *,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> int:
        """ENTITY_UNMERGE: restore exactly the state before a merge (its answer or its
        ``merge_id``); returns the write's LSN."""
        return await self._run(
            operations.unmerge_entities(merged, space=self._space(space), request_id=request_id)
        )

    async def resolve_entity(
        self,
        name: str,
        *,
        type_: str | None = None,
        limit: int | None = None,
        as_of: TimeLike | None = None,
        min_lsn: int | None = None,
        space: str | None = None,
    ) -> results.Resolution:
        """ENTITY_RESOLVE: which entities ``name`` means, by exact name, alias, then fuzzy."""
        return await self._run(
            operations.resolve_entity(
                name, type_=type_, limit=limit, as_of=as_of, space=self._space(space)
            ),
            min_lsn=min_lsn,
        )

    async def list_entities(
        self,
        *,
        type_: str | None = None,
        prefix: str | None = None,
        limit: int | None = None,
        cursor: bytes | None = None,
        as_of: TimeLike | None = None,
        min_lsn: int | None = None,
        space: str | None = None,
    ) -> results.EntityPage:
        """ENTITY_LIST: entities, optionally of one type or with a name prefix; pass the
        page's ``cursor`` back for the next page."""
        return await self._run(
            operations.list_entities(
                type_=type_,
                prefix=prefix,
                limit=limit,
                cursor=cursor,
                as_of=as_of,
                space=self._space(space),
            ),
            min_lsn=min_lsn,
        )

    async def tombstone_entity(
        self, entity: IdLike, *, space: str | None = None, request_id: bytes | None = None
    ) -> results.EntityTombstoned:
        """ENTITY_TOMBSTONE: soft-delete an entity."""
        return await self._run(
            operations.tombstone_entity(entity, space=self._space(space), request_id=request_id)
        )

    # --- relations ------------------------------------------------------------------

    async def create_relation(
        self,
        type_: str,
        from_: SubjectLike,
        to: SubjectLike,
        *,
        confidence: float | None = None,
        evidence: Iterable[EvidenceLike] | None = None,
        valid_from: TimeLike | None = None,
        valid_to: TimeLike | None = None,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.RelationWritten:
        """RELATION_CREATE: a typed edge between two entities (names are found or created);
        a type with a constrained cardinality supersedes the current edge it replaces."""
        return await self._run(
            operations.create_relation(
                type_,
                from_,
                to,
                confidence=confidence,
                evidence=evidence,
                valid_from=valid_from,
                valid_to=valid_to,
                space=self._space(space),
                request_id=request_id,
            )
        )

    async def get_relation(
        self, relation: IdLike, *, min_lsn: int | None = None, space: str | None = None
    ) -> results.Relation:
        """RELATION_GET: one relation by id."""
        return await self._run(
            operations.get_relation(relation, space=self._space(space)), min_lsn=min_lsn
        )

    async def supersede_relation(
        self,
        old: IdLike,
        type_: str,
        from_: SubjectLike,
        to: SubjectLike,
        *,
        confidence: float | None = None,
        evidence: Iterable[EvidenceLike] | None = None,
        valid_from: TimeLike | None = None,
        valid_to: TimeLike | None = None,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.RelationWritten:
        """RELATION_SUPERSEDE: replace the current relation ``old`` by a new one."""
        return await self._run(
            operations.supersede_relation(
                old,
                type_,
                from_,
                to,
                confidence=confidence,
                evidence=evidence,
                valid_from=valid_from,
                valid_to=valid_to,
                space=self._space(space),
                request_id=request_id,
            )
        )

    async def tombstone_relation(
        self,
        relation: IdLike,
        *,
        reason: str | None = None,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.TombstoneResult:
        """RELATION_TOMBSTONE: soft-delete a relation; ``reason`` goes to the audit log."""
        return await self._run(
            operations.tombstone_relation(
                relation, reason=reason, space=self._space(space), request_id=request_id
            )
        )

    async def list_relations(
        self,
        entity: IdLike,
        *,
        direction: Direction = "both",
        type_: str | None = None,
        valid_at: TimeLike | None = None,
        as_of: TimeLike | None = None,
        limit: int | None = None,
        cursor: bytes | None = None,
        min_lsn: int | None = None,
        space: str | None = None,
    ) -> results.RelationPage:
        """RELATION_LIST: the relations of ``entity`` in ``direction``, through the same
        time filters as statements; pass the page's ``cursor`` back for the next page."""
        return await self._run(
            operations.list_relations(
                entity,
                direction=direction,
                type_=type_,
                valid_at=valid_at,
                as_of=as_of,
                limit=limit,
                cursor=cursor,
                space=self._space(space),
            ),
            min_lsn=min_lsn,
        )

    async def traverse(
        self,
        from_: IdLike,
        *,
        depth: int = 1,
        types: Iterable[str] | None = None,
        direction: Direction | None = None,
        valid_at: TimeLike | None = None,
        as_of: TimeLike | None = None,
        limit: int | None = None,
        min_lsn: int | None = None,
        space: str | None = None,
    ) -> results.Traversal:
        """RELATION_TRAVERSE: the entities up to ``depth`` hops from ``from_`` and the
        edges walked, over ``types`` only when given."""
        return await self._run(
            operations.traverse(
                from_,
                depth=depth,
                types=types,
                direction=direction,
                valid_at=valid_at,
                as_of=as_of,
                limit=limit,
                space=self._space(space),
            ),
            min_lsn=min_lsn,
        )

    # --- reviews and the schema -----------------------------------------------------

    async def list_reviews(
        self, *, limit: int | None = None, min_lsn: int | None = None, space: str | None = None
    ) -> tuple[results.ReviewItem, ...]:
        """REVIEW_LIST: the contradictions and ambiguous names waiting for a decision."""
        return await self._run(
            operations.list_reviews(limit=limit, space=self._space(space)), min_lsn=min_lsn
        )

    async def decide_review(
        self,
        review: IdLike | results.ReviewItem,
        decision: Decision,
        *,
        into: IdLike | None = None,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> int:
        """REVIEW_DECIDE: settle a review item; returns the write's LSN. A ``merge`` of an
        ambiguous name names the candidate the name means, ``into`` (an entity id),
        and no other decision takes it."""
        return await self._run(
            operations.decide_review(
                review, decision, into=into, space=self._space(space), request_id=request_id
            )
        )

    async def put_schema(
        self,
        *,
        predicates: Iterable[PredicateDecl] | None = None,
        relation_types: Iterable[RelationTypeDecl] | None = None,
        entity_types: Iterable[str] | None = None,
        space: str | None = None,
    ) -> int:
        """SCHEMA_PUT: declare vocabulary; returns the schema's new version.

        Unlike the other methods, no ``space`` means the namespace's schema (in force
        in every space without one of its own), not the facade's space."""
        return await self._run(
            operations.put_schema(
                predicates=predicates,
                relation_types=relation_types,
                entity_types=entity_types,
                space=space,
            )
        )

    async def get_schema(self, *, min_lsn: int | None = None, space: str | None = None) -> Schema:
        """SCHEMA_GET: the namespace's schema, or with ``space`` the one in force there."""
        return await self._run(operations.get_schema(space=space), min_lsn=min_lsn)

    # --- the escape hatch -----------------------------------------------------------

    # EXPLAIN's request extends RECALL's; the opcode follows the exact class, so the
    # narrower overload comes first and wins.
    @overload
    async def call(  # type: ignore[overload-overlap]
        self, request: recall_ops.ExplainRequest
    ) -> recall_ops.ExplainOk: ...
    @overload
    async def call(self, request: memory_ops.Encode) -> memory_ops.EncodeOk: ...
    @overload
    async def call(self, request: recall_ops.Recall) -> recall_ops.RecallOk: ...
    @overload
    async def call(self, request: memory_ops.Forget) -> memory_ops.ForgetOk: ...
    @overload
    async def call(self, request: memory_ops.MemoryGet) -> memory_ops.MemoryGetOk: ...
    @overload
    async def call(self, request: txn_ops.TxnBegin) -> txn_ops.TxnBegun: ...
    @overload
    async def call(self, request: txn_ops.TxnCommit) -> txn_ops.TxnCommitted: ...
    @overload
    async def call(self, request: txn_ops.TxnAbort) -> txn_ops.TxnAborted: ...
    @overload
    async def call(self, request: schema_ops.SchemaPut) -> schema_ops.SchemaPutOk: ...
    @overload
    async def call(self, request: schema_ops.SchemaGet) -> schema_ops.Schema: ...
    @overload
    async def call(self, request: entity_ops.EntityCreate) -> entity_ops.EntityCreateOk: ...
    @overload
    async def call(self, request: entity_ops.EntityGet) -> entity_ops.EntityGetOk: ...
    @overload
    async def call(self, request: entity_ops.EntityUpdate) -> entity_ops.EntityUpdateOk: ...
    @overload
    async def call(self, request: entity_ops.EntityMerge) -> entity_ops.EntityMergeOk: ...
    @overload
    async def call(self, request: entity_ops.EntityUnmerge) -> entity_ops.EntityUnmergeOk: ...
    @overload
    async def call(self, request: entity_ops.EntityResolve) -> entity_ops.EntityResolveOk: ...
    @overload
    async def call(self, request: entity_ops.EntityList) -> entity_ops.EntityListOk: ...
    @overload
    async def call(self, request: entity_ops.EntityTombstone) -> entity_ops.EntityTombstoneOk: ...
    @overload
    async def call(self, request: entity_ops.EntityHistory) -> entity_ops.EntityHistoryOk: ...
    @overload
    async def call(
        self, request: statement_ops.StatementCreate
    ) -> statement_ops.StatementCreateOk: ...
    @overload
    async def call(self, request: statement_ops.StatementGet) -> statement_ops.StatementGetOk: ...
    @overload
    async def call(
        self, request: statement_ops.StatementSupersede
    ) -> statement_ops.StatementSupersedeOk: ...
    @overload
    async def call(
        self, request: statement_ops.StatementTombstone
    ) -> statement_ops.StatementTombstoned: ...
    @overload
    async def call(
        self, request: statement_ops.StatementRetract
    ) -> statement_ops.StatementRetracted: ...
    @overload
    async def call(
        self, request: statement_ops.StatementHistory
    ) -> statement_ops.StatementHistoryOk: ...
    @overload
    async def call(self, request: statement_ops.StatementList) -> statement_ops.StatementListOk: ...
    @overload
    async def call(self, request: relation_ops.RelationCreate) -> relation_ops.RelationCreateOk: ...
    @overload
    async def call(self, request: relation_ops.RelationGet) -> relation_ops.RelationGetOk: ...
    @overload
    async def call(
        self, request: relation_ops.RelationSupersede
    ) -> relation_ops.RelationSupersedeOk: ...
    @overload
    async def call(
        self, request: relation_ops.RelationTombstone
    ) -> relation_ops.RelationTombstoned: ...
    @overload
    async def call(self, request: relation_ops.RelationList) -> relation_ops.RelationListOk: ...
    @overload
    async def call(
        self, request: relation_ops.RelationTraverse
    ) -> relation_ops.RelationTraverseOk: ...
    @overload
    async def call(self, request: review_ops.ReviewList) -> review_ops.ReviewListOk: ...
    @overload
    async def call(self, request: review_ops.ReviewDecide) -> review_ops.ReviewDecided: ...

    async def call(self, request: Message) -> Message:
        """Send any data request; the opcode follows from its class, the facade's space
        fills an unset ``space``, and the retry rules apply. Returns the wire answer."""
        return await self._run(operations.any_request(request, space=self.space))


class AsyncTransaction:
    """``async with db.transaction() as tx:``: TXN_BEGIN on entry, TXN_COMMIT when the
    block ends, TXN_ABORT when it raises; the asyncio twin of
    :class:`~brain.sdk.sync.Transaction`."""

    def __init__(self, brain: AsyncBrain, *, timeout_ms: int | None = None) -> None:
        """A transaction on ``brain``'s transport; ``timeout_ms`` None: the server's default."""
        self.brain = brain
        self.timeout_ms = timeout_ms
        self.txn_id: bytes | None = None
        """The transaction's id, once begun."""
        self.committed: txn_ops.TxnCommitted | None = None
        """TXN_COMMIT's answer (the commit's LSN and each write's answer), once committed."""

    async def __aenter__(self) -> AsyncBrain:
        """Begin the transaction; return the facade joined to it."""
        self.txn_id = await self.brain._run(
            operations.begin(timeout_ms=self.timeout_ms, space=self.brain.space)
        )
        return self.brain.joined(self.txn_id)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Commit, or abort when the block raised (the block's error is what propagates)."""
        assert self.txn_id is not None, "the transaction was never begun"
        if exc_type is None:
            self.committed = await self.brain._run(
                operations.commit(self.txn_id, space=self.brain.space)
            )
            return
        # An abort that fails (the connection went with the error) must not hide the
        # error that ended the block; the server drops the transaction either way.
        with contextlib.suppress(BrainError):
            await self.brain._run(operations.abort(self.txn_id, space=self.brain.space))
