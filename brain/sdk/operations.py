"""Each facade operation as one value: the opcode, the request and how its answer
becomes a result, shared by the blocking and the asyncio facade.

A method of :class:`~brain.sdk.sync.Brain` or :class:`~brain.sdk.aio.AsyncBrain`
builds an :class:`Op` here and runs it on its transport, so both facades send the
same requests and return the same results; the only difference between them is
how they wait. Builders take ``space`` already resolved (the facade's own unless
the call named another) and leave ``txn_id`` unset: :func:`joined` puts a request
into a transaction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from brain.errors import InvalidArgument
from brain.sdk import requests, results
from brain.sdk.calls import opcode_of, with_space
from brain.sdk.requests import EvidenceLike, IdLike, ObjectLike, SubjectLike
from brain.sdk.times import TimeLike, optional_nanos
from brain.wire.messages import (
    control,
    entity_ops,
    memory_ops,
    recall_ops,
    relation_ops,
    review_ops,
    schema_ops,
    statement_ops,
    txn_ops,
)
from brain.wire.opcodes import Opcode, Permission, required_permission
from brain.wire.schema import Message

__all__ = ["Decision", "Direction", "Op", "joined"]

Direction = Literal["out", "in", "both"]
"""Which edges of an entity to follow: outgoing, incoming or both."""

Decision = Literal["keep_both", "supersede", "reject_new", "merge", "distinct"]
"""How a review is settled: the first three for contradictions, the last two for
ambiguous entities (spec/02-data-model.md §7)."""

T = TypeVar("T")
A = TypeVar("A", bound=Message)


@dataclass(frozen=True, slots=True)
class Op(Generic[T]):
    """One request ready to send and the conversion of its answer."""

    opcode: Opcode
    request: Message
    finish: Callable[[Message], T]


def _op(opcode: Opcode, request: Message, answer: type[A], convert: Callable[[A], T]) -> Op[T]:
    def finish(message: Message) -> T:
        # A transport hands back whatever the far end answered; any other class is a
        # broken peer, not something to convert by guesswork.
        if not isinstance(message, answer):
            raise TypeError(
                f"{opcode.name} was answered with {type(message).__name__}, not {answer.__name__}"
            )
        return convert(message)

    return Op(opcode, request, finish)


def _same(message: A) -> A:
    return message


def joined(op: Op[T], txn_id: bytes) -> Op[T]:
    """``op`` as a part of the transaction ``txn_id``.

    A request with a ``txn_id`` field carries it (a write is buffered, a read by id
    sees the buffered writes); another read runs on committed state; another write
    is refused, since sending it outside the transaction would apply it at once
    whatever the transaction's outcome."""
    fields = {f.name for f in dataclasses.fields(op.request)}  # type: ignore[arg-type]
    if "txn_id" in fields:
        if getattr(op.request, "txn_id", None) is not None:
            return op  # the caller named a transaction of its own
        request = dataclasses.replace(op.request, txn_id=txn_id)  # type: ignore[type-var]
        return Op(op.opcode, request, op.finish)
    if required_permission(op.opcode) is Permission.READ:
        return op
    raise InvalidArgument(f"{op.opcode.name} cannot be part of a transaction", field="txn_id")


def any_request(request: Message, *, space: str) -> Op[Message]:
    """The escape hatch's exchange: any data request, its opcode by its class, the
    facade's ``space`` filled in when unset, the wire answer as it came."""
    return Op(opcode_of(request), with_space(request, space), _same)


# --- connection --------------------------------------------------------------------


def ping(nonce: object) -> Op[results.Pong]:
    """PING's exchange."""
    return _op(Opcode.PING, control.Ping(nonce=nonce), control.Pong, results.Pong.from_wire)


# --- memories ----------------------------------------------------------------------


def remember(
    text: str,
    *,
    occurred_at: TimeLike | None,
    context: str | None,
    vector: bytes | None,
    override_forgotten: bool | None,
    space: str,
    request_id: bytes | None,
) -> Op[results.Remembered]:
    """ENCODE."""
    request = requests.encode(
        text,
        occurred_at=occurred_at,
        context=context,
        vector=vector,
        override_forgotten=override_forgotten,
        space=space,
        request_id=request_id,
    )
    return _op(Opcode.ENCODE, request, memory_ops.EncodeOk, results.Remembered.from_wire)


