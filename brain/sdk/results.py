"""What the facade's methods return: frozen dataclasses built from wire answers.

Each record and each write's answer carries every field of its wire message,
with times as :class:`~brain.sdk.times.Instant` and ids as :class:`RecordId`
(``bytes`` that print as hex); the wire message itself stays in ``wire``. The
names are the wire's (``type_``, ``object_``, ``from_``: Python keywords and
builtins take the plain ones), except that a write's answer calls the id it
made ``id``. Parts of answers that are accounts rather than records (RECALL's
coverage and explain, a hit's ranks) are kept as their wire messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from brain.sdk.times import Instant, optional_instant
from brain.wire.messages import (
    control,
    entity_ops,
    memory_ops,
    recall_ops,
    relation_ops,
    review_ops,
    statement_ops,
    values,
)
from brain.wire.messages import records as wire_records
from brain.wire.messages.common import Tombstoned

__all__ = [
    "Entity",
    "EntityMade",
    "EntityMatch",
    "EntityPage",
    "EntityTombstoned",
    "Evidence",
    "Explained",
    "ForgetResult",
    "Hit",
    "Memory",
    "Mention",
    "Merged",
    "Name",
    "Pong",
    "Recalled",
    "RecordId",
    "Ref",
    "Relation",
    "RelationPage",
    "RelationWritten",
    "Remembered",
    "Resolution",
    "ReviewItem",
    "Statement",
    "StatementPage",
    "StatementWritten",
    "TombstoneResult",
    "Traversal",
    "TraversalNode",
]


class RecordId(bytes):
    """A record id: the 16 bytes of the wire, shown as hex (``str(id)``, ``id.hex()``)."""

    __slots__ = ()

    def __str__(self) -> str:
        """The id as 32 hex digits, as the CLI and logs show it."""
        return self.hex()

    def __repr__(self) -> str:
        """``RecordId('0190…')``."""
        return f"RecordId({self.hex()!r})"


def _id(raw: bytes) -> RecordId:
    return RecordId(raw)


def _opt_id(raw: bytes | None) -> RecordId | None:
    return None if raw is None else RecordId(raw)


RefKind = Literal["entity", "memory", "statement", "pending"]


@dataclass(frozen=True, slots=True)
class Ref:
    """A record named by id: an entity, a memory, a statement, or an ambiguous name
    waiting for review (``pending``, its review id)."""

    kind: RefKind
    id: RecordId


@dataclass(frozen=True, slots=True)
class Name:
    """A subject named by exact name or alias (and optional type), as it was written."""

    name: str
    type_: str | None = None


ObjectValue = str | int | float | bool | Instant | Ref
"""A statement's object: text, number, boolean, time, or a record by id."""


def subject_of(ref: values.SubjectRef) -> Ref | Name:
    """The facade form of a wire subject or relation end."""
    if isinstance(ref, values.EntityRef):
        return Ref("entity", _id(ref.entity))
    if isinstance(ref, values.MemoryRef):
        return Ref("memory", _id(ref.memory))
    if isinstance(ref, values.PendingRef):
        return Ref("pending", _id(ref.pending))
    return Name(ref.name, ref.type_)


def object_of(value: values.Value) -> ObjectValue:
    """The facade form of a wire statement object."""
    match value:
        case values.TextValue(text=text):
            return text
        case values.IntValue(int_=number):
            return number
        case values.FloatValue(float_=number):
            return number
        case values.BoolValue(bool_=flag):
            return flag
        case values.TimeValue(time=nanos):
            return Instant(nanos)
        case values.EntityValue(entity=raw):
            return Ref("entity", _id(raw))
        case values.MemoryValue(memory=raw):
            return Ref("memory", _id(raw))
        case values.StatementValue(statement=raw):
            return Ref("statement", _id(raw))
    raise TypeError(f"unknown statement object {value!r}")


@dataclass(frozen=True, slots=True)
class Evidence:
    """A memory a statement or relation cites, with its SHA-256 when known."""

    memory: RecordId
    sha256: bytes | None = None

    @classmethod
    def from_wire(cls, wire: wire_records.Evidence | wire_records.Citation) -> Evidence:
        """From a request's evidence entry or a hit's citation."""
        return cls(_id(wire.memory), wire.sha256)


def _evidence(entries: tuple[wire_records.Evidence, ...] | None) -> tuple[Evidence, ...] | None:
    return None if entries is None else tuple(Evidence.from_wire(e) for e in entries)


