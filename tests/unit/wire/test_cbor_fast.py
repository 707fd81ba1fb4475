"""cbor2's codec behind brain.cbor, held to the pure-Python reference: the same bytes,
the same values, the same refusals word for word; and safe on hostile input."""

from __future__ import annotations

import enum
import json
import math
import re
import subprocess
import sys
import textwrap
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import cbor, cbor_fast
from brain import cbor_reference as reference
from brain.cbor import UNDEFINED, Simple, Tag, decode, decode_stored, encode
from brain.errors import InvalidArgument
from protocol.bless import GOLDEN_PATH

REPO: Final = Path(__file__).resolve().parents[3]
CORPORA: Final = REPO / "fuzz" / "corpus"

LONG_TEXT: Final = "x" * (cbor_fast.SMALL_INPUT_BYTES + 8)
"""A text that makes any input holding it long enough for cbor2 to decode."""

LONG: Final = reference.encode(LONG_TEXT)

PAYLOAD_SELECTOR_BYTES: Final = 2
"""Bytes before the CBOR payload in a payload-corpus input (fuzz/fuzz_payloads.py)."""

RECORD_HEADER_BYTES: Final = 4
"""Bytes before each payload in a re-framing record of the wire corpus (fuzz/fuzz_wire.py)."""

HOSTILE_MEMORY_LIMIT: Final = 512 * 1024 * 1024
"""Address space the hostile-input child may use: a few times what Python and cbor2
need, far below what any of the lengths the inputs claim would take."""

HOSTILE_TIME_LIMIT_S: Final = 60
"""Cap on the hostile-input child, well above the second or two it takes."""


# --- comparing --------------------------------------------------------------------------


def same(actual: object, expected: object) -> bool:
    """Equality that also tells int from float from bool, -0.0 from 0.0, and NaN = NaN,
    at every level, tags included."""
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
        # Keys in order, by position: two NaN keys are never equal to each other.
        return same(list(actual), list(expected)) and same(
            list(actual.values()), list(expected.values())
        )
    if isinstance(actual, Tag):
        assert isinstance(expected, Tag)
        return actual.number == expected.number and same(actual.value, expected.value)
    return actual == expected


def verdict(run: Callable[[bytes], object], data: bytes) -> tuple[str, object, object]:
    """What a decoder answers: its value, or its refusal's message and field."""
    try:
        return "value", run(data), None
    except InvalidArgument as exc:
        return "error", exc.message, exc.field


def agree(data: bytes) -> None:
    """``decode`` answers exactly what the reference answers."""
    new, ref = verdict(decode, data), verdict(reference.decode, data)
    assert new[0] == ref[0], (data.hex(), new, ref)
    if new[0] == "value":
        assert same(new[1], ref[1]), data.hex()
    else:
        assert new[1:] == ref[1:], data.hex()


def long(data: bytes) -> bytes:
    """``data`` as the second item of an array whose first is a long text: whatever
    ``data`` holds (trailing bytes too), the input is long enough for cbor2."""
    return b"\x82" + LONG + data


def encoded_outcome(value: object) -> tuple[str, object]:
    """The bytes an encoder writes, or the type and text of its error."""
    try:
        return "bytes", encode(value)
    except Exception as exc:
        return "error", (type(exc), str(exc))


def reference_outcome(value: object) -> tuple[str, object]:
    try:
        return "bytes", reference.encode(value)
    except Exception as exc:
        return "error", (type(exc), str(exc))


# --- values -----------------------------------------------------------------------------


class Colour(enum.IntEnum):
    RED = 1
    BLUE = 300


class Kind(enum.StrEnum):
    FACT = "fact"


class Score(float):
    """A float subclass, as a numeric library's scalar is."""


def as_view(raw: bytes) -> memoryview:
    """``raw`` as a memoryview, which the encoders write as a byte string."""
    return memoryview(raw)


surrogate_text = st.text(alphabet=st.characters(codec=None, categories=["Cs"]), min_size=1)
floats = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)
plain_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | floats
    | st.text()
    | st.binary()
)
odd_scalars = (
    st.binary().map(bytearray)
    | st.binary().map(as_view)
    | st.sampled_from([UNDEFINED, Colour.RED, Colour.BLUE, Kind.FACT])
    | (st.integers(0, 19) | st.integers(32, 255)).map(Simple)
    | floats.map(Score)
    | surrogate_text
)
keys = (
    st.text()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.binary(max_size=6)
    | floats
    | st.booleans()
    | st.none()
    | st.tuples(st.integers(0, 5), st.text(max_size=3))
    | st.sampled_from([Kind.FACT])
)


