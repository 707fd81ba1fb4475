"""Building wire requests from the facade's arguments, shared by the blocking and the
asyncio facade so both build exactly the same messages.

Arguments take the forms people have at hand: a subject as a name, an id or a
record the facade returned; a statement object as a Python value; evidence as
memories or their ids; times in any form :func:`~brain.sdk.times.to_nanos` takes.
A wrong one raises InvalidArgument or TypeError naming the argument.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable
from typing import Final

from brain.errors import InvalidArgument
from brain.sdk import results
from brain.sdk.times import TimeLike, optional_nanos, to_nanos
from brain.wire.messages import memory_ops, recall_ops, statement_ops, values
from brain.wire.messages import records as wire_records

__all__ = [
    "EvidenceLike",
    "IdLike",
    "ObjectLike",
    "SubjectLike",
    "evidence_list",
    "new_request_id",
    "object_value",
    "record_id",
    "subject_ref",
]

ID_BYTES: Final = 16
"""A record id's length on the wire (UUIDv7)."""

HasId = (
    results.Memory
    | results.Statement
    | results.Entity
    | results.Relation
    | results.Remembered
    | results.StatementWritten
    | results.EntityMade
    | results.RelationWritten
    | results.Hit
)
"""Facade results that name one record by ``id``."""

IdLike = bytes | str | HasId
"""A record named by its 16-byte id, its 32 hex digits, or a facade result."""

SubjectLike = str | bytes | results.Ref | results.Name | results.Entity | results.EntityMade
"""A subject or relation end: a name (found or created by the server), an entity id,
or an entity (a memory too, as :class:`~brain.sdk.results.Ref` or Memory)."""

ObjectLike = (
    str
    | int
    | float
    | bool
    | datetime.datetime
    | results.Ref
    | results.Entity
    | results.EntityMade
    | results.Memory
    | results.Remembered
    | results.Statement
    | results.StatementWritten
)
"""A statement's object: text, integer, float, boolean, an aware datetime (a time),
or a record (an entity, a memory, another statement)."""

EvidenceLike = bytes | str | results.Memory | results.Remembered | results.Evidence
"""A memory cited as evidence."""


def new_request_id() -> bytes:
    """A fresh idempotency key: 16 random bytes (spec/01-wire.md §4)."""
    return os.urandom(ID_BYTES)


def record_id(value: IdLike, *, argument: str) -> bytes:
    """The 16-byte id ``value`` names."""
    if isinstance(value, bytes):
        raw = bytes(value)
    elif isinstance(value, str):
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raise InvalidArgument(
                f"{argument}: {value!r} is not an id in hex", field=argument
            ) from None
    elif isinstance(value, HasId):
        raw = bytes(value.id)
    else:
        raise TypeError(
            f"{argument} must be an id (bytes or hex) or a record, not {type(value).__name__}"
        )
    if len(raw) != ID_BYTES:
        raise InvalidArgument(
            f"{argument}: an id has {ID_BYTES} bytes, got {len(raw)}", field=argument
        )
    return raw


def request_id_of(value: bytes | None) -> bytes:
    """The caller's ``request_id``, or a fresh one."""
    return new_request_id() if value is None else record_id(value, argument="request_id")


def subject_ref(value: SubjectLike, *, subject_type: str | None, argument: str) -> values.Ref:
    """The wire reference for a subject or relation end."""
    if isinstance(value, str):
        return values.NameRef(name=value, type_=subject_type)
    if subject_type is not None and not isinstance(value, results.Name):
        raise InvalidArgument(
            f"{argument}_type applies to a subject given by name", field=f"{argument}_type"
        )
    if isinstance(value, results.Name):
        return values.NameRef(name=value.name, type_=subject_type or value.type_)
    if isinstance(value, results.Ref):
        if value.kind == "entity":
            return values.EntityRef(entity=bytes(value.id))
        if value.kind == "memory":
            return values.MemoryRef(memory=bytes(value.id))
        raise InvalidArgument(f"{argument}: a {value.kind} cannot be a subject", field=argument)
    if isinstance(value, results.Entity | results.EntityMade):
        return values.EntityRef(entity=bytes(value.id))
    if isinstance(value, bytes):
        return values.EntityRef(entity=record_id(value, argument=argument))
    raise TypeError(
        f"{argument} must be a name, an entity id or an entity, not {type(value).__name__}"
    )


def object_value(value: ObjectLike, *, argument: str = "object") -> values.Value:
    """The wire value for a statement's object."""
    # bool before int: True is an int to Python, a boolean to the wire.
    if isinstance(value, bool):
        return values.BoolValue(bool_=value)
    if isinstance(value, int):
        return values.IntValue(int_=value)
    if isinstance(value, float):
        return values.FloatValue(float_=value)
    if isinstance(value, str):
        return values.TextValue(text=value)
    if isinstance(value, datetime.datetime):
        return values.TimeValue(time=to_nanos(value, argument=argument))
    if isinstance(value, results.Ref):
        raw = bytes(value.id)
        if value.kind == "entity":
            return values.EntityValue(entity=raw)
        if value.kind == "memory":
            return values.MemoryValue(memory=raw)
        if value.kind == "statement":
            return values.StatementValue(statement=raw)
        raise InvalidArgument(f"{argument}: a pending name cannot be an object", field=argument)
    if isinstance(value, results.Entity | results.EntityMade):
        return values.EntityValue(entity=bytes(value.id))
    if isinstance(value, results.Memory | results.Remembered):
        return values.MemoryValue(memory=bytes(value.id))
    if isinstance(value, results.Statement | results.StatementWritten):
        return values.StatementValue(statement=bytes(value.id))
    raise TypeError(
        f"{argument} must be text, a number, a boolean, a datetime or a record, "
        f"not {type(value).__name__}"
    )