@dataclass(frozen=True, slots=True)
class Mention:
    """A name a memory's text mentions, and the entity it resolved to when stored."""

    name: str
    found: str
    entity: RecordId | None
    extractor: str

    @classmethod
    def from_wire(cls, wire: wire_records.Mention) -> Mention:
        """From the wire's mention."""
        return cls(wire.name, wire.found, _opt_id(wire.entity), wire.extractor)


@dataclass(frozen=True, slots=True)
class Memory:
    """A memory: raw text with its SHA-256 (no text once hard-forgotten)."""

    id: RecordId
    text: str | None
    sha256: bytes
    occurred_at: Instant | None
    recorded_at: Instant
    context: str | None
    forgotten: str | None
    forgotten_at: Instant | None
    mentions: tuple[Mention, ...] | None
    wire: wire_records.Memory

    @classmethod
    def from_wire(cls, wire: wire_records.Memory) -> Memory:
        """From the wire's memory record."""
        return cls(
            id=_id(wire.id),
            text=wire.text,
            sha256=wire.sha256,
            occurred_at=optional_instant(wire.occurred_at),
            recorded_at=Instant(wire.recorded_at),
            context=wire.context,
            forgotten=wire.forgotten,
            forgotten_at=optional_instant(wire.forgotten_at),
            mentions=None
            if wire.mentions is None
            else tuple(Mention.from_wire(m) for m in wire.mentions),
            wire=wire,
        )


@dataclass(frozen=True, slots=True)
class Statement:
    """A statement; a retracted one keeps only its ids, chain links and times."""

    id: RecordId
    space: str
    kind: str | None
    subject: Ref | Name | None
    predicate: str | None
    object_: ObjectValue | None
    confidence: float | None
    evidence: tuple[Evidence, ...] | None
    source: str | None
    valid_from: Instant | None
    valid_to: Instant | None
    event_at: Instant | None
    recorded_at: Instant
    record_invalidated_at: Instant | None
    version: int
    chain_root: RecordId
    supersedes: RecordId | None
    superseded_by: RecordId | None
    tombstoned_at: Instant | None
    tombstone_reason: str | None
    wire: wire_records.Statement

    @classmethod
    def from_wire(cls, wire: wire_records.Statement) -> Statement:
        """From the wire's statement record."""
        return cls(
            id=_id(wire.id),
            space=wire.space,
            kind=wire.kind,
            subject=None if wire.subject is None else subject_of(wire.subject),
            predicate=wire.predicate,
            object_=None if wire.object_ is None else object_of(wire.object_),
            confidence=wire.confidence,
            evidence=_evidence(wire.evidence),
            source=wire.source,
            valid_from=optional_instant(wire.valid_from),
            valid_to=optional_instant(wire.valid_to),
            event_at=optional_instant(wire.event_at),
            recorded_at=Instant(wire.recorded_at),
            record_invalidated_at=optional_instant(wire.record_invalidated_at),
            version=wire.version,
            chain_root=_id(wire.chain_root),
            supersedes=_opt_id(wire.supersedes),
            superseded_by=_opt_id(wire.superseded_by),
            tombstoned_at=optional_instant(wire.tombstoned_at),
            tombstone_reason=wire.tombstone_reason,
            wire=wire,
        )


@dataclass(frozen=True, slots=True)
class Entity:
    """An entity: a canonical thing with a name, aliases and attributes, as one version
    shows it: believed from ``recorded_at`` until ``record_invalidated_at`` (None while
    it is the current version)."""

    id: RecordId
    name: str
    type_: str | None
    aliases: tuple[str, ...]
    attributes: dict[str, object]
    created_at: Instant
    merged_into: RecordId | None
    tombstoned_at: Instant | None
    recorded_at: Instant
    record_invalidated_at: Instant | None
    wire: wire_records.Entity

    @classmethod
    def from_wire(cls, wire: wire_records.Entity) -> Entity:
        """From the wire's entity record."""
        return cls(
            id=_id(wire.id),
            name=wire.name,
            type_=wire.type_,
            aliases=wire.aliases,
            attributes=wire.attributes,
            created_at=Instant(wire.created_at),
            merged_into=_opt_id(wire.merged_into),
            tombstoned_at=optional_instant(wire.tombstoned_at),
            recorded_at=Instant(wire.recorded_at),
            record_invalidated_at=optional_instant(wire.record_invalidated_at),
            wire=wire,
        )


