"""``Brain``: the blocking facade, the same class over a socket or an embedded database.

::

    with Brain.connect(api_key=key) as db:            # or Brain.open("my-data")
        m = db.remember("Dan: I moved to Berlin in May.")
        s = db.create_statement("Dan", "lives_in", "Berlin", evidence=[m], valid_from="2024-05-01")
        print(db.render(db.recall("where does Dan live?")))

Every request carries the facade's space unless a call names another; every
write gets a fresh ``request_id`` unless one is given, and keeps it for every
attempt (:mod:`brain.sdk.retry`): a write refused with OVERLOADED is sent again
after ``retry_after_ms``, and over the wire, once after a lost connection, on a
fresh one. Errors are the typed :class:`~brain.errors.BrainError` the request
ended in.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self, overload

from brain.client.render import render_hits
from brain.client.sync import DEFAULT_PORT, DEFAULT_TIMEOUT_S
from brain.errors import ConnectionClosed, NotFound, Overloaded
from brain.sdk import requests, results
from brain.sdk.calls import opcode_of, with_space
from brain.sdk.requests import EvidenceLike, IdLike, ObjectLike, SubjectLike
from brain.sdk.retry import (
    MAX_OVERLOADED_ATTEMPTS,
    RECONNECTS_PER_REQUEST,
    overloaded_wait_s,
    resendable_after_reconnect,
)
from brain.sdk.times import TimeLike
from brain.sdk.transport import EmbeddedTransport, Transport, WireTransport
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
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

if TYPE_CHECKING:
    from brain.engine.database import DatabaseOptions

__all__ = ["DEFAULT_SPACE", "Brain"]

DEFAULT_SPACE = "default"
"""The space a facade uses when none is named: the server's own default."""


