"""Times as the facade takes and gives them (spec/01-wire.md §10).

The wire carries every time as signed nanoseconds since the Unix epoch, UTC.
People write times as datetimes, dates and ISO 8601 text, and an integer of
*seconds* passed where nanoseconds are meant is a silent bug (an ``as_of`` in
1970 sees nothing). :func:`to_nanos` therefore takes the forms people write
and refuses the ambiguous ones by name; :class:`Instant` is what results carry:
a UTC ``datetime`` that keeps the exact nanoseconds, so a time read from one
answer can be sent back in the next without losing the last three digits.
"""

from __future__ import annotations

import datetime
import re
from typing import Final, Self

from brain.errors import InvalidArgument

__all__ = ["MIN_PLAUSIBLE_NANOS", "Instant", "TimeLike", "to_nanos"]

NANOS_PER_SECOND: Final = 1_000_000_000
NANOS_PER_MICRO: Final = 1_000
_NANOS_PER_DAY: Final = 86_400 * NANOS_PER_SECOND

MIN_PLAUSIBLE_NANOS: Final = _NANOS_PER_DAY
"""An integer time of smaller magnitude is refused: in nanoseconds it is within a
day of 1970, which no agent means, while the current time in seconds (about
1.7e9) or milliseconds (about 1.7e12) lands there. Refusing it turns the silent
empty answer of an ``as_of`` in seconds into an error that names the argument."""

_I64_MIN: Final = -(1 << 63)
_I64_MAX: Final = (1 << 63) - 1
_MAX_FRACTION_DIGITS: Final = 9
"""Nanoseconds: the finest time the wire carries."""

_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

# A fraction of a second in ISO text; taken out before datetime.fromisoformat
# parses the rest, since it keeps only six digits and the wire has nine.
_FRACTION: Final = re.compile(r"(T\d{2}:\d{2}:\d{2})[.,](\d+)")


def _nanos_of(moment: datetime.datetime) -> int:
    """The exact nanoseconds of an aware datetime (integer arithmetic: no float rounding)."""
    delta = moment - _EPOCH
    return (
        delta.days * 86_400 + delta.seconds
    ) * NANOS_PER_SECOND + delta.microseconds * NANOS_PER_MICRO


