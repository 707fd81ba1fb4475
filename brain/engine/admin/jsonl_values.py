"""The values of the JSONL export form (``spec/06-operations.md`` §9.2): times, ids,
vectors and free values, each to JSON and strictly back.

Every conversion here is exact both ways, so that a record read back from its
line encodes to the same stored bytes:

- a time (signed nanoseconds since the Unix epoch, UTC) is ISO 8601 text with
  all nine fraction digits and ``Z``, ``2024-05-01T10:00:00.123456789Z``;
- an id or a digest is lowercase hex of its exact length;
- a vector (little-endian float32 values) is base64 of those bytes, or a list of
  the values (each float32 printed as the shortest decimal that reads back to it);
- a free value (entity attributes, schema declarations) is JSON as it is, with a
  byte string as ``{"$hex": "…"}``; a map that itself has exactly one key
  beginning with ``$`` is wrapped as ``{"$map": {…}}``, so no map is ever taken
  for a byte string.

A value that does not read is :class:`FieldError`, naming the field by its path
in the line; the importer adds the line number.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import datetime
import math
import re
from typing import Final

import numpy as np

__all__ = [
    "I64_MAX",
    "I64_MIN",
    "VECTOR_ENCODINGS",
    "FieldError",
    "free_from_json",
    "free_to_json",
    "hex_from_json",
    "iso_time",
    "time_from_json",
    "vector_from_json",
    "vector_to_json",
]

I64_MIN: Final = -(1 << 63)
"""The earliest time a record holds (spec/01-wire.md §2: a time is a signed 64-bit count)."""
I64_MAX: Final = (1 << 63) - 1
"""The latest time a record holds."""

NANOS_PER_SECOND: Final = 1_000_000_000

VECTOR_ENCODINGS: Final = ("none", "base64", "list")
"""How an export writes vectors: not at all (an import embeds again), as base64 of the
float32 bytes, or as a list of numbers."""

FLOAT32_BYTES: Final = 4
"""A vector value's width: float32."""

FLOAT32_MAX: Final = float(np.finfo(np.float32).max)
"""The largest float32: a listed value beyond it has no float32 to read back as."""

_TIME: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{9})Z")
"""The one time form a line may hold: every field, nine fraction digits, UTC."""

_HEX: Final = re.compile(r"[0-9a-f]*")
"""Lowercase hex: the form an export writes, so a file has one spelling of each id."""

_BYTES_TAG: Final = "$hex"
"""The key of a byte string in a free value."""
_MAP_TAG: Final = "$map"
"""The key wrapping a map that would otherwise look like a tag."""


class FieldError(ValueError):
    """A field of a line that does not read: ``path`` names it (``subject.id``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.reason = message


def iso_time(nanos: int) -> str:
    """``nanos`` as ISO 8601 UTC with nine fraction digits."""
    seconds, fraction = divmod(nanos, NANOS_PER_SECOND)
    moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=seconds)
    # Every signed 64-bit nanosecond count falls in 1677-2262: four-digit years.
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{fraction:09d}Z"


def time_from_json(value: object, path: str) -> int:
    """The nanoseconds of a time field written by :func:`iso_time`."""
    if not isinstance(value, str):
        raise FieldError(
            path, "a time must be ISO 8601 text such as 2024-05-01T10:00:00.000000000Z"
        )
    found = _TIME.fullmatch(value)
    if found is None:
        raise FieldError(
            path, f"{value!r} is not a UTC time with nine fraction digits (…T10:00:00.000000000Z)"
        )
    year, month, day, hour, minute, second, fraction = (int(part) for part in found.groups())
    try:
        datetime.datetime(year, month, day, hour, minute, second)
    except ValueError as exc:
        raise FieldError(path, f"{value!r} is not a time: {exc}") from None
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    nanos = seconds * NANOS_PER_SECOND + fraction
    if not I64_MIN <= nanos <= I64_MAX:
        raise FieldError(path, f"{value!r} is outside the times a record can hold")
    return nanos


def hex_from_json(value: object, path: str, size: int | None = None) -> bytes:
    """The bytes of lowercase hex ``value``; exactly ``size`` of them when given."""
    if not isinstance(value, str) or _HEX.fullmatch(value) is None or len(value) % 2:
        raise FieldError(path, "must be lowercase hex")
    raw = bytes.fromhex(value)
    if size is not None and len(raw) != size:
        raise FieldError(path, f"must be {size} bytes ({2 * size} hex digits), not {len(raw)}")
    return raw


def vector_to_json(raw: bytes, encoding: str) -> object:
    """A stored vector (little-endian float32 bytes) as ``encoding`` writes it."""
    if encoding == "list":
        return [float(v) for v in np.frombuffer(raw, dtype="<f4")]
    return base64.b64encode(raw).decode("ascii")


def vector_from_json(value: object, path: str, encoding: str) -> bytes:
    """The float32 bytes of a vector written as ``encoding`` (base64 or a list)."""
    if encoding == "list":
        if not isinstance(value, list) or not value:
            raise FieldError(path, "must be a list of numbers (the header says vectors: list)")
        if not all(_is_number(v) and math.isfinite(float(v)) for v in value):
            raise FieldError(path, "must hold finite numbers only")
        values = [float(v) for v in value]
        if any(abs(v) > FLOAT32_MAX for v in values):
            raise FieldError(path, "holds a number too large for float32")
        return np.array(values, dtype="<f4").tobytes()
    if not isinstance(value, str):
        raise FieldError(path, f"must be base64 text (the header says vectors: {encoding})")
    try:
        raw = base64.b64decode(value, validate=True)
    except binascii.Error as exc:
        raise FieldError(path, f"is not base64: {exc}") from None
    if not raw or len(raw) % FLOAT32_BYTES:
        raise FieldError(path, "must hold a whole number of float32 values")
    return raw


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def free_to_json(value: object) -> object:
    """A stored free value (CBOR-simple, arrays, text-keyed maps) as JSON."""
    if isinstance(value, bytes):
        return {_BYTES_TAG: value.hex()}
    if isinstance(value, list | tuple):
        return [free_to_json(item) for item in value]
    if isinstance(value, dict):
        shown = {str(key): free_to_json(item) for key, item in value.items()}
        if len(shown) == 1 and next(iter(shown)).startswith("$"):
            return {_MAP_TAG: shown}
        return shown
    return value


def free_from_json(value: object, path: str) -> object:
    """The stored free value :func:`free_to_json` wrote as ``value``."""
    if isinstance(value, float) and not math.isfinite(value):
        raise FieldError(path, "numbers must be finite")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [free_from_json(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)).startswith("$"):
            tag, inner = next(iter(value.items()))
            if tag == _BYTES_TAG:
                return hex_from_json(inner, f"{path}.{tag}")
            if tag == _MAP_TAG and isinstance(inner, dict):
                return {key: free_from_json(item, f"{path}.{key}") for key, item in inner.items()}
            raise FieldError(path, f"{tag!r} is not a tag of this form ($hex or $map)")
        return {key: free_from_json(item, f"{path}.{key}") for key, item in value.items()}
    raise FieldError(path, f"cannot hold a {type(value).__name__}")