class Brain:
    """A Brain database: over the wire (:meth:`connect`) or in this process (:meth:`open`).

    Thread-safe as its transport is: one connection serialises its callers.
    """

    def __init__(self, transport: Transport, *, space: str = DEFAULT_SPACE) -> None:
        """Use ``transport``; ``space`` is the space of every request that names none."""
        self.transport = transport
        self.space = space

    @classmethod
    def connect(
        cls,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        api_key: str,
        space: str = DEFAULT_SPACE,
        timeout: float | None = DEFAULT_TIMEOUT_S,
    ) -> Brain:
        """Connect to a server and authenticate with ``api_key``."""
        return cls(WireTransport(host, port, api_key=api_key, timeout=timeout), space=space)

    @classmethod
    def open(
        cls,
        path: Path | str,
        *,
        namespace: str = "default",
        space: str = DEFAULT_SPACE,
        options: DatabaseOptions | None = None,
    ) -> Brain:
        """Open the embedded database in directory ``path`` (creating it), used as
        ``namespace``; :meth:`close` closes it."""
        from brain.engine.database import Database

        database = Database.open(path, options)
        return cls(EmbeddedTransport(database, namespace=namespace, owns=True), space=space)

    def close(self) -> None:
        """Close the connection, or the embedded database this facade opened."""
        self.transport.close()

    def __enter__(self) -> Self:
        """Use the facade in a ``with`` block that closes it."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the facade."""
        self.close()

    # --- sending --------------------------------------------------------------------

    def _send(self, opcode: Opcode, message: Message) -> Message:
        """Send with the retry rules of :mod:`brain.sdk.retry`; the same message, and so
        the same ``request_id``, on every attempt."""
        overloaded = 0
        reconnects = 0
        while True:
            try:
                return self.transport.request(opcode, message)
            except Overloaded as refused:
                overloaded += 1
                if overloaded >= MAX_OVERLOADED_ATTEMPTS:
                    raise
                time.sleep(overloaded_wait_s(refused))
            except ConnectionClosed:
                if reconnects >= RECONNECTS_PER_REQUEST or not resendable_after_reconnect(
                    opcode, message
                ):
                    raise
                reconnects += 1
                if not self.transport.reconnect():
                    raise

    def _space(self, space: str | None) -> str:
        return self.space if space is None else space

    # --- memories -------------------------------------------------------------------

    def remember(
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
        request = requests.encode(
            text,
            occurred_at=occurred_at,
            context=context,
            vector=vector,
            override_forgotten=override_forgotten,
            space=self._space(space),
            request_id=request_id,
        )
        answer = self._send(Opcode.ENCODE, request)
        assert isinstance(answer, memory_ops.EncodeOk)
        return results.Remembered.from_wire(answer)

    def get_memory(self, memory: IdLike, *, space: str | None = None) -> results.Memory:
        """MEMORY_GET: one memory by id."""
        request = memory_ops.MemoryGet(
            space=self._space(space), id=requests.record_id(memory, argument="memory")
        )
        answer = self._send(Opcode.MEMORY_GET, request)
        assert isinstance(answer, memory_ops.MemoryGetOk)
        return results.Memory.from_wire(answer.memory)

    def forget(
        self,
        memory: IdLike,
        *,
        hard: bool = False,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.ForgetResult:
        """FORGET: forget a memory, softly (recall no longer finds it) or ``hard``
        (its text is gone for good); statements resting on it alone are tombstoned."""
        request = requests.forget(
            memory, hard=hard, space=self._space(space), request_id=request_id
        )
        answer = self._send(Opcode.FORGET, request)
        assert isinstance(answer, memory_ops.ForgetOk)
        return results.ForgetResult.from_wire(answer)

    # --- recall ---------------------------------------------------------------------

    def recall(
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
        space: str | None = None,
    ) -> results.Recalled:
        """RECALL: statements and memories for ``cue``, best first (spec/04-retrieval.md).

        ``as_of`` asks what was believed at an instant; ``valid_at`` what was true
        in the world then. Left-out arguments take the server's defaults."""
        request = requests.recall(
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
        )
        answer = self._send(Opcode.RECALL, request)
        assert isinstance(answer, recall_ops.RecallOk)
        return results.Recalled.from_wire(answer)

    def render(
        self,
        found: results.Recalled | Iterable[results.Hit],
        *,
        max_chars: int | None = None,
        space: str | None = None,
    ) -> str:
        """The hits as prompt text that marks stored text as data
        (:func:`brain.client.render.render_hits`), entities shown by name: each entity
        the hits name is looked up once (ENTITY_GET)."""
        hits = requests.hits_of(found)
        names: dict[bytes, str] = {}
        for entity in requests.entity_ids(hits):
            # An entity gone since the recall is shown by its id.
            with contextlib.suppress(NotFound):
                names[entity] = self.get_entity(entity, space=space).name
        return render_hits([hit.wire for hit in hits], max_chars=max_chars, names=names)

    # --- statements -----------------------------------------------------------------

    def create_statement(
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
        content = requests.draft(
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
        )
        request = requests.statement_create(
            content, space=self._space(space), request_id=request_id
        )
        answer = self._send(Opcode.STATEMENT_CREATE, request)
        assert isinstance(answer, statement_ops.StatementCreateOk)
        return results.StatementWritten.from_wire(answer)

    def supersede_statement(
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
        request = statement_ops.StatementSupersede(
            space=self._space(space),
            request_id=requests.request_id_of(request_id),
            old=requests.record_id(old, argument="old"),
            new=requests.draft(
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
            ),
        )
        answer = self._send(Opcode.STATEMENT_SUPERSEDE, request)
        assert isinstance(answer, statement_ops.StatementSupersedeOk)
        return results.StatementWritten.from_wire(answer)

    def get_statement(self, statement: IdLike, *, space: str | None = None) -> results.Statement:
        """STATEMENT_GET: one statement by id."""
        request = statement_ops.StatementGet(
            space=self._space(space), id=requests.record_id(statement, argument="statement")
        )
        answer = self._send(Opcode.STATEMENT_GET, request)
        assert isinstance(answer, statement_ops.StatementGetOk)
        return results.Statement.from_wire(answer.statement)

    def list_statements(
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
        space: str | None = None,
    ) -> results.StatementPage:
        """STATEMENT_LIST: statements through the filter chain, oldest record first;
        pass the page's ``cursor`` back for the next page."""
        request = requests.statement_list(
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
        )
        answer = self._send(Opcode.STATEMENT_LIST, request)
        assert isinstance(answer, statement_ops.StatementListOk)
        return results.StatementPage.from_wire(answer)

    def statement_history(
        self, statement: IdLike, *, space: str | None = None
    ) -> tuple[results.Statement, ...]:
        """STATEMENT_HISTORY: every version of the chain holding ``statement``, oldest first."""
        request = statement_ops.StatementHistory(
            space=self._space(space), id=requests.record_id(statement, argument="statement")
        )
        answer = self._send(Opcode.STATEMENT_HISTORY, request)
        assert isinstance(answer, statement_ops.StatementHistoryOk)
        return tuple(results.Statement.from_wire(s) for s in answer.versions)

    # --- entities -------------------------------------------------------------------

    def get_entity(self, entity: IdLike, *, space: str | None = None) -> results.Entity:
        """ENTITY_GET: one entity by id."""
        request = entity_ops.EntityGet(
            space=self._space(space), id=requests.record_id(entity, argument="entity")
        )
        answer = self._send(Opcode.ENTITY_GET, request)
        assert isinstance(answer, entity_ops.EntityGetOk)
        return results.Entity.from_wire(answer.entity)

    # --- the escape hatch -----------------------------------------------------------

    # EXPLAIN's request extends RECALL's; the opcode follows the exact class, so the
    # narrower overload comes first and wins.
    @overload
    def call(  # type: ignore[overload-overlap]
        self, request: recall_ops.ExplainRequest
    ) -> recall_ops.ExplainOk: ...
    @overload
    def call(self, request: memory_ops.Encode) -> memory_ops.EncodeOk: ...
    @overload
    def call(self, request: recall_ops.Recall) -> recall_ops.RecallOk: ...
    @overload
    def call(self, request: memory_ops.Forget) -> memory_ops.ForgetOk: ...
    @overload
    def call(self, request: memory_ops.MemoryGet) -> memory_ops.MemoryGetOk: ...
    @overload
    def call(self, request: txn_ops.TxnBegin) -> txn_ops.TxnBegun: ...
    @overload
    def call(self, request: txn_ops.TxnCommit) -> txn_ops.TxnCommitted: ...
    @overload
    def call(self, request: txn_ops.TxnAbort) -> txn_ops.TxnAborted: ...
    @overload
    def call(self, request: schema_ops.SchemaPut) -> schema_ops.SchemaPutOk: ...
    @overload
    def call(self, request: schema_ops.SchemaGet) -> schema_ops.Schema: ...
    @overload
    def call(self, request: entity_ops.EntityCreate) -> entity_ops.EntityCreateOk: ...
    @overload
    def call(self, request: entity_ops.EntityGet) -> entity_ops.EntityGetOk: ...
    @overload
    def call(self, request: entity_ops.EntityUpdate) -> entity_ops.EntityUpdateOk: ...
    @overload
    def call(self, request: entity_ops.EntityMerge) -> entity_ops.EntityMergeOk: ...
    @overload
    def call(self, request: entity_ops.EntityUnmerge) -> entity_ops.EntityUnmergeOk: ...
    @overload
    def call(self, request: entity_ops.EntityResolve) -> entity_ops.EntityResolveOk: ...
    @overload
    def call(self, request: entity_ops.EntityList) -> entity_ops.EntityListOk: ...
    @overload
    def call(self, request: entity_ops.EntityTombstone) -> entity_ops.EntityTombstoneOk: ...
    @overload
    def call(self, request: statement_ops.StatementCreate) -> statement_ops.StatementCreateOk: ...
    @overload
    def call(self, request: statement_ops.StatementGet) -> statement_ops.StatementGetOk: ...
    @overload
    def call(
        self, request: statement_ops.StatementSupersede
    ) -> statement_ops.StatementSupersedeOk: ...
    @overload
    def call(
        self, request: statement_ops.StatementTombstone
    ) -> statement_ops.StatementTombstoned: ...
    @overload
    def call(self, request: statement_ops.StatementRetract) -> statement_ops.StatementRetracted: ...
    @overload
    def call(self, request: statement_ops.StatementHistory) -> statement_ops.StatementHistoryOk: ...
    @overload
    def call(self, request: statement_ops.StatementList) -> statement_ops.StatementListOk: ...
    @overload
    def call(self, request: relation_ops.RelationCreate) -> relation_ops.RelationCreateOk: ...
    @overload
    def call(self, request: relation_ops.RelationGet) -> relation_ops.RelationGetOk: ...
    @overload
    def call(self, request: relation_ops.RelationSupersede) -> relation_ops.RelationSupersedeOk: ...
    @overload
    def call(self, request: relation_ops.RelationTombstone) -> relation_ops.RelationTombstoned: ...
    @overload
    def call(self, request: relation_ops.RelationList) -> relation_ops.RelationListOk: ...
    @overload
    def call(self, request: relation_ops.RelationTraverse) -> relation_ops.RelationTraverseOk: ...
    @overload
    def call(self, request: review_ops.ReviewList) -> review_ops.ReviewListOk: ...
    @overload
    def call(self, request: review_ops.ReviewDecide) -> review_ops.ReviewDecided: ...

    def call(self, request: Message) -> Message:
        """Send any data request; the opcode follows from its class, the facade's space
        fills an unset ``space``, and the retry rules apply. Returns the wire answer."""
        return self._send(opcode_of(request), with_space(request, self.space))