def get_memory(memory: IdLike, *, space: str) -> Op[results.Memory]:
    """MEMORY_GET."""
    request = memory_ops.MemoryGet(space=space, id=requests.record_id(memory, argument="memory"))
    return _op(
        Opcode.MEMORY_GET,
        request,
        memory_ops.MemoryGetOk,
        lambda a: results.Memory.from_wire(a.memory),
    )


def forget(
    memory: IdLike, *, hard: bool, space: str, request_id: bytes | None
) -> Op[results.ForgetResult]:
    """FORGET."""
    request = requests.forget(memory, hard=hard, space=space, request_id=request_id)
    return _op(Opcode.FORGET, request, memory_ops.ForgetOk, results.ForgetResult.from_wire)


# --- recall ------------------------------------------------------------------------


def recall(
    cue: str,
    *,
    top_k: int | None,
    as_of: TimeLike | None,
    valid_at: TimeLike | None,
    valid_from: TimeLike | None,
    valid_to: TimeLike | None,
    records: Iterable[str] | None,
    kinds: Iterable[str] | None,
    predicates: Iterable[str] | None,
    min_confidence: float | None,
    min_relevance: float | None,
    include_superseded: bool | None,
    include_tombstoned: bool | None,
    entity_anchor: IdLike | None,
    explain: bool | None,
    space: str,
) -> Op[results.Recalled]:
    """RECALL."""
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
        space=space,
    )
    return _op(Opcode.RECALL, request, recall_ops.RecallOk, results.Recalled.from_wire)


def explain(
    cue: str,
    *,
    top_k: int | None,
    as_of: TimeLike | None,
    valid_at: TimeLike | None,
    valid_from: TimeLike | None,
    valid_to: TimeLike | None,
    records: Iterable[str] | None,
    kinds: Iterable[str] | None,
    predicates: Iterable[str] | None,
    min_confidence: float | None,
    min_relevance: float | None,
    include_superseded: bool | None,
    include_tombstoned: bool | None,
    entity_anchor: IdLike | None,
    space: str,
) -> Op[results.Explained]:
    """EXPLAIN: RECALL's request, answered with how it was served."""
    recall_request = requests.recall(
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
        explain=None,
        space=space,
    )
    # EXPLAIN's request is RECALL's under its own class, which picks the opcode.
    fields = {f.name: getattr(recall_request, f.name) for f in dataclasses.fields(recall_request)}
    return _op(
        Opcode.EXPLAIN,
        recall_ops.ExplainRequest(**fields),
        recall_ops.ExplainOk,
        results.Explained.from_wire,
    )


# --- statements --------------------------------------------------------------------


def create_statement(
    subject: SubjectLike,
    predicate: str,
    object_: ObjectLike,
    *,
    kind: str,
    subject_type: str | None,
    confidence: float | None,
    evidence: Iterable[EvidenceLike] | None,
    source: str | None,
    valid_from: TimeLike | None,
    valid_to: TimeLike | None,
    event_at: TimeLike | None,
    space: str,
    request_id: bytes | None,
) -> Op[results.StatementWritten]:
    """STATEMENT_CREATE."""
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
    request = requests.statement_create(content, space=space, request_id=request_id)
    return _op(
        Opcode.STATEMENT_CREATE,
        request,
        statement_ops.StatementCreateOk,
        results.StatementWritten.from_wire,
    )


def supersede_statement(
    old: IdLike,
    subject: SubjectLike,
    predicate: str,
    object_: ObjectLike,
    *,
    kind: str,
    subject_type: str | None,
    confidence: float | None,
    evidence: Iterable[EvidenceLike] | None,
    source: str | None,
    valid_from: TimeLike | None,
    valid_to: TimeLike | None,
    event_at: TimeLike | None,
    space: str,
    request_id: bytes | None,
) -> Op[results.StatementWritten]:
    """STATEMENT_SUPERSEDE."""
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
    request = statement_ops.StatementSupersede(
        space=space,
        request_id=requests.request_id_of(request_id),
        old=requests.record_id(old, argument="old"),
        new=content,
    )
    return _op(
        Opcode.STATEMENT_SUPERSEDE,
        request,
        statement_ops.StatementSupersedeOk,
        results.StatementWritten.from_wire,
    )


