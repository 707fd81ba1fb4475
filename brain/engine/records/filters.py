"""The filter chain of spec/03-time.md §6, in its binding order, as pure functions.

Every row a list or a recall considers passes the same six steps:

1. type — record type, kinds, predicates;
2. temporal, object axis — ``valid_at`` or a ``[valid_from, valid_to)`` range;
3. confidence — ``confidence ≥ min_confidence``;
4. tombstone — drops tombstoned rows unless ``include_tombstoned``;
5. supersession — drops superseded rows unless ``include_superseded``;
6. as-of, record axis — with ``as_of = t``, keeps a row iff ``recorded_at ≤ t``
   and ``record_invalidated_at`` is absent or ``> t``. This step overrides 4 and
   5: a row they dropped for a tombstone or supersession that happened after
   ``t`` is restored, because the caller asked what was believed at ``t``.
   Retracted and hard-forgotten rows are never restored.

The validity a row is judged by (and shown with) is the one believed at
``as_of`` (now when absent): a supersession that closed the row's validity
counts only from the record time it was learned (spec/03-time.md §4).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from enum import IntEnum

__all__ = ["Filters", "RowTimes", "Step", "Verdict", "judge", "validity_at"]


class Step(IntEnum):
    """The steps, numbered as spec/03-time.md §6 numbers them; 0 means the row survived."""

    SURVIVED = 0
    TYPE = 1
    TEMPORAL = 2
    CONFIDENCE = 3
    TOMBSTONE = 4
    SUPERSESSION = 5
    AS_OF = 6


@dataclass(frozen=True, slots=True)
class Filters:
    """What a request asks for; ``None`` means no filter on that axis."""

    kinds: Collection[str] | None = None
    predicates: Collection[str] | None = None
    valid_at: int | None = None
    valid_from: int | None = None
    valid_to: int | None = None
    min_confidence: float | None = None
    include_tombstoned: bool = False
    include_superseded: bool = False
    as_of: int | None = None


@dataclass(frozen=True, slots=True)
class RowTimes:
    """What the chain needs to know about one row.

    ``valid_from``/``valid_to`` are the row's own (as first recorded);
    ``closed_valid_to`` and ``closed_at`` are the close a supersession stamped
    on it, and when. ``event_at`` marks an event.
    """

    kind: str | None
    predicate: str | None
    confidence: float | None
    recorded_at: int
    valid_from: int | None = None
    valid_to: int | None = None
    event_at: int | None = None
    closed_valid_to: int | None = None
    closed_at: int | None = None
    record_invalidated_at: int | None = None
    tombstoned_at: int | None = None
    superseded: bool = False
    retracted: bool = False
    extra: dict[str, object] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome for one row: where it stopped, whether as-of restored it, and the
    first step it failed in chain order before step 6 had its say (what EXPLAIN
    counts for steps 1 to 5)."""

    dropped_at: Step
    restored: bool = False
    first_failed: Step = Step.SURVIVED

    @property
    def kept(self) -> bool:
        """True when the row survived every step."""
        return self.dropped_at is Step.SURVIVED


def validity_at(row: RowTimes, believed_at: int | None) -> tuple[int | None, int | None]:
    """The ``[valid_from, valid_to)`` believed at record time ``believed_at`` (None: now)."""
    valid_to = row.valid_to
    if row.closed_at is not None and (believed_at is None or row.closed_at <= believed_at):
        valid_to = row.closed_valid_to
    return row.valid_from, valid_to


def _temporal(row: RowTimes, f: Filters) -> bool:
    if f.valid_at is None and f.valid_from is None and f.valid_to is None:
        return True
    if row.event_at is not None:
        at = row.event_at
        if f.valid_at is not None and at > f.valid_at:
            return False
        if f.valid_from is not None and at < f.valid_from:
            return False
        return not (f.valid_to is not None and at >= f.valid_to)
    start, end = validity_at(row, f.as_of)
    if f.valid_at is not None:
        if start is not None and f.valid_at < start:
            return False
        if end is not None and f.valid_at >= end:
            return False
    # Overlap of [start, end) with [valid_from, valid_to).
    if f.valid_to is not None and start is not None and start >= f.valid_to:
        return False
    return not (f.valid_from is not None and end is not None and end <= f.valid_from)


def judge(row: RowTimes, f: Filters) -> Verdict:
    """Run the six steps over one row, in order."""
    if row.retracted:
        # A husk has no content to match and is never restored (step 6).
        return Verdict(Step.TYPE, first_failed=Step.TYPE)
    if f.kinds is not None and row.kind not in f.kinds:
        return Verdict(Step.TYPE, first_failed=Step.TYPE)
    if f.predicates is not None and row.predicate not in f.predicates:
        return Verdict(Step.TYPE, first_failed=Step.TYPE)
    if not _temporal(row, f):
        return Verdict(Step.TEMPORAL, first_failed=Step.TEMPORAL)
    if f.min_confidence is not None and (row.confidence or 0.0) < f.min_confidence:
        return Verdict(Step.CONFIDENCE, first_failed=Step.CONFIDENCE)
    dropped: Step | None = None
    if row.tombstoned_at is not None and not f.include_tombstoned:
        dropped = Step.TOMBSTONE
    elif row.superseded and not f.include_superseded:
        dropped = Step.SUPERSESSION
    first = Step.SURVIVED if dropped is None else dropped
    if f.as_of is None:
        return Verdict(first, first_failed=first)
    t = f.as_of
    believed = row.recorded_at <= t and (
        row.record_invalidated_at is None or row.record_invalidated_at > t
    )
    if not believed:
        return Verdict(Step.AS_OF, first_failed=Step.AS_OF if dropped is None else dropped)
    # Believed at t: whatever invalidated it came after t, so the historical answer wins.
    return Verdict(Step.SURVIVED, restored=dropped is not None, first_failed=first)
