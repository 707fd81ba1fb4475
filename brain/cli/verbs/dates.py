"""Times on the command line: ISO 8601 or raw nanoseconds in, ISO 8601 out.

The wire carries every time as signed nanoseconds since the Unix epoch, UTC
(spec/01-wire.md §2). People type dates. :func:`parse_time` accepts

- a date, ``2024-02-01``: midnight local time;
- a date-time, ``2024-02-01T09:30``, ``2024-02-01 09:30:15.123456789``: local
  time when it has no offset;
- a date-time with an offset, ``…Z``, ``…+02:00``, ``…+0200``, ``…-05``;
- all digits, ``1706745600000000000``: nanoseconds, as the wire and ``--json``
  show them (so ``20240201`` is 20 ms after the epoch, not a date).

Fractions of a second may have up to 9 digits, so any time the server shows
can be typed back exactly. :func:`format_time` shows a time in local time with
its offset, or in UTC with ``Z``, with as many fraction digits as it needs (0,
3, 6 or 9): a time copied from the output names the same nanosecond. Its
``compact`` form, for tables, is to the second (the fraction cut off, not
rounded) with a space for the ``T``: ``2026-12-04 20:31:05Z``, which reads back
as the start of that second.

Both take an optional ``tz``; ``None`` means the system's local time zone
(``TZ``), which is what the CLI uses.
"""

from __future__ import annotations

import datetime
import re
from typing import Final

__all__ = ["NANOS_PER_SECOND", "format_time", "parse_time"]

NANOS_PER_SECOND: Final = 1_000_000_000
_FRACTION_DIGITS: Final = 9
"""Nanoseconds: the wire's resolution, so no typed fraction needs more."""

_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

_ISO: Final = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})"
    r"(?:[T ](?P<hour>\d{2}):(?P<minute>\d{2})"
    r"(?::(?P<second>\d{2})(?:[.,](?P<fraction>\d+))?)?"
    r"(?P<offset>Z|z|[+-]\d{2}(?::?\d{2}(?::?\d{2})?)?)?)?"
)
"""ISO 8601 extended format: a date, optionally a time, optionally an offset.
An offset needs a time: ``2024-02-01Z`` is not ISO 8601."""

_FORMS: Final = (
    "a date (2024-02-01), a date-time (2024-02-01T09:30, local time), "
    "a date-time with an offset (2024-02-01T09:30:00Z, …+02:00), "
    "or nanoseconds since the epoch (all digits)"
)


def _offset(text: str) -> datetime.tzinfo:
    """``Z``, ``+HH``, ``+HHMM``, ``+HH:MM`` or ``+HH:MM:SS`` (the seconds of a historical
    local mean time, as :func:`format_time` shows them) as a fixed-offset time zone."""
    if text in ("Z", "z"):
        return datetime.UTC
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    hours = int(digits[:2])
    minutes = int(digits[2:4] or "0")
    seconds = int(digits[4:] or "0")
    if hours > 23 or minutes > 59 or seconds > 59:
        raise ValueError(f"offset {text!r} is out of range")
    offset = datetime.timedelta(hours=hours, minutes=minutes, seconds=seconds)
    return datetime.timezone(sign * offset)


def parse_time(text: str, *, tz: datetime.tzinfo | None = None) -> int:
    """Nanoseconds since the epoch for ``text`` (the forms of the module docstring).

    A time without an offset is read in ``tz`` (None: the local time zone).
    Raises ValueError with a message that lists the accepted forms.
    """
    value = text.strip()
    if value.isdigit() and value.isascii():
        return int(value)
    match = _ISO.fullmatch(value)
    if match is None:
        raise ValueError(f"{text!r} is not a time; use {_FORMS}")
    fraction = match["fraction"] or ""
    if len(fraction) > _FRACTION_DIGITS:
        raise ValueError(f"{text!r} has more than {_FRACTION_DIGITS} fraction digits")
    try:
        naive = datetime.datetime(
            int(match["year"]),
            int(match["month"]),
            int(match["day"]),
            int(match["hour"] or 0),
            int(match["minute"] or 0),
            int(match["second"] or 0),
        )
        if match["offset"] is not None:
            moment = naive.replace(tzinfo=_offset(match["offset"]))
        elif tz is None:
            moment = naive.astimezone()  # a naive datetime's astimezone reads it as local time
        else:
            moment = naive.replace(tzinfo=tz)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"{text!r} is not a valid time: {exc}") from None
    delta = moment - _EPOCH
    seconds = delta.days * 86_400 + delta.seconds
    return seconds * NANOS_PER_SECOND + int(fraction.ljust(_FRACTION_DIGITS, "0"))


def format_time(
    nanos: int, *, utc: bool = False, tz: datetime.tzinfo | None = None, compact: bool = False
) -> str:
    """``nanos`` as ISO 8601: in UTC with ``Z`` when ``utc``, else in ``tz`` (None:
    local time) with its offset; fraction digits only as many as needed (0, 3, 6, 9).

    ``compact``: to the second, the fraction cut off, and a space between date and
    time (``2026-12-04 20:31:05Z``), narrow enough for a table column."""
    seconds, fraction = divmod(nanos, NANOS_PER_SECOND)
    try:
        moment = _EPOCH + datetime.timedelta(seconds=seconds)
        if not utc:
            moment = moment.astimezone(tz) if tz is not None else moment.astimezone()
    except (OverflowError, OSError, ValueError):
        return f"{nanos} ns"  # beyond what datetime can show; the number is still exact
    stamp = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        f"{' ' if compact else 'T'}{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    if fraction and not compact:
        digits = f"{fraction:09d}"
        while digits.endswith("000"):
            digits = digits[:-3]
        stamp += "." + digits
    if utc:
        return stamp + "Z"
    return stamp + _offset_text(moment.utcoffset() or datetime.timedelta(0))


def _offset_text(offset: datetime.timedelta) -> str:
    """``+HH:MM`` (``+HH:MM:SS`` for the odd historical zone with seconds)."""
    total = int(offset.total_seconds())
    sign = "-" if total < 0 else "+"
    hours, rest = divmod(abs(total), 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}" + (f":{seconds:02d}" if seconds else "")