@dataclass(frozen=True, slots=True)
class Relation:
    """A typed edge between two entities, on the same two time axes as a statement."""

    id: RecordId
    type_: str
    from_: Ref | Name
    to: Ref | Name
    confidence: float
    evidence: tuple[Evidence, ...]
    valid_from: Instant | None
    valid_to: Instant | None
    recorded_at: Instant
    record_invalidated_at: Instant | None
    supersedes: RecordId | None
    superseded_by: RecordId | None
    tombstoned_at: Instant | None
    wire: wire_records.Relation

    @classmethod
    def from_wire(cls, wire: wire_records.Relation) -> Relation:
        """From the wire's relation record."""
        return cls(
            id=_id(wire.id),
            type_=wire.type_,
            from_=subject_of(wire.from_),
            to=subject_of(wire.to),
            confidence=wire.confidence,
            evidence=tuple(Evidence.from_wire(e) for e in wire.evidence),
            valid_from=optional_instant(wire.valid_from),
            valid_to=optional_instant(wire.valid_to),
            recorded_at=Instant(wire.recorded_at),
            record_invalidated_at=optional_instant(wire.record_invalidated_at),
            supersedes=_opt_id(wire.supersedes),
            superseded_by=_opt_id(wire.superseded_by),
            tombstoned_at=optional_instant(wire.tombstoned_at),
            wire=wire,
        )


@dataclass(frozen=True, slots=True)
class Hit:
    """One RECALL hit: its record (a statement or a memory), score and ranks."""

    record: str
    id: RecordId
    score: float
    ranks: recall_ops.Ranks
    arm_scores: recall_ops.ArmScores
    statement: Statement | None
    memory: Memory | None
    evidence: tuple[Evidence, ...] | None
    wire: recall_ops.Hit

    @classmethod
    def from_wire(cls, wire: recall_ops.Hit) -> Hit:
        """From the wire's hit."""
        return cls(
            record=wire.record,
            id=_id(wire.id),
            score=wire.score,
            ranks=wire.ranks,
            arm_scores=wire.arm_scores,
            statement=None if wire.statement is None else Statement.from_wire(wire.statement),
            memory=None if wire.memory is None else Memory.from_wire(wire.memory),
            evidence=None
            if wire.evidence is None
            else tuple(Evidence.from_wire(c) for c in wire.evidence),
            wire=wire,
        )


@dataclass(frozen=True, slots=True)
class Recalled:
    """RECALL's answer: the hits, best first; ``abstained`` when nothing was relevant
    enough; what was searched (``coverage``) and, when asked, how (``explain``)."""

    hits: tuple[Hit, ...]
    abstained: bool
    coverage: recall_ops.Coverage
    explain: recall_ops.Explain | None
    wire: recall_ops.RecallOk

    @classmethod
    def from_wire(cls, wire: recall_ops.RecallOk) -> Recalled:
        """From the wire's answer."""
        return cls(
            hits=tuple(Hit.from_wire(h) for h in wire.hits),
            abstained=wire.abstained,
            coverage=wire.coverage,
            explain=wire.explain,
            wire=wire,
        )


@dataclass(frozen=True, slots=True)
class StatementPage:
    """One page of STATEMENT_LIST; pass ``cursor`` back for the next (None: the last)."""

    statements: tuple[Statement, ...]
    cursor: bytes | None
    wire: statement_ops.StatementListOk

    @classmethod
    def from_wire(cls, wire: statement_ops.StatementListOk) -> StatementPage:
        """From the wire's answer."""
        return cls(tuple(Statement.from_wire(s) for s in wire.statements), wire.cursor, wire)


@dataclass(frozen=True, slots=True)
class Remembered:
    """ENCODE's answer: the memory's id; ``deduplicated`` when the same text was
    already stored (``id`` is then the earlier memory)."""

    id: RecordId
    lsn: int
    recorded_at: Instant
    sha256: bytes
    deduplicated: bool
    wire: memory_ops.EncodeOk

    @classmethod
    def from_wire(cls, wire: memory_ops.EncodeOk) -> Remembered:
        """From the wire's answer."""
        return cls(
            _id(wire.memory_id),
            wire.lsn,
            Instant(wire.recorded_at),
            wire.sha256,
            wire.deduplicated,
            wire,
        )