class Instant(datetime.datetime):
    """A UTC ``datetime`` that keeps the exact nanoseconds of a wire time in ``nanos``.

    ``Instant(nanos)`` makes one; every facade result carries its times as
    instants, and every time argument takes one back exactly. Instants compare by
    their nanoseconds; the datetime arithmetic inherited gives datetimes of
    microsecond precision.
    """

    __slots__ = ("_nanos",)
    _nanos: int

    def __new__(cls, *args: object, **kwargs: object) -> Self:
        """``Instant(nanos)``; the datetime form (year, month, …, tzinfo) is what the
        inherited datetime methods call, and must be aware."""
        if len(args) == 1 and not kwargs and type(args[0]) is int:
            nanos = args[0]
            seconds, rest = divmod(nanos, NANOS_PER_SECOND)
            base = _EPOCH + datetime.timedelta(
                seconds=seconds, microseconds=rest // NANOS_PER_MICRO
            )
            made = datetime.datetime.__new__(
                cls,
                base.year,
                base.month,
                base.day,
                base.hour,
                base.minute,
                base.second,
                base.microsecond,
                tzinfo=datetime.UTC,
            )
            made._nanos = nanos
            return made
        made = datetime.datetime.__new__(cls, *args, **kwargs)  # type: ignore[arg-type]
        if made.tzinfo is None or made.utcoffset() is None:
            raise InvalidArgument("an Instant must be timezone-aware")
        made._nanos = _nanos_of(made)
        return made

    @classmethod
    def from_datetime(cls, moment: datetime.datetime) -> Instant:
        """The instant of an aware datetime; InvalidArgument for a naive one."""
        return cls(to_nanos(moment, argument="moment"))

    @property
    def nanos(self) -> int:
        """Nanoseconds since the Unix epoch, UTC: exactly what the wire carried."""
        return self._nanos

    def iso(self) -> str:
        """ISO 8601 UTC with as many fraction digits as needed (0, 3, 6 or 9): exact."""
        seconds, fraction = divmod(self._nanos, NANOS_PER_SECOND)
        stamp = (_EPOCH + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")
        if fraction == 0:
            return stamp + "Z"
        digits = f"{fraction:09d}"
        while digits.endswith("000"):
            digits = digits[:-3]
        return f"{stamp}.{digits}Z"

    def __repr__(self) -> str:
        """``Instant('2024-05-01T10:00:00.000000001Z')``."""
        return f"Instant({self.iso()!r})"

    def __reduce_ex__(self, protocol: object) -> tuple[type[Instant], tuple[int]]:
        """Copies and pickles keep the nanoseconds (datetime's own keeps microseconds)."""
        return (Instant, (self._nanos,))

    # Instants compare by nanoseconds; against a plain datetime, as datetimes do.
    def __eq__(self, other: object) -> bool:
        if isinstance(other, Instant):
            return self._nanos == other._nanos
        return super().__eq__(other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __lt__(self, other: datetime.date) -> bool:
        if isinstance(other, Instant):
            return self._nanos < other._nanos
        if isinstance(other, datetime.datetime):
            return super().__lt__(other)
        return NotImplemented

    def __le__(self, other: datetime.date) -> bool:
        if isinstance(other, Instant):
            return self._nanos <= other._nanos
        if isinstance(other, datetime.datetime):
            return super().__le__(other)
        return NotImplemented

    def __gt__(self, other: datetime.date) -> bool:
        if isinstance(other, Instant):
            return self._nanos > other._nanos
        if isinstance(other, datetime.datetime):
            return super().__gt__(other)
        return NotImplemented

    def __ge__(self, other: datetime.date) -> bool:
        if isinstance(other, Instant):
            return self._nanos >= other._nanos
        if isinstance(other, datetime.datetime):
            return super().__ge__(other)
        return NotImplemented

    # Equal instants hash alike; instants within one microsecond share a hash.
    __hash__ = datetime.datetime.__hash__


TimeLike = Instant | datetime.datetime | datetime.date | str | int
"""What every time argument of the facade takes (see :func:`to_nanos`)."""


def _parse_text(text: str, argument: str) -> int:
    extra = 0
    stripped = text.strip()
    match = _FRACTION.search(stripped)
    if match is not None:
        digits = match.group(2)
        if len(digits) > _MAX_FRACTION_DIGITS:
            raise InvalidArgument(
                f"{argument}: {text!r} has more than nine fraction digits (nanoseconds)",
                field=argument,
            )
        extra = int(digits.ljust(_MAX_FRACTION_DIGITS, "0"))
        stripped = stripped[: match.start()] + match.group(1) + stripped[match.end() :]
    try:
        if "T" not in stripped and " " not in stripped:
            day = datetime.date.fromisoformat(stripped)
            return _nanos_of(datetime.datetime.combine(day, datetime.time(), datetime.UTC))
        moment = datetime.datetime.fromisoformat(stripped)
    except ValueError:
        raise InvalidArgument(
            f"{argument}: {text!r} is not an ISO 8601 date or time "
            "(e.g. 2024-05-01 or 2024-05-01T10:00:00Z)",
            field=argument,
        ) from None
    if moment.tzinfo is None:
        raise InvalidArgument(
            f"{argument}: {text!r} has no offset; add Z for UTC or an offset such as +02:00",
            field=argument,
        )
    return _nanos_of(moment) + extra


def to_nanos(value: TimeLike, *, argument: str) -> int:
    """Nanoseconds since the epoch, UTC, from any form a time argument takes.

    An :class:`Instant` gives its exact nanoseconds; an aware ``datetime`` its
    instant (a naive one is refused: its zone is a guess); a ``date`` midnight UTC;
    text is ISO 8601 (a date, or a time with ``Z`` or an offset, up to nine
    fraction digits); an ``int`` is nanoseconds, refused when its magnitude is
    below :data:`MIN_PLAUSIBLE_NANOS` (almost surely seconds or milliseconds).
    Raises InvalidArgument naming ``argument``, or TypeError for another type.
    """
    if isinstance(value, Instant):
        return value.nanos
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidArgument(
                f"{argument}: a naive datetime has no timezone; "
                "use an aware one, e.g. datetime.now(UTC)",
                field=argument,
            )
        nanos = _nanos_of(value)
    elif isinstance(value, datetime.date):
        nanos = _nanos_of(datetime.datetime.combine(value, datetime.time(), datetime.UTC))
    elif isinstance(value, str):
        nanos = _parse_text(value, argument)
    elif isinstance(value, int) and not isinstance(value, bool):
        if abs(value) < MIN_PLAUSIBLE_NANOS:
            raise InvalidArgument(
                f"{argument}: {value} as nanoseconds is within a day of 1970, so it is "
                "almost surely seconds or milliseconds; pass nanoseconds, a datetime "
                "or ISO 8601 text",
                field=argument,
            )
        nanos = value
    else:
        raise TypeError(
            f"{argument} must be a datetime, date, ISO 8601 text, Instant or int "
            f"nanoseconds, not {type(value).__name__}"
        )
    if not _I64_MIN <= nanos <= _I64_MAX:
        raise InvalidArgument(
            f"{argument}: {value!r} is outside the wire's time range (years 1677 to 2262)",
            field=argument,
        )
    return nanos


def optional_nanos(value: TimeLike | None, *, argument: str) -> int | None:
    """:func:`to_nanos`, passing None through (an argument left out)."""
    return None if value is None else to_nanos(value, argument=argument)


def optional_instant(nanos: int | None) -> Instant | None:
    """The instant of an optional wire time."""
    return None if nanos is None else Instant(nanos)
