"""Extractors: the names a memory's text mentions, found by pure rules (spec/02-data-model.md §3.1).

An extractor (:class:`Extractor`) reads a memory's text and answers the names
it mentions, each with how it was found (:data:`SPEAKER` or
:data:`PROPER_NAME`). It is pure and deterministic, with no model, no network,
no clock and no randomness, so the same text always yields the same mentions.
The write path runs the extractors ``DatabaseOptions.extractors`` names on
every new memory and stores what they found as links
(:mod:`brain.engine.records.mentions`); :data:`EXTRACTORS` holds those a
configuration may name, :data:`DEFAULT_EXTRACTORS` those it runs by default.

This package imports nothing else of the engine: the planning context carries
the configured extractors, and every planner imports that context.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from brain.engine.extract.base import HOW_FOUND, PROPER_NAME, SPEAKER, Extractor, Found
from brain.engine.extract.names import NamesExtractor

__all__ = [
    "DEFAULT_EXTRACTORS",
    "EXTRACTORS",
    "HOW_FOUND",
    "PROPER_NAME",
    "SPEAKER",
    "Extractor",
    "Found",
    "NamesExtractor",
    "extractors_named",
]

EXTRACTORS: Final[dict[str, Extractor]] = {NamesExtractor.name: NamesExtractor()}
"""Every extractor a configuration may name, by name."""

DEFAULT_EXTRACTORS: Final[tuple[Extractor, ...]] = (EXTRACTORS["names"],)
"""What runs on ENCODE unless configured otherwise: the ``names`` extractor."""


def extractors_named(names: Iterable[str]) -> tuple[Extractor, ...]:
    """The extractors ``names`` name, in that order, each once; ValueError naming an
    unknown one (an empty list turns extraction off)."""
    chosen: dict[str, Extractor] = {}
    for name in names:
        extractor = EXTRACTORS.get(name)
        if extractor is None:
            known = ", ".join(sorted(EXTRACTORS))
            raise ValueError(f"unknown extractor {name!r} (known: {known})")
        chosen.setdefault(name, extractor)
    return tuple(chosen.values())