@dataclass(frozen=True, slots=True)
class ForgetResult:
    """FORGET's answer: how many statements resting on the memory alone were tombstoned."""

    id: RecordId
    lsn: int
    already_forgotten: bool
    statements_tombstoned: int
    wire: memory_ops.ForgetOk

    @classmethod
    def from_wire(cls, wire: memory_ops.ForgetOk) -> ForgetResult:
        """From the wire's answer."""
        return cls(
            _id(wire.memory_id),
            wire.lsn,
            wire.already_forgotten,
            wire.statements_tombstoned,
            wire,
        )


@dataclass(frozen=True, slots=True)
class StatementWritten:
    """A statement write's answer (create or supersede): the new statement, its place
    in its chain, and the statement it superseded, if any."""

    id: RecordId
    lsn: int
    recorded_at: Instant
    version: int
    chain_root: RecordId
    superseded: RecordId | None
    wire: statement_ops.StatementCreateOk | statement_ops.StatementSupersedeOk

    @classmethod
    def from_wire(
        cls, wire: statement_ops.StatementCreateOk | statement_ops.StatementSupersedeOk
    ) -> StatementWritten:
        """From the wire's answer."""
        return cls(
            _id(wire.statement_id),
            wire.lsn,
            Instant(wire.recorded_at),
            wire.version,
            _id(wire.chain_root),
            _opt_id(wire.superseded),
            wire,
        )


@dataclass(frozen=True, slots=True)
class TombstoneResult:
    """A tombstone's or retraction's answer; ``tombstoned_at`` is the write's record time."""

    id: RecordId
    lsn: int
    tombstoned_at: Instant
    wire: Tombstoned

    @classmethod
    def from_wire(cls, wire: Tombstoned) -> TombstoneResult:
        """From the wire's answer."""
        return cls(_id(wire.id), wire.lsn, Instant(wire.tombstoned_at), wire)


@dataclass(frozen=True, slots=True)
class EntityMade:
    """ENTITY_CREATE's answer."""

    id: RecordId
    lsn: int
    wire: entity_ops.EntityCreateOk

    @classmethod
    def from_wire(cls, wire: entity_ops.EntityCreateOk) -> EntityMade:
        """From the wire's answer."""
        return cls(_id(wire.entity_id), wire.lsn, wire)


@dataclass(frozen=True, slots=True)
class RelationWritten:
    """A relation write's answer (create or supersede)."""

    id: RecordId
    lsn: int
    recorded_at: Instant
    superseded: RecordId | None
    wire: relation_ops.RelationCreateOk | relation_ops.RelationSupersedeOk

    @classmethod
    def from_wire(
        cls, wire: relation_ops.RelationCreateOk | relation_ops.RelationSupersedeOk
    ) -> RelationWritten:
        """From the wire's answer."""
        return cls(
            _id(wire.relation_id),
            wire.lsn,
            Instant(wire.recorded_at),
            _opt_id(wire.superseded),
            wire,
        )


@dataclass(frozen=True, slots=True)
class ReviewItem:
    """An item of the review queue: a contradiction or an ambiguous name."""

    review_id: RecordId
    kind: str
    records: tuple[RecordId, ...]
    created_at: Instant
    name: str | None
    type_: str | None
    wire: review_ops.ReviewItem

    @classmethod
    def from_wire(cls, wire: review_ops.ReviewItem) -> ReviewItem:
        """From the wire's item."""
        return cls(
            _id(wire.review_id),
            wire.kind,
            tuple(_id(r) for r in wire.records),
            Instant(wire.created_at),
            wire.name,
            wire.type_,
            wire,
        )


@dataclass(frozen=True, slots=True)
class Explained:
    """EXPLAIN's answer: how a recall was served (``explain``), what it searched
    (``coverage``) and the hits it ranked, without their records."""

    explain: recall_ops.Explain
    coverage: recall_ops.Coverage
    hits: tuple[recall_ops.RankedHit, ...]
    wire: recall_ops.ExplainOk

    @classmethod
    def from_wire(cls, wire: recall_ops.ExplainOk) -> Explained:
        """From the wire's answer."""
        return cls(wire.explain, wire.coverage, wire.hits, wire)