def containers(inner: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return (
        st.lists(inner, max_size=6)
        | st.lists(inner, max_size=6).map(tuple)
        | st.dictionaries(st.text(max_size=12), inner, max_size=8)
        | st.dictionaries(keys, inner, max_size=5)
        | st.dictionaries(st.text(max_size=4), inner, max_size=4).map(OrderedDict)
        | st.builds(Tag, st.integers(0, 2**64 - 1), inner)
    )


any_values = st.recursive(plain_scalars | odd_scalars, containers, max_leaves=30)
plain_values = st.recursive(
    plain_scalars,
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=8)
    ),
    max_leaves=30,
)


# --- encoding -------------------------------------------------------------------------------


@settings(max_examples=600, deadline=None)
@given(any_values)
def test_encode_writes_the_reference_bytes_or_raises_its_error(value: object) -> None:
    assert encoded_outcome(value) == reference_outcome(value)


def stable_id(value: object) -> str:
    """A case's id without the memory addresses ``repr`` shows, so that every process
    collecting the tests names them the same."""
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


@pytest.mark.parametrize(
    "value",
    [
        {1: 2, "a": 3, 2**40: 1, -1: 0},  # length-first order would differ from bytewise
        {"bb": 1, "a": 2, "c" * 30: 3, "c" * 25: 4, "é": 5, "z": 6},
        {(1, 2): 0, (3,): 1},
        {b"\x02": 1, b"\x01\x00": 2},
        {float("nan"): 1, 0.5: 2},
        [-0.0, 5.960464477539063e-08, 1e-40, 65504.0, 65520.0, float("inf"), float("-inf")],
        [float("nan"), 1.5, 3.4028234663852886e38, 1.0000001],
        [2**64 - 1, 2**64, -(2**64), -(2**64) - 1, 2**300, -(2**300)],
        (1, (2, (3,))),
        [bytearray(b"ab"), memoryview(b"cd"), b"ef"],
        [Tag(1, 1363896240), Tag(2**40, {"a": [Simple(16)]}), Simple(255), UNDEFINED],
        {"m": Colour.BLUE, "k": Kind.FACT, "s": Score(0.25)},
        OrderedDict([(2, "b"), ("a", 1)]),
        {"a": {"b": {"c": {}}}, "list": [[], [[]], {}]},
    ],
    ids=stable_id,
)
def test_encode_agrees_on_the_cases_cbor2_would_get_wrong(value: object) -> None:
    assert encode(value) == reference.encode(value)


@pytest.mark.parametrize(
    "value",
    [{1, 2}, frozenset(), range(3), 1 + 2j, object(), {"a": {"b": [{3}]}}, ["\ud800"]],
    ids=stable_id,
)
def test_encode_refuses_what_the_reference_refuses(value: object) -> None:
    new, ref = encoded_outcome(value), reference_outcome(value)
    assert new == ref
    assert new[0] == "error"


def test_plain_data_is_written_by_cbor2(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fast path must carry plain rows itself, not hand them to the reference.
    rows = [
        {"kind": "fact", "subject": b"\x01" * 16, "evidence": [{"memory": b"\x02" * 16}]},
        {"confidence": 0.5, "kind": "fact", "version": 2**64, "tags": ("a", -1), "none": None},
    ]
    expected = [reference.encode(row) for row in rows]
    for row in rows:
        encode(row)  # learns the key orders

    def refuse(value: object) -> bytes:
        raise AssertionError("the reference was asked to encode plain data")

    monkeypatch.setattr(reference, "encode", refuse)
    assert [encode(row) for row in rows] == expected


def test_nesting_past_cbor2s_depth_goes_to_the_reference() -> None:
    value: object = "leaf"
    for _ in range(cbor_fast.NATIVE_ENCODE_DEPTH + 5):
        value = [{"k": value}]
    assert encode(value) == reference.encode(value)


def test_key_orders_are_bounded_and_stay_right() -> None:
    values = [{f"k{i}": i, "a": 0} for i in range(cbor_fast.MAX_KEY_ORDERS + 10)]
    for value in values:
        assert encode(value) == reference.encode(value)
    assert len(cbor_fast._key_orders) <= cbor_fast.MAX_KEY_ORDERS


# --- decoding bytes from outside ----------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64))
def test_decode_agrees_on_arbitrary_bytes(data: bytes) -> None:
    agree(data)
    agree(long(data))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_values, st.data())
