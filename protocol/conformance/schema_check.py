"""Check a decoded payload against ``protocol/schema.json``, mechanically.

Standard library only, so any implementation can run it: a client in another
language writes the payloads it encodes as mirrors (the JSON form of
``protocol/bless.py``, plus ``{"$float": text}``, see README.md) and runs

    python3 protocol/conformance/schema_check.py OPCODE DIRECTION [FILE]

where ``OPCODE`` is a name (``STATEMENT_CREATE``, ``ERROR``) or a code
(``0x0140``), ``DIRECTION`` is ``request``, ``response`` or ``stream_end``,
and ``FILE`` (default: standard input) holds one mirror. Exit status 0: the
payload fits; 1: it does not (the key path and the rule are printed); 2: bad
arguments. ``--golden`` checks every vector of ``protocol/vectors/golden.json``.

What is checked is exactly what schema.json's type notation says (the grammar
is in ``protocol/clients/README.md``), with the server's reading of it
(``brain/wire/schema.py``): types, required and optional keys, unknown keys,
length bounds (code points for text, bytes, items), value bounds, enums,
whole-text regular expressions, finite floats, labels (one line of visible
words), and union members picked by their one required key. Rules that span
several keys (``valid_from`` before ``valid_to``) are not in the notation and
are not checked here.

Two rules depend on the direction, as the server applies them: in a request,
``null`` for an optional key means absent and an integer is accepted for a
``float`` key; a response never holds ``null`` (absent keys are omitted) and
always carries a ``float`` key as a float.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

__all__ = [
    "DIRECTIONS",
    "Checker",
    "NotationError",
    "SchemaViolation",
    "Type",
    "check_payload",
    "from_mirror",
    "load_schema",
    "parse_type",
    "shape_name",
    "vector_target",
]

SCHEMA_PATH: Final = Path(__file__).resolve().parent.parent / "schema.json"
GOLDEN_PATH: Final = Path(__file__).resolve().parent.parent / "vectors" / "golden.json"

DIRECTIONS: Final = ("request", "response", "stream_end")
"""Which of an opcode's shapes a payload is: its request, its response, its stream's end."""

ERROR_OPCODE: Final = 0x00FF
"""The opcode of an ERROR frame (protocol.json's ``frame.error_opcode``)."""

ERROR_SHAPE: Final = "ErrorMessage"
"""The shape of an ERROR frame (opcode 0x00FF), which answers any request."""

MAX_TEXT_BYTES: Final = 1024 * 1024
"""The decoder's limit on one text string in UTF-8 bytes (spec/01-wire.md §2), beside any bound."""

PRIMITIVES: Final = frozenset({"bool", "text", "bytes", "int", "float", "any", "map"})
"""The base type words of the notation; any other word names a shape."""

LABEL_REFUSED_CATEGORIES: Final = frozenset({"Zl", "Zp"})
"""Categories outside C that a ``label`` text refuses too: line and paragraph separators."""

_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER: Final = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf"
_LENGTH: Final = re.compile(r"\((\d+)(?:(\.\.)(\d*))?\)")
_RANGE: Final = re.compile(rf"\[({_NUMBER})?\.\.({_NUMBER})?\]")


class NotationError(ValueError):
    """schema.json holds a type text this checker cannot read: the checker must learn it."""


class SchemaViolation(ValueError):
    """A payload does not fit its shape; ``field`` is the key path, as the server names it."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field or 'payload'}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Type:
    """One parsed type text: a base and the constraints that follow it."""

    base: str  # a primitive word, "array", "enum", "shape" or "union"
    item: Type | None = None  # the element type of an array
    names: tuple[str, ...] = ()  # a shape's name, a union's members, an enum's values
    min_len: int | None = None
    max_len: int | None = None
    low: int | float | None = None
    high: int | float | None = None
    patterns: tuple[re.Pattern[str], ...] = ()
    finite: bool = False
    label: bool = False  # one line of visible words: no category C, Zl, Zp; no edge whitespace
    time: bool = False  # an integer that is a time (ns since the epoch): a marker, no extra rule


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def _base_end(text: str) -> tuple[Type, int]:
    """The base type at the start of ``text`` and where it ends."""
    if text.startswith("["):
        # The element type runs to a closing bracket; try each from the right, so
        # that brackets inside the element (a range, a pattern) do not end it early.
        closers = [i for i, ch in enumerate(text) if ch == "]"]
        for end in reversed(closers):
            try:
                item = parse_type(text[1:end])
                _suffixes(text[end + 1 :], Type("array", item))
            except NotationError:
                continue
            return Type("array", item), end + 1
        raise NotationError(f"unreadable array type {text!r}")
    if text.startswith("enum("):
        end = text.find(")")
        if end < 0:
            raise NotationError(f"unclosed enum in {text!r}")
        return Type("enum", names=tuple(text[5:end].split("|"))), end + 1
    match = _NAME.match(text)
    if match is None:
        raise NotationError(f"unreadable type {text!r}")
    word = match.group()
    if word in PRIMITIVES:
        return Type(word), match.end()
    # A shape name, or a union of shape names (A|B|C).
    names = [word]
    end = match.end()
    while end < len(text) and text[end] == "|":
        nxt = _NAME.match(text, end + 1)
        if nxt is None:
            raise NotationError(f"unreadable union in {text!r}")
        names.append(nxt.group())
        end = nxt.end()
    if len(names) == 1:
        return Type("shape", names=(word,)), end
    return Type("union", names=tuple(names)), end


Constraint = tuple[str, object, object]
"""One suffix of a type text: ("len", min, max), ("range", low, high), ("pattern", re, None),
("finite", None, None), ("label", None, None) or ("time", None, None)."""


def _constraints(rest: str) -> list[Constraint]:
    """The constraint suffixes of a type text, in the order bless.py appends them."""
    if not rest:
        return []
    if (m := _LENGTH.match(rest)) is not None:
        low = int(m.group(1))
        high = low if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
        return [("len", low, high), *_constraints(rest[m.end() :])]
    if (m := _RANGE.match(rest)) is not None:
        low_num = None if m.group(1) is None else _number(m.group(1))
        high_num = None if m.group(2) is None else _number(m.group(2))
        return [("range", low_num, high_num), *_constraints(rest[m.end() :])]
    for word in (" finite", " label", " time"):
        if rest.startswith(word) and not rest[len(word) : len(word) + 1].isalnum():
            return [(word.strip(), None, None), *_constraints(rest[len(word) :])]
    if rest.startswith(" /"):
        # The pattern ends at a slash after which only suffixes follow; the
        # longest such pattern wins, since a pattern may hold slashes itself.
        for end in range(len(rest) - 1, 1, -1):
            if rest[end] != "/":
                continue
            try:
                compiled = re.compile(rest[2:end])
                tail = _constraints(rest[end + 1 :])
            except (re.error, NotationError):
                continue
            return [("pattern", compiled, None), *tail]
        raise NotationError(f"unreadable pattern in {rest!r}")
    raise NotationError(f"unreadable constraint {rest!r}")


def _suffixes(rest: str, base: Type) -> Type:
    """``base`` with the constraint suffixes in ``rest`` applied."""
    result = base
    for kind, first, second in _constraints(rest):
        if kind == "len":
            assert isinstance(first, int) and (second is None or isinstance(second, int))
            result = replace(result, min_len=first, max_len=second)
        elif kind == "range":
            assert first is None or isinstance(first, int | float)
            assert second is None or isinstance(second, int | float)
            result = replace(result, low=first, high=second)
        elif kind == "finite":
            result = replace(result, finite=True)
        elif kind == "label":
            result = replace(result, label=True)
        elif kind == "time":
            result = replace(result, time=True)
        else:
            assert isinstance(first, re.Pattern)
            result = replace(result, patterns=(*result.patterns, first))
    return result


_TYPE_CACHE: dict[str, Type] = {}


def parse_type(text: str) -> Type:
    """Parse one type text of schema.json (``bytes(16)``, ``[Evidence](0..1024)``, …)."""
    cached = _TYPE_CACHE.get(text)
    if cached is not None:
        return cached
    base, end = _base_end(text)
    parsed = _suffixes(text[end:], base)
    _check_applicable(parsed, text)
    _TYPE_CACHE[text] = parsed
    return parsed


def _check_applicable(parsed: Type, text: str) -> None:
    """Refuse a constraint on a type it cannot apply to: the notation changed."""
    if (parsed.min_len is not None) and parsed.base not in ("text", "enum", "bytes", "array"):
        raise NotationError(f"a length bound on {parsed.base} in {text!r}")
    if (parsed.low is not None or parsed.high is not None) and parsed.base not in ("int", "float"):
        raise NotationError(f"a value bound on {parsed.base} in {text!r}")
    if parsed.patterns and parsed.base not in ("text", "enum"):
        raise NotationError(f"a pattern on {parsed.base} in {text!r}")
    if parsed.finite and parsed.base != "float":
        raise NotationError(f"'finite' on {parsed.base} in {text!r}")
    if parsed.label and parsed.base not in ("text", "enum"):
        raise NotationError(f"'label' on {parsed.base} in {text!r}")
    if parsed.time and parsed.base != "int":
        raise NotationError(f"'time' on {parsed.base} in {text!r}")


def load_schema(path: Path = SCHEMA_PATH) -> dict[str, Any]:
    """Read schema.json, and parse every type text in it (a text it cannot read fails here)."""
    schema: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    shapes = schema["shapes"]
    assert isinstance(shapes, dict)
    for name, fields in shapes.items():
        for entry in fields:
            try:
                parsed = parse_type(entry["type"])
            except NotationError as exc:
                raise NotationError(f"shape {name}, key {entry['key']}: {exc}") from None
            for member in _shape_names(parsed):
                if member not in shapes:
                    raise NotationError(f"shape {name} names unknown shape {member}")
    return schema


def _shape_names(parsed: Type) -> tuple[str, ...]:
    if parsed.base in ("shape", "union"):
        return parsed.names
    if parsed.item is not None:
        return _shape_names(parsed.item)
    return ()


def shape_name(schema: Mapping[str, object], opcode: str | int, direction: str) -> str:
    """The shape a payload of ``opcode`` (name or code) in ``direction`` must have."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")
    if opcode in ("ERROR", ERROR_OPCODE) or (
        isinstance(opcode, str) and _same_code(opcode, ERROR_OPCODE)
    ):
        return ERROR_SHAPE
    opcodes = schema["opcodes"]
    assert isinstance(opcodes, list)
    for entry in opcodes:
        code = int(str(entry["code"]), 16)
        if opcode in (entry["name"], code) or (
            isinstance(opcode, str) and _same_code(opcode, code)
        ):
            name = entry.get(direction)
            if name is None:
                raise ValueError(f"{entry['name']} has no {direction} shape")
            return str(name)
    raise ValueError(f"unknown opcode {opcode!r}")


