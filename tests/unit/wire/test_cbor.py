"""The strict CBOR codec: RFC 8949 vectors, invalid inputs, round trips, cbor2, limits."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import Any, Final

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain import cbor, cbor_reference
from brain.cbor import (
    MAX_ARRAY_LENGTH,
    MAX_DEPTH,
    MAX_TEXT_BYTES,
    UNDEFINED,
    Simple,
    Tag,
    decode,
    encode,
)
from brain.errors import InvalidArgument

VECTORS_DIR: Final = Path(__file__).resolve().parents[2] / "data" / "cbor"
"""The CBOR test vectors kept with the tests (their README.md names the sources)."""
APPENDIX_A: Final = json.loads((VECTORS_DIR / "appendix_a.json").read_text())
VECTORS: Final = json.loads((VECTORS_DIR / "invalid_and_valid_vectors.json").read_text())

FAST_REJECT_S: Final = 0.1
"""A lying length header must be refused at once, long before any allocation could happen."""


# --- comparing and rendering ---------------------------------------------------------


def same(actual: object, expected: object) -> bool:
    """Equality that also tells int from float from bool, -0.0 from 0.0, and NaN = NaN."""
    if type(actual) is not type(expected):
        return False
    if isinstance(actual, float):
        assert isinstance(expected, float)
        if math.isnan(actual):
            return math.isnan(expected)
        return actual == expected and math.copysign(1, actual) == math.copysign(1, expected)
    if isinstance(actual, list):
        assert isinstance(expected, list)
        return len(actual) == len(expected) and all(map(same, actual, expected))
    if isinstance(actual, dict):
        assert isinstance(expected, dict)
        return actual.keys() == expected.keys() and all(
            same(actual[k], expected[k]) for k in actual
        )
    return actual == expected


def diagnostic(value: object) -> str:
    """RFC 8949 §8 diagnostic notation of a decoded value."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if value is UNDEFINED:
        return "undefined"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return float_diagnostic(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bytes):
        return f"h'{value.hex()}'"
    if isinstance(value, list):
        return "[" + ", ".join(diagnostic(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{diagnostic(k)}: {diagnostic(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Tag):
        return f"{value.number}({diagnostic(value.value)})"
    if isinstance(value, Simple):
        return f"simple({value.value})"
    raise TypeError(f"no diagnostic notation for {value!r}")


def float_diagnostic(value: float) -> str:
    """RFC 8949 §8 diagnostic notation of a float, which spells out NaN and the infinities."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


_INDEFINITE_BYTES = re.compile(r"\(_ (h'[0-9a-f]*'(?:, h'[0-9a-f]*')*)\)")


def definite(notation: str) -> str:
    """Rewrite indefinite byte strings ``(_ h'01', h'02')`` as the one string they decode to."""
    return _INDEFINITE_BYTES.sub(
        lambda m: "h'" + "".join(re.findall(r"h'([0-9a-f]*)'", m.group(1))) + "'", notation
    )


# --- RFC 8949 Appendix A -------------------------------------------------------------


@pytest.mark.parametrize("vector", APPENDIX_A, ids=[v["hex"] for v in APPENDIX_A])
def test_appendix_a(vector: dict[str, Any]) -> None:
    data = bytes.fromhex(vector["hex"])
    if vector["hex"] == "f818":
        # RFC 7049 listed simple(24) in two bytes; RFC 8949 §3.3 makes values below 32
        # in the two-byte form not well-formed, and invalid_and_valid_vectors.json agrees.
        with pytest.raises(InvalidArgument, match="simple value 24"):
            decode(data)
        return
    value = decode(data)
    if "decoded" in vector:
        assert same(value, vector["decoded"]), f"{value!r} != {vector['decoded']!r}"
    else:
        assert diagnostic(value) == definite(vector["diagnostic"])
    if vector["roundtrip"]:
        assert encode(value) == data


def test_definite_rewrites_indefinite_byte_strings() -> None:
    assert definite("(_ h'0102', h'030405')") == "h'0102030405'"
    assert definite("[(_ h'01'), 2]") == "[h'01', 2]"


# --- the invalid/valid corpus --------------------------------------------------------

# Single-precision Infinity is "canonical" to that corpus, but RFC 8949 §4.1
# preferred serialization picks the shortest float with the same value: f97c00.
NOT_PREFERRED_SERIALIZATION: Final = frozenset({"fa7f800000"})


@pytest.mark.parametrize(
    "vector", VECTORS, ids=[f"{i}-{v['hex'].lower()}" for i, v in enumerate(VECTORS)]
)
def test_invalid_and_valid_vectors(vector: dict[str, Any]) -> None:
    data = bytes.fromhex(vector["hex"])
    flags = vector["flags"]
    if "invalid" in flags:
        with pytest.raises(InvalidArgument):
            decode(data)
        return
    assert "valid" in flags
    value = decode(data)
    if "canonical" in flags and vector["hex"].lower() not in NOT_PREFERRED_SERIALIZATION:
        assert encode(value) == data


def test_vector_files_are_not_empty() -> None:
    assert len(APPENDIX_A) > 80
    assert sum("invalid" in v["flags"] for v in VECTORS) > 600
    assert sum("valid" in v["flags"] for v in VECTORS) > 80


# --- round trips ---------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.binary()
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(), inner, max_size=8),
    max_leaves=40,
)


@settings(max_examples=200, deadline=None)
@given(values)
def test_encode_then_decode_is_identity(value: object) -> None:
    assert same(decode(encode(value)), value)


@settings(max_examples=150, deadline=None)
@given(values)
def test_encoding_is_deterministic_and_canonical(value: object) -> None:
    data = encode(value)
    assert encode(decode(data)) == data


@settings(max_examples=150, deadline=None)
@given(values)
def test_cbor2_reads_what_we_write(value: object) -> None:
    assert same(cbor2.loads(encode(value)), value)


@settings(max_examples=150, deadline=None)
@given(values)
def test_we_read_what_cbor2_writes(value: object) -> None:
    assert same(decode(cbor2.dumps(value)), value)


@settings(max_examples=150, deadline=None)
@given(values)
def test_we_read_cbor2_canonical_output_and_write_the_same_bytes(value: object) -> None:
    data = cbor2.dumps(value, canonical=True)
    assert same(decode(data), value)
    assert encode(value) == data


def test_tags_and_simple_values_round_trip() -> None:
    for value in (Tag(1, 1363896240), Tag(32, "http://x"), Simple(16), Simple(255), UNDEFINED):
        assert decode(encode(value)) == value


def test_big_integers_travel_as_bignum_tags() -> None:
    assert encode(2**64) == bytes.fromhex("c249010000000000000000")
    assert encode(-(2**64) - 1) == bytes.fromhex("c349010000000000000000")
    assert decode(bytes.fromhex("c249010000000000000000")) == 2**64


def test_nan_is_encoded_as_the_canonical_half_float() -> None:
    assert encode(float("nan")) == b"\xf9\x7e\x00"


def test_encode_refuses_types_cbor_has_no_form_for() -> None:
    with pytest.raises(TypeError):
        encode(object())


# --- limits --------------------------------------------------------------------------


def nested_arrays(depth: int) -> bytes:
    """``depth`` arrays inside each other, the innermost empty."""
    return b"\x81" * (depth - 1) + b"\x80"


def test_nesting_depth_of_32_is_accepted() -> None:
    assert MAX_DEPTH == 32
    value = decode(nested_arrays(32))
    for _ in range(31):
        assert isinstance(value, list)
        (value,) = value
    assert value == []


def test_nesting_depth_of_33_is_rejected() -> None:
    with pytest.raises(InvalidArgument, match="nesting"):
        decode(nested_arrays(33))
    with pytest.raises(InvalidArgument, match="nesting"):
        decode(b"\xa1\x61a" * 32 + b"\xa0")  # maps count too
    with pytest.raises(InvalidArgument, match="nesting"):
        decode(b"\xc1" * 32 + b"\x00")  # and tags


def test_deep_nesting_never_recurses_out_of_the_stack() -> None:
    with pytest.raises(InvalidArgument):
        decode(b"\x9f" * 100_000)


def array_header(count: int) -> bytes:
    """A definite-length array header for ``count`` items."""
    return b"\x9a" + count.to_bytes(4, "big")


def test_array_of_100_000_items_is_accepted() -> None:
    value = decode(array_header(MAX_ARRAY_LENGTH) + b"\x00" * MAX_ARRAY_LENGTH)
    assert isinstance(value, list)
    assert len(value) == 100_000


def test_array_of_100_001_items_is_rejected() -> None:
    count = MAX_ARRAY_LENGTH + 1
    with pytest.raises(InvalidArgument, match="over 100000 items"):
        decode(array_header(count) + b"\x00" * count)
    with pytest.raises(InvalidArgument, match="over 100000 items"):
        decode(b"\x9f" + b"\x00" * count + b"\xff")


@pytest.mark.parametrize(
    "header",
    [
        b"\x9a\xff\xff\xff\xff",  # array of 2**32 - 1 items
        b"\x9b" + (1 << 32).to_bytes(8, "big"),  # array of 2**32 items
        b"\x9b\xff\xff\xff\xff\xff\xff\xff\xff",  # array of 2**64 - 1 items
        b"\xbb" + (1 << 32).to_bytes(8, "big"),  # map of 2**32 pairs
        b"\x5b" + (1 << 32).to_bytes(8, "big"),  # byte string of 4 GiB
        b"\x7a\xff\xff\xff\xff",  # text of 4 GiB
    ],
)
def test_lying_length_on_a_short_buffer_is_rejected_fast(header: bytes) -> None:
    started = time.perf_counter()
    with pytest.raises(InvalidArgument):
        decode(header + b"\x00" * 16)
    assert time.perf_counter() - started < FAST_REJECT_S


def test_array_count_past_the_end_of_the_input_is_rejected() -> None:
    with pytest.raises(InvalidArgument, match="runs past the end"):
        decode(array_header(1000) + b"\x00" * 999)


def text_item(size: int) -> bytes:
    """A definite-length text string of ``size`` ASCII bytes."""
    return b"\x7a" + size.to_bytes(4, "big") + b"a" * size


def test_text_of_one_mib_is_accepted() -> None:
    assert decode(text_item(MAX_TEXT_BYTES)) == "a" * MAX_TEXT_BYTES


def test_text_over_one_mib_is_rejected() -> None:
    with pytest.raises(InvalidArgument, match="over 1048576 bytes"):
        decode(text_item(MAX_TEXT_BYTES + 1))
    half = MAX_TEXT_BYTES // 2 + 1
    chunk = b"\x7a" + half.to_bytes(4, "big") + b"a" * half
    with pytest.raises(InvalidArgument, match="over 1048576 bytes"):
        decode(b"\x7f" + chunk + chunk + b"\xff")  # indefinite: the chunks add up


def test_duplicate_text_key_is_rejected_with_its_name_as_field() -> None:
    with pytest.raises(InvalidArgument) as caught:
        decode(bytes.fromhex("a3 61 61 01 61 62 02 61 61 03".replace(" ", "")))
    assert caught.value.field == "a"


def test_duplicate_key_spelled_two_ways_is_rejected() -> None:
    # "a" as a definite and as an indefinite text string is the same key.
    with pytest.raises(InvalidArgument, match="duplicate") as caught:
        decode(bytes.fromhex("a2 61 61 01 7f 61 61 ff 02".replace(" ", "")))
    assert caught.value.field == "a"


def test_two_nan_keys_are_duplicates() -> None:
    # Unequal in Python, one key in CBOR: accepting them would re-encode as a duplicate.
    with pytest.raises(InvalidArgument, match="duplicate"):
        decode(bytes.fromhex("a2 f97e00 a0 f97e00 a1616101".replace(" ", "")))


def test_duplicate_huge_bignum_keys_are_an_invalid_argument() -> None:
    # repr() of an int this large raises ValueError; the error must not try it.
    big = b"\xc2\x59\x07\xd0" + b"\x01" * 2000
    with pytest.raises(InvalidArgument, match="duplicate map key of type int"):
        decode(b"\xa2" + big + b"\x00" + big + b"\x00")


def test_array_or_map_as_map_key_is_rejected() -> None:
    with pytest.raises(InvalidArgument, match="array or map"):
        decode(b"\xa1\x80\x00")


def test_trailing_bytes_are_rejected() -> None:
    with pytest.raises(InvalidArgument, match="1 bytes follow"):
        decode(b"\x00\x00")
    with pytest.raises(InvalidArgument, match="bytes follow"):
        decode(encode({"a": 1}) + b"\xff")


def test_empty_input_is_rejected() -> None:
    with pytest.raises(InvalidArgument):
        decode(b"")


@pytest.mark.parametrize(
    "data",
    [
        b"\x62\xc3\x28",  # bad continuation byte
        b"\x61\x80",  # lone continuation byte
        b"\x63\xed\xa0\x80",  # UTF-8-encoded surrogate
        b"\x7f\x61\xc3\x61\xa9\xff",  # é split across two chunks: each must be valid alone
    ],
)
def test_invalid_utf8_is_rejected(data: bytes) -> None:
    with pytest.raises(InvalidArgument, match="UTF-8"):
        decode(data)


def test_every_failure_is_invalid_argument_without_field_unless_a_key() -> None:
    with pytest.raises(InvalidArgument) as caught:
        decode(b"\x1c")
    assert caught.value.field is None
    assert "not valid CBOR" in caught.value.message


def test_module_limits_are_the_wire_limits() -> None:
    assert (cbor.MAX_DEPTH, cbor.MAX_ARRAY_LENGTH, cbor.MAX_TEXT_BYTES) == (
        32,
        100_000,
        1024 * 1024,
    )


# --- the fast path for plain data --------------------------------------------------------


def strict(data: bytes) -> object:
    """What the strict decoder alone answers (the reference for the fast paths)."""
    decoder = cbor_reference._Decoder(data)
    value = decoder.item(1)
    if decoder.pos != decoder.end:
        raise InvalidArgument("trailing bytes")
    return value


def outcome(run: Any, data: bytes) -> tuple[str, object]:
    try:
        return "value", run(data)
    except InvalidArgument:
        return "error", None


def agree(data: bytes) -> None:
    strict_kind, strict_value = outcome(strict, data)
    # Both fast paths: the reference's own for plain data, and cbor2's in front of it.
    for run in (decode, cbor_reference.decode):
        fast_kind, fast_value = outcome(run, data)
        assert fast_kind == strict_kind, data.hex()
        if fast_kind == "value":
            assert same(fast_value, strict_value), data.hex()
            assert type(fast_value) is type(strict_value)


@settings(max_examples=300, deadline=None)
@given(values, st.data())
def test_fast_path_answers_what_the_strict_decoder_answers(value: object, data: Any) -> None:
    encoded = encode(value)
    agree(encoded)
    # The same bytes cut short, with a byte changed, or with bytes after them.
    if encoded:
        cut = data.draw(st.integers(min_value=0, max_value=len(encoded) - 1))
        agree(encoded[:cut])
        flipped = bytearray(encoded)
        flipped[cut] = data.draw(st.integers(min_value=0, max_value=255))
        agree(bytes(flipped))
    agree(encoded + b"\x00")


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64))
def test_fast_path_agrees_on_arbitrary_bytes(data: bytes) -> None:
    agree(data)


@pytest.mark.parametrize(
    "hex_input",
    [
        "a2616101616102",  # repeated text key: strict names it
        "a1016161",  # integer key: left to the strict decoder
        "c11a514b67b0",  # a tag
        "f7",  # undefined
        "e0",  # a simple value
        "9f01ff",  # indefinite array
        "7f616161ff",  # indefinite text
        "62c328",  # invalid UTF-8
        "1c",  # reserved additional information
        "3f",  # indefinite length on a negative integer
        "f818",  # two-byte simple value below 32
        "18",  # one-byte argument missing
        "1a0102",  # four-byte argument cut short
        "3b01020304050607",  # eight-byte argument cut short
        "fa0102",  # single float cut short
    ],
)
def test_fast_path_hands_everything_else_to_the_strict_decoder(hex_input: str) -> None:
    agree(bytes.fromhex(hex_input))


@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1])
def test_fast_path_agrees_at_the_depth_bound(depth: int) -> None:
    # Only containers check the bound on the fast path: empty ones, ones holding a
    # scalar, and maps all have to land on the strict decoder's side of it.
    agree(nested_arrays(depth))
    agree(b"\x81" * (depth - 1) + b"\x01")
    agree(b"\x81" * depth + b"\x01")
    agree(b"\xa1\x61a" * (depth - 1) + b"\xa0")
    agree(b"\xa1\x61a" * (depth - 1) + b"\xa1\x61a\xf5")