def tombstone_statement(
    statement: IdLike, *, reason: str | None, space: str, request_id: bytes | None
) -> Op[results.TombstoneResult]:
    """STATEMENT_TOMBSTONE."""
    request = statement_ops.StatementTombstone(
        space=space,
        request_id=requests.request_id_of(request_id),
        id=requests.record_id(statement, argument="statement"),
        reason=reason,
    )
    return _op(
        Opcode.STATEMENT_TOMBSTONE,
        request,
        statement_ops.StatementTombstoned,
        results.TombstoneResult.from_wire,
    )


def retract_statement(
    statement: IdLike, *, space: str, request_id: bytes | None
) -> Op[results.TombstoneResult]:
    """STATEMENT_RETRACT."""
    request = statement_ops.StatementRetract(
        space=space,
        request_id=requests.request_id_of(request_id),
        id=requests.record_id(statement, argument="statement"),
    )
    return _op(
        Opcode.STATEMENT_RETRACT,
        request,
        statement_ops.StatementRetracted,
        results.TombstoneResult.from_wire,
    )


def get_statement(statement: IdLike, *, space: str) -> Op[results.Statement]:
    """STATEMENT_GET."""
    request = statement_ops.StatementGet(
        space=space, id=requests.record_id(statement, argument="statement")
    )
    return _op(
        Opcode.STATEMENT_GET,
        request,
        statement_ops.StatementGetOk,
        lambda a: results.Statement.from_wire(a.statement),
    )


def list_statements(
    *,
    subject: SubjectLike | None,
    subject_type: str | None,
    predicate: str | None,
    kind: str | None,
    valid_at: TimeLike | None,
    as_of: TimeLike | None,
    include_superseded: bool | None,
    include_tombstoned: bool | None,
    limit: int | None,
    cursor: bytes | None,
    space: str,
) -> Op[results.StatementPage]:
    """STATEMENT_LIST."""
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
        space=space,
    )
    return _op(
        Opcode.STATEMENT_LIST,
        request,
        statement_ops.StatementListOk,
        results.StatementPage.from_wire,
    )


def statement_history(statement: IdLike, *, space: str) -> Op[tuple[results.Statement, ...]]:
    """STATEMENT_HISTORY."""
    request = statement_ops.StatementHistory(
        space=space, id=requests.record_id(statement, argument="statement")
    )
    return _op(
        Opcode.STATEMENT_HISTORY,
        request,
        statement_ops.StatementHistoryOk,
        lambda a: tuple(results.Statement.from_wire(s) for s in a.versions),
    )


# --- entities ----------------------------------------------------------------------


def _names(items: Iterable[str] | None, argument: str) -> tuple[str, ...] | None:
    if items is None:
        return None
    if isinstance(items, str):
        # A lone string would otherwise become a tuple of its letters.
        raise TypeError(f"{argument} must be a list of names, not one name")
    return tuple(items)


def create_entity(
    name: str,
    *,
    type_: str | None,
    aliases: Iterable[str] | None,
    attributes: Mapping[str, object] | None,
    space: str,
    request_id: bytes | None,
) -> Op[results.EntityMade]:
    """ENTITY_CREATE."""
    request = entity_ops.EntityCreate(
        space=space,
        request_id=requests.request_id_of(request_id),
        name=name,
        type_=type_,
        aliases=_names(aliases, "aliases"),
        attributes=None if attributes is None else dict(attributes),
    )
    return _op(
        Opcode.ENTITY_CREATE, request, entity_ops.EntityCreateOk, results.EntityMade.from_wire
    )


def get_entity(entity: IdLike, *, as_of: TimeLike | None, space: str) -> Op[results.Entity]:
    """ENTITY_GET."""
    request = entity_ops.EntityGet(
        space=space,
        id=requests.record_id(entity, argument="entity"),
        as_of=optional_nanos(as_of, argument="as_of"),
    )
    return _op(
        Opcode.ENTITY_GET,
        request,
        entity_ops.EntityGetOk,
        lambda a: results.Entity.from_wire(a.entity),
    )