def _same_code(text: str, code: int) -> bool:
    try:
        return int(text, 0) == code
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Checker:
    shapes: Mapping[str, Sequence[Mapping[str, object]]]
    request: bool

    def shape(self, name: str, value: object, path: str) -> None:
        if not isinstance(value, dict):
            raise SchemaViolation(path, f"must be a map ({name}), got {_describe(value)}")
        fields = {str(f["key"]): f for f in self.shapes[name]}
        for key, item in value.items():
            if not isinstance(key, str):
                raise SchemaViolation(path, f"has a non-text key ({_describe(key)})")
            child = f"{path}.{key}" if path else key
            entry = fields.get(key)
            if entry is None:
                raise SchemaViolation(child, "unknown key")
            if item is None:
                if not self.request:
                    raise SchemaViolation(child, "null in a response (absent keys are omitted)")
                continue  # null means absent (spec/01-wire.md §2)
            self.value(parse_type(str(entry["type"])), item, child)
        for key, entry in fields.items():
            if entry["required"] and value.get(key) is None:
                child = f"{path}.{key}" if path else key
                raise SchemaViolation(child, "is required")

    def value(self, kind: Type, value: object, path: str) -> None:
        base = kind.base
        if base == "any":
            return
        if base == "bool":
            if not isinstance(value, bool):
                raise SchemaViolation(path, f"must be a bool, got {_describe(value)}")
        elif base == "int":
            self.integer(kind, value, path)
        elif base == "float":
            self.float_value(kind, value, path)
        elif base in ("text", "enum"):
            self.text(kind, value, path)
        elif base == "bytes":
            self.byte_string(kind, value, path)
        elif base == "map":
            self.text_keyed_map(value, path)
        elif base == "array":
            self.array(kind, value, path)
        elif base == "shape":
            self.shape(kind.names[0], value, path)
        elif base == "union":
            self.union(kind, value, path)
        else:  # pragma: no cover - parse_type admits no other base
            raise NotationError(f"no rule for {base}")

    def integer(self, kind: Type, value: object, path: str) -> None:
        """Check an ``int`` value: an integer (not a bool) within the bounds."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise SchemaViolation(path, f"must be an integer, got {_describe(value)}")
        self.bounds(kind, value, path)

    def byte_string(self, kind: Type, value: object, path: str) -> None:
        """Check a ``bytes`` value: a byte string of an allowed length."""
        if not isinstance(value, bytes):
            raise SchemaViolation(path, f"must be a byte string, got {_describe(value)}")
        self.length(kind, len(value), "bytes", path)

    def text_keyed_map(self, value: object, path: str) -> None:
        """Check a ``map`` value: any map whose keys are all text."""
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise SchemaViolation(path, f"must be a map with text keys, got {_describe(value)}")

    def array(self, kind: Type, value: object, path: str) -> None:
        """Check an array value: each item against the item type, then the length."""
        if not isinstance(value, list | tuple):
            raise SchemaViolation(path, f"must be an array, got {_describe(value)}")
        assert kind.item is not None
        for i, item in enumerate(value):
            self.value(kind.item, item, f"{path}[{i}]")
        self.length(kind, len(value), "items", path)

    def float_value(self, kind: Type, value: object, path: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SchemaViolation(path, f"must be a number, got {_describe(value)}")
        if isinstance(value, int):
            if not self.request:
                raise SchemaViolation(path, "must be a float in a response, got an integer")
            try:
                value = float(value)
            except OverflowError:
                raise SchemaViolation(path, "must be a float, got an integer beyond it") from None
        if kind.finite and not math.isfinite(value):
            raise SchemaViolation(path, "must be a finite number")
        self.bounds(kind, value, path)

    def bounds(self, kind: Type, value: float, path: str) -> None:
        if kind.low is None and kind.high is None:
            return
        if math.isnan(value):
            raise SchemaViolation(path, "must not be NaN")
        if kind.low is not None and value < kind.low:
            raise SchemaViolation(path, f"must be at least {kind.low}")
        if kind.high is not None and value > kind.high:
            raise SchemaViolation(path, f"must be at most {kind.high}")

    def text(self, kind: Type, value: object, path: str) -> None:
        if not isinstance(value, str):
            raise SchemaViolation(path, f"must be text, got {_describe(value)}")
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            raise SchemaViolation(path, "holds a lone surrogate, which has no UTF-8 form") from None
        if size > MAX_TEXT_BYTES:
            raise SchemaViolation(path, f"is over {MAX_TEXT_BYTES} bytes of UTF-8")
        if kind.base == "enum" and value not in kind.names:
            raise SchemaViolation(path, f"must be one of {', '.join(kind.names)}, got {value!r}")
        self.length(kind, len(value), "characters", path)
        for pattern in kind.patterns:
            if pattern.fullmatch(value) is None:
                raise SchemaViolation(path, f"must match /{pattern.pattern}/")
        if kind.label:
            self.label(value, path)

    def label(self, value: str, path: str) -> None:
        if value != value.strip():
            raise SchemaViolation(path, "must not be blank or begin or end with whitespace")
        for index, char in enumerate(value):
            category = unicodedata.category(char)
            if category[0] == "C" or category in LABEL_REFUSED_CATEGORIES:
                raise SchemaViolation(
                    path, f"must not contain U+{ord(char):04X} ({category}) at character {index}"
                )

    def length(self, kind: Type, size: int, unit: str, path: str) -> None:
        if kind.min_len is not None and size < kind.min_len:
            raise SchemaViolation(path, f"must have at least {kind.min_len} {unit}, got {size}")
        if kind.max_len is not None and size > kind.max_len:
            raise SchemaViolation(path, f"must have at most {kind.max_len} {unit}, got {size}")

    def union(self, kind: Type, value: object, path: str) -> None:
        if not isinstance(value, dict):
            raise SchemaViolation(path, f"must be a map, got {_describe(value)}")
        members: dict[str, str] = {}
        for name in kind.names:
            required = [str(f["key"]) for f in self.shapes[name] if f["required"]]
            if len(required) != 1:
                raise NotationError(f"union member {name} has {len(required)} required keys, not 1")
            members[required[0]] = name
        present = [key for key in members if key in value]
        if len(present) != 1:
            keys = " or ".join(repr(k) for k in members)
            raise SchemaViolation(path, f"must hold exactly one of the keys {keys}")
        self.shape(members[present[0]], value, path)


def _describe(value: object) -> str:
    if value is None:
        return "null"
    for kind, text in ((bool, "a bool"), (int, "an integer"), (float, "a float"), (str, "text")):
        if isinstance(value, kind):
            return text
    if isinstance(value, bytes):
        return f"a byte string of {len(value)} bytes"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "a map"
    return type(value).__name__


def check_payload(
    schema: Mapping[str, object], opcode: str | int, direction: str, payload: object
) -> None:
    """Raise :class:`SchemaViolation` unless ``payload`` fits its shape.

    ``payload`` is a decoded CBOR map: ``bytes`` for byte strings, ``int`` and
    ``float`` as decoded (see :func:`from_mirror` for the JSON mirror form).
    """
    shapes = schema["shapes"]
    assert isinstance(shapes, Mapping)
    name = shape_name(schema, opcode, direction)
    Checker(shapes, request=direction == "request").shape(name, payload, "")


def from_mirror(value: object) -> object:
    """A mirror (``$bytes``, ``$int``, ``$float``) as the decoded value it stands for."""
    if isinstance(value, dict):
        if set(value) == {"$bytes"}:
            return bytes.fromhex(str(value["$bytes"]))
        if set(value) == {"$int"}:
            return int(str(value["$int"]))
        if set(value) == {"$float"}:
            return float(str(value["$float"]))
        return {k: from_mirror(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_mirror(v) for v in value]
    return value


def vector_target(vector: Mapping[str, object]) -> tuple[str, str]:
    """The opcode name and direction a golden vector's payload is checked as."""
    name = str(vector["name"])
    if name.startswith("ERROR."):
        return "ERROR", "response"
    opcode, suffix = name.rsplit(".", 1)
    return opcode, {"request": "request", "response": "response", "end": "stream_end"}[suffix]


