"""The review queue: REVIEW_LIST and REVIEW_DECIDE (spec/02-data-model.md §7)."""

from __future__ import annotations

from typing import Annotated

from brain.wire.messages.common import TxnReadRequest, TxnWriteRequest
from brain.wire.messages.values import Id, Limit, Name, Nanos, UInt
from brain.wire.schema import Choice, Len, Message, wire_message

__all__ = [
    "ReviewDecide",
    "ReviewDecided",
    "ReviewItem",
    "ReviewList",
    "ReviewListOk",
]

ReviewKind = Annotated[str, Choice(("contradiction", "ambiguous_entity"))]
"""Why an item waits for review."""

Decision = Annotated[str, Choice(("keep_both", "supersede", "reject_new", "merge", "distinct"))]
"""How a review is settled: the first three for contradictions, the last two for
ambiguous entities."""


@wire_message
class ReviewList(TxnReadRequest):
    """REVIEW_LIST: items waiting for a decision."""

    limit: Limit | None = None


@wire_message
class ReviewItem(Message):
    """One item of the review queue and the records it concerns."""

    review_id: Id
    kind: ReviewKind
    records: Annotated[tuple[Id, ...], Len(1, None)]
    created_at: Nanos
    name: Name | None = None
    """For ``ambiguous_entity``: the name the writes gave (an extension of spec/02-data-model.md §7,
    which has no other way to show it)."""
    type_: Name | None = None
    """For ``ambiguous_entity``: the type the writes gave with the name, if any."""


@wire_message
class ReviewListOk(Message):
    """The answer to REVIEW_LIST."""

    items: tuple[ReviewItem, ...]


@wire_message
class ReviewDecide(TxnWriteRequest):
    """REVIEW_DECIDE: settle a review item; a write with its own audit entry."""

    review_id: Id
    decision: Decision
    into: Id | None = None
    """For ``merge`` of an ``ambiguous_entity`` item, and only for it: the candidate
    the name means (spec/02-data-model.md §7). A name that ties between entities is
    settled by naming one of them, never by guessing which."""


@wire_message
class ReviewDecided(Message):
    """The answer to REVIEW_DECIDE."""

    lsn: UInt