def test_decode_agrees_on_mutated_encodings(value: object, data: Any) -> None:
    try:
        encoded = reference.encode(value)
    except (TypeError, UnicodeEncodeError):
        return
    for item in (encoded, long(encoded)):
        agree(item)
        agree(item + b"\x00")
        cut = data.draw(st.integers(min_value=0, max_value=len(item) - 1))
        agree(item[:cut])
        flipped = bytearray(item)
        flipped[cut] = data.draw(st.integers(min_value=0, max_value=255))
        agree(bytes(flipped))
        inserted = bytearray(item)
        inserted[cut:cut] = data.draw(st.binary(min_size=1, max_size=3))
        agree(bytes(inserted))


@settings(max_examples=300, deadline=None)
@given(plain_values)
def test_decode_agrees_on_what_cbor2_writes_non_canonically(value: object) -> None:
    # Doubles for every float, keys in insertion order, indefinite lengths.
    import cbor2

    wrapped = [LONG_TEXT, value]
    agree(cbor2.dumps(wrapped))
    agree(cbor2.dumps(wrapped, indefinite_containers=True))


untagged_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64 - 1)
    | floats
    | st.text()
    | st.binary(),
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=8)
    ),
    max_leaves=30,
)
"""Plain data without the bignums that take a tag (and so the reference's path)."""


@settings(max_examples=300, deadline=None)
@given(untagged_values)
def test_decode_takes_plain_data_from_cbor2(value: object) -> None:
    # Plain data takes the fast path whole, and comes back as the reference gives it.
    data = reference.encode([LONG_TEXT, value])
    native, whole = cbor_fast._native(data)
    assert whole and cbor_fast._is_plain(native)
    assert same(decode(data), reference.decode(data))


def _map(pairs: list[tuple[bytes, bytes]]) -> bytes:
    assert len(pairs) < 24
    return bytes((0xA0 | len(pairs),)) + b"".join(k + v for k, v in pairs)


TEXT_A: Final = b"\x61a"


@pytest.mark.parametrize(
    "item",
    [
        _map([(TEXT_A, b"\x01"), (TEXT_A, b"\x02")]),  # repeated text key: its name as field
        _map([(TEXT_A, b"\x01"), (b"\x7f\x61a\xff", b"\x02")]),  # the same key spelled twice
        _map([(b"\xf9\x7e\x00", b"\x01"), (b"\xfb\x7f\xf8" + b"\x00" * 6, b"\x02")]),  # two NaNs
        _map([(b"\x01", b"\x01"), (b"\xf9\x3c\x00", b"\x02")]),  # 1 and 1.0: one key
        _map([(b"\x01", b"\x01"), (b"\xf5", b"\x02")]),  # 1 and true: one key
        _map([(b"\x81\x01", b"\x01")]),  # an array as a key
        _map([(b"\xa0", b"\x01")]),  # a map as a key
        _map([(b"\x01", b"\x01")]),  # an integer key: the reference decides
        b"\xc1\x1a\x51\x4b\x67\xb0",  # an epoch datetime tag: stays a Tag
        b"\xc2\x49\x01" + b"\x00" * 8,  # a bignum
        b"\xc2\x41\x05",  # a bignum that fits 64 bits
        b"\xc2\x81\x01",  # a bignum tag around an array
        b"\xd9\x01\x00\x82\x63abc\xd8\x19\x00",  # string references (tags 256 and 25)
        b"\xd8\x1c\x81\xd8\x1d\x00",  # a shared, self-referring array (tags 28 and 29)
        b"\xd9\x01\x02\x82\x01\x02",  # a set (tag 258)
        b"\xf7",  # undefined
        b"\xe0",  # simple(0)
        b"\xf8\x20",  # simple(32)
        b"\xf8\x18",  # a two-byte simple value below 32
        b"\x1c",  # reserved additional information
        b"\xff",  # a break outside an indefinite item
        b"\x9f\x01\xff",  # an indefinite array
        b"\x7f\x61\xc3\x61\xa9\xff",  # é split across two chunks of an indefinite text
        b"\x62\xc3\x28",  # invalid UTF-8
        b"\x63\xed\xa0\x80",  # a UTF-8-encoded surrogate
        b"\x18\x05",  # an over-long integer head
        b"\xfb\x3f\xf0" + b"\x00" * 6,  # 1.0 as a double
        b"\xf9\xfe\x00",  # a negative NaN
        b"\x3b" + b"\xff" * 8,  # -2**64
        b"\x9a\x00\x00\x00\x02\x01\x02",  # an over-long array head
    ],
    ids=lambda item: item.hex(),
)
def test_decode_agrees_where_cbor2_differs(item: bytes) -> None:
    agree(item)
    agree(long(item))
    agree(long(item) + b"\x00")