def entity_history(entity: IdLike, *, space: str) -> Op[tuple[results.Entity, ...]]:
    """ENTITY_HISTORY."""
    request = entity_ops.EntityHistory(
        space=space, id=requests.record_id(entity, argument="entity")
    )
    return _op(
        Opcode.ENTITY_HISTORY,
        request,
        entity_ops.EntityHistoryOk,
        lambda a: tuple(results.Entity.from_wire(e) for e in a.versions),
    )


def update_entity(
    entity: IdLike,
    *,
    name: str | None,
    add_aliases: Iterable[str] | None,
    remove_aliases: Iterable[str] | None,
    attributes: Mapping[str, object] | None,
    space: str,
    request_id: bytes | None,
) -> Op[results.Entity]:
    """ENTITY_UPDATE."""
    request = entity_ops.EntityUpdate(
        space=space,
        request_id=requests.request_id_of(request_id),
        id=requests.record_id(entity, argument="entity"),
        name=name,
        add_aliases=_names(add_aliases, "add_aliases"),
        remove_aliases=_names(remove_aliases, "remove_aliases"),
        attributes=None if attributes is None else dict(attributes),
    )
    return _op(
        Opcode.ENTITY_UPDATE,
        request,
        entity_ops.EntityUpdateOk,
        lambda a: results.Entity.from_wire(a.entity),
    )


def merge_entities(
    keep: IdLike, merge: IdLike, *, space: str, request_id: bytes | None
) -> Op[results.Merged]:
    """ENTITY_MERGE."""
    request = entity_ops.EntityMerge(
        space=space,
        request_id=requests.request_id_of(request_id),
        keep=requests.record_id(keep, argument="keep"),
        merge=requests.record_id(merge, argument="merge"),
    )
    return _op(Opcode.ENTITY_MERGE, request, entity_ops.EntityMergeOk, results.Merged.from_wire)


def unmerge_entities(
    merged: IdLike | results.Merged, *, space: str, request_id: bytes | None
) -> Op[int]:
    """ENTITY_UNMERGE of a merge, given by its answer or its ``merge_id``."""
    merge_id = (
        merged.merge_id
        if isinstance(merged, results.Merged)
        else requests.record_id(merged, argument="merged")
    )
    request = entity_ops.EntityUnmerge(
        space=space, request_id=requests.request_id_of(request_id), merge_id=bytes(merge_id)
    )
    return _op(Opcode.ENTITY_UNMERGE, request, entity_ops.EntityUnmergeOk, lambda a: a.lsn)


def resolve_entity(
    name: str, *, type_: str | None, limit: int | None, as_of: TimeLike | None, space: str
) -> Op[results.Resolution]:
    """ENTITY_RESOLVE."""
    request = entity_ops.EntityResolve(
        space=space,
        name=name,
        type_=type_,
        limit=limit,
        as_of=optional_nanos(as_of, argument="as_of"),
    )
    return _op(
        Opcode.ENTITY_RESOLVE, request, entity_ops.EntityResolveOk, results.Resolution.from_wire
    )


def list_entities(
    *,
    type_: str | None,
    prefix: str | None,
    limit: int | None,
    cursor: bytes | None,
    as_of: TimeLike | None,
    space: str,
) -> Op[results.EntityPage]:
    """ENTITY_LIST."""
    request = entity_ops.EntityList(
        space=space,
        type_=type_,
        prefix=prefix,
        limit=limit,
        cursor=cursor,
        as_of=optional_nanos(as_of, argument="as_of"),
    )
    return _op(Opcode.ENTITY_LIST, request, entity_ops.EntityListOk, results.EntityPage.from_wire)


def tombstone_entity(
    entity: IdLike, *, space: str, request_id: bytes | None
) -> Op[results.EntityTombstoned]:
    """ENTITY_TOMBSTONE."""
    request = entity_ops.EntityTombstone(
        space=space,
        request_id=requests.request_id_of(request_id),
        id=requests.record_id(entity, argument="entity"),
    )
    return _op(
        Opcode.ENTITY_TOMBSTONE,
        request,
        entity_ops.EntityTombstoneOk,
        results.EntityTombstoned.from_wire,
    )


# --- relations ---------------------------------------------------------------------


