"""Statements: STATEMENT_CREATE, GET, SUPERSEDE, TOMBSTONE, RETRACT, HISTORY, LIST."""

from __future__ import annotations

from brain.errors import InvalidArgument
from brain.wire.messages.common import (
    ByIdRequest,
    Reason,
    Tombstoned,
    TxnReadRequest,
    TxnWriteRequest,
    check_validity,
)
from brain.wire.messages.records import ChainVersion, EvidenceList, Source, Statement
from brain.wire.messages.values import (
    Confidence,
    Cursor,
    Id,
    Kind,
    Limit,
    Nanos,
    Predicate,
    Ref,
    Space,
    UInt,
    Value,
)
from brain.wire.schema import Message, wire_message

__all__ = [
    "StatementCreate",
    "StatementCreateOk",
    "StatementDraft",
    "StatementGet",
    "StatementGetOk",
    "StatementHistory",
    "StatementHistoryOk",
    "StatementList",
    "StatementListOk",
    "StatementRetract",
    "StatementRetracted",
    "StatementSupersede",
    "StatementSupersedeOk",
    "StatementTombstone",
    "StatementTombstoned",
    "StatementWritten",
]


def _check_event_at(draft: StatementDraft) -> None:
    """``event_at`` is required for and only for events (spec/02-data-model.md §5)."""
    if draft.kind == "event" and draft.event_at is None:
        raise InvalidArgument("event_at is required for an event", field="event_at")
    if draft.kind != "event" and draft.event_at is not None:
        raise InvalidArgument(
            f"event_at is only for events, not for a {draft.kind}", field="event_at"
        )


@wire_message
class StatementDraft(Message):
    """The content of a statement: the fields of STATEMENT_CREATE other than
    ``space``, ``request_id`` and ``txn_id``; STATEMENT_SUPERSEDE's ``new``.

    ``confidence`` left out means 1.0: the server applies that default, so the
    wire keeps the key absent rather than inventing it. ``event_at`` is required
    for and only for ``kind == "event"``; ``valid_from ≤ valid_to``."""

    kind: Kind
    subject: Ref
    predicate: Predicate
    object_: Value
    confidence: Confidence | None = None
    evidence: EvidenceList | None = None
    source: Source | None = None
    valid_from: Nanos | None = None
    valid_to: Nanos | None = None
    event_at: Nanos | None = None

    cross_checks = (_check_event_at, check_validity)


@wire_message
class StatementCreate(StatementDraft):
    """STATEMENT_CREATE: record a claim. When the predicate is declared stateful,
    the current statement of the same subject and predicate is superseded."""

    space: Space | None = None
    request_id: Id
    txn_id: Id | None = None


@wire_message
class StatementWritten(Message):
    """What every statement write answers: the new statement and its place in its chain."""

    statement_id: Id
    lsn: UInt
    recorded_at: Nanos
    version: ChainVersion
    chain_root: Id


@wire_message
class StatementCreateOk(StatementWritten):
    """The answer to STATEMENT_CREATE; ``superseded`` names the statement a stateful
    predicate replaced."""

    superseded: Id | None = None


@wire_message
class StatementGet(ByIdRequest):
    """STATEMENT_GET: one statement by id."""


@wire_message
class StatementGetOk(Message):
    """The answer to STATEMENT_GET."""

    statement: Statement


@wire_message
class StatementSupersede(TxnWriteRequest):
    """STATEMENT_SUPERSEDE: replace the current statement ``old`` by ``new``
    (spec/03-time.md §4)."""

    old: Id
    new: StatementDraft


@wire_message
class StatementSupersedeOk(StatementWritten):
    """The answer to STATEMENT_SUPERSEDE; ``superseded`` is the replaced statement."""

    superseded: Id


@wire_message
class StatementTombstone(TxnWriteRequest):
    """STATEMENT_TOMBSTONE: soft-delete a statement. ``reason`` is a free-text note
    for the audit log; the statement's ``tombstone_reason`` becomes ``user_request``."""

    id: Id
    reason: Reason | None = None


@wire_message
class StatementTombstoned(Tombstoned):
    """The answer to STATEMENT_TOMBSTONE."""


@wire_message
class StatementRetract(TxnWriteRequest):
    """STATEMENT_RETRACT: reduce a statement to a husk of ids, chain links and times."""

    id: Id


@wire_message
class StatementRetracted(Tombstoned):
    """The answer to STATEMENT_RETRACT."""


@wire_message
class StatementHistory(ByIdRequest):
    """STATEMENT_HISTORY: every version of the chain holding ``id``."""


@wire_message
class StatementHistoryOk(Message):
    """The answer to STATEMENT_HISTORY: the chain's versions, oldest first."""

    versions: tuple[Statement, ...]


@wire_message
class StatementList(TxnReadRequest):
    """STATEMENT_LIST: statements through RECALL's filter chain (spec/04-retrieval.md §5,
    steps 1 to 6), ordered by ``recorded_at``. ``limit`` defaults to 100 (server)."""

    subject: Ref | None = None
    predicate: Predicate | None = None
    kind: Kind | None = None
    valid_at: Nanos | None = None
    as_of: Nanos | None = None
    include_superseded: bool | None = None
    include_tombstoned: bool | None = None
    limit: Limit | None = None
    cursor: Cursor | None = None


@wire_message
class StatementListOk(Message):
    """The answer to STATEMENT_LIST; ``cursor`` is present only when more rows follow."""

    statements: tuple[Statement, ...]
    cursor: Cursor | None = None
