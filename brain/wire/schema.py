"""Typed wire messages: frozen dataclasses that validate themselves.

A message class declares its fields with ordinary type hints; constraints ride
along in ``Annotated`` metadata (:class:`Len`, :class:`Range`, :class:`Choice`,
…). From the hints this module compiles, once per class, a checker per field
that both validates and converts: a decoded CBOR map becomes nested message
objects, arrays become tuples, integers sent for a float field become floats.
The same checkers run when server code builds a message, so no invalid message
can exist, whoever made it.

Wire keys are the field names, except that a trailing underscore is dropped
(``from_`` travels as ``from``), which keeps Python keywords and builtins out
of the way. Optional fields default to ``None`` and are omitted on the wire;
``null`` on the wire reads as absent (spec/01-wire.md §2).

A union of message classes is decoded by its discriminating key: each member
must have exactly one required field, and its key picks the member (the
``{"entity": id}`` / ``{"name": …}`` shapes of spec/01-wire.md §9).

Answers the engine builds from its own stored rows were checked when those
rows were written: inside :func:`built_answers` (on the calling thread only),
messages are converted as usual (nested maps become messages, arrays tuples,
integers floats) but their constraints are not checked again. Requests are
never built there. :func:`check_built_answers` turns the full checks back on
everywhere, which the test suite does, so a builder that makes an invalid
answer still fails a test.
"""

from __future__ import annotations

import dataclasses
import math
import re
import threading
import types
import typing
import unicodedata
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Final, Self, TypeVar, dataclass_transform

from brain.errors import BrainError, InvalidArgument

__all__ = [
    "Choice",
    "Finite",
    "Label",
    "Len",
    "Message",
    "Range",
    "TextPattern",
    "Time",
    "built_answers",
    "check_built_answers",
    "describe_message",
    "field_keys",
    "nested_messages",
    "wire_message",
]

T = TypeVar("T")

Checker = Callable[[object, str], object]

Converter = Callable[[object], object]
"""The conversion half of a :data:`Checker` alone, for built answers."""


class _Trust(threading.local):
    """Per thread: whether the messages made now are answers built from stored rows."""

    built = False


_TRUST: Final = _Trust()

_CHECK_BUILT: list[bool] = [False]
"""Whether built answers are checked as fully as requests (the test suite's mode),
for every thread; a one-item list, changed in place."""


class _Built:
    """The block of :func:`built_answers`."""

    __slots__ = ("_outer",)

    def __enter__(self) -> None:
        self._outer = _TRUST.built
        _TRUST.built = True

    def __exit__(self, *exc: object) -> None:
        _TRUST.built = self._outer


def built_answers() -> _Built:
    """Within ``with built_answers():`` on this thread, messages are answers the
    engine builds from its stored rows: converted, not validated again (unless
    :func:`check_built_answers` is on). Nothing made from a request may be built
    inside. Blocks nest."""
    return _Built()


def check_built_answers(on: bool) -> bool:
    """Check built answers as fully as requests (``on``) or trust them (the default);
    returns the setting it replaced. The test suite turns it on, so a builder that
    makes an invalid answer fails there instead of sending it."""
    previous = _CHECK_BUILT[0]
    _CHECK_BUILT[0] = on
    return previous


def _trusted() -> bool:
    return _TRUST.built and not _CHECK_BUILT[0]


@dataclasses.dataclass(frozen=True, slots=True)
class Len:
    """Length bounds for text (characters), bytes and arrays."""

    min: int = 0
    max: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Range:
    """Inclusive numeric bounds."""

    min: float | None = None
    max: float | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Choice:
    """An enumeration: the text must be one of ``values``."""

    values: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class TextPattern:
    """The whole text must match ``regex``; ``describe`` says so in errors."""

    regex: str
    describe: str


@dataclasses.dataclass(frozen=True, slots=True)
class Finite:
    """A float that is neither NaN nor infinite."""


@dataclasses.dataclass(frozen=True, slots=True)
class Label:
    """Text that reads as one line of visible words: no character of Unicode
    category C (control, format, surrogate, private use, unassigned), no line or
    paragraph separator (Zl, Zp), and no whitespace at either end, so never blank."""


@dataclasses.dataclass(frozen=True, slots=True)
class Time:
    """An integer that is a time: signed nanoseconds since the Unix epoch, UTC.
    It constrains nothing beyond its range; it tells clients which integers are
    times (``int[…] time`` in ``schema.json``), so they may accept a date there."""


