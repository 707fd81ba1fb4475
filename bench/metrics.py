"""Retrieval-quality metrics: nDCG@k, recall@k and their means over queries.

Pure functions over document ids, so the quality suite scores every arm
(lexical, semantic, hybrid) and every reference system the same way.

nDCG uses the graded gain **linearly** (a document of gain 4 adds 4, not
``2**4 - 1``) with the ``log2(rank + 1)`` discount, ranks counted from 1, as
trec_eval's ``ndcg`` measure does; the exponential form would let Cranfield's
few "complete answer" documents dominate a query's score. Scores are comparable
only between runs that use the same form.

A query with no relevant document has no ideal ranking and nothing to recall;
the metrics return 0.0 for it, and callers should leave it out of the means
(:func:`has_relevant` says which queries to skip) rather than count a zero.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Final, TypedDict

__all__ = [
    "NDCG_DEPTH",
    "RECALL_DEPTH",
    "Summary",
    "has_relevant",
    "mean",
    "ndcg_at_k",
    "recall_at_k",
    "summarise",
]

NDCG_DEPTH: Final = 10
"""Default nDCG cut-off: the top-10 a RECALL returns by default (spec/01-wire.md §9)."""

RECALL_DEPTH: Final = 100
"""Default recall cut-off: the candidate depth a re-ranker or fusion step would see."""


class Summary(TypedDict):
    """A metric over a query set: its mean and how many queries it averages."""

    mean: float
    count: int


def _check_ranking(ranked: Sequence[int], k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    # A repeated document would be credited twice and could push nDCG above 1.
    if len(set(ranked)) != len(ranked):
        raise ValueError("the ranking lists a document more than once")


def has_relevant(gains: Mapping[int, int]) -> bool:
    """Whether a query has any relevant document; queries without one are skipped."""
    return any(gain > 0 for gain in gains.values())


def _discount(rank: int) -> float:
    """The DCG discount of a 1-based rank: ``1 / log2(rank + 1)``."""
    return 1.0 / math.log2(rank + 1)


def ndcg_at_k(
    ranked_doc_ids: Sequence[int], gains: Mapping[int, int], k: int = NDCG_DEPTH
) -> float:
    """Normalised discounted cumulative gain of the top ``k`` of a ranking.

    ``gains`` maps judged documents to their graded gain (0 or absent: not
    relevant). DCG sums ``gain / log2(rank + 1)`` over the top ``k``; the ideal
    DCG does the same for the judged gains sorted best first, so a ranking that
    puts the best documents first scores 1.0. A query with no relevant
    document scores 0.0 (see :func:`has_relevant`)."""
    _check_ranking(ranked_doc_ids, k)
    if any(gain < 0 for gain in gains.values()):
        raise ValueError("gains must not be negative")
    ideal = sorted((gain for gain in gains.values() if gain > 0), reverse=True)[:k]
    ideal_dcg = math.fsum(gain * _discount(rank) for rank, gain in enumerate(ideal, start=1))
    if ideal_dcg == 0.0:
        return 0.0
    dcg = math.fsum(
        gains.get(doc, 0) * _discount(rank) for rank, doc in enumerate(ranked_doc_ids[:k], start=1)
    )
    return dcg / ideal_dcg


def recall_at_k(
    ranked_doc_ids: Sequence[int], relevant: Collection[int], k: int = RECALL_DEPTH
) -> float:
    """The share of ``relevant`` documents found in the top ``k`` of a ranking.

    The denominator is all relevant documents, not ``min(k, len(relevant))``,
    so a query with more relevant documents than ``k`` cannot reach 1.0. A
    query with no relevant document scores 0.0 (see :func:`has_relevant`)."""
    _check_ranking(ranked_doc_ids, k)
    if not relevant:
        return 0.0
    wanted = set(relevant)
    found = sum(1 for doc in ranked_doc_ids[:k] if doc in wanted)
    return found / len(wanted)


def mean(values: Iterable[float]) -> float:
    """The arithmetic mean, summed exactly; no values is an error, not a zero."""
    items = list(values)
    if not items:
        raise ValueError("the mean of no values is undefined")
    return math.fsum(items) / len(items)


def summarise(per_query: Mapping[int, float]) -> Summary:
    """The mean of a metric over queries, and how many queries it covers.

    An empty mapping is an error (a suite that skipped every query measured nothing)."""
    return Summary(mean=mean(per_query.values()), count=len(per_query))