@dataclass(frozen=True, slots=True)
class EntityPage:
    """One page of ENTITY_LIST; pass ``cursor`` back for the next (None: the last)."""

    entities: tuple[Entity, ...]
    cursor: bytes | None
    wire: entity_ops.EntityListOk

    @classmethod
    def from_wire(cls, wire: entity_ops.EntityListOk) -> EntityPage:
        """From the wire's answer."""
        return cls(tuple(Entity.from_wire(e) for e in wire.entities), wire.cursor, wire)


@dataclass(frozen=True, slots=True)
class EntityMatch:
    """One candidate of ENTITY_RESOLVE: which step matched (``tier``) and how well."""

    id: RecordId
    name: str
    score: float
    tier: str
    wire: entity_ops.EntityMatch

    @classmethod
    def from_wire(cls, wire: entity_ops.EntityMatch) -> EntityMatch:
        """From the wire's candidate."""
        return cls(_id(wire.entity_id), wire.name, wire.score, wire.tier, wire)


@dataclass(frozen=True, slots=True)
class Resolution:
    """ENTITY_RESOLVE's answer: the candidates, best first; ``resolved`` when one entity
    wins, ``ambiguous`` when a fuzzy tie leaves the choice to a review."""

    matches: tuple[EntityMatch, ...]
    resolved: RecordId | None
    ambiguous: bool
    wire: entity_ops.EntityResolveOk

    @classmethod
    def from_wire(cls, wire: entity_ops.EntityResolveOk) -> Resolution:
        """From the wire's answer."""
        return cls(
            tuple(EntityMatch.from_wire(m) for m in wire.matches),
            _opt_id(wire.resolved),
            wire.ambiguous,
            wire,
        )


@dataclass(frozen=True, slots=True)
class Merged:
    """ENTITY_MERGE's answer; ``merge_id`` is what :meth:`unmerge_entities` takes."""

    merge_id: RecordId
    lsn: int
    wire: entity_ops.EntityMergeOk

    @classmethod
    def from_wire(cls, wire: entity_ops.EntityMergeOk) -> Merged:
        """From the wire's answer."""
        return cls(_id(wire.merge_id), wire.lsn, wire)


@dataclass(frozen=True, slots=True)
class EntityTombstoned:
    """ENTITY_TOMBSTONE's answer."""

    id: RecordId
    lsn: int
    wire: entity_ops.EntityTombstoneOk

    @classmethod
    def from_wire(cls, wire: entity_ops.EntityTombstoneOk) -> EntityTombstoned:
        """From the wire's answer."""
        return cls(_id(wire.id), wire.lsn, wire)


@dataclass(frozen=True, slots=True)
class RelationPage:
    """One page of RELATION_LIST; pass ``cursor`` back for the next (None: the last)."""

    relations: tuple[Relation, ...]
    cursor: bytes | None
    wire: relation_ops.RelationListOk

    @classmethod
    def from_wire(cls, wire: relation_ops.RelationListOk) -> RelationPage:
        """From the wire's answer."""
        return cls(tuple(Relation.from_wire(r) for r in wire.relations), wire.cursor, wire)


@dataclass(frozen=True, slots=True)
class TraversalNode:
    """An entity a traversal reached, ``hop`` steps from the start (0: the start)."""

    id: RecordId
    hop: int
    wire: relation_ops.TraversalNode

    @classmethod
    def from_wire(cls, wire: relation_ops.TraversalNode) -> TraversalNode:
        """From the wire's node."""
        return cls(_id(wire.entity_id), wire.hop, wire)


@dataclass(frozen=True, slots=True)
class Traversal:
    """RELATION_TRAVERSE's answer: the entities reached and the edges walked."""

    nodes: tuple[TraversalNode, ...]
    edges: tuple[Relation, ...]
    wire: relation_ops.RelationTraverseOk

    @classmethod
    def from_wire(cls, wire: relation_ops.RelationTraverseOk) -> Traversal:
        """From the wire's answer."""
        return cls(
            tuple(TraversalNode.from_wire(n) for n in wire.nodes),
            tuple(Relation.from_wire(e) for e in wire.edges),
            wire,
        )


@dataclass(frozen=True, slots=True)
class Pong:
    """PING's answer: the echoed ``nonce`` and the server's clock."""

    nonce: object
    server_time: Instant
    wire: control.Pong

    @classmethod
    def from_wire(cls, wire: control.Pong) -> Pong:
        """From the wire's answer."""
        return cls(wire.nonce, Instant(wire.server_time), wire)
