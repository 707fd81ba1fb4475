"""Honest abstention (spec/04-retrieval.md §6): the relevance floor.

Fusion always ranks something, so an answer's hits say nothing of whether the
space holds anything about the cue. Its **relevance** does: the best cosine
similarity between the cue's embedding and a record the filter chain kept. A
kept record the semantic arm did not find is less similar than the arm's weakest
candidate, so when the arm found none of the kept records, that weakest
candidate's similarity bounds theirs and stands in.

Below the **floor** the answer abstains: no hits, ``abstained: true``, and the
coverage gives the relevance and the floor. The floor is the request's
``min_relevance`` when it gives one, else the server embedder's calibrated
floor (:data:`RELEVANCE_FLOORS`, by the embedder's name, since a floor belongs to
one model's similarity scale). None applies when the semantic arm did not run,
when the request brought its own ``vector`` (another model's scale) without a
``min_relevance``, or while the scope has documents not yet in the vector index
(the arm could not see them, so a low relevance would not be the space's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from brain.embed.minilm import MODEL_NAME
from brain.engine.recall.fusion import Candidate
from brain.wire.messages.recall_ops import Recall

__all__ = ["RELEVANCE_FLOORS", "floor_of", "relevance_of"]

RELEVANCE_FLOORS: Final = {MODEL_NAME: 0.42}
"""Each embedder's floor, calibrated on data (bench/results/locomo.json and
quality.json): with all-MiniLM-L6-v2, the best hit of a cue about its own LoCoMo
conversation scores below 0.42 for 0.7% of cues, and for 1 of Cranfield's 225
queries against Cranfield, while questions about another conversation score below
it for 85% and Cranfield queries against a conversation for all."""


def relevance_of(
    kept: Sequence[Candidate], semantic: Sequence[tuple[bytes, float]]
) -> float | None:
    """The answer's relevance: the best semantic score among ``kept``, else the
    semantic arm's weakest score; None when the arm found nothing."""
    found = [c.scores["semantic"] for c in kept if "semantic" in c.scores]
    if found:
        return max(found)
    return semantic[-1][1] if semantic else None


def floor_of(request: Recall, embedder: str, *, ran: bool, backlog: int) -> float | None:
    """The floor the answer is held to, or None when none applies."""
    if not ran:
        return None
    if request.min_relevance is not None:
        return request.min_relevance
    if request.vector is not None or backlog:
        return None
    return RELEVANCE_FLOORS.get(embedder)
