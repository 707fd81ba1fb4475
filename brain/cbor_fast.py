"""CBOR through cbor2's compiled codec, answering exactly as :mod:`brain.cbor_reference` does.

cbor2 encodes and decodes several times faster than the pure-Python reference,
but it is not the same codec. Its canonical mode sorts map keys length-first
(RFC 7049), which is the bytewise order of RFC 8949 §4.2.1 only when every key
of a map has one major type; it encodes types the reference refuses (sets,
datetimes, any Mapping, any Sequence, a memoryview as an array of integers);
it recurses on the C stack as it encodes. Decoding, it ignores bytes after the
first item, gives semantic tags a meaning (datetimes, shared references), and
has none of the wire's size bounds. So each entry point takes cbor2's answer
only where it is the reference's by construction, and hands everything else to
the reference:

- :func:`encode` gives cbor2 plain data only: ``None``, booleans, integers,
  floats, text, bytes, bytearrays, lists and tuples, and dicts with text keys,
  nested at most :data:`NATIVE_ENCODE_DEPTH` deep. On the way it puts each map's
  keys in canonical order (the order of a key set is worked out once) and turns
  each float into its shortest encoding, so cbor2, in its plain mode, only writes
  what it is given (its canonical mode would sort each map again, calling back
  into Python for every key, which costs more than the rest of the encoding).
  Anything else (a tag, a simple value, a non-text key, a subclass) goes to the
  reference whole.
- :func:`decode` is for bytes from outside. cbor2 decodes with indefinite
  lengths, duplicate keys and every tag refused and the reference's nesting
  bound, from a stream whose position proves the item spans the whole input.
  Its value is taken when it is plain data with text keys and within the size
  bounds; any other input, valid or not, goes to the reference, which decides
  and words the refusal.
- :func:`decode_stored` is for bytes this server wrote and nobody else can
  touch (store rows, logged plans, answers, its own child's pipe): cbor2's value
  as it is, the reference only for what cbor2 cannot read.

Importing this module raises ImportError when cbor2 is missing or lacks an
option used here; :mod:`brain.cbor` then uses the reference alone.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator, Mapping
from itertools import chain
from typing import Final, NoReturn

import cbor2

from brain import cbor_reference as reference
from brain.cbor_reference import MAX_ARRAY_LENGTH, MAX_DEPTH, MAX_MAP_LENGTH, MAX_TEXT_BYTES

__all__ = [
    "DECODER_MAX_DEPTH",
    "MAX_KEY_ORDERS",
    "NATIVE_ENCODE_DEPTH",
    "RETAINED_INPUT_BYTES",
    "SCAN_IN_C_FROM",
    "SMALL_INPUT_BYTES",
    "decode",
    "decode_stored",
    "encode",
]

NATIVE_ENCODE_DEPTH: Final = 64
"""Deepest nesting of containers handed to cbor2's encoder; a deeper value goes
to the reference. cbor2 recurses on the C stack as it encodes, and some
thousands of levels overflow it and end the process, where the reference stops
at Python's recursion limit with a RecursionError. Whatever came off the wire is
at most :data:`~brain.cbor_reference.MAX_DEPTH` deep, and rows add a level or
two to that."""

MAX_KEY_ORDERS: Final = 4096
"""Most key sets whose canonical order is remembered; a full table starts anew.
The server's rows and messages use a few dozen key sets; the bound keeps maps
with client-chosen keys from growing the table without end."""

DECODER_MAX_DEPTH: Final = MAX_DEPTH - 1
"""cbor2's ``max_depth`` that accepts exactly the nesting the reference accepts:
cbor2 counts the containers inside the outermost one, the reference counts every
item from 1 (so a container at depth 32 may only be empty)."""

RETAINED_INPUT_BYTES: Final = 64 * 1024
"""Largest input a thread's decoder may keep alive after decoding it, until that
thread decodes again; after a larger one the decoder is dropped, so that an idle
thread never pins a large frame."""

SMALL_INPUT_BYTES: Final = 32
"""Inputs up to this size :func:`decode` leaves to the reference at once: its own
fast path for plain data is quicker than cbor2 and the checks around it there
(measured: a 24-byte array in 3.2 µs against 3.6, a 58-byte one in 10.1 against 7.0)."""

SCAN_IN_C_FROM: Final = 16
"""Length past which an array's item types are first checked in one pass in C
(``set(map(type, items))``): cheaper than a Python loop for a long array of
scalars, dearer for the short arrays and maps that rows are made of."""

_BOUNDS_UNREACHABLE: Final = min(MAX_ARRAY_LENGTH, MAX_MAP_LENGTH, MAX_TEXT_BYTES)
"""An input no longer than this cannot break a size bound (each item takes a
byte, each pair two, each text byte one), so its value needs no size check."""

_LEAVES: Final = frozenset({str, int, bytes, bytearray, bool, type(None)})
"""Types cbor2 writes exactly as the reference does (the integer's bignum form too)."""

_ARRAYS: Final = frozenset({list, tuple})
_TEXT: Final = frozenset({str})

_DECODED_LEAVES: Final = frozenset({str, int, bytes, float, bool, type(None)})
"""The scalar types of plain data as cbor2 decodes it."""


class _Decline(Exception):
    """The value or input lies outside what cbor2 is trusted with here."""


# --- encoding -----------------------------------------------------------------


class _Encoded:
    """An item already encoded, which cbor2 writes as it is (a float, in its shortest form)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def _write_encoded(encoder: cbor2.CBOREncoder, value: object) -> None:
    """cbor2's hook for a type it does not know: only :class:`_Encoded` gets that far."""
    if not isinstance(value, _Encoded):
        raise _Decline
    encoder.write(value.data)


_key_orders: dict[tuple[str, ...], tuple[str, ...]] = {}
"""Each key set met, in the order its map held it, and in canonical order."""


def _canonical_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    """``keys`` (all text) sorted by their encoded bytes (RFC 8949 §4.2.1), remembered."""
    order = _key_orders.get(keys)
    if order is None:
        order = tuple(sorted(keys, key=reference.encode))
        if len(_key_orders) >= MAX_KEY_ORDERS:
            _key_orders.clear()
        _key_orders[keys] = order
    return order


def _prepared(value: object, depth: int) -> object:
    """``value`` in the form cbor2 writes as the reference would: maps in canonical
    order, floats encoded. :class:`_Decline` for anything but plain data."""
    if type(value) is dict:
        return _prepared_map(value, depth)
    if type(value) is list or type(value) is tuple:
        return _prepared_array(value, depth)
    if type(value) is float:
        return _Encoded(reference.encode_float(value))
    if type(value) in _LEAVES:
        return value
    raise _Decline


def _prepared_map(value: dict[object, object], depth: int) -> dict[str, object]:
    if not value:
        return {}
    if depth >= NATIVE_ENCODE_DEPTH:
        raise _Decline
    keys = tuple(value)
    if not _TEXT.issuperset(map(type, keys)):
        raise _Decline
    prepared: dict[str, object] = {}
    for key in _canonical_order(keys):  # type: ignore[arg-type]  # all text, checked above
        item = value[key]
        prepared[key] = item if type(item) in _LEAVES else _prepared(item, depth + 1)
    return prepared


def _prepared_array(value: list[object] | tuple[object, ...], depth: int) -> object:
    if not value:
        return value
    if depth >= NATIVE_ENCODE_DEPTH:
        raise _Decline
    if len(value) > SCAN_IN_C_FROM:
        kinds = set(map(type, value))
        if kinds <= _LEAVES:
            return value
        # Arrays of arrays of scalars (a plan's changes) are checked in one pass too.
        if (
            kinds <= _ARRAYS
            and depth + 1 < NATIVE_ENCODE_DEPTH
            and _LEAVES.issuperset(map(type, chain.from_iterable(value)))  # type: ignore[arg-type]
        ):
            return value
    return [item if type(item) in _LEAVES else _prepared(item, depth + 1) for item in value]


def encode(value: object) -> bytes:
    """Encode ``value`` deterministically (RFC 8949 §4.2.1): the bytes of
    :func:`brain.cbor_reference.encode`, or its error."""
    try:
        return cbor2.dumps(_prepared(value, 0), default=_write_encoded)
    except Exception:
        # Not plain data, or text that is not UTF-8: the reference writes it or raises its error.
        return reference.encode(value)


# --- decoding bytes from outside ---------------------------------------------------


_TagDecoder = Callable[[object, bool], object]
"""What cbor2 calls with a tag's decoded content (and whether it must be immutable)."""


class _NoTags(Mapping[int, _TagDecoder]):
    """cbor2's table of tag decoders for :func:`decode`: every lookup ends cbor2's
    attempt, so no tag takes a meaning (a datetime, a shared reference) and the
    reference decodes every tagged input its own way."""

    def __getitem__(self, number: int) -> NoReturn:
        raise _Decline

    def __iter__(self) -> Iterator[int]:
        return iter(())

    def __len__(self) -> int:
        return 0


_DECODER_OPTIONS: Final[dict[str, object]] = {
    "semantic_decoders": _NoTags(),
    "max_depth": DECODER_MAX_DEPTH,
    "allow_indefinite": False,
    "allow_duplicate_keys": False,
}
"""How :func:`decode` has cbor2 read: indefinite lengths and duplicate keys are left
to the reference (which words the refusal of a duplicate, and checks each chunk of
an indefinite text on its own), and so are tags."""


class _ThreadDecoder(threading.local):
    """Each thread's cbor2 decoder, reused: building one costs more than decoding a small frame."""

    decoder: cbor2.CBORDecoder | None = None


_thread: Final = _ThreadDecoder()


def _native(data: bytes) -> tuple[object, bool]:
    """cbor2's value for the first item of ``data``, and whether the item spans all of it."""
    stream = io.BytesIO(data)
    decoder = _thread.decoder
    # Taken out while in use: a decode that raises leaves no half-used decoder behind.
    _thread.decoder = None
    if decoder is None:
        decoder = cbor2.CBORDecoder(stream, **_DECODER_OPTIONS)  # type: ignore[arg-type]
    else:
        decoder.fp = stream
    value = decoder.decode()
    if len(data) <= RETAINED_INPUT_BYTES:
        _thread.decoder = decoder
    return value, stream.tell() == len(data)


def _is_plain(value: object) -> bool:
    """Whether a value cbor2 decoded is plain data: scalars, lists, and dicts with text
    keys (no simple value, no undefined). The decoder's depth bound bounds the recursion."""
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str or (type(item) not in _DECODED_LEAVES and not _is_plain(item)):
                return False
        return True
    if type(value) is list:
        if len(value) > SCAN_IN_C_FROM and _DECODED_LEAVES.issuperset(map(type, value)):
            return True
        for item in value:
            if type(item) not in _DECODED_LEAVES and not _is_plain(item):
                return False
        return True
    return type(value) in _DECODED_LEAVES


def _within_bounds(value: object) -> bool:
    """Whether plain decoded data keeps the reference's size bounds: arrays and maps
    of at most 100,000 entries, texts of at most 1 MiB of UTF-8."""
    if type(value) is str:
        # A character takes at most four bytes: only a long text needs encoding to be measured.
        return len(value) <= MAX_TEXT_BYTES // 4 or len(value.encode()) <= MAX_TEXT_BYTES
    if type(value) is list:
        return len(value) <= MAX_ARRAY_LENGTH and all(map(_within_bounds, value))
    if type(value) is dict:
        return (
            len(value) <= MAX_MAP_LENGTH
            and all(map(_within_bounds, value))
            and all(map(_within_bounds, value.values()))
        )
    return True


def decode(data: bytes | bytearray | memoryview) -> object:
    """Decode exactly one CBOR item from ``data``, as :func:`brain.cbor_reference.decode`:
    the same value, or the same refusal."""
    data = bytes(data)
    if len(data) <= SMALL_INPUT_BYTES:
        return reference.decode(data)
    try:
        value, whole = _native(data)
    except Exception:
        # cbor2 refused it, or met a tag: the reference decides and words any refusal.
        return reference.decode(data)
    if whole and _is_plain(value) and (len(data) <= _BOUNDS_UNREACHABLE or _within_bounds(value)):
        return value
    return reference.decode(data)


# --- decoding the server's own bytes ---------------------------------------------------


def _positive_bignum(value: object, immutable: bool) -> int:
    if type(value) is not bytes:
        raise _Decline
    return int.from_bytes(value, "big")


def _negative_bignum(value: object, immutable: bool) -> int:
    if type(value) is not bytes:
        raise _Decline
    return -1 - int.from_bytes(value, "big")


class _StoredTags(Mapping[int, _TagDecoder]):
    """cbor2's table of tag decoders for :func:`decode_stored`: bignums (tags 2 and 3,
    which the encoder writes for integers past 64 bits) and nothing else, so no
    other tag takes a cbor2 meaning; the reference decodes those inputs."""

    _DECODERS: Final[dict[int, _TagDecoder]] = {2: _positive_bignum, 3: _negative_bignum}

    def __getitem__(self, number: int) -> _TagDecoder:
        decoder = self._DECODERS.get(number)
        if decoder is None:
            raise _Decline
        return decoder

    def __iter__(self) -> Iterator[int]:
        return iter(self._DECODERS)

    def __len__(self) -> int:
        return len(self._DECODERS)


_STORED_TAGS: Final = _StoredTags()


def decode_stored(data: bytes | bytearray | memoryview) -> object:
    """Decode one CBOR item that this server wrote: a row, a logged plan, an answer.

    Not for anything a peer can touch: it takes cbor2's value without the checks of
    :func:`decode` (bytes after the item, duplicate keys and the size bounds go
    unnoticed), which bytes the server's own encoder wrote never need. What cbor2
    cannot read, the reference decodes or refuses; a tag other than a bignum is
    left to the reference too, so it comes back as a :class:`~brain.cbor.Tag`. The
    server stores plain data only: a simple value or ``undefined``, which it never
    writes, would come back as cbor2's ``CBORSimpleValue`` or ``undefined``.
    """
    try:
        return cbor2.loads(data, semantic_decoders=_STORED_TAGS)
    except Exception:
        return reference.decode(data)


def _check_cbor2() -> None:
    """Refuse, as an ImportError, a cbor2 without the decoder options used here (before 6.1)."""
    try:
        cbor2.CBORDecoder(io.BytesIO(b""), **_DECODER_OPTIONS)  # type: ignore[arg-type]
    except TypeError as exc:
        raise ImportError(f"cbor2 lacks a decoder option brain.cbor uses: {exc}") from exc


_check_cbor2()
