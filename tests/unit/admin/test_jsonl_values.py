"""The JSONL form's values turn into JSON and back exactly: every signed 64-bit time,
every free value an entity attribute can hold (byte strings and maps that look like
tags included), every float32 vector in either encoding; and a value of another
shape is refused, naming its field."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brain import cbor
from brain.engine.admin.jsonl_values import (
    I64_MAX,
    I64_MIN,
    FieldError,
    free_from_json,
    free_to_json,
    hex_from_json,
    iso_time,
    time_from_json,
    vector_from_json,
    vector_to_json,
)


@given(st.integers(I64_MIN, I64_MAX))
def test_every_time_reads_back_as_itself(nanos: int) -> None:
    text = iso_time(nanos)
    assert len(text) == len("2024-05-01T10:00:00.123456789Z")
    assert time_from_json(text, "t") == nanos


def test_times_are_utc_with_nine_fraction_digits() -> None:
    assert iso_time(0) == "1970-01-01T00:00:00.000000000Z"
    assert iso_time(-1) == "1969-12-31T23:59:59.999999999Z"
    assert iso_time(1_714_557_600_123_456_789) == "2024-05-01T10:00:00.123456789Z"
    assert iso_time(I64_MIN) == "1677-09-21T00:12:43.145224192Z"
    assert iso_time(I64_MAX) == "2262-04-11T23:47:16.854775807Z"


@pytest.mark.parametrize(
    "text",
    [
        "2024-05-01T10:00:00Z",
        "2024-05-01T10:00:00.123Z",
        "2024-05-01T10:00:00.000000000+02:00",
        "2024-05-01 10:00:00.000000000Z",
        "2024-02-30T10:00:00.000000000Z",
        "2262-04-11T23:47:16.854775808Z",
        "1714557600123456789",
        1_714_557_600_123_456_789,
    ],
)
def test_a_time_of_another_form_is_refused(text: object) -> None:
    with pytest.raises(FieldError) as refused:
        time_from_json(text, "state.closed_at")
    assert refused.value.path == "state.closed_at"


_free = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(1 << 63), (1 << 64) - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["a", "$hex", "$map", "$x", "b"]), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(_free)
def test_every_free_value_reads_back_as_itself(value: object) -> None:
    written = json.dumps(free_to_json(value))
    # CBOR tells 1 from 1.0 and a list from a map, as the stored row does.
    assert cbor.encode(free_from_json(json.loads(written), "attributes")) == cbor.encode(value)


def test_byte_strings_and_maps_that_look_like_tags() -> None:
    assert free_to_json(b"\x00\xff") == {"$hex": "00ff"}
    assert free_to_json({"$hex": "00"}) == {"$map": {"$hex": "00"}}
    assert free_from_json({"$map": {"$hex": "00"}}, "a") == {"$hex": "00"}
    with pytest.raises(FieldError, match="not a tag"):
        free_from_json({"$bytes": "00"}, "attributes.x")


@given(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=1))
def test_every_float32_vector_reads_back_in_both_encodings(values: list[float]) -> None:
    raw = vector_from_json(values, "vector", "list")
    for encoding in ("base64", "list"):
        written = json.loads(json.dumps(vector_to_json(raw, encoding)))
        assert vector_from_json(written, "vector", encoding) == raw


@pytest.mark.parametrize(
    ("value", "encoding"),
    [
        ("AAAA", "base64"),
        ("not base64!", "base64"),
        ([], "list"),
        (["1"], "list"),
        ([1e300], "list"),
    ],
)
def test_a_vector_of_another_form_is_refused(value: object, encoding: str) -> None:
    with pytest.raises(FieldError):
        vector_from_json(value, "vector", encoding)


def test_hex_is_lowercase_and_of_its_length() -> None:
    assert hex_from_json("00ff", "id") == b"\x00\xff"
    for bad in ("00FF", "0", "zz", 12):
        with pytest.raises(FieldError):
            hex_from_json(bad, "id")
    with pytest.raises(FieldError, match="16 bytes"):
        hex_from_json("00ff", "id", 16)