def evidence_list(
    items: Iterable[EvidenceLike] | None, *, argument: str = "evidence"
) -> tuple[wire_records.Evidence, ...] | None:
    """The wire evidence entries; a memory's SHA-256 pins the text cited when known."""
    if items is None:
        return None
    if isinstance(items, bytes | str):
        raise TypeError(f"{argument} must be a list of memories or ids, not one")
    entries: list[wire_records.Evidence] = []
    for item in items:
        if isinstance(item, results.Evidence):
            entries.append(wire_records.Evidence(memory=bytes(item.memory), sha256=item.sha256))
        elif isinstance(item, results.Memory | results.Remembered):
            entries.append(wire_records.Evidence(memory=bytes(item.id), sha256=item.sha256))
        else:
            entries.append(wire_records.Evidence(memory=record_id(item, argument=argument)))
    return tuple(entries)


def encode(
    text: str,
    *,
    occurred_at: TimeLike | None,
    context: str | None,
    vector: bytes | None,
    override_forgotten: bool | None,
    space: str,
    request_id: bytes | None,
    txn_id: bytes | None = None,
) -> memory_ops.Encode:
    """ENCODE's request."""
    return memory_ops.Encode(
        space=space,
        request_id=request_id_of(request_id),
        txn_id=txn_id,
        text=text,
        occurred_at=optional_nanos(occurred_at, argument="occurred_at"),
        context=context,
        vector=vector,
        override_forgotten=override_forgotten,
    )


def forget(
    memory: IdLike, *, hard: bool, space: str, request_id: bytes | None
) -> memory_ops.Forget:
    """FORGET's request."""
    return memory_ops.Forget(
        space=space,
        request_id=request_id_of(request_id),
        memory=record_id(memory, argument="memory"),
        mode="hard" if hard else "soft",
    )


def draft(
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
) -> statement_ops.StatementDraft:
    """A statement's content, as STATEMENT_SUPERSEDE's ``new`` carries it."""
    return statement_ops.StatementDraft(
        kind=kind,
        subject=subject_ref(subject, subject_type=subject_type, argument="subject"),
        predicate=predicate,
        object_=object_value(object_),
        confidence=confidence,
        evidence=evidence_list(evidence),
        source=source,
        valid_from=optional_nanos(valid_from, argument="valid_from"),
        valid_to=optional_nanos(valid_to, argument="valid_to"),
        event_at=optional_nanos(event_at, argument="event_at"),
    )


def statement_create(
    content: statement_ops.StatementDraft,
    *,
    space: str,
    request_id: bytes | None,
    txn_id: bytes | None = None,
) -> statement_ops.StatementCreate:
    """STATEMENT_CREATE's request from a statement's content."""
    return statement_ops.StatementCreate(
        space=space,
        request_id=request_id_of(request_id),
        txn_id=txn_id,
        kind=content.kind,
        subject=content.subject,
        predicate=content.predicate,
        object_=content.object_,
        confidence=content.confidence,
        evidence=content.evidence,
        source=content.source,
        valid_from=content.valid_from,
        valid_to=content.valid_to,
        event_at=content.event_at,
    )


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
) -> recall_ops.Recall:
    """RECALL's request."""
    return recall_ops.Recall(
        space=space,
        cue=cue,
        top_k=top_k,
        as_of=optional_nanos(as_of, argument="as_of"),
        valid_at=optional_nanos(valid_at, argument="valid_at"),
        valid_from=optional_nanos(valid_from, argument="valid_from"),
        valid_to=optional_nanos(valid_to, argument="valid_to"),
        records=_strings(records, "records"),
        kinds=_strings(kinds, "kinds"),
        predicates=_strings(predicates, "predicates"),
        min_confidence=min_confidence,
        min_relevance=min_relevance,
        include_superseded=include_superseded,
        include_tombstoned=include_tombstoned,
        entity_anchor=None
        if entity_anchor is None
        else record_id(entity_anchor, argument="entity_anchor"),
        explain=explain,
    )


def _strings(items: Iterable[str] | None, argument: str) -> tuple[str, ...] | None:
    if items is None:
        return None
    if isinstance(items, str):
        # A lone string would otherwise become a tuple of its letters.
        raise TypeError(f"{argument} must be a list of strings, not one string")
    return tuple(items)


def statement_list(
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
) -> statement_ops.StatementList:
    """STATEMENT_LIST's request."""
    return statement_ops.StatementList(
        space=space,
        subject=None
        if subject is None
        else subject_ref(subject, subject_type=subject_type, argument="subject"),
        predicate=predicate,
        kind=kind,
        valid_at=optional_nanos(valid_at, argument="valid_at"),
        as_of=optional_nanos(as_of, argument="as_of"),
        include_superseded=include_superseded,
        include_tombstoned=include_tombstoned,
        limit=limit,
        cursor=cursor,
    )


def hits_of(found: results.Recalled | Iterable[results.Hit]) -> tuple[results.Hit, ...]:
    """The hits of a recall's answer, or the hits themselves."""
    if isinstance(found, results.Recalled):
        return found.hits
    hits = tuple(found)
    for hit in hits:
        if not isinstance(hit, results.Hit):
            raise TypeError(f"render takes a recall's answer or its hits, not {type(hit).__name__}")
    return hits


def entity_ids(hits: Iterable[results.Hit]) -> list[bytes]:
    """The entities the hits' statements name, in order of first appearance, each once."""
    seen: dict[bytes, None] = {}
    for hit in hits:
        statement = hit.statement
        if statement is None:
            continue
        for part in (statement.subject, statement.object_):
            if isinstance(part, results.Ref) and part.kind == "entity":
                seen.setdefault(bytes(part.id), None)
    return list(seen)