class Message:
    """Base of every wire message. Subclasses are made with :func:`wire_message`."""

    __slots__ = ()

    # Set by subclasses that need rules spanning several fields.
    cross_checks: ClassVar[tuple[Callable[[Any], None], ...]] = ()

    def __post_init__(self) -> None:
        spec = _spec_of(type(self))
        if _TRUST.built and not _CHECK_BUILT[0]:
            for name, convert in spec.converters:
                value = getattr(self, name)
                if value is not None:
                    converted = convert(value)
                    if converted is not value:
                        object.__setattr__(self, name, converted)
            return
        for name, key, check in spec.checkers:
            value = getattr(self, name)
            if value is None:
                if name in spec.required:
                    raise InvalidArgument(f"{key} is required", field=key)
                continue
            converted = check(value, key)
            if converted is not value:
                object.__setattr__(self, name, converted)
        for rule in type(self).cross_checks:
            rule(self)

    @classmethod
    def from_wire(cls, obj: object, path: str = "") -> Self:
        """Build the message from a decoded CBOR value, or raise InvalidArgument
        (inside :func:`built_answers`: converted, not checked)."""
        result = _decode_message(cls, obj, path)
        assert isinstance(result, cls)
        return result

    def to_wire(self) -> dict[str, object]:
        """The message as a CBOR-ready map; absent optional fields are omitted."""
        out: dict[str, object] = {}
        for name, key, _ in _spec_of(type(self)).checkers:
            value = getattr(self, name)
            if value is not None:
                out[key] = _to_wire_value(value)
        return out


@dataclass_transform(frozen_default=True, kw_only_default=True)
def wire_message(cls: type[T]) -> type[T]:
    """Make ``cls`` a frozen, slotted, keyword-only dataclass message."""
    made: type[T] = dataclasses.dataclass(frozen=True, slots=True, kw_only=True)(cls)
    return made


def field_keys(cls: type[Message]) -> list[tuple[str, bool]]:
    """The wire keys of ``cls`` in declaration order, with whether each is required."""
    spec = _spec_of(cls)
    return [(key, name in spec.required) for name, key, _ in spec.checkers]


# --- compilation ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Spec:
    checkers: tuple[tuple[str, str, Checker], ...]
    required: frozenset[str]
    by_key: Mapping[str, str]  # wire key -> attribute name
    # The fields a built answer still converts (attribute name, converter); a field
    # whose values are kept as they come is not listed.
    converters: tuple[tuple[str, Converter], ...]


_SPECS: dict[type, _Spec] = {}


def _wire_key(name: str) -> str:
    return name[:-1] if name.endswith("_") else name


def _spec_of(cls: type) -> _Spec:
    spec = _SPECS.get(cls)
    if spec is None:
        spec = _compile_spec(cls)
        _SPECS[cls] = spec
    return spec


def _compile_spec(cls: type) -> _Spec:
    hints = typing.get_type_hints(cls, include_extras=True)
    checkers: list[tuple[str, str, Checker]] = []
    converters: list[tuple[str, Converter]] = []
    required: set[str] = set()
    by_key: dict[str, str] = {}
    for fld in dataclasses.fields(cls):
        hint = hints[fld.name]
        optional, inner = _split_optional(hint)
        has_default = (
            fld.default is not dataclasses.MISSING or fld.default_factory is not dataclasses.MISSING
        )
        if not has_default:
            required.add(fld.name)
        elif not optional and fld.default is None:
            raise TypeError(f"{cls.__name__}.{fld.name} defaults to None but is not Optional")
        key = _wire_key(fld.name)
        checkers.append((fld.name, key, _compile(inner)))
        convert = _compile_converter(inner)
        if convert is not None:
            converters.append((fld.name, convert))
        by_key[key] = fld.name
    return _Spec(tuple(checkers), frozenset(required), by_key, tuple(converters))


def _split_optional(hint: object) -> tuple[bool, object]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if type(None) in args:
            rest = tuple(a for a in args if a is not type(None))
            return True, rest[0] if len(rest) == 1 else typing.Union[rest]  # noqa: UP007
    return False, hint


def _type_error(path: str, expected: str, value: object) -> InvalidArgument:
    return InvalidArgument(
        f"{path or 'payload'} must be {expected}, got {_describe(value)}", field=path or None
    )


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "text"
    if isinstance(value, bytes):
        return f"a byte string of {len(value)} bytes"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "a map"
    return type(value).__name__


