"""Change feeds: SUBSCRIBE and UNSUBSCRIBE (spec/02-data-model.md §10).

A subscription's answer stream stays open: each frame is one :class:`ChangeEvent`,
replayed from ``from_lsn`` first, then live. UNSUBSCRIBE (or CANCEL_STREAM) ends it
with a :class:`SubscriptionEnded` frame flagged EOS, and answers like CANCEL_STREAM.
"""

from __future__ import annotations

from typing import Annotated, Final

from brain.wire.messages.common import ScopedRequest
from brain.wire.messages.values import Id, Nanos, UInt
from brain.wire.schema import Choice, Len, Message, Range, TextPattern, wire_message

__all__ = [
    "RECORD_KINDS",
    "ChangeEvent",
    "Subscribe",
    "SubscriptionEnded",
    "Unsubscribe",
]

RECORD_KINDS: Final = ("memory", "statement", "entity", "relation")
"""The record kinds a change feed reports (spec/02-data-model.md §1)."""

RecordKind = Annotated[str, Choice(RECORD_KINDS)]
"""A kind of record."""

Operation = Annotated[str, TextPattern(r"[a-z][a-z_]{0,31}", "a lowercase word of 1-32 letters")]
"""The write that changed a record (``create``, ``supersede``, ``tombstone``, …)."""


@wire_message
class Subscribe(ScopedRequest):
    """SUBSCRIBE: stream the changes of this space from ``from_lsn`` on (absent: from
    now), optionally only for some record kinds."""

    from_lsn: UInt | None = None
    records: Annotated[tuple[RecordKind, ...], Len(1, len(RECORD_KINDS))] | None = None


@wire_message
class ChangeEvent(Message):
    """One frame of a SUBSCRIBE stream: which write changed which record."""

    lsn: UInt
    op: Operation
    record: RecordKind
    id: Id
    recorded_at: Nanos


@wire_message
class SubscriptionEnded(Message):
    """The last frame of a cancelled subscription (flagged EOS): every change before
    ``next_lsn`` was sent, so SUBSCRIBE ``from_lsn: next_lsn`` resumes it exactly."""

    next_lsn: UInt


@wire_message
class Unsubscribe(ScopedRequest):
    """UNSUBSCRIBE: end the subscription answering on stream ``stream``."""

    stream: Annotated[int, Range(1, 0xFFFFFFFF)]
