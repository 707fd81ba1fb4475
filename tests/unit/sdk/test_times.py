"""Time arguments and ``Instant`` (spec/01-wire.md §10): every form converts to the
nanoseconds it means, an instant round-trips exactly, and the ambiguous forms are
refused by name."""

from __future__ import annotations

import copy
import datetime
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain.errors import InvalidArgument
from brain.sdk.times import MIN_PLAUSIBLE_NANOS, Instant, to_nanos

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
nanos = st.integers(I64_MIN, I64_MAX).filter(lambda n: abs(n) >= MIN_PLAUSIBLE_NANOS)
offsets = st.integers(-23 * 60, 23 * 60).map(
    lambda minutes: datetime.timezone(datetime.timedelta(minutes=minutes))
)


# No deadline: these are properties of exactness, and on a loaded machine the first
# example (importing pickle's and copy's machinery) can take longer than 200 ms.
@settings(deadline=None)
@given(nanos)
def test_an_instant_keeps_its_nanoseconds_through_every_form(n: int) -> None:
    instant = Instant(n)
    assert instant.nanos == n
    assert to_nanos(instant, argument="as_of") == n
    assert to_nanos(instant.iso(), argument="as_of") == n
    assert copy.deepcopy(instant).nanos == n
    assert pickle.loads(pickle.dumps(instant)).nanos == n
    assert instant.tzinfo is datetime.UTC
    # As a datetime it is the same instant to the microsecond (floored, as datetime
    # keeps no finer; the floor of the earliest wire time is before the wire's range).
    if n >= I64_MIN + 1000:
        assert to_nanos(datetime.datetime.fromisoformat(instant.isoformat()), argument="x") == (
            n - n % 1000
        )


@settings(deadline=None)
@given(
    st.datetimes(
        min_value=datetime.datetime(1678, 1, 1), max_value=datetime.datetime(2261, 12, 31)
    ),
    offsets,
)
def test_an_aware_datetime_is_its_instant_in_any_zone(
    moment: datetime.datetime, zone: datetime.tzinfo
) -> None:
    aware = moment.replace(tzinfo=zone)
    n = to_nanos(aware, argument="valid_from")
    assert Instant(n) == aware.astimezone(datetime.UTC)
    assert to_nanos(aware.isoformat(), argument="valid_from") == n
    assert to_nanos(aware.astimezone(datetime.UTC), argument="valid_from") == n


def test_the_written_forms() -> None:
    may_first = 1_714_521_600 * 10**9
    assert to_nanos("2024-05-01", argument="t") == may_first
    assert to_nanos(datetime.date(2024, 5, 1), argument="t") == may_first
    assert to_nanos("2024-05-01T10:00:00Z", argument="t") == may_first + 10 * 3600 * 10**9
    assert to_nanos("2024-05-01T12:00:00+02:00", argument="t") == may_first + 10 * 3600 * 10**9
    assert to_nanos("2024-05-01T00:00:00.000000001Z", argument="t") == may_first + 1
    assert to_nanos(may_first, argument="t") == may_first


def test_instants_order_by_nanoseconds() -> None:
    a, b = Instant(MIN_PLAUSIBLE_NANOS * 9000 + 1), Instant(MIN_PLAUSIBLE_NANOS * 9000 + 2)
    assert a < b and a != b and b >= a and max(a, b) is b


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (1_714_521_600, "seconds or milliseconds"),
        (1_714_521_600_000, "seconds or milliseconds"),
        (datetime.datetime(2024, 5, 1), "naive"),
        ("2024-05-01T10:00:00", "no offset"),
        ("yesterday", "not an ISO 8601"),
        ("2024-05-01T10:00:00.0000000001Z", "nine fraction digits"),
        (1 << 63, "range"),
    ],
)
def test_ambiguous_or_wrong_times_are_refused_by_name(value: object, words: str) -> None:
    with pytest.raises(InvalidArgument, match=words) as caught:
        to_nanos(value, argument="as_of")  # type: ignore[arg-type]
    assert caught.value.field == "as_of"
    assert "as_of" in caught.value.message


def test_other_types_are_a_type_error_naming_the_argument() -> None:
    with pytest.raises(TypeError, match="as_of"):
        to_nanos(1.7e18, argument="as_of")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="as_of"):
        to_nanos(True, argument="as_of")
    with pytest.raises(InvalidArgument, match="aware"):
        Instant(2024, 5, 1)