def relation_draft(
    type_: str,
    from_: SubjectLike,
    to: SubjectLike,
    *,
    confidence: float | None,
    evidence: Iterable[EvidenceLike] | None,
    valid_from: TimeLike | None,
    valid_to: TimeLike | None,
) -> relation_ops.RelationDraft:
    """A relation's content, as RELATION_SUPERSEDE's ``new`` carries it."""
    return relation_ops.RelationDraft(
        type_=type_,
        from_=requests.subject_ref(from_, subject_type=None, argument="from_"),
        to=requests.subject_ref(to, subject_type=None, argument="to"),
        confidence=confidence,
        evidence=requests.evidence_list(evidence),
        valid_from=optional_nanos(valid_from, argument="valid_from"),
        valid_to=optional_nanos(valid_to, argument="valid_to"),
    )


def create_relation(
    type_: str,
    from_: SubjectLike,
    to: SubjectLike,
    *,
    confidence: float | None,
    evidence: Iterable[EvidenceLike] | None,
    valid_from: TimeLike | None,
    valid_to: TimeLike | None,
    space: str,
    request_id: bytes | None,
) -> Op[results.RelationWritten]:
    """RELATION_CREATE."""
    content = relation_draft(
        type_,
        from_,
        to,
        confidence=confidence,
        evidence=evidence,
        valid_from=valid_from,
        valid_to=valid_to,
    )
    request = relation_ops.RelationCreate(
        space=space,
        request_id=requests.request_id_of(request_id),
        type_=content.type_,
        from_=content.from_,
        to=content.to,
        confidence=content.confidence,
        evidence=content.evidence,
        valid_from=content.valid_from,
        valid_to=content.valid_to,
    )
    return _op(
        Opcode.RELATION_CREATE,
        request,
        relation_ops.RelationCreateOk,
        results.RelationWritten.from_wire,
    )


def get_relation(relation: IdLike, *, space: str) -> Op[results.Relation]:
    """RELATION_GET."""
    request = relation_ops.RelationGet(
        space=space, id=requests.record_id(relation, argument="relation")
    )
    return _op(
        Opcode.RELATION_GET,
        request,
        relation_ops.RelationGetOk,
        lambda a: results.Relation.from_wire(a.relation),
    )


def supersede_relation(
    old: IdLike,
    type_: str,
    from_: SubjectLike,
    to: SubjectLike,
    *,
    confidence: float | None,
    evidence: Iterable[EvidenceLike] | None,
    valid_from: TimeLike | None,
    valid_to: TimeLike | None,
    space: str,
    request_id: bytes | None,
) -> Op[results.RelationWritten]:
    """RELATION_SUPERSEDE."""
    content = relation_draft(
        type_,
        from_,
        to,
        confidence=confidence,
        evidence=evidence,
        valid_from=valid_from,
        valid_to=valid_to,
    )
    request = relation_ops.RelationSupersede(
        space=space,
        request_id=requests.request_id_of(request_id),
        old=requests.record_id(old, argument="old"),
        new=content,
    )
    return _op(
        Opcode.RELATION_SUPERSEDE,
        request,
        relation_ops.RelationSupersedeOk,
        results.RelationWritten.from_wire,
    )


def tombstone_relation(
    relation: IdLike, *, reason: str | None, space: str, request_id: bytes | None
) -> Op[results.TombstoneResult]:
    """RELATION_TOMBSTONE."""
    request = relation_ops.RelationTombstone(
        space=space,
        request_id=requests.request_id_of(request_id),
        id=requests.record_id(relation, argument="relation"),
        reason=reason,
    )
    return _op(
        Opcode.RELATION_TOMBSTONE,
        request,
        relation_ops.RelationTombstoned,
        results.TombstoneResult.from_wire,
    )


def list_relations(
    entity: IdLike,
    *,
    direction: Direction,
    type_: str | None,
    valid_at: TimeLike | None,
    as_of: TimeLike | None,
    limit: int | None,
    cursor: bytes | None,
    space: str,
) -> Op[results.RelationPage]:
    """RELATION_LIST."""
    request = relation_ops.RelationList(
        space=space,
        entity=requests.record_id(entity, argument="entity"),
        direction=direction,
        type_=type_,
        valid_at=optional_nanos(valid_at, argument="valid_at"),
        as_of=optional_nanos(as_of, argument="as_of"),
        limit=limit,
        cursor=cursor,
    )
    return _op(
        Opcode.RELATION_LIST, request, relation_ops.RelationListOk, results.RelationPage.from_wire
    )