def _compile(hint: object) -> Checker:
    origin = typing.get_origin(hint)
    if origin is Annotated:
        base, *meta = typing.get_args(hint)
        return _with_constraints(_compile(base), meta)
    if hint is object:
        return _check_any
    if hint is bool:
        return _check_bool
    if hint is int:
        return _check_int
    if hint is float:
        return _check_float
    if hint is str:
        return _check_str
    if hint is bytes:
        return _check_bytes
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) != 2 or args[1] is not Ellipsis:
            raise TypeError(f"only tuple[T, ...] is supported, not {hint}")
        return _array_checker(_compile(args[0]))
    if origin in (dict, Mapping):
        return _check_map
    if origin in (typing.Union, types.UnionType):
        return _union_checker(typing.get_args(hint))
    if isinstance(hint, type) and issubclass(hint, Message):
        return _message_checker(hint)
    raise TypeError(f"unsupported message field type {hint!r}")


def _compile_converter(hint: object) -> Converter | None:
    """What :func:`_compile` makes of ``hint`` without its constraints and type
    checks, for built answers: the conversions alone, or None when values are kept
    as they are."""
    origin = typing.get_origin(hint)
    if origin is Annotated:
        return _compile_converter(typing.get_args(hint)[0])
    if hint is float:
        return _to_float
    if origin is tuple:
        return _tuple_converter(_compile_converter(typing.get_args(hint)[0]))
    if origin in (typing.Union, types.UnionType):
        return _union_converter(typing.get_args(hint))
    if isinstance(hint, type) and issubclass(hint, Message):
        return _message_converter(hint)
    return None


def _to_float(value: object) -> object:
    if type(value) is int:
        return float(value)
    return value


def _tuple_converter(item: Converter | None) -> Converter:
    def convert(value: object) -> object:
        assert isinstance(value, list | tuple)
        if item is None:
            return value if isinstance(value, tuple) else tuple(value)
        return tuple(item(v) for v in value)

    return convert


def _message_converter(cls: type[Message]) -> Converter:
    def convert(value: object) -> object:
        if isinstance(value, dict):
            return _decode_message(cls, value, "")
        return value

    return convert


def _union_converter(members: tuple[object, ...]) -> Converter:
    classes: dict[str, type[Message]] = {}
    for member in members:
        assert isinstance(member, type) and issubclass(member, Message)
        (key,) = [key for key, req in field_keys(member) if req]
        classes[key] = member

    def convert(value: object) -> object:
        if not isinstance(value, dict):
            return value
        for key, cls in classes.items():
            if key in value:
                return _decode_message(cls, value, "")
        raise _type_error("", " or ".join(classes), value)

    return convert


def _check_any(value: object, path: str) -> object:
    return value


def _check_bool(value: object, path: str) -> object:
    if not isinstance(value, bool):
        raise _type_error(path, "a bool", value)
    return value


def _check_int(value: object, path: str) -> object:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(path, "an integer", value)
    return value


def _check_float(value: object, path: str) -> object:
    if isinstance(value, float):
        return value
    # Many CBOR encoders (JavaScript's among them) send 1.0 as the integer 1.
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise _type_error(path, "a float", value) from None
    raise _type_error(path, "a number", value)


def _check_str(value: object, path: str) -> object:
    if not isinstance(value, str):
        raise _type_error(path, "text", value)
    return value


def _check_bytes(value: object, path: str) -> object:
    if not isinstance(value, bytes):
        raise _type_error(path, "a byte string", value)
    return value


def _check_map(value: object, path: str) -> object:
    if not isinstance(value, dict):
        raise _type_error(path, "a map", value)
    for key in value:
        if not isinstance(key, str):
            raise InvalidArgument(f"{path} must have text keys", field=path or None)
    return value


def _array_checker(item: Checker) -> Checker:
    def check(value: object, path: str) -> object:
        if not isinstance(value, list | tuple):
            raise _type_error(path, "an array", value)
        converted = tuple(item(v, f"{path}[{i}]") for i, v in enumerate(value))
        if isinstance(value, tuple) and all(a is b for a, b in zip(converted, value, strict=True)):
            return value
        return converted

    return check


def _message_checker(cls: type[Message]) -> Checker:
    def check(value: object, path: str) -> object:
        # Exactly ``cls``: a subclass would put its extra fields on the wire.
        if type(value) is cls:
            return value
        if isinstance(value, Message):
            raise _type_error(path, f"a {cls.__name__}", value)
        return _decode_message(cls, value, path)

    return check


