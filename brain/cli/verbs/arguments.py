"""Reading command-line words into wire values: ids, refs, objects, arms, attributes.

Each ``parse_*`` function is pure and raises ValueError with a message fit to
show as it is; the ``*_arg`` wrappers turn that into the ArgumentTypeError
argparse reports (exit 2). Refs follow spec/01-wire.md §9:

- a SUBJECT (or relation end) ``id:<hex>`` or ``entity:<hex>`` is ``{"entity": id}``,
  ``memory:<hex>`` is ``{"memory": id}``, ``name:<text>`` is ``{"name": text}``
  whatever the text looks like, and anything else is ``{"name": SUBJECT}``;
- an OBJECT is read by ``--object-type`` (text unless said otherwise).
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Final, TypeVar

from brain.cli.verbs.dates import parse_time
from brain.errors import BrainError
from brain.wire.messages.recall_ops import ArmWeights
from brain.wire.messages.records import Evidence
from brain.wire.messages.values import (
    BoolValue,
    EntityRef,
    EntityValue,
    FloatValue,
    IntValue,
    MemoryRef,
    MemoryValue,
    NameRef,
    Ref,
    StatementValue,
    TextValue,
    TimeValue,
    Value,
)

__all__ = [
    "ARMS",
    "OBJECT_TYPES",
    "argument",
    "parse_arms",
    "parse_attribute",
    "parse_bool",
    "parse_choices",
    "parse_evidence",
    "parse_id",
    "parse_object",
    "parse_ref",
    "parse_weight",
]

ARMS: Final = ("semantic", "lexical", "graph")
"""RECALL's arms, in the order the wire names them (spec/01-wire.md §9)."""

OBJECT_TYPES: Final = ("text", "entity", "int", "float", "bool", "time", "memory", "statement")
"""What ``--object-type`` accepts: the value shapes of spec/01-wire.md §9."""

_HEX_ID: Final = re.compile(r"[0-9a-fA-F]{32}")
_UUID: Final = re.compile(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
_TRUE: Final = ("true", "yes", "1", "on")
_FALSE: Final = ("false", "no", "0", "off")

T = TypeVar("T")


def parse_id(text: str) -> bytes:
    """A record id: 32 hex digits, or the same as a UUID with hyphens."""
    value = text.strip()
    if _UUID.fullmatch(value):
        value = value.replace("-", "")
    if not _HEX_ID.fullmatch(value):
        raise ValueError(f"{text!r} is not an id (32 hex digits, as the output shows them)")
    return bytes.fromhex(value)


def parse_ref(text: str, *, type_: str | None = None) -> Ref:
    """A subject or relation end (the module docstring's prefixes); ``type_`` is the
    entity type a ``{"name"}`` ref carries (``--subject-type``)."""
    prefix, colon, rest = text.partition(":")
    if colon:
        if prefix in ("id", "entity"):
            return EntityRef(entity=parse_id(rest))
        if prefix == "memory":
            return MemoryRef(memory=parse_id(rest))
        if prefix == "name":
            text = rest
    if not text.strip():
        raise ValueError("a name must contain more than white space")
    return NameRef(name=text, type_=type_)


def parse_bool(text: str) -> bool:
    """``true``/``false`` (also yes/no, 1/0, on/off), any case."""
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"{text!r} is not a truth value (true or false)")


def parse_object(text: str, object_type: str = "text") -> Value:
    """A statement's object read as ``object_type`` (one of :data:`OBJECT_TYPES`)."""
    if object_type == "text":
        return TextValue(text=text)
    if object_type == "entity":
        return EntityValue(entity=parse_id(text.removeprefix("id:").removeprefix("entity:")))
    if object_type == "memory":
        return MemoryValue(memory=parse_id(text.removeprefix("memory:")))
    if object_type == "statement":
        return StatementValue(statement=parse_id(text.removeprefix("statement:")))
    if object_type == "int":
        try:
            return IntValue(int_=int(text.strip(), 10))
        except ValueError:
            raise ValueError(f"{text!r} is not an integer") from None
    if object_type == "float":
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
        if not math.isfinite(number):
            raise ValueError(f"{text!r} is not a finite number")
        return FloatValue(float_=number)
    if object_type == "bool":
        return BoolValue(bool_=parse_bool(text))
    if object_type == "time":
        return TimeValue(time=parse_time(text))
    raise ValueError(f"unknown object type {object_type!r}; use one of {', '.join(OBJECT_TYPES)}")


def parse_weight(text: str) -> float:
    """An arm weight: a finite number, 0 or more (0 turns the arm off)."""
    try:
        weight = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(weight) or weight < 0:
        raise ValueError(f"an arm weight must be a finite number, 0 or more, not {text!r}")
    return weight


def parse_arms(text: str) -> ArmWeights:
    """``semantic=1,lexical=1,graph=0``: a weight per named arm; unnamed arms keep the
    server's default (1.0)."""
    weights: dict[str, float] = {}
    for item in text.split(","):
        name, equals, number = item.strip().partition("=")
        if not equals:
            raise ValueError(f"{item.strip()!r} is not ARM=WEIGHT (for example graph=0)")
        if name not in ARMS:
            raise ValueError(f"unknown arm {name!r}; the arms are {', '.join(ARMS)}")
        if name in weights:
            raise ValueError(f"arm {name!r} is given twice")
        weights[name] = parse_weight(number)
    return ArmWeights(**weights)


def parse_choices(text: str, allowed: Sequence[str]) -> tuple[str, ...]:
    """A comma-separated list of distinct words from ``allowed`` (``statement,memory``)."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise ValueError(f"name at least one of {', '.join(allowed)}")
    for item in items:
        if item not in allowed:
            raise ValueError(f"unknown {item!r}; use {', '.join(allowed)}")
    if len(set(items)) != len(items):
        raise ValueError(f"{text!r} names something twice")
    return tuple(items)


def parse_evidence(text: str) -> Evidence:
    """A cited memory: ``MEMORY_ID``, optionally ``MEMORY_ID:SHA256`` to pin its text."""
    ident, colon, digest = text.removeprefix("memory:").partition(":")
    if not colon:
        return Evidence(memory=parse_id(ident))
    try:
        sha = bytes.fromhex(digest)
    except ValueError:
        sha = b""
    if len(sha) != 32:
        raise ValueError(f"{digest!r} is not a SHA-256 (64 hex digits)")
    return Evidence(memory=parse_id(ident), sha256=sha)


def parse_attribute(text: str) -> tuple[str, object]:
    """``KEY=TEXT`` (the value is text) or ``KEY:=JSON`` (the value is JSON: numbers,
    true/false, null, arrays, objects), as httpie reads them."""
    key, raw_json, value = text.partition(":=")
    if raw_json and "=" not in key:
        try:
            return _attribute_key(key, text), json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the value of {key!r} is not JSON: {exc.msg}") from None
    key, equals, value = text.partition("=")
    if not equals:
        raise ValueError(f"{text!r} is not KEY=TEXT or KEY:=JSON")
    return _attribute_key(key, text), value


def _attribute_key(key: str, text: str) -> str:
    if not key:
        raise ValueError(f"{text!r} has no key before '='")
    return key


def argument(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse ``type=`` from a ``parse_*`` function: its ValueError (or a message
    class's InvalidArgument) becomes the message argparse prints (exit 2)."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        except BrainError as exc:  # a message class refused the value
            raise argparse.ArgumentTypeError(exc.message) from None

    convert.__name__ = parse.__name__.removeprefix("parse_")
    return convert