def traverse(
    from_: IdLike,
    *,
    depth: int,
    types: Iterable[str] | None,
    direction: Direction | None,
    valid_at: TimeLike | None,
    as_of: TimeLike | None,
    limit: int | None,
    space: str,
) -> Op[results.Traversal]:
    """RELATION_TRAVERSE."""
    request = relation_ops.RelationTraverse(
        space=space,
        from_=requests.record_id(from_, argument="from_"),
        types=_names(types, "types"),
        direction=direction,
        depth=depth,
        valid_at=optional_nanos(valid_at, argument="valid_at"),
        as_of=optional_nanos(as_of, argument="as_of"),
        limit=limit,
    )
    return _op(
        Opcode.RELATION_TRAVERSE,
        request,
        relation_ops.RelationTraverseOk,
        results.Traversal.from_wire,
    )


# --- reviews and the schema --------------------------------------------------------


def list_reviews(*, limit: int | None, space: str) -> Op[tuple[results.ReviewItem, ...]]:
    """REVIEW_LIST."""
    request = review_ops.ReviewList(space=space, limit=limit)
    return _op(
        Opcode.REVIEW_LIST,
        request,
        review_ops.ReviewListOk,
        lambda a: tuple(results.ReviewItem.from_wire(i) for i in a.items),
    )


def decide_review(
    review: IdLike | results.ReviewItem,
    decision: Decision,
    *,
    into: IdLike | None,
    space: str,
    request_id: bytes | None,
) -> Op[int]:
    """REVIEW_DECIDE; ``into`` is the candidate a ``merge`` of an ambiguous name means."""
    review_id = (
        review.review_id
        if isinstance(review, results.ReviewItem)
        else requests.record_id(review, argument="review")
    )
    request = review_ops.ReviewDecide(
        space=space,
        request_id=requests.request_id_of(request_id),
        review_id=bytes(review_id),
        decision=decision,
        into=None if into is None else requests.record_id(into, argument="into"),
    )
    return _op(Opcode.REVIEW_DECIDE, request, review_ops.ReviewDecided, lambda a: a.lsn)


def put_schema(
    *,
    predicates: Iterable[schema_ops.PredicateDecl] | None,
    relation_types: Iterable[schema_ops.RelationTypeDecl] | None,
    entity_types: Iterable[str] | None,
    space: str | None,
) -> Op[int]:
    """SCHEMA_PUT; ``space`` None declares in the namespace's schema."""
    request = schema_ops.SchemaPut(
        space=space,
        predicates=None if predicates is None else tuple(predicates),
        relation_types=None if relation_types is None else tuple(relation_types),
        entity_types=_names(entity_types, "entity_types"),
    )
    return _op(Opcode.SCHEMA_PUT, request, schema_ops.SchemaPutOk, lambda a: a.version)


def get_schema(*, space: str | None) -> Op[schema_ops.Schema]:
    """SCHEMA_GET; ``space`` None asks for the namespace's schema."""
    return _op(Opcode.SCHEMA_GET, schema_ops.SchemaGet(space=space), schema_ops.Schema, _same)


# --- transactions ------------------------------------------------------------------


def begin(*, timeout_ms: int | None, space: str) -> Op[bytes]:
    """TXN_BEGIN; the answer is the new transaction's id."""
    request = txn_ops.TxnBegin(space=space, timeout_ms=timeout_ms)
    return _op(Opcode.TXN_BEGIN, request, txn_ops.TxnBegun, lambda a: a.txn_id)


def commit(txn_id: bytes, *, space: str) -> Op[txn_ops.TxnCommitted]:
    """TXN_COMMIT."""
    request = txn_ops.TxnCommit(space=space, txn_id=txn_id)
    return _op(Opcode.TXN_COMMIT, request, txn_ops.TxnCommitted, _same)


def abort(txn_id: bytes, *, space: str) -> Op[txn_ops.TxnAborted]:
    """TXN_ABORT."""
    request = txn_ops.TxnAbort(space=space, txn_id=txn_id)
    return _op(Opcode.TXN_ABORT, request, txn_ops.TxnAborted, _same)
