"""Fusion (spec/04-retrieval.md §5): one ranking out of the arms' rankings.

Two functions, the request's ``fusion`` choosing (``convex`` unless it names
``rrf`` or gives an ``rrf_k``):

- **convex** (the default): each arm's own scores are scaled into [0, 1] by
  min-max over its best :data:`NORMALISE_DEPTH` candidates (the best scores 1,
  the :data:`NORMALISE_DEPTH`-th 0, any deeper one 0 too), and a document's
  score is ``Σ w_arm · scaled_arm``, an arm that did not find it adding 0.
  Weights default to :data:`DEFAULT_WEIGHTS`.
- **rrf**: ``score = Σ w_arm / (rrf_k + rank_arm)``, ranks from 1, ``rrf_k``
  default :data:`DEFAULT_RRF_K`, every weight 1.0 unless the request names it.

Either way, ties go by record id, then record type, so equal scores always come
out in the same order, and each fused candidate keeps its rank and its own
score in every arm that found it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from brain.engine.index.documents import MEMORY_DOC
from brain.wire.messages.recall_ops import Recall

__all__ = [
    "ARMS",
    "CONVEX",
    "DEFAULT_FUSION",
    "DEFAULT_RRF_K",
    "DEFAULT_WEIGHTS",
    "NORMALISE_DEPTH",
    "RRF",
    "RRF_WEIGHT",
    "Candidate",
    "Fusion",
    "fuse",
    "fusion_of",
]

ARMS: Final = ("semantic", "lexical", "graph")
"""The arms, in the order they run and fuse."""
CONVEX: Final = "convex"
"""Fusion by a weighted sum of the arms' min-max scaled scores."""
RRF: Final = "rrf"
"""Reciprocal-rank fusion."""
DEFAULT_FUSION: Final = CONVEX
"""The fusion a request gets when it names none and gives no ``rrf_k``: on agent
conversations (LoCoMo) equal-weight RRF lost to its own lexical arm, while the
convex combination beat both arms there and on Cranfield (spec/04-retrieval.md §5
gives the figures and bench/results/locomo.json the ablations)."""
DEFAULT_RRF_K: Final = 60
"""RRF's ``k`` when the request names none (spec/04-retrieval.md §5)."""
RRF_WEIGHT: Final = 1.0
"""An arm's RRF weight when the request names none."""
DEFAULT_WEIGHTS: Final = {"semantic": 0.4, "lexical": 0.6, "graph": 0.1}
"""Convex weights when the request names none, chosen on the LoCoMo development
split and Cranfield (spec/04-retrieval.md §5): on conversation turns BM25 is the
far stronger arm and MiniLM adds what the words miss (on Cranfield the two are
even, and semantic 0.3 to 0.5 beats both arms on both collections); the graph arm,
which scores every record naming the cue's entities alike, only breaks ties."""
NORMALISE_DEPTH: Final = 100
"""Candidates an arm's scores are scaled over: its minimum candidate count
(``arms.MIN_ARM_CANDIDATES``), so a document's fused score does not move with ``top_k``."""


@dataclass(frozen=True, slots=True)
class Fusion:
    """How a request's arms are fused: the function, its weights, RRF's ``k`` (None
    for convex)."""

    method: str
    weights: dict[str, float]
    rrf_k: int | None


@dataclass(slots=True)
class Candidate:
    """One fused document: its key, its fused score, its rank and own score in each arm,
    and what its conversational context added (spec/04-retrieval.md §5)."""

    key: bytes
    score: float = 0.0
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    """Each arm's own score of the document (cosine, BM25, graph), where it found it."""
    context: float = 0.0
    """The score its neighbours in the same conversation added (0 when none did)."""
    named_time: float = 0.0
    """The score its falling in a time the cue names added (0 when it did not)."""

    @property
    def record(self) -> str:
        """The record type the document key names: ``memory`` or ``statement``."""
        return "memory" if self.key[:1] == MEMORY_DOC else "statement"


def fusion_of(request: Recall) -> Fusion:
    """The request's fusion: its ``fusion``, else RRF when it gives ``rrf_k``, else
    :data:`DEFAULT_FUSION`; weights are the request's where it names one (the wire
    refuses ``rrf_k`` with fusion ``convex``)."""
    method = request.fusion or (RRF if request.rrf_k is not None else DEFAULT_FUSION)
    weights = dict(DEFAULT_WEIGHTS) if method == CONVEX else dict.fromkeys(ARMS, RRF_WEIGHT)
    if request.arms is not None:
        for arm in ARMS:
            given = getattr(request.arms, arm)
            if given is not None:
                weights[arm] = given
    rrf_k = (request.rrf_k or DEFAULT_RRF_K) if method == RRF else None
    return Fusion(method, weights, rrf_k)


def fused_order(candidate: Candidate) -> tuple[float, bytes, bytes]:
    """Best score first; ties by record id, then by the record type byte."""
    return (-candidate.score, candidate.key[1:], candidate.key[:1])


def _scaled(found: Sequence[tuple[bytes, float]]) -> list[float]:
    """Each score scaled by min-max over the best :data:`NORMALISE_DEPTH`."""
    head = [score for _, score in found[:NORMALISE_DEPTH]]
    if not head:
        return []
    top, floor = max(head), min(head)
    if top - floor <= 0.0:
        # Nothing tells the head apart: each of it is the arm's best, and a deeper
        # candidate, which can only score less, is below the scale.
        return [1.0 if score >= top else 0.0 for _, score in found]
    return [max(0.0, (score - floor) / (top - floor)) for _, score in found]


def fuse(ranked: Mapping[str, Sequence[tuple[bytes, float]]], fusion: Fusion) -> list[Candidate]:
    """Every document any arm ranked, best fused score first."""
    fused: dict[bytes, Candidate] = {}
    for arm in ARMS:
        found = ranked[arm]
        weight = fusion.weights[arm]
        if fusion.method == RRF:
            k = fusion.rrf_k or DEFAULT_RRF_K
            parts = [weight / (k + rank) for rank in range(1, len(found) + 1)]
        else:
            parts = [weight * scaled for scaled in _scaled(found)]
        for rank, ((key, score), part) in enumerate(zip(found, parts, strict=True), start=1):
            candidate = fused.setdefault(key, Candidate(key))
            candidate.ranks[arm] = rank
            candidate.scores[arm] = score
            candidate.score += part
    return sorted(fused.values(), key=fused_order)
