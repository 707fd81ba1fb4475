"""RECALL modes shared by the retrieval-quality suites (``quality``, ``locomo``).

A **mode** is the RECALL fields a suite sends, in their wire form, beside what
the suite sets itself (the cue, the space, ``top_k``, ``records``); a field a
mode leaves out takes the server's default. ``hybrid`` is the server's defaults,
what a user gets; an arm's mode is the arm **alone**: its own ranking, with the
steps after fusion (the conversational context, the preference for times the cue
names) turned off, so that it is the baseline the hybrid is measured against.
:data:`ABLATIONS` take one part of the defaults away each (spec/04-retrieval.md
§5, §6), and ``NAME=JSON`` on a suite's command line adds any other mode.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from brain.errors import BrainError
from brain.wire.messages.recall_ops import Recall

__all__ = [
    "ABLATIONS",
    "ALONE",
    "HYBRID",
    "SUITE_FIELDS",
    "Mode",
    "alone",
    "parse_mode",
    "request_of",
]

Mode = Mapping[str, object]
"""The RECALL fields a mode sends, in their wire form."""

HYBRID: Final = "hybrid"
"""The mode of the server's defaults, which the suites' goals are held by."""

ALONE: Final = {"context": False, "named_time": False}
"""What makes an arm's mode the arm alone: neither step after fusion."""

SUITE_FIELDS: Final = frozenset({"cue", "space", "top_k", "records"})
"""The RECALL fields a suite sets itself, the same in every mode."""

ABLATIONS: Final[Mapping[str, Mode]] = {
    "rrf": {"fusion": "rrf"},
    "convex_no_context": {"context": False},
    "convex_no_named_time": {"named_time": False},
    "convex_no_graph": {"arms": {"graph": 0.0}},
    "no_floor": {"min_relevance": -1.0},
    "lexical_with_steps": {"arms": {"semantic": 0.0, "lexical": 1.0, "graph": 0.0}},
    "semantic_with_steps": {"arms": {"semantic": 1.0, "lexical": 0.0, "graph": 0.0}},
}
"""What ``--ablations`` adds, each measured in the same run as the hybrid:
equal-weight RRF (the earlier default) with the server's other steps, the convex
fusion without the conversational context, without the preference for the times a
cue names, without the graph arm, and without the relevance floor; and the lexical
and semantic arms each alone but with the steps after fusion the hybrid has."""


def alone(arm: str) -> Mode:
    """The mode of ``arm`` alone: weight 1, the other arms 0, no step after fusion."""
    weights = {name: float(name == arm) for name in ("semantic", "lexical", "graph")}
    return {"arms": weights, **ALONE}


def request_of(
    mode: Mode, cue: str, *, top_k: int, records: tuple[str, ...], space: str | None
) -> Recall:
    """The RECALL of ``mode`` for ``cue``; INVALID_ARGUMENT for a field RECALL refuses."""
    wire: dict[str, object] = {**mode, "cue": cue, "top_k": top_k, "records": list(records)}
    if space is not None:
        wire["space"] = space
    return Recall.from_wire(wire)


def parse_mode(text: str) -> tuple[str, Mode]:
    """A mode from ``NAME=JSON``: an object of RECALL fields in their wire form, as in
    ``half={"arms": {"semantic": 1, "lexical": 0.5}, "fusion": "rrf"}`` (``{}`` or
    ``null``: the server's defaults). Raises ValueError for anything else, including
    fields RECALL refuses and those the suite sets itself."""
    name, sep, fields = text.partition("=")
    if not sep or not name:
        raise ValueError(f"mode {text!r} is not NAME=JSON")
    try:
        value = json.loads(fields)
    except json.JSONDecodeError as exc:
        raise ValueError(f"mode {name!r}: the fields are not JSON: {exc}") from None
    if value is None:
        value = {}
    if not isinstance(value, dict):
        # A bad command-line argument, like every other refusal here.
        raise ValueError(f"mode {name!r}: expected null or an object of RECALL fields")  # noqa: TRY004
    mode = {str(key): field for key, field in value.items()}
    owned = sorted(set(mode) & SUITE_FIELDS)
    if owned:
        raise ValueError(f"mode {name!r}: the suite sets {', '.join(owned)} itself")
    try:
        request_of(mode, "probe", top_k=1, records=("memory",), space=None)
    except BrainError as exc:
        raise ValueError(f"mode {name!r}: {exc}") from None
    return name, mode
