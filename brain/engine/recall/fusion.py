"""Reciprocal-rank fusion (spec/04-retrieval.md §5): one ranking out of the arms' rankings.

``score = Σ w_arm / (rrf_k + rank_arm)`` over the arms that found a document,
ranks from 1, weights 1.0 unless the request names them. Ties go by record
id, then record type, so equal scores always come out in the same order.
Each fused candidate keeps its rank in every arm that found it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from brain.engine.index.documents import MEMORY_DOC
from brain.wire.messages.recall_ops import Recall

__all__ = ["ARMS", "DEFAULT_RRF_K", "DEFAULT_WEIGHT", "Candidate", "arm_weights", "fuse"]

ARMS: Final = ("semantic", "lexical", "graph")
"""The arms, in the order they run and fuse."""
DEFAULT_RRF_K: Final = 60
"""Fusion's ``k`` when the request names none (spec/04-retrieval.md §5)."""
DEFAULT_WEIGHT: Final = 1.0
"""An arm's weight when the request names none (spec/04-retrieval.md §5)."""


@dataclass(slots=True)
class Candidate:
    """One fused document: its document key, its fused score, its rank in each arm."""

    key: bytes
    score: float = 0.0
    ranks: dict[str, int] = field(default_factory=dict)

    @property
    def record(self) -> str:
        """The record type the document key names: ``memory`` or ``statement``."""
        return "memory" if self.key[:1] == MEMORY_DOC else "statement"


def arm_weights(request: Recall) -> dict[str, float]:
    """Each arm's weight: the request's where it names one, else :data:`DEFAULT_WEIGHT`."""
    weights = dict.fromkeys(ARMS, DEFAULT_WEIGHT)
    if request.arms is not None:
        for arm in ARMS:
            given = getattr(request.arms, arm)
            if given is not None:
                weights[arm] = given
    return weights


def _fused_order(candidate: Candidate) -> tuple[float, bytes, bytes]:
    # Best score first; ties by record id, then by the record type byte.
    return (-candidate.score, candidate.key[1:], candidate.key[:1])


def fuse(
    ranked: Mapping[str, Sequence[bytes]], weights: Mapping[str, float], rrf_k: int
) -> list[Candidate]:
    """Every document any arm ranked, best fused score first."""
    fused: dict[bytes, Candidate] = {}
    for arm in ARMS:
        for rank, key in enumerate(ranked[arm], start=1):
            candidate = fused.setdefault(key, Candidate(key))
            candidate.ranks[arm] = rank
            candidate.score += weights[arm] / (rrf_k + rank)
    return sorted(fused.values(), key=_fused_order)