def nested(depth: int, opening: bytes, innermost: bytes) -> bytes:
    """``depth`` containers opened by ``opening`` inside each other around ``innermost``."""
    return opening * depth + innermost


@pytest.mark.parametrize("depth", range(cbor.MAX_DEPTH - 3, cbor.MAX_DEPTH + 3))
def test_decode_agrees_at_the_depth_bound(depth: int) -> None:
    # The long text is an item at depth 2 of the outer array, so it fits at every depth tested.
    for opening, innermost in [
        (b"\x81", b"\x80"),
        (b"\x81", b"\x01"),
        (b"\xa1\x61a", b"\xa0"),
        (b"\xa1\x61a", b"\xf5"),
        (b"\x82" + LONG, b"\x80"),
        (b"\xa2\x61a" + LONG + b"\x61b", b"\x01"),
    ]:
        agree(nested(depth, opening, innermost))
        agree(long(nested(depth - 1, opening, innermost)))


def test_decode_agrees_at_the_size_bounds() -> None:
    count = cbor.MAX_ARRAY_LENGTH
    for n in (count, count + 1):
        agree(b"\x9a" + n.to_bytes(4, "big") + b"\x00" * n)
        pairs = b"".join(reference.encode(f"{i:06}") + b"\x00" for i in range(n))
        agree(b"\xba" + n.to_bytes(4, "big") + pairs)
    for size in (cbor.MAX_TEXT_BYTES, cbor.MAX_TEXT_BYTES + 1):
        agree(reference.encode("a" * size))
        agree(reference.encode(["b", {"t": "a" * size}]))
    # Four bytes a character: the bound is in UTF-8 bytes, not characters.
    for chars in (cbor.MAX_TEXT_BYTES // 4, cbor.MAX_TEXT_BYTES // 4 + 1):
        agree(reference.encode("😀" * chars))


def test_decode_from_many_threads_at_once() -> None:
    inputs = [reference.encode([LONG_TEXT, {"n": i, "s": "x" * i}]) for i in range(40)]
    inputs += [long(b"\x00\x00"), long(b"\xf7"), long(b"\x9f\xff")]
    expected = [verdict(reference.decode, data) for data in inputs]
    failures: list[str] = []

    def work() -> None:
        for _ in range(25):
            for data, wanted in zip(inputs, expected, strict=True):
                got = verdict(decode, data)
                if got[0] != wanted[0] or not same(got[1], wanted[1]):
                    failures.append(data.hex())

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


def test_a_large_input_leaves_no_decoder_holding_it() -> None:
    data = reference.encode(["a" * (cbor_fast.RETAINED_INPUT_BYTES + 1)])
    assert decode(data) == ["a" * (cbor_fast.RETAINED_INPUT_BYTES + 1)]
    assert cbor_fast._thread.decoder is None
    decode(long(b"\x01"))
    assert cbor_fast._thread.decoder is not None


# --- golden vectors and fuzz corpora ---------------------------------------------------------

GOLDEN_PAYLOADS: Final = [
    bytes.fromhex(vector["payload_hex"])
    for vector in json.loads(GOLDEN_PATH.read_text(encoding="utf-8"))["vectors"]
    if vector["payload_hex"]
]


def test_golden_payloads_decode_and_encode_the_same() -> None:
    assert len(GOLDEN_PAYLOADS) > 90
    for payload in GOLDEN_PAYLOADS:
        agree(payload)
        agree(long(payload))
        assert encode(decode(payload)) == payload == reference.encode(reference.decode(payload))


def record_payloads(data: bytes) -> list[bytes]:
    """The payloads of ``data`` read as the wire target's re-framing records."""
    found = []
    pos = 0
    while pos + RECORD_HEADER_BYTES <= len(data):
        size = int.from_bytes(data[pos + 2 : pos + 4], "big")
        pos += RECORD_HEADER_BYTES
        found.append(data[pos : pos + size])
        pos += size
    return found


def corpus_items(name: str) -> list[bytes]:
    """Every input of a fuzz corpus, whole and in the pieces its target decodes."""
    items: list[bytes] = []
    for path in sorted((CORPORA / name).iterdir()):
        data = path.read_bytes()
        items += [data, data[PAYLOAD_SELECTOR_BYTES:], *record_payloads(data)]
    return items


@pytest.mark.parametrize("name", ["wire", "payloads", "wal"])
def test_every_fuzz_corpus_input_decodes_as_the_reference_decodes(name: str) -> None:
    items = corpus_items(name)
    assert len(items) > 200
    for item in items:
        agree(item)
        agree(long(item))


# --- decoding the server's own bytes --------------------------------------------------------


stored_values = st.recursive(
    plain_scalars,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.dictionaries(st.text(max_size=12), inner, max_size=8)
        | st.builds(Tag, st.integers(0, 2**64 - 1), inner)
    ),
    max_leaves=30,
)
"""What the server stores: plain data (bignums included), and tags for good measure."""


