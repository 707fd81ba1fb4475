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
import copy
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self, TypeVar, overload

from brain.client.render import render_hits
from brain.client.sync import DEFAULT_PORT, DEFAULT_TIMEOUT_S
from brain.errors import BrainError, ConnectionClosed, InvalidArgument, NotFound, Overloaded
from brain.sdk import operations, requests, results
from brain.sdk.consistency import ReadYourWrites
from brain.sdk.operations import Decision, Direction, Op
from brain.sdk.requests import EvidenceLike, IdLike, ObjectLike, SubjectLike
from brain.sdk.retry import Attempts
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
from brain.wire.messages.schema_ops import PredicateDecl, RelationTypeDecl, Schema
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

if TYPE_CHECKING:
    from brain.engine.database import DatabaseOptions

__all__ = ["DEFAULT_SPACE", "Brain", "Transaction"]

T = TypeVar("T")

DEFAULT_SPACE = "default"
"""The space a facade uses when none is named: the server's own default."""


class Brain:
    """A Brain database: over the wire (:meth:`connect`) or in this process (:meth:`open`).

    Thread-safe as its transport is: one connection serialises its callers.
    """

    def __init__(
        self, transport: Transport, *, space: str = DEFAULT_SPACE, read_your_writes: bool = False
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
    def connect(
        cls,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        api_key: str,
        space: str = DEFAULT_SPACE,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        read_your_writes: bool = False,
    ) -> Brain:
        """Connect to a server and authenticate with ``api_key``; ``read_your_writes``
        as for the constructor."""
        return cls(
            WireTransport(host, port, api_key=api_key, timeout=timeout),
            space=space,
            read_your_writes=read_your_writes,
        )

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
        attempts = Attempts(opcode, message)
        while True:
            try:
                return self.transport.request(opcode, message)
            except Overloaded as refused:
                wait = attempts.wait_after(refused)
                if wait is None:
                    raise
                time.sleep(wait)
            except ConnectionClosed:
                if not attempts.may_reconnect() or not self.transport.reconnect():
                    raise

    def _run(self, op: Op[T], *, min_lsn: int | None = None) -> T:
        """Send ``op`` (in this facade's transaction, if any; a read with ``min_lsn``,
        or the last LSN seen under read-your-writes) and convert its answer."""
        if self.txn_id is not None:
            op = operations.joined(op, self.txn_id)
        request = self.consistency.apply(op.request, min_lsn)
        answer = self._send(op.opcode, request)
        self.consistency.saw(answer)
        return op.finish(answer)

    def _space(self, space: str | None) -> str:
        return self.space if space is None else space

    def ping(self, nonce: object = None) -> results.Pong:
        """PING: the server's clock, and ``nonce`` echoed; embedded, this process's clock."""
        return self._run(operations.ping(nonce))

    # --- transactions ---------------------------------------------------------------

    def transaction(self, *, timeout_ms: int | None = None) -> Transaction:
        """A transaction (spec/05-durability.md §8) for a ``with`` block::

            with db.transaction() as tx:
                tx.create_statement("Dan", "lives_in", "Berlin")

        ``tx`` is this facade joined to the transaction: its writes are buffered and
        applied together when the block ends, or dropped when it raises."""
        if self.txn_id is not None:
            raise InvalidArgument("transactions do not nest", field="txn_id")
        return Transaction(self, timeout_ms=timeout_ms)

    def joined(self, txn_id: bytes) -> Self:
        """This facade, sharing its transport, with every request joining ``txn_id``
        (writes are buffered, reads by id see them; a write that cannot be part of a
        transaction raises InvalidArgument)."""
        bound = copy.copy(self)
        bound.txn_id = txn_id
        return bound

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
        return self._run(
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

    def get_memory(
        self, memory: IdLike, *, min_lsn: int | None = None, space: str | None = None
    ) -> results.Memory:
        """MEMORY_GET: one memory by id."""
        return self._run(operations.get_memory(memory, space=self._space(space)), min_lsn=min_lsn)

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
        return self._run(
            operations.forget(memory, hard=hard, space=self._space(space), request_id=request_id)
        )

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
        min_lsn: int | None = None,
        space: str | None = None,
    ) -> results.Recalled:
        """RECALL: statements and memories for ``cue``, best first (spec/04-retrieval.md).

        ``as_of`` asks what was believed at an instant; ``valid_at`` what was true
        in the world then. Left-out arguments take the server's defaults."""
        return self._run(
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

    def explain(
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
        return self._run(
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
        return self._run(
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
        return self._run(
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

    def tombstone_statement(
        self,
        statement: IdLike,
        *,
        reason: str | None = None,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.TombstoneResult:
        """STATEMENT_TOMBSTONE: soft-delete a statement; ``reason`` goes to the audit log."""
        return self._run(
            operations.tombstone_statement(
                statement, reason=reason, space=self._space(space), request_id=request_id
            )
        )

    def retract_statement(
        self,
        statement: IdLike,
        *,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.TombstoneResult:
        """STATEMENT_RETRACT: withdraw a statement and erase its content, keeping only
        its ids, chain links and times."""
        return self._run(
            operations.retract_statement(statement, space=self._space(space), request_id=request_id)
        )

    def get_statement(
        self, statement: IdLike, *, min_lsn: int | None = None, space: str | None = None
    ) -> results.Statement:
        """STATEMENT_GET: one statement by id."""
        return self._run(
            operations.get_statement(statement, space=self._space(space)), min_lsn=min_lsn
        )

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
        min_lsn: int | None = None,
        space: str | None = None,
    ) -> results.StatementPage:
        """STATEMENT_LIST: statements through the filter chain, oldest record first;
        pass the page's ``cursor`` back for the next page."""
        return self._run(
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

    def statement_history(
        self, statement: IdLike, *, min_lsn: int | None = None, space: str | None = None
    ) -> tuple[results.Statement, ...]:
        """STATEMENT_HISTORY: every version of the chain holding ``statement``, oldest first."""
        return self._run(
            operations.statement_history(statement, space=self._space(space)), min_lsn=min_lsn
        )

    # --- entities -------------------------------------------------------------------

    def create_entity(
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
        return self._run(
            operations.create_entity(
                name,
                type_=type_,
                aliases=aliases,
                attributes=attributes,
                space=self._space(space),
                request_id=request_id,
            )
        )

    def get_entity(
        self,
        entity: IdLike,
        *,
        as_of: TimeLike | None = None,
        min_lsn: int | None = None,
        space: str | None = None,
    ) -> results.Entity:
        """ENTITY_GET: one entity by id, as it is now or as it was believed at ``as_of``."""
        return self._run(
            operations.get_entity(entity, as_of=as_of, space=self._space(space)), min_lsn=min_lsn
        )

    def entity_history(
        self, entity: IdLike, *, min_lsn: int | None = None, space: str | None = None
    ) -> tuple[results.Entity, ...]:
        """ENTITY_HISTORY: every version of the entity on the record axis, oldest first."""
        return self._run(
            operations.entity_history(entity, space=self._space(space)), min_lsn=min_lsn
        )

    def update_entity(
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
        return self._run(
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

    def merge_entities(
        self,
        keep: IdLike,
        merge: IdLike,
        *,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.Merged:
        """ENTITY_MERGE: ``merge`` becomes an alias of ``keep`` (spec/02-data-model.md §4)."""
        return self._run(
            operations.merge_entities(keep, merge, space=self._space(space), request_id=request_id)
        )

    def unmerge_entities(
        self,
        merged: IdLike | results.Merged,
        *,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> int:
        """ENTITY_UNMERGE: restore exactly the state before a merge (its answer or its
        ``merge_id``); returns the write's LSN."""
        return self._run(
            operations.unmerge_entities(merged, space=self._space(space), request_id=request_id)
        )

    def resolve_entity(
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
        return self._run(
            operations.resolve_entity(
                name, type_=type_, limit=limit, as_of=as_of, space=self._space(space)
            ),
            min_lsn=min_lsn,
        )

    def list_entities(
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
        return self._run(
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

    def tombstone_entity(
        self, entity: IdLike, *, space: str | None = None, request_id: bytes | None = None
    ) -> results.EntityTombstoned:
        """ENTITY_TOMBSTONE: soft-delete an entity."""
        return self._run(
            operations.tombstone_entity(entity, space=self._space(space), request_id=request_id)
        )

    # --- relations ------------------------------------------------------------------

    def create_relation(
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
        return self._run(
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

    def get_relation(
        self, relation: IdLike, *, min_lsn: int | None = None, space: str | None = None
    ) -> results.Relation:
        """RELATION_GET: one relation by id."""
        return self._run(
            operations.get_relation(relation, space=self._space(space)), min_lsn=min_lsn
        )

    def supersede_relation(
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
        return self._run(
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

    def tombstone_relation(
        self,
        relation: IdLike,
        *,
        reason: str | None = None,
        space: str | None = None,
        request_id: bytes | None = None,
    ) -> results.TombstoneResult:
        """RELATION_TOMBSTONE: soft-delete a relation; ``reason`` goes to the audit log."""
        return self._run(
            operations.tombstone_relation(
                relation, reason=reason, space=self._space(space), request_id=request_id
            )
        )

    def list_relations(
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
        return self._run(
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

    def traverse(
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
        return self._run(
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

    def list_reviews(
        self, *, limit: int | None = None, min_lsn: int | None = None, space: str | None = None
    ) -> tuple[results.ReviewItem, ...]:
        """REVIEW_LIST: the contradictions and ambiguous names waiting for a decision."""
        return self._run(
            operations.list_reviews(limit=limit, space=self._space(space)), min_lsn=min_lsn
        )

    def decide_review(
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
        return self._run(
            operations.decide_review(
                review, decision, into=into, space=self._space(space), request_id=request_id
            )
        )

    def put_schema(
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
        return self._run(
            operations.put_schema(
                predicates=predicates,
                relation_types=relation_types,
                entity_types=entity_types,
                space=space,
            )
        )

    def get_schema(self, *, min_lsn: int | None = None, space: str | None = None) -> Schema:
        """SCHEMA_GET: the namespace's schema, or with ``space`` the one in force there."""
        return self._run(operations.get_schema(space=space), min_lsn=min_lsn)

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
    def call(self, request: entity_ops.EntityHistory) -> entity_ops.EntityHistoryOk: ...
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
        return self._run(operations.any_request(request, space=self.space))


class Transaction:
    """``with db.transaction() as tx:``: TXN_BEGIN on entry, TXN_COMMIT when the block
    ends, TXN_ABORT when it raises. ``tx`` is the facade joined to the transaction
    (:meth:`Brain.joined`); it shares the facade's transport, so closing it closes both.

    A transaction lives in its connection: one lost mid-way is gone, and its
    requests are not sent again on a new connection (:mod:`brain.sdk.retry`)."""

    def __init__(self, brain: Brain, *, timeout_ms: int | None = None) -> None:
        """A transaction on ``brain``'s transport; ``timeout_ms`` None: the server's default."""
        self.brain = brain
        self.timeout_ms = timeout_ms
        self.txn_id: bytes | None = None
        """The transaction's id, once begun."""
        self.committed: txn_ops.TxnCommitted | None = None
        """TXN_COMMIT's answer (the commit's LSN and each write's answer), once committed."""

    def __enter__(self) -> Brain:
        """Begin the transaction; return the facade joined to it."""
        self.txn_id = self.brain._run(
            operations.begin(timeout_ms=self.timeout_ms, space=self.brain.space)
        )
        return self.brain.joined(self.txn_id)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Commit, or abort when the block raised (the block's error is what propagates)."""
        assert self.txn_id is not None, "the transaction was never begun"
        if exc_type is None:
            self.committed = self.brain._run(operations.commit(self.txn_id, space=self.brain.space))
            return
        # An abort that fails (the connection went with the error) must not hide the
        # error that ended the block; the server drops the transaction either way.
        with contextlib.suppress(BrainError):
            self.brain._run(operations.abort(self.txn_id, space=self.brain.space))
