"""The record shapes answers carry: Statement, Entity, Relation, Memory and its Mentions
(spec/01-wire.md §9).

Also the pieces several families share: evidence entries, enumerations and the
bounded text kinds. Requests are untrusted and carry tight limits (in the
``*_ops`` modules); answers are built by the server from records that passed
those limits, so their arrays are bounded only by the CBOR layer (an entity's
aliases grow with every merge, for example).
"""

from __future__ import annotations

from typing import Annotated, Final

from brain.errors import InvalidArgument
from brain.wire.messages.values import (
    U64_MAX,
    Confidence,
    EntityRef,
    Id,
    Kind,
    Name,
    Nanos,
    PendingRef,
    Sha256,
    Space,
    SubjectRef,
    Value,
)
from brain.wire.schema import Choice, Len, Message, Range, wire_message

__all__ = [
    "MAX_CONTEXT_CHARS",
    "MAX_EVIDENCE",
    "MAX_MEMORY_TEXT_CHARS",
    "MAX_SOURCE_CHARS",
    "ChainVersion",
    "Citation",
    "Context",
    "Entity",
    "Evidence",
    "EvidenceList",
    "ForgetMode",
    "Memory",
    "MemoryText",
    "Mention",
    "MentionFound",
    "Relation",
    "RelationEnd",
    "Source",
    "Statement",
    "TombstoneReason",
]

MAX_MEMORY_TEXT_CHARS: Final = 1024 * 1024
"""Longest memory text: the CBOR layer already caps any text at 1 MiB (spec/01-wire.md §2)."""

MAX_CONTEXT_CHARS: Final = 64 * 1024
"""Longest memory context: a note on where the memory came from, not a second document."""

MAX_SOURCE_CHARS: Final = 1024
"""Longest statement source: a label naming who or what produced the claim."""

MAX_EVIDENCE: Final = 1024
"""Most memories one statement or relation cites in a request: a claim rests on a few,
a summary on hundreds; more is a bulk-import bug."""

MemoryText = Annotated[str, Len(1, MAX_MEMORY_TEXT_CHARS)]
"""The text of a memory: never empty."""

Context = Annotated[str, Len(1, MAX_CONTEXT_CHARS)]
"""Where a memory came from (a conversation, a document, …)."""

Source = Annotated[str, Len(1, MAX_SOURCE_CHARS)]
"""Who or what produced a statement."""

ForgetMode = Annotated[str, Choice(("soft", "hard"))]
"""How strongly a memory is forgotten (spec/02-data-model.md §3)."""

TombstoneReason = Annotated[str, Choice(("user_request", "source_forgotten", "retracted"))]
"""Why a statement was tombstoned."""

ChainVersion = Annotated[int, Range(1, U64_MAX)]
"""A statement's place in its chain: 1 for the first version, then 2, 3, …"""

RelationEnd = EntityRef | PendingRef
"""A relation end in an answer: an entity, or an ambiguous name waiting for review."""


@wire_message
class Evidence(Message):
    """``{memory: id, sha256?: bytes32}``: a memory a statement or relation cites.

    A request may send the memory's SHA-256 to pin the exact text it cites."""

    memory: Id
    sha256: Sha256 | None = None


EvidenceList = Annotated[tuple[Evidence, ...], Len(0, MAX_EVIDENCE)]
"""The memories a statement or relation request cites."""


@wire_message
class Citation(Message):
    """``{memory: id, sha256: bytes32}``: evidence in a RECALL hit, always with the hash
    a client checks against MEMORY_GET (spec/04-retrieval.md §6)."""

    memory: Id
    sha256: Sha256


_CONTENT_FIELDS: Final = ("kind", "subject", "predicate", "object_", "confidence", "evidence")
"""What a statement that is not retracted always shows."""

_HUSK_GONE: Final = ("subject", "object_", "evidence", "source")
"""What a retracted statement no longer has (spec/01-wire.md §9)."""