@settings(max_examples=300, deadline=None)
@given(stored_values)
def test_decode_stored_reads_what_the_encoder_wrote(value: object) -> None:
    data = encode(value)
    assert same(decode_stored(data), reference.decode(data))
    assert same(decode_stored(memoryview(data)), reference.decode(data))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_decode_stored_refuses_only_with_invalid_argument(data: bytes) -> None:
    try:
        decode_stored(data)
    except InvalidArgument as exc:
        assert exc.message == verdict(reference.decode, data)[1]


def test_decode_stored_keeps_tags_the_reference_keeps() -> None:
    assert decode_stored(bytes.fromhex("c11a514b67b0")) == Tag(1, 1363896240)
    assert decode_stored(bytes.fromhex("c249010000000000000000")) == 2**64
    assert decode_stored(bytes.fromhex("c349010000000000000000")) == -(2**64) - 1
    assert decode_stored(bytes.fromhex("c28101")) == Tag(2, [1])
    assert decode_stored(b"\xd9\x01\x02\x82\x01\x02") == Tag(258, [1, 2])


# --- hostile input and a missing cbor2, in a child process ------------------------------------

HOSTILE: Final = textwrap.dedent(
    """
    import resource, sys
    from brain import cbor, cbor_fast
    from brain.errors import InvalidArgument
    assert cbor.decode is cbor_fast.decode
    resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
    pad = b"\\x00" * 200
    inputs = [
        b"\\x9b" + (1 << 32).to_bytes(8, "big") + pad,
        b"\\x9b" + b"\\xff" * 8 + pad,
        b"\\x9a\\xff\\xff\\xff\\xff" + pad,
        b"\\xbb" + (1 << 32).to_bytes(8, "big") + pad,
        b"\\x5b" + (1 << 32).to_bytes(8, "big") + pad,
        b"\\x5b" + (1 << 63).to_bytes(8, "big") + pad,
        b"\\x7a\\xff\\xff\\xff\\xff" + pad,
        b"\\x7b" + b"\\xff" * 8 + pad,
        b"\\x81" * 10**6,
        b"\\x9f" * 10**6,
        b"\\xa1\\x61a" * 10**6,
        b"\\xc1" * 10**6 + b"\\x00",
        b"\\xd8\\x1c" * 10**6 + b"\\x00",
        b"\\x5f" + b"\\x40" * 10**6 + b"\\xff",
        b"\\x9f" + b"\\x80" * 10**6 + b"\\xff",
    ]
    for data in inputs:
        for run in (cbor.decode, cbor.decode_stored):
            try:
                run(data)
            except InvalidArgument:
                pass
    deep = []
    for _ in range(10**5):
        deep = [deep]
    try:
        cbor.encode(deep)
    except RecursionError:
        pass
    else:
        raise AssertionError("a value 100,000 deep was encoded")
    print("survived")
    """
)


def test_hostile_input_is_refused_within_bounded_memory() -> None:
    # In a child with little address space: an allocation as large as a header
    # claims would fail there, and a C stack overflow would end it.
    result = subprocess.run(
        [sys.executable, "-c", HOSTILE.format(limit=HOSTILE_MEMORY_LIMIT)],
        capture_output=True,
        text=True,
        timeout=HOSTILE_TIME_LIMIT_S,
        check=False,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "survived"


WITHOUT_CBOR2: Final = textwrap.dedent(
    """
    import sys
    sys.modules["cbor2"] = None  # import cbor2 now raises ImportError
    from brain import cbor, cbor_reference
    assert cbor.encode is cbor_reference.encode
    assert cbor.decode is cbor_reference.decode
    assert cbor.decode_stored is cbor_reference.decode
    expected = "a2616181c2494000000000000000006162f93e00"
    assert cbor.encode({"b": 1.5, "a": [2**70]}) == bytes.fromhex(expected)
    assert cbor.decode_stored(cbor.encode({"x": b"y"})) == {"x": b"y"}
    try:
        cbor.decode(b"\\xa2\\x61a\\x01\\x61a\\x02")
    except Exception as exc:
        assert exc.field == "a", exc
    print("reference")
    """
)


def test_without_cbor2_the_reference_does_everything() -> None:
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_CBOR2],
        capture_output=True,
        text=True,
        timeout=HOSTILE_TIME_LIMIT_S,
        check=False,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "reference"