def check_golden(schema: Mapping[str, object], path: Path = GOLDEN_PATH) -> list[str]:
    """Every golden vector's payload checked; the list of failures (empty: all fit)."""
    failures: list[str] = []
    for vector in json.loads(path.read_text(encoding="utf-8"))["vectors"]:
        opcode, direction = vector_target(vector)
        try:
            check_payload(schema, opcode, direction, from_mirror(vector["payload"]))
        except SchemaViolation as exc:
            failures.append(f"{vector['name']}: {exc}")
    return failures


def main(argv: list[str] | None = None) -> int:
    """The command line: one payload, or every golden vector."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("opcode", nargs="?", help="name (STATEMENT_CREATE, ERROR) or code (0x0140)")
    parser.add_argument("direction", nargs="?", choices=DIRECTIONS)
    parser.add_argument("file", nargs="?", help="a JSON mirror of the payload (default: stdin)")
    parser.add_argument("--golden", action="store_true", help="check every golden vector")
    parser.add_argument("--schema", type=Path, default=SCHEMA_PATH)
    args = parser.parse_args(argv)
    try:
        schema = load_schema(args.schema)
    except NotationError as exc:
        print(f"schema.json: {exc}", file=sys.stderr)
        return 2
    if args.golden:
        failures = check_golden(schema)
        for line in failures:
            print(f"MISMATCH {line}")
        return 1 if failures else 0
    if args.opcode is None or args.direction is None:
        parser.print_usage(sys.stderr)
        return 2
    text = Path(args.file).read_text(encoding="utf-8") if args.file else sys.stdin.read()
    try:
        check_payload(schema, args.opcode, args.direction, from_mirror(json.loads(text)))
    except SchemaViolation as exc:
        print(f"MISMATCH {exc}")
        return 1
    except ValueError as exc:  # an unknown opcode or direction, or a file that is not JSON
        print(str(exc), file=sys.stderr)
        return 2
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
