"""What an extractor is and what it answers (spec/02-data-model.md §3.1).

Kept free of other engine imports: the planning context carries the configured
extractors, and every planner imports that context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

__all__ = ["HOW_FOUND", "PROPER_NAME", "SPEAKER", "Extractor", "Found"]

SPEAKER: Final = "speaker"
"""A name found as the speaker prefix of the text (``Jolene: I went …``)."""

PROPER_NAME: Final = "proper_name"
"""A name found as a run of capitalised words, or an acronym, in the text."""

HOW_FOUND: Final = (SPEAKER, PROPER_NAME)
"""Every way a mention can be found, as the wire spells it."""


@dataclass(frozen=True, slots=True)
class Found:
    """One name a text mentions, as written (spaces made single), and how it was found."""

    name: str
    how: str


class Extractor(Protocol):
    """Finds the names a memory's text mentions.

    ``extract`` must be pure and deterministic (no model, no network, no clock, no
    randomness): the write path stores what it answers, and planning the same ENCODE
    again (a transaction's commit) must link the same names. ``version`` changes
    whenever the rules do, so stored mentions say which rules found them."""

    @property
    def name(self) -> str:
        """The extractor's name, as configurations and stored mentions spell it."""
        ...

    @property
    def version(self) -> int:
        """The version of its rules."""
        ...

    def extract(self, text: str) -> tuple[Found, ...]:
        """The names ``text`` mentions, each once (by normalised name), first found first."""
        ...