def _union_checker(members: tuple[object, ...]) -> Checker:
    classes: dict[str, type[Message]] = {}
    for member in members:
        if not (isinstance(member, type) and issubclass(member, Message)):
            raise TypeError(f"unions may only hold message classes, not {member!r}")
        required = [key for key, req in field_keys(member) if req]
        if len(required) != 1:
            raise TypeError(f"{member.__name__} needs exactly one required field to be in a union")
        if required[0] in classes:
            raise TypeError(f"two union members are keyed by {required[0]!r}")
        classes[required[0]] = member
    allowed = tuple(classes.values())
    shapes = " or ".join(f"{{{key!r}: …}}" for key in classes)

    def check(value: object, path: str) -> object:
        if type(value) in allowed:
            return value
        if not isinstance(value, dict):
            raise _type_error(path, shapes, value)
        present = [key for key in classes if key in value]
        if len(present) != 1:
            raise InvalidArgument(f"{path} must be exactly one of {shapes}", field=path or None)
        return _decode_message(classes[present[0]], value, path)

    return check


def _with_constraints(check: Checker, meta: list[object]) -> Checker:
    rules: list[Callable[[object, str], None]] = []
    for item in meta:
        if isinstance(item, Len):
            rules.append(_len_rule(item))
        elif isinstance(item, Range):
            rules.append(_range_rule(item))
        elif isinstance(item, Choice):
            rules.append(_choice_rule(item))
        elif isinstance(item, TextPattern):
            rules.append(_pattern_rule(item))
        elif isinstance(item, Finite):
            rules.append(_finite_rule)
        elif isinstance(item, Label):
            rules.append(_label_rule)
        elif isinstance(item, Time):
            pass  # a marker for clients: the range rule already holds
        else:
            raise TypeError(f"unknown constraint {item!r}")

    def constrained(value: object, path: str) -> object:
        value = check(value, path)
        for rule in rules:
            rule(value, path)
        return value

    return constrained


def _len_rule(bound: Len) -> Callable[[object, str], None]:
    def rule(value: object, path: str) -> None:
        assert isinstance(value, str | bytes | tuple)
        size = len(value)
        unit = (
            "items"
            if isinstance(value, tuple)
            else ("bytes" if isinstance(value, bytes) else "characters")
        )
        if bound.max is not None and bound.min == bound.max and size != bound.min:
            raise InvalidArgument(
                f"{path} must be exactly {bound.min} {unit}, got {size}", field=path
            )
        if size < bound.min:
            raise InvalidArgument(f"{path} must have at least {bound.min} {unit}", field=path)
        if bound.max is not None and size > bound.max:
            raise InvalidArgument(f"{path} must have at most {bound.max} {unit}", field=path)

    return rule


def _range_rule(bound: Range) -> Callable[[object, str], None]:
    def rule(value: object, path: str) -> None:
        assert isinstance(value, int | float)
        if isinstance(value, float) and math.isnan(value):
            raise InvalidArgument(f"{path} must not be NaN", field=path)
        if bound.min is not None and value < bound.min:
            raise InvalidArgument(f"{path} must be at least {bound.min:g}", field=path)
        if bound.max is not None and value > bound.max:
            raise InvalidArgument(f"{path} must be at most {bound.max:g}", field=path)

    return rule


def _choice_rule(choice: Choice) -> Callable[[object, str], None]:
    allowed = frozenset(choice.values)
    listing = ", ".join(repr(v) for v in choice.values)

    def rule(value: object, path: str) -> None:
        if value not in allowed:
            raise InvalidArgument(f"{path} must be one of {listing}, got {value!r}", field=path)

    return rule


def _pattern_rule(pattern: TextPattern) -> Callable[[object, str], None]:
    compiled = re.compile(pattern.regex)

    def rule(value: object, path: str) -> None:
        assert isinstance(value, str)
        if compiled.fullmatch(value) is None:
            raise InvalidArgument(f"{path} must be {pattern.describe}", field=path)

    return rule


def _finite_rule(value: object, path: str) -> None:
    assert isinstance(value, float)
    if not math.isfinite(value):
        raise InvalidArgument(f"{path} must be a finite number", field=path)


_HIDDEN_CATEGORIES: Final = frozenset({"Zl", "Zp"})
"""Categories outside C that a label refuses too: a line or paragraph separator
breaks a label across lines as surely as a newline does."""


def _label_rule(value: object, path: str) -> None:
    assert isinstance(value, str)
    if value != value.strip():
        what = "be blank" if not value.strip() else "begin or end with whitespace"
        raise InvalidArgument(f"{path} must not {what}", field=path)
    for index, char in enumerate(value):
        category = unicodedata.category(char)
        if category[0] == "C" or category in _HIDDEN_CATEGORIES:
            raise InvalidArgument(
                f"{path} must not contain U+{ord(char):04X} ({category}) at character {index}",
                field=path,
            )


# --- decoding and encoding -----------------------------------------------------------


