"""Field types shared by many messages: ids, times, scopes, refs and values.

Each alias is a type plus the constraints spec/01-wire.md §2 and §4 put on it, so a
message field declared as ``Id`` is a 16-byte byte string wherever it appears.
"""

from __future__ import annotations

from typing import Annotated, Final

from brain.wire.schema import (
    Choice,
    Finite,
    Label,
    Len,
    Message,
    Range,
    TextPattern,
    Time,
    wire_message,
)

__all__ = [
    "I64",
    "MAX_LIST_LIMIT",
    "MAX_PREDICATE_CHARS",
    "Confidence",
    "Cursor",
    "EntityRef",
    "Id",
    "Limit",
    "MemoryRef",
    "NameRef",
    "Nanos",
    "PendingRef",
    "Predicate",
    "Ref",
    "RelationType",
    "Sha256",
    "Space",
    "SubjectRef",
    "UInt",
    "Value",
    "Vector",
]

U64_MAX: Final = (1 << 64) - 1
I64_MIN: Final = -(1 << 63)
I64_MAX: Final = (1 << 63) - 1

MAX_LIST_LIMIT: Final = 1000
"""Largest page a list operation returns (spec/01-wire.md §9, STATEMENT_LIST)."""

MAX_NAME_CHARS: Final = 1024
"""Longest entity name, alias or entity type: names are labels, not documents."""

MAX_PREDICATE_CHARS: Final = 1024
"""Longest predicate or relation type: a vocabulary word, compared and hashed on
every write of it, not a sentence."""

MAX_CURSOR_BYTES: Final = 1024
"""Longest list cursor: an opaque server token of a few dozen bytes in practice."""

MAX_VECTOR_BYTES: Final = 4 * 8192
"""Longest embedding: 8192 float32 values, twice the widest common embedding model."""

Id = Annotated[bytes, Len(16, 16)]
"""A record id: 16 bytes, UUIDv7 (spec/01-wire.md §2)."""

Sha256 = Annotated[bytes, Len(32, 32)]
"""A SHA-256 digest."""

UInt = Annotated[int, Range(0, U64_MAX)]
"""An unsigned 64-bit integer."""

I64 = Annotated[int, Range(I64_MIN, I64_MAX)]
"""A signed 64-bit integer."""

Nanos = Annotated[int, Range(I64_MIN, I64_MAX), Time()]
"""A time: signed nanoseconds since the Unix epoch, UTC (valid time may precede 1970)."""

Limit = Annotated[int, Range(1, MAX_LIST_LIMIT)]
"""A page size for list operations."""

Confidence = Annotated[float, Range(0.0, 1.0), Finite()]
"""A confidence in [0, 1], never NaN."""

Space = Annotated[str, TextPattern(r"[a-z0-9_.\-]{1,64}", "1-64 characters of [a-z0-9_.-]")]
"""A space name within the key's namespace (spec/01-wire.md §4)."""

Name = Annotated[str, Len(1, MAX_NAME_CHARS)]
"""An entity name, alias or entity type. Stored predicates and relation types are
shown as ``Name`` in answers, so a record stored before the :data:`Predicate`
rule still reads."""

Predicate = Annotated[str, Len(1, MAX_PREDICATE_CHARS), Label()]
"""A statement predicate: one line of visible text with no whitespace at either
end (:class:`~brain.wire.schema.Label`), so ``"works_at"`` and ``" works_at"``
cannot become two predicates that look alike."""

RelationType = Annotated[str, Len(1, MAX_PREDICATE_CHARS), Label()]
"""A relation type: the same shape as a predicate."""

Kind = Annotated[str, Choice(("fact", "preference", "event"))]
"""A statement kind."""

RecordType = Annotated[str, Choice(("statement", "memory"))]
"""A record type RECALL can return."""

Cursor = Annotated[bytes, Len(1, MAX_CURSOR_BYTES)]
"""An opaque list cursor: returned by one page, sent back unchanged for the next."""

Vector = Annotated[bytes, Len(4, MAX_VECTOR_BYTES)]
"""An embedding: little-endian float32 values (spec/01-wire.md §2). Messages holding one also
run :func:`brain.wire.messages.common.check_vector` for the whole-float rule."""


@wire_message
class EntityRef(Message):
    """``{"entity": id}``: an entity by id."""

    entity: Id


@wire_message
class MemoryRef(Message):
    """``{"memory": id}``: a memory by id."""

    memory: Id


@wire_message
class NameRef(Message):
    """``{"name": text, "type"?: text}``: an entity by exact name or alias."""

    name: Name
    type_: Name | None = None


@wire_message
class PendingRef(Message):
    """``{"pending": review_id}``: a subject waiting for an ambiguous-name review."""

    pending: Id


Ref = EntityRef | MemoryRef | NameRef
"""What a request may name as a subject or relation end."""

SubjectRef = EntityRef | MemoryRef | NameRef | PendingRef
"""What an answer may show as a subject."""


@wire_message
class EntityValue(Message):
    """An object that is an entity."""

    entity: Id


@wire_message
class TextValue(Message):
    """An object that is text."""

    text: Annotated[str, Len(0, None)]


@wire_message
class IntValue(Message):
    """An object that is an integer (signed 64-bit)."""

    int_: I64


@wire_message
class FloatValue(Message):
    """An object that is a float."""

    float_: float


@wire_message
class BoolValue(Message):
    """An object that is a boolean."""

    bool_: bool


@wire_message
class TimeValue(Message):
    """An object that is a time, in nanoseconds."""

    time: Nanos


@wire_message
class MemoryValue(Message):
    """An object that is a memory."""

    memory: Id


@wire_message
class StatementValue(Message):
    """An object that is another statement."""

    statement: Id


Value = (
    EntityValue
    | TextValue
    | IntValue
    | FloatValue
    | BoolValue
    | TimeValue
    | MemoryValue
    | StatementValue
)
"""A statement's object (spec/01-wire.md §9)."""
