"""Time named in the cue (spec/04-retrieval.md §5): a soft preference on the object axis.

A cue such as "what did Ann paint in July 2023?" or "where was Bob in 2022?"
names when the answer happened. After fusion and the conversational context,
each of the best :data:`TIME_DEPTH` candidates whose time falls in a span the
cue names gains :data:`TIME_WEIGHT` times the best candidate's score: it moves
ahead of candidates outside the span that scored up to that much more, and
never hides them (``valid_at``/``valid_from``/``valid_to`` are the filters
that do).

**Spans** are read from the cue in English, as written: a capitalised month
name (``July``, ``Sept``), with a day and a year or a year beside it
(``July 2023``, ``13 October, 2023``, ``October 13, 2023``), names that month
of that year; a month alone names it in any year; a four-digit year from 1900
to 2099 not beside a month names that year. Relative expressions ("last
year") are left alone: what they mean depends on when the cue was asked of
whom, which the server does not know.

**A record's time** is its time on the object axis as the filter chain judges
it, in UTC: a memory's ``occurred_at`` (else its ``recorded_at``, when it was
seen), an event statement's instant; a statement with a validity interval
matches a span naming a year when the interval overlaps it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from brain.engine.recall.fusion import Candidate, fused_order
from brain.engine.records.filters import RowTimes

__all__ = ["TIME_DEPTH", "TIME_WEIGHT", "Span", "cue_spans", "in_spans", "prefer_named_time"]

TIME_WEIGHT: Final = 0.5
"""A candidate in a named span gains this share of the best candidate's score:
measured on the LoCoMo development split, the preference helps from 0.3 on and
no more past 0.5, so half of the best score is as strong as it needs to be."""
TIME_DEPTH: Final = 100
"""Candidates, best first, whose times are read: deeper ones would need more than
the whole weight to reach the hits."""

_MONTHS: Final = {
    "January": 1,
    "Jan": 1,
    "February": 2,
    "Feb": 2,
    "March": 3,
    "Mar": 3,
    "April": 4,
    "Apr": 4,
    "May": 5,
    "June": 6,
    "Jun": 6,
    "July": 7,
    "Jul": 7,
    "August": 8,
    "Aug": 8,
    "September": 9,
    "Sept": 9,
    "Sep": 9,
    "October": 10,
    "Oct": 10,
    "November": 11,
    "Nov": 11,
    "December": 12,
    "Dec": 12,
}
_MONTH: Final = "|".join(sorted(_MONTHS, key=len, reverse=True))
_YEAR: Final = r"(?:19|20)\d\d"
_SPANS: Final = re.compile(
    rf"\b(?:\d{{1,2}}(?:st|nd|rd|th)?\s+)?(?P<month>{_MONTH})\b\.?"
    rf"(?:\s+\d{{1,2}}(?:st|nd|rd|th)?\b)?(?:,?\s+(?P<with>{_YEAR})\b)?"
    rf"|\b(?P<year>{_YEAR})\b"
)
_NS_PER_S: Final = 10**9


@dataclass(frozen=True, slots=True)
class Span:
    """A month of a year, a month of any year (``year`` None), or a year (``month`` None)."""

    year: int | None
    month: int | None

    def holds(self, when: datetime) -> bool:
        """Whether the instant ``when`` (UTC) falls in the span."""
        return (self.year is None or when.year == self.year) and (
            self.month is None or when.month == self.month
        )

    def bounds(self) -> tuple[int, int] | None:
        """``[start, end)`` in nanoseconds for a span with a year, else None."""
        if self.year is None:
            return None
        first, last = (self.month, self.month) if self.month is not None else (1, 12)
        start = datetime(self.year, first, 1, tzinfo=UTC)
        end = datetime(self.year + last // 12, last % 12 + 1, 1, tzinfo=UTC)
        return int(start.timestamp()) * _NS_PER_S, int(end.timestamp()) * _NS_PER_S


def cue_spans(cue: str) -> list[Span]:
    """The spans the cue names, in the order it names them, each once."""
    found: list[Span] = []
    for match in _SPANS.finditer(cue):
        if match.group("month"):
            year = match.group("with")
            span = Span(int(year) if year else None, _MONTHS[match.group("month")])
        else:
            span = Span(int(match.group("year")), None)
        if span not in found:
            found.append(span)
    return found


def in_spans(times: RowTimes | None, spans: Sequence[Span]) -> bool:
    """Whether a record with ``times`` falls in one of ``spans``."""
    if times is None:
        return False
    if times.event_at is not None:
        when = datetime.fromtimestamp(times.event_at // _NS_PER_S, tz=UTC)
        return any(span.holds(when) for span in spans)
    if times.valid_from is None and times.valid_to is None:
        return False
    start = times.valid_from if times.valid_from is not None else -(2**63)
    end = times.valid_to if times.valid_to is not None else 2**63
    for span in spans:
        bounds = span.bounds()
        if bounds is not None and start < bounds[1] and bounds[0] < end:
            return True
    return False


def prefer_named_time(
    order: Sequence[Candidate],
    spans: Sequence[Span],
    times_of: Callable[[bytes], RowTimes | None],
) -> list[Candidate]:
    """``order`` with each of its best :data:`TIME_DEPTH` candidates that is in a span
    raised, re-sorted; ``times_of`` gives a candidate's times by its key."""
    if not spans or not order:
        return list(order)
    lift = TIME_WEIGHT * max(candidate.score for candidate in order)
    for candidate in order[:TIME_DEPTH]:
        if in_spans(times_of(candidate.key), spans):
            candidate.score += lift
            candidate.named_time = lift
    return sorted(order, key=fused_order)