def _decode_message(cls: type[Message], obj: object, path: str) -> Message:
    if not isinstance(obj, dict):
        raise _type_error(path, "a map", obj)
    spec = _spec_of(cls)
    if _trusted():
        # A built answer: its keys are the builder's own (an unknown one is a bug, and
        # raises as the constructor's TypeError); absent and null are the same.
        by_key = spec.by_key
        return cls(**{by_key.get(k, k): v for k, v in obj.items() if v is not None})
    kwargs: dict[str, object] = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise InvalidArgument(
                # Described, not repr()'d: repr() of a huge bignum key raises ValueError.
                f"{path or 'payload'} has a non-text key ({_describe(key)})",
                field=path or None,
            )
        name = spec.by_key.get(key)
        child = f"{path}.{key}" if path else key
        if name is None:
            raise InvalidArgument(f"unknown key {child!r}", field=child)
        if value is not None:
            kwargs[name] = value
    for name in spec.required:
        if name not in kwargs:
            key = _wire_key(name)
            child = f"{path}.{key}" if path else key
            raise InvalidArgument(f"{child} is required", field=child)
    try:
        return cls(**kwargs)
    except BrainError as exc:
        raise exc.with_field_prefix(path) from None


def _to_wire_value(value: object) -> object:
    if isinstance(value, Message):
        return value.to_wire()
    if isinstance(value, tuple):
        return [_to_wire_value(v) for v in value]
    return value


# --- description, for the machine-readable contract in protocol/ ----------------------


def describe_message(cls: type[Message]) -> list[dict[str, object]]:
    """Each field of ``cls`` as ``{"key", "required", "type"}``, in declaration order.

    The type is a compact text such as ``bytes(16)``, ``int[0..18446744073709551615]``,
    ``enum(fact|preference|event)``, ``[text]`` or ``Statement``; nested messages
    are named, and described by their own entry.
    """
    hints = typing.get_type_hints(cls, include_extras=True)
    spec = _spec_of(cls)
    out: list[dict[str, object]] = []
    for name, key, _ in spec.checkers:
        _, inner = _split_optional(hints[name])
        out.append({"key": key, "required": name in spec.required, "type": _describe_hint(inner)})
    return out


def nested_messages(cls: type[Message]) -> list[type[Message]]:
    """Every message class reachable from ``cls``'s fields (not ``cls`` itself)."""
    seen: dict[type[Message], None] = {}

    def walk(hint: object) -> None:
        origin = typing.get_origin(hint)
        args = typing.get_args(hint)
        if origin is Annotated:
            walk(args[0])
        elif origin in (tuple, typing.Union, types.UnionType):
            for arg in args:
                walk(arg)
        elif isinstance(hint, type) and issubclass(hint, Message) and hint not in seen:
            seen[hint] = None
            for sub in typing.get_type_hints(hint, include_extras=True).values():
                walk(sub)

    for sub in typing.get_type_hints(cls, include_extras=True).values():
        walk(sub)
    seen.pop(cls, None)
    return list(seen)


def _describe_hint(hint: object) -> str:
    origin = typing.get_origin(hint)
    if origin is Annotated:
        base, *meta = typing.get_args(hint)
        text = _describe_hint(base)
        for item in meta:
            text = _describe_constraint(text, item)
        return text
    if hint is object:
        return "any"
    simple = {bool: "bool", int: "int", float: "float", str: "text", bytes: "bytes"}
    if isinstance(hint, type) and hint in simple:
        return simple[hint]
    if origin is tuple:
        return "[" + _describe_hint(typing.get_args(hint)[0]) + "]"
    if origin in (dict, Mapping):
        return "map"
    if origin in (typing.Union, types.UnionType):
        return "|".join(_describe_hint(a) for a in typing.get_args(hint))
    if isinstance(hint, type):
        return hint.__name__
    return repr(hint)


def _describe_constraint(text: str, item: object) -> str:
    """``text``, the description of a type, with the constraint ``item`` added to it;
    annotation metadata that is no constraint leaves it as it was."""
    if isinstance(item, Len):
        upper = "" if item.max is None else str(item.max)
        return text + (f"({item.min})" if item.min == item.max else f"({item.min}..{upper})")
    if isinstance(item, Range):
        low = "" if item.min is None else f"{item.min:g}"
        high = "" if item.max is None else f"{item.max:g}"
        if isinstance(item.min, int) and isinstance(item.max, int):
            low, high = str(item.min), str(item.max)
        return text + f"[{low}..{high}]"
    if isinstance(item, Choice):
        return "enum(" + "|".join(item.values) + ")"
    if isinstance(item, TextPattern):
        return text + f" /{item.regex}/"
    if isinstance(item, Finite):
        return text + " finite"
    if isinstance(item, Label):
        return text + " label"
    if isinstance(item, Time):
        return text + " time"
    return text
