"""Fused candidates through the filter chain, and EXPLAIN's counts (spec/04-retrieval.md §5).

Every fused candidate, in fused order, is looked up in the read's own snapshot
and judged by the chain of :mod:`brain.engine.records.filters`, in its binding
order. The record type filter (``records``) belongs to step 1; a memory has no
kind or predicate, so a ``kinds`` or ``predicates`` filter leaves memories out.
A memory is judged like an event at ``occurred_at`` (else ``recorded_at``),
with confidence 1 (it is what was seen), as tombstoned from a soft forget on,
and never restored once hard-forgotten. A candidate the snapshot no longer
holds counts as removed at step 1.

EXPLAIN counts, for each of steps 1 to 5, the candidates still standing after
it (a candidate counts as removed at the first step it failed, even when step
6 restores it); step 6's count is the candidates kept.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final

from brain.engine.index.documents import MEMORY_DOC
from brain.engine.recall.fusion import Candidate
from brain.engine.records.filters import Filters, RowTimes, Step, Verdict, judge
from brain.engine.records.memories import memory_row
from brain.engine.records.statements import get_loaded, statement_times
from brain.engine.store.scope import Scope
from brain.engine.write.reads import ReadContext
from brain.errors import NotFound
from brain.wire.messages.recall_ops import Recall, Survivors

__all__ = [
    "COUNTED_STEPS",
    "RECORD_TYPES",
    "Judged",
    "TimesOf",
    "judge_candidates",
    "memory_times",
    "recall_filters",
    "row_times",
    "survivors",
]

COUNTED_STEPS: Final = (
    Step.TYPE,
    Step.TEMPORAL,
    Step.CONFIDENCE,
    Step.TOMBSTONE,
    Step.SUPERSESSION,
)
"""The steps EXPLAIN counts survivors of by the first step a candidate failed."""
RECORD_TYPES: Final = frozenset({"statement", "memory"})
"""The record types a recall returns when the request names no ``records``."""


def recall_filters(request: Recall) -> Filters:
    """The chain's filters as the request states them."""
    return Filters(
        kinds=request.kinds,
        predicates=request.predicates,
        valid_at=request.valid_at,
        valid_from=request.valid_from,
        valid_to=request.valid_to,
        min_confidence=request.min_confidence,
        include_tombstoned=bool(request.include_tombstoned),
        include_superseded=bool(request.include_superseded),
        as_of=request.as_of,
    )


def memory_times(row: dict[str, object]) -> RowTimes:
    """What the chain judges of a memory row (an event at ``occurred_at``, else
    ``recorded_at``; tombstoned at a soft forget, retracted once hard-forgotten)."""
    recorded = row["recorded_at"]
    assert isinstance(recorded, int)
    occurred = row.get("occurred_at")
    forgotten_at = row.get("forgotten_at")
    soft = row.get("forgotten") == "soft"
    return RowTimes(
        kind=None,
        predicate=None,
        confidence=1.0,
        recorded_at=recorded,
        event_at=occurred if isinstance(occurred, int) else recorded,
        record_invalidated_at=forgotten_at if soft and isinstance(forgotten_at, int) else None,
        tombstoned_at=forgotten_at if soft and isinstance(forgotten_at, int) else None,
        retracted=row.get("forgotten") == "hard",
    )


def row_times(ctx: ReadContext, scope: Scope, key: bytes) -> RowTimes | None:
    """What the chain judges of the document ``key``; None when the snapshot lacks it."""
    if key[:1] == MEMORY_DOC:
        row = memory_row(ctx.store, ctx.txn, scope, key[1:])
        return None if row is None else memory_times(row)
    try:
        return statement_times(get_loaded(ctx.store, ctx.txn, scope, key[1:], "id"))
    except NotFound:
        return None


class TimesOf:
    """What the chain judges of each document, read from the snapshot at most once per
    search: the context step, the named-time step and the chain all ask for the best
    candidates' times, and each read decodes a whole row."""

    def __init__(self, ctx: ReadContext, scope: Scope) -> None:
        self._ctx = ctx
        self._scope = scope
        self._known: dict[bytes, RowTimes | None] = {}

    def __call__(self, key: bytes) -> RowTimes | None:
        """The times of the document ``key``; None when the snapshot lacks it."""
        if key not in self._known:
            self._known[key] = row_times(self._ctx, self._scope, key)
        return self._known[key]

    def note(self, key: bytes, times: RowTimes | None) -> None:
        """Keep ``times`` for ``key``, worked out by a caller that read its row anyway."""
        self._known.setdefault(key, times)


@dataclass(frozen=True, slots=True)
class Judged:
    """The chain's outcome: the kept candidates in fused order, how many of them step 6
    restored, and the first step each judged candidate failed (``SURVIVED`` if none)."""

    kept: list[Candidate]
    restored: int
    first_failed: list[Step]

    def surviving(self, step: Step) -> int:
        """Judged candidates still standing after ``step`` (of steps 1 to 5)."""
        return sum(1 for f in self.first_failed if f is Step.SURVIVED or f > step)


def judge_candidates(
    ctx: ReadContext,
    scope: Scope,
    order: Sequence[Candidate],
    filters: Filters,
    records: Collection[str] | None,
    *,
    stop_after: int | None,
    times_of: TimesOf,
) -> Judged:
    """Judge ``order`` candidate by candidate; with ``stop_after``, stop once that many are
    kept (each is judged on its own, so the kept ones are the same; the rest go uncounted)."""
    allowed = set(records) if records is not None else set(RECORD_TYPES)
    first_failed: list[Step] = []
    kept: list[Candidate] = []
    restored = 0
    for candidate in order:
        times = times_of(candidate.key)
        if times is None:
            first_failed.append(Step.TYPE)  # gone from this snapshot: nothing to show
            continue
        verdict = (
            Verdict(Step.TYPE, first_failed=Step.TYPE)
            if candidate.record not in allowed
            else judge(times, filters)
        )
        first_failed.append(verdict.first_failed)
        if verdict.kept:
            kept.append(candidate)
            restored += int(verdict.restored)
            if stop_after is not None and len(kept) == stop_after:
                break
    return Judged(kept, restored, first_failed)


def survivors(judged: Judged, *, fused: int, limit: int) -> Survivors:
    """EXPLAIN's counts: ``fused`` candidates in, the survivors of each step, ``limit`` hits."""
    counts = [judged.surviving(step) for step in COUNTED_STEPS]
    return Survivors(
        fused=fused,
        type_=counts[0],
        temporal=counts[1],
        confidence=counts[2],
        tombstone=counts[3],
        supersession=counts[4],
        as_of=len(judged.kept),
        limit=limit,
    )
