"""The strict CBOR codec (RFC 8949) in pure Python: the reference :mod:`brain.cbor` is held to.

Decoding reads exactly one well-formed data item and nothing after it, and
bounds every resource a hostile peer could make us spend: nesting depth,
array and map sizes, text sizes, and lengths that run past the input. It
rejects duplicate map keys and invalid UTF-8. Every failure is
:class:`brain.errors.InvalidArgument`, so callers need to catch one thing.

Encoding follows RFC 8949 §4.2.1 core deterministic encoding: shortest
integer heads, shortest float that keeps the value (preferred serialization),
definite lengths, and map keys sorted by their encoded bytes. The same value
always gives the same bytes, in any language that follows the RFC.

:mod:`brain.cbor` answers most calls with cbor2's compiled codec and hands this
module whatever that codec cannot be trusted to answer the same way: its
decoder words every refusal, and its encoder writes every value outside plain
text-keyed data. Nothing else calls this module but the tests that hold the two
to the same bytes, values and refusals.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Final

from brain.errors import InvalidArgument

__all__ = [
    "MAX_ARRAY_LENGTH",
    "MAX_DEPTH",
    "MAX_MAP_LENGTH",
    "MAX_TEXT_BYTES",
    "UNDEFINED",
    "Simple",
    "Tag",
    "Undefined",
    "decode",
    "encode",
    "encode_float",
]

MAX_DEPTH: Final = 32
"""Deepest nesting of arrays, maps and tags accepted (spec/01-wire.md §2)."""

MAX_ARRAY_LENGTH: Final = 100_000
"""Most items in one array (spec/01-wire.md §2)."""

MAX_MAP_LENGTH: Final = 100_000
"""Most pairs in one map; the array bound applied to maps, for the same reason."""

MAX_TEXT_BYTES: Final = 1024 * 1024
"""Largest text string, in UTF-8 bytes (spec/01-wire.md §2)."""

_BREAK: Final = 0xFF


@dataclass(frozen=True, slots=True)
class Tag:
    """A tagged item whose tag this layer gives no meaning to (RFC 8949 §3.4)."""

    number: int
    value: object


@dataclass(frozen=True, slots=True)
class Simple:
    """A simple value other than false, true, null and undefined (RFC 8949 §3.3)."""

    value: int


class Undefined:
    """The CBOR ``undefined`` simple value; a singleton, :data:`UNDEFINED`."""

    _instance: Undefined | None = None

    def __new__(cls) -> Undefined:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "undefined"


UNDEFINED: Final = Undefined()

_HALF = struct.Struct(">e")
_SINGLE = struct.Struct(">f")
_DOUBLE = struct.Struct(">d")


def _fail(message: str) -> InvalidArgument:
    return InvalidArgument(f"payload is not valid CBOR: {message}")


class _Decoder:
    """One pass over a buffer; positions are checked before every read."""

    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.end = len(data)

    def _take(self, count: int) -> bytes:
        if count > self.end - self.pos:
            raise _fail(f"item at offset {self.pos} runs past the end of the payload")
        start = self.pos
        self.pos += count
        return self.data[start : self.pos]

    def _head(self) -> tuple[int, int, int | None]:
        """Read an initial byte and its argument: (major, info, argument or None)."""
        if self.pos >= self.end:
            raise _fail(f"payload ends where an item was expected (offset {self.pos})")
        initial = self.data[self.pos]
        self.pos += 1
        major = initial >> 5
        info = initial & 0x1F
        if info < 24:
            return major, info, info
        if info == 24:
            return major, info, self._take(1)[0]
        if info == 25:
            return major, info, int.from_bytes(self._take(2), "big")
        if info == 26:
            return major, info, int.from_bytes(self._take(4), "big")
        if info == 27:
            return major, info, int.from_bytes(self._take(8), "big")
        if info == 31:
            return major, info, None
        raise _fail(f"reserved additional information {info} at offset {self.pos - 1}")

    def item(self, depth: int) -> object:
        if depth > MAX_DEPTH:
            raise _fail(f"nesting deeper than {MAX_DEPTH}")
        start = self.pos
        major, info, arg = self._head()
        if major == 0:
            if arg is None:
                raise _fail(f"indefinite length on an integer at offset {start}")
            return arg
        if major == 1:
            if arg is None:
                raise _fail(f"indefinite length on an integer at offset {start}")
            return -1 - arg
        if major in (2, 3):
            return self._string(major, arg, start)
        if major == 4:
            return self._array(arg, depth, start)
        if major == 5:
            return self._map(arg, depth, start)
        if major == 6:
            if arg is None:
                raise _fail(f"indefinite length on a tag at offset {start}")
            return self._tag(arg, depth)
        return self._simple_or_float(info, arg, start)

    def _string(self, major: int, arg: int | None, start: int) -> bytes | str:
        if arg is not None:
            raw = self._take(arg)
            return self._text(raw, start) if major == 3 else raw
        chunks: list[bytes | str] = []
        total = 0
        while True:
            if self.pos >= self.end:
                raise _fail(f"indefinite string at offset {start} has no break")
            if self.data[self.pos] == _BREAK:
                self.pos += 1
                break
            chunk_start = self.pos
            chunk_major, _, chunk_len = self._head()
            if chunk_major != major or chunk_len is None:
                raise _fail(f"bad chunk in indefinite string at offset {chunk_start}")
            raw = self._take(chunk_len)
            total += chunk_len
            if major == 3 and total > MAX_TEXT_BYTES:
                raise _fail(f"text at offset {start} is over {MAX_TEXT_BYTES} bytes")
            # Each chunk of a text string must be valid UTF-8 on its own (RFC 8949 §3.2.3).
            chunks.append(self._text(raw, chunk_start) if major == 3 else raw)
        if major == 3:
            return "".join(c for c in chunks if isinstance(c, str))
        return b"".join(c for c in chunks if isinstance(c, bytes))

    @staticmethod
    def _text(raw: bytes, start: int) -> str:
        if len(raw) > MAX_TEXT_BYTES:
            raise _fail(f"text at offset {start} is over {MAX_TEXT_BYTES} bytes")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _fail(f"text at offset {start} is not valid UTF-8") from exc

    def _array(self, arg: int | None, depth: int, start: int) -> list[object]:
        items: list[object] = []
        if arg is not None:
            # Each item takes at least one byte: a count past the input is a lie.
            if arg > MAX_ARRAY_LENGTH:
                raise _fail(f"array at offset {start} has over {MAX_ARRAY_LENGTH} items")
            if arg > self.end - self.pos:
                raise _fail(f"array at offset {start} runs past the end of the payload")
            for _ in range(arg):
                items.append(self.item(depth + 1))
            return items
        while True:
            if self.pos >= self.end:
                raise _fail(f"indefinite array at offset {start} has no break")
            if self.data[self.pos] == _BREAK:
                self.pos += 1
                return items
            if len(items) >= MAX_ARRAY_LENGTH:
                raise _fail(f"array at offset {start} has over {MAX_ARRAY_LENGTH} items")
            items.append(self.item(depth + 1))

    def _map(self, arg: int | None, depth: int, start: int) -> dict[object, object]:
        result: dict[object, object] = {}
        # Canonical encodings of the non-text keys seen so far: two NaN keys are
        # unequal in Python yet the same CBOR key, and would re-encode as duplicates.
        seen: set[bytes] = set()
        if arg is not None:
            if arg > MAX_MAP_LENGTH:
                raise _fail(f"map at offset {start} has over {MAX_MAP_LENGTH} pairs")
            if 2 * arg > self.end - self.pos:
                raise _fail(f"map at offset {start} runs past the end of the payload")
            for _ in range(arg):
                self._pair(result, seen, depth, start)
            return result
        while True:
            if self.pos >= self.end:
                raise _fail(f"indefinite map at offset {start} has no break")
            if self.data[self.pos] == _BREAK:
                self.pos += 1
                return result
            if len(result) >= MAX_MAP_LENGTH:
                raise _fail(f"map at offset {start} has over {MAX_MAP_LENGTH} pairs")
            self._pair(result, seen, depth, start)

    def _pair(self, result: dict[object, object], seen: set[bytes], depth: int, start: int) -> None:
        key_pos = self.pos
        key = self.item(depth + 1)
        try:
            hash(key)
        except TypeError:
            raise _fail(f"map key at offset {key_pos} is an array or map") from None
        duplicate = key in result
        if not isinstance(key, str):
            canonical = encode(key)
            duplicate = duplicate or canonical in seen
            seen.add(canonical)
        if duplicate:
            # Only text keys are shown: repr() of a huge bignum key raises ValueError.
            shown = repr(key) if isinstance(key, str) else f"of type {type(key).__name__}"
            raise InvalidArgument(
                f"duplicate map key {shown} at offset {key_pos}",
                field=key if isinstance(key, str) else None,
            )
        if self.pos >= self.end:
            raise _fail(f"map at offset {start} ends without a value")
        result[key] = self.item(depth + 1)

    def _tag(self, number: int, depth: int) -> object:
        value = self.item(depth + 1)
        if number in (2, 3) and isinstance(value, bytes):
            magnitude = int.from_bytes(value, "big")
            return magnitude if number == 2 else -1 - magnitude
        return Tag(number, value)

    def _simple_or_float(self, info: int, arg: int | None, start: int) -> object:
        if info < 20:
            return Simple(info)
        if info == 20:
            return False
        if info == 21:
            return True
        if info == 22:
            return None
        if info == 23:
            return UNDEFINED
        if info == 24:
            assert arg is not None
            if arg < 32:
                raise _fail(f"two-byte simple value {arg} at offset {start} (must be >= 32)")
            return Simple(arg)
        if info in (25, 26, 27):
            width = {25: 2, 26: 4, 27: 8}[info]
            raw = self.data[start + 1 : start + 1 + width]
            fmt = {25: _HALF, 26: _SINGLE, 27: _DOUBLE}[info]
            value: float = fmt.unpack(raw)[0]
            return value
        raise _fail(f"unexpected break at offset {start}")


class _NotPlain(Exception):
    """The fast path met something outside plain data; the strict decoder takes over."""


_ARGUMENT_READERS: Final = tuple(
    (reader.unpack_from, reader.size)
    for reader in (struct.Struct(">H"), struct.Struct(">I"), struct.Struct(">Q"))
)
"""Readers of the big-endian argument that follows an initial byte whose
additional information is 25, 26 or 27 (RFC 8949 §3), with its width; 24, the
most common, is read inline."""

_PLAIN_CONSTANTS: Final = (False, True, None)
"""The simple values 20, 21 and 22 (RFC 8949 §3.3), in that order."""


def _plain(data: bytes, pos: int, depth: int) -> tuple[object, int]:
    """Decode the item at ``pos`` if it is plain data: integers, text, bytes, floats,
    true, false, null, and definite arrays and text-keyed maps of those.

    It gives up (:class:`_NotPlain`, or an IndexError, UnicodeDecodeError or
    struct.error on bad input) at anything else: a tag, a simple value, an
    indefinite length, a non-text or repeated map key, a bound of :func:`decode`
    reached, an item running past the end. It never decides that input is
    invalid; it only answers, for input the strict decoder would accept, what
    that decoder answers. Every row we store and nearly every request is plain
    data, so this path carries the load at a few times the strict decoder's
    speed: scalars other than floats are read inline here, and only containers
    and floats cost a further call. Containers check the depth bound, as only
    they nest."""
    initial = data[pos]
    major = initial >> 5
    info = initial & 0x1F
    pos += 1
    if major == 7:
        if 20 <= info <= 22:
            return _PLAIN_CONSTANTS[info - 20], pos
        return _plain_float(data, pos, info)
    if info < 24:
        arg = info
    elif info == 24:
        arg = data[pos]
        pos += 1
    else:
        # Information 28-31 (reserved, indefinite) lies past the table: IndexError.
        # An argument running past the end of the input is a struct.error.
        unpack_from, width = _ARGUMENT_READERS[info - 25]
        arg = unpack_from(data, pos)[0]
        pos += width
    if major < 2:
        return (arg if major == 0 else -1 - arg), pos
    if major == 3:
        end = pos + arg
        if end > len(data) or arg > MAX_TEXT_BYTES:
            raise _NotPlain
        return data[pos:end].decode("utf-8"), end
    if major == 5:
        return _plain_map(data, pos, depth, arg)
    if major == 2:
        end = pos + arg
        if end > len(data):
            raise _NotPlain
        return data[pos:end], end
    if major == 4:
        return _plain_array(data, pos, depth, arg)
    raise _NotPlain


def _plain_float(data: bytes, pos: int, info: int) -> tuple[object, int]:
    """The float at ``pos`` whose initial byte, just read, carried ``info``."""
    if info == 25:
        return _HALF.unpack_from(data, pos)[0], pos + 2
    if info == 26:
        return _SINGLE.unpack_from(data, pos)[0], pos + 4
    if info == 27:
        return _DOUBLE.unpack_from(data, pos)[0], pos + 8
    raise _NotPlain


def _plain_map(data: bytes, pos: int, depth: int, length: int) -> tuple[object, int]:
    """The ``length`` text-keyed pairs of a plain map at ``depth``, starting at ``pos``."""
    # At the depth bound its pairs would lie past it; the strict decoder judges.
    if length > MAX_MAP_LENGTH or depth >= MAX_DEPTH:
        raise _NotPlain
    result: dict[object, object] = {}
    for _ in range(length):
        key, pos = _plain(data, pos, depth + 1)
        if type(key) is not str or key in result:
            raise _NotPlain
        result[key], pos = _plain(data, pos, depth + 1)
    return result, pos


def _plain_array(data: bytes, pos: int, depth: int, length: int) -> tuple[object, int]:
    """The ``length`` items of a plain array at ``depth``, starting at ``pos``."""
    # At the depth bound its items would lie past it; the strict decoder judges.
    if length > MAX_ARRAY_LENGTH or depth >= MAX_DEPTH:
        raise _NotPlain
    items: list[object] = []
    for _ in range(length):
        item, pos = _plain(data, pos, depth + 1)
        items.append(item)
    return items, pos


def decode(data: bytes | bytearray | memoryview) -> object:
    """Decode exactly one CBOR item from ``data``; trailing bytes are an error."""
    data = bytes(data)
    try:
        value, end = _plain(data, 0, 1)
    except (_NotPlain, IndexError, UnicodeDecodeError, struct.error, RecursionError):
        pass
    else:
        if end == len(data):
            return value
    decoder = _Decoder(data)
    value = decoder.item(1)
    if decoder.pos != decoder.end:
        raise _fail(f"{decoder.end - decoder.pos} bytes follow the item at offset {decoder.pos}")
    return value


def _head(major: int, value: int) -> bytes:
    top = major << 5
    if value < 24:
        return bytes((top | value,))
    if value < 0x100:
        return bytes((top | 24, value))
    if value < 0x10000:
        return bytes((top | 25,)) + value.to_bytes(2, "big")
    if value < 0x100000000:
        return bytes((top | 26,)) + value.to_bytes(4, "big")
    return bytes((top | 27,)) + value.to_bytes(8, "big")


def encode_float(value: float) -> bytes:
    """The shortest encoding of ``value`` that keeps it (NaN as the half-float f97e00)."""
    if math.isnan(value):
        return b"\xf9\x7e\x00"
    for prefix, fmt in ((b"\xf9", _HALF), (b"\xfa", _SINGLE)):
        try:
            packed = fmt.pack(value)
        except OverflowError:
            continue
        if fmt.unpack(packed)[0] == value:
            return prefix + packed
    return b"\xfb" + _DOUBLE.pack(value)


def _encode_int(value: int) -> bytes:
    if 0 <= value < 1 << 64:
        return _head(0, value)
    if -(1 << 64) <= value < 0:
        return _head(1, -1 - value)
    tag, magnitude = (2, value) if value >= 0 else (3, -1 - value)
    raw = magnitude.to_bytes((magnitude.bit_length() + 7) // 8, "big")
    return _head(6, tag) + _head(2, len(raw)) + raw


def _encode_into(value: object, out: list[bytes]) -> None:
    # bool before int: bool is a subclass of int.
    if value is None:
        out.append(b"\xf6")
    elif value is True:
        out.append(b"\xf5")
    elif value is False:
        out.append(b"\xf4")
    elif isinstance(value, int):
        out.append(_encode_int(value))
    elif isinstance(value, str):
        raw = value.encode("utf-8")
        out.append(_head(3, len(raw)))
        out.append(raw)
    elif isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        out.append(_head(2, len(raw)))
        out.append(raw)
    elif isinstance(value, float):
        out.append(encode_float(value))
    elif isinstance(value, list | tuple):
        out.append(_head(4, len(value)))
        for item in value:
            _encode_into(item, out)
    elif isinstance(value, dict):
        pairs = sorted((encode(k), v) for k, v in value.items())
        out.append(_head(5, len(pairs)))
        for key_bytes, item in pairs:
            out.append(key_bytes)
            _encode_into(item, out)
    else:
        _encode_extension_into(value, out)


def _encode_extension_into(value: object, out: list[bytes]) -> None:
    """Append the encoding of a value outside plain data: a tag, a simple value or
    undefined. These are rare, so they stay off the chain that plain data walks."""
    if isinstance(value, Tag):
        out.append(_head(6, value.number))
        _encode_into(value.value, out)
    elif isinstance(value, Simple):
        if value.value < 24:
            out.append(bytes((0xE0 | value.value,)))
        else:
            out.append(bytes((0xF8, value.value)))
    elif isinstance(value, Undefined):
        out.append(b"\xf7")
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as CBOR")


def encode(value: object) -> bytes:
    """Encode ``value`` deterministically (RFC 8949 §4.2.1)."""
    out: list[bytes] = []
    _encode_into(value, out)
    return b"".join(out)
