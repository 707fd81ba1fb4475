"""Comparing JSON mirrors of payloads, strictly about types (README.md, "Mirrors")."""

from __future__ import annotations

import json
import math
from typing import Final

__all__ = ["MAX_SHOWN", "compare", "show"]

MAX_SHOWN: Final = 200
"""Longest rendering of a value in a mismatch line; the JSON report keeps them whole."""


def _float_of(value: object) -> float | None:
    """The float a mirror value stands for, or None when it is not a float."""
    if isinstance(value, float):
        return value
    if isinstance(value, dict) and set(value) == {"$float"}:
        return float(str(value["$float"]))
    return None


def _same_float(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def show(value: object) -> str:
    """A value as short JSON, for a mismatch line."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def compare(expected: object, actual: object, path: str = "") -> list[str]:
    """Differences between two mirrors, strict about types.

    One allowance: an expected float that is integral may come back as a JSON
    integer, because JSON (as many languages parse it) cannot tell 1.0 from 1.
    The encode and round-trip checks catch an implementation that confuses them.
    """
    where = path or "payload"
    expected_float = _float_of(expected)
    if expected_float is not None:
        if _float_matches(expected_float, actual):
            return []
        return [f"{where}: expected float {show(expected)}, got {show(actual)}"]
    if isinstance(expected, dict) and isinstance(actual, dict):
        return _compare_maps(expected, actual, path)
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{where}: expected {len(expected)} items, got {len(actual)}"]
        problems: list[str] = []
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            problems.extend(compare(e, a, f"{path}[{i}]"))
        return problems
    # bool before int: True == 1 in Python, never on the wire.
    if type(expected) is not type(actual) or expected != actual:
        return [f"{where}: expected {show(expected)}, got {show(actual)}"]
    return []


def _float_matches(expected: float, actual: object) -> bool:
    """True when ``actual`` mirrors the float ``expected``: the same float, or the
    same integral, positive-signed value as a JSON integer (see :func:`compare`)."""
    got = _float_of(actual)
    if got is not None and _same_float(expected, got):
        return True
    return (
        type(actual) is int
        and math.isfinite(expected)
        and expected.is_integer()
        and actual == expected
        and math.copysign(1.0, expected) > 0
    )


def _compare_maps(expected: dict[str, object], actual: dict[str, object], path: str) -> list[str]:
    """Differences between two mirrored maps at ``path``: a ``$bytes`` or ``$int``
    mirror compared whole (hex in either case), any other map key by key."""
    special = {"$bytes", "$int"}
    if set(expected) & special or set(actual) & special:
        if set(expected) == {"$bytes"} and set(actual) == {"$bytes"}:
            same = str(expected["$bytes"]).lower() == str(actual["$bytes"]).lower()
        else:
            same = expected == actual
        where = path or "payload"
        return [] if same else [f"{where}: expected {show(expected)}, got {show(actual)}"]
    problems: list[str] = []
    for key, value in expected.items():
        sub = f"{path}.{key}" if path else key
        if key not in actual:
            problems.append(f"{sub}: missing")
        else:
            problems.extend(compare(value, actual[key], sub))
    problems.extend(
        f"{path}.{key}: unexpected key" if path else f"{key}: unexpected key"
        for key in actual
        if key not in expected
    )
    return problems
