"""Settings an operator may tune that planners and readers see.

Kept free of other engine imports: the planning and reading contexts carry
them, and every planner imports those contexts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "AMBIGUITY_MARGIN",
    "DEFAULT_INDEX_WAIT_S",
    "DEFAULT_RESOLUTION",
    "DEFAULT_RETENTION_NS",
    "FUZZY_THRESHOLD",
    "MAX_EMBED_BACKLOG",
    "Resolution",
]

DEFAULT_RETENTION_NS: Final = 24 * 3600 * 10**9
"""Idempotency answers are kept at least 24 h by default (spec/01-wire.md §4,
``server.idempotency_retention_s``); a client retrying later than that is refused
(:mod:`brain.engine.write.idempotency`), which is why the window is generous."""

DEFAULT_INDEX_WAIT_S: Final = 30.0
"""Longest a RECALL waits for the indexer to reach the writes acknowledged before it.
Under a sustained burst of writes the embedder falls behind; past this wait the
recall runs on the vectors there are (the lexical and graph arms see everything)."""

MAX_EMBED_BACKLOG: Final = 20_000
"""Queue entries a namespace may have waiting for the indexer before its writes that
add documents are refused with OVERLOADED (:mod:`brain.engine.index.pressure`).
Writes are taken much faster than MiniLM embeds (about a thousand against 60 to
100 short statements a second on two cores), so this is the burst a namespace may
write at full speed: twenty seconds of it. The lag it bounds is 3 to 5 minutes of
embedding; a recall waits :data:`DEFAULT_INDEX_WAIT_S` of it at most, and its
coverage counts what it could not see."""

FUZZY_THRESHOLD: Final = 0.8
"""Lowest fuzzy score kept: "Jon Smith" still finds "John Smith" (0.95), "Bob" not "Rob" (0.67)."""

AMBIGUITY_MARGIN: Final = 0.05
"""Two best candidates this close are a tie to be settled by a review (spec/02-data-model.md §4)."""


@dataclass(frozen=True, slots=True)
class Resolution:
    """How names resolve: the fuzzy tier's lowest score and the margin of a tie."""

    fuzzy_threshold: float = FUZZY_THRESHOLD
    ambiguity_margin: float = AMBIGUITY_MARGIN

    def __post_init__(self) -> None:
        if not 0.0 < self.fuzzy_threshold <= 1.0:
            raise ValueError(f"fuzzy_threshold must be in (0, 1], not {self.fuzzy_threshold}")
        if not 0.0 <= self.ambiguity_margin < 1.0:
            raise ValueError(f"ambiguity_margin must be in [0, 1), not {self.ambiguity_margin}")


DEFAULT_RESOLUTION: Final = Resolution()
"""The documented defaults."""