def _statement_shape(statement: Statement) -> None:
    """A retracted statement is a husk; every other one shows its whole claim."""
    if statement.tombstone_reason == "retracted":
        for name in _HUSK_GONE:
            if getattr(statement, name) is not None:
                key = name.rstrip("_")
                raise InvalidArgument(f"a retracted statement has no {key}", field=key)
        return
    for name in _CONTENT_FIELDS:
        if getattr(statement, name) is None:
            key = name.rstrip("_")
            raise InvalidArgument(f"{key} is required", field=key)


@wire_message
class Statement(Message):
    """A statement as answers show it (spec/01-wire.md §9).

    ``kind``, ``subject``, ``predicate``, ``object``, ``confidence`` and ``evidence``
    are present unless the statement is retracted (``tombstone_reason ==
    "retracted"``): a retracted statement keeps only its ids, chain links and
    times, and never shows ``subject``, ``object``, ``evidence`` or ``source``.
    The validity shown is the one believed at the query's ``as_of``.
    """

    id: Id
    space: Space
    kind: Kind | None = None
    subject: SubjectRef | None = None
    predicate: Name | None = None
    object_: Value | None = None
    confidence: Confidence | None = None
    evidence: tuple[Evidence, ...] | None = None
    source: Source | None = None
    valid_from: Nanos | None = None
    valid_to: Nanos | None = None
    event_at: Nanos | None = None
    recorded_at: Nanos
    record_invalidated_at: Nanos | None = None
    version: ChainVersion
    chain_root: Id
    supersedes: Id | None = None
    superseded_by: Id | None = None
    tombstoned_at: Nanos | None = None
    tombstone_reason: TombstoneReason | None = None

    cross_checks = (_statement_shape,)


@wire_message
class Entity(Message):
    """An entity: a canonical thing with a name, aliases and attributes, as one version
    shows it: believed from ``recorded_at`` until ``record_invalidated_at`` (absent
    while it is the current version).

    ``merged_into`` names the entity it was merged into, if any."""

    id: Id
    name: Name
    type_: Name | None = None
    aliases: tuple[Name, ...]
    attributes: dict[str, object]
    created_at: Nanos
    merged_into: Id | None = None
    tombstoned_at: Nanos | None = None
    recorded_at: Nanos
    record_invalidated_at: Nanos | None = None


@wire_message
class Relation(Message):
    """A typed edge between two entities, on the same two time axes as a statement."""

    id: Id
    type_: Name
    from_: RelationEnd
    to: RelationEnd
    confidence: Confidence
    evidence: tuple[Evidence, ...]
    valid_from: Nanos | None = None
    valid_to: Nanos | None = None
    recorded_at: Nanos
    record_invalidated_at: Nanos | None = None
    supersedes: Id | None = None
    superseded_by: Id | None = None
    tombstoned_at: Nanos | None = None


MentionFound = Annotated[str, Choice(("speaker", "proper_name"))]
"""How an extractor found a name in a memory's text (spec/02-data-model.md §3.1)."""


@wire_message
class Mention(Message):
    """A name a memory's text mentions, as an extractor found it when the memory was
    stored: ``entity`` is the entity the name resolved to then, absent when it
    resolved to none or was ambiguous; ``extractor`` is ``name/version``."""

    name: Name
    found: MentionFound
    entity: Id | None = None
    extractor: Name


def _memory_shape(memory: Memory) -> None:
    """A hard-forgotten memory has no text (spec/01-wire.md §9)."""
    if memory.forgotten == "hard" and memory.text is not None:
        raise InvalidArgument("a hard-forgotten memory has no text", field="text")
    if memory.forgotten == "hard" and memory.mentions is not None:
        raise InvalidArgument("a hard-forgotten memory has no mentions", field="mentions")


@wire_message
class Memory(Message):
    """A memory: raw text an agent experienced, with its SHA-256.

    ``forgotten`` and ``forgotten_at`` are present once it was forgotten; a
    hard-forgotten memory has no ``text`` and no ``mentions``. ``mentions`` lists
    the names its text mentions, when extraction ran on it."""

    id: Id
    text: MemoryText | None = None
    sha256: Sha256
    occurred_at: Nanos | None = None
    recorded_at: Nanos
    context: Context | None = None
    forgotten: ForgetMode | None = None
    forgotten_at: Nanos | None = None
    mentions: tuple[Mention, ...] | None = None

    cross_checks = (_memory_shape,)
