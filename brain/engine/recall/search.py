"""A recall's search (spec/04-retrieval.md §5): arms, fusion and filter chain, in one snapshot.

1. **Arms** (:mod:`brain.engine.recall.arms`): semantic, lexical and graph,
   one after another, each contributing its best ``max(3·top_k, 100)``
   candidates. An arm whose weight is 0 is not run; an empty cue runs only
   the arms that do not need it (the semantic arm with a ``vector``, the
   graph arm with an ``entity_anchor``).
2. **Fusion** (:mod:`brain.engine.recall.fusion`): a convex combination of the
   arms' scaled scores, or reciprocal-rank fusion; ties by record id, then record
   type; then the **conversational context** (:mod:`brain.engine.recall.context`)
   lends part of each best memory's score to its neighbouring turns, and a time
   the cue names (:mod:`brain.engine.recall.when`) raises the records in it.
3. **The filter chain** (:mod:`brain.engine.recall.chain`) over every fused
   candidate, in fused order, then the limit ``top_k``, then the **relevance
   floor** (:mod:`brain.engine.recall.relevance`).

Every candidate an arm returns is looked up in the read's own snapshot, so a
record another scope holds, or one the snapshot cannot see, never appears.
The coverage's ``embed_backlog`` counts the scope's documents the snapshot holds
and the vector index did not yet when the arms ran (spec/04-retrieval.md §6).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

from brain.engine.index import lexical
from brain.engine.index.service import Retrieval
from brain.engine.recall.arms import (
    Scored,
    arm_candidates,
    graph_arm,
    lexical_arm,
    query_vector,
    semantic_arm,
)
from brain.engine.recall.chain import TimesOf, judge_candidates, recall_filters, survivors
from brain.engine.recall.context import spread_context
from brain.engine.recall.fusion import ARMS, Candidate, Fusion, fuse, fusion_of
from brain.engine.recall.relevance import floor_of, relevance_of
from brain.engine.recall.when import cue_spans, prefer_named_time
from brain.engine.records.filters import Filters
from brain.engine.store.scope import Scope
from brain.engine.write.reads import ReadContext
from brain.errors import AsOfInFuture, InvalidArgument
from brain.wire.messages.recall_ops import Candidates, Coverage, Recall, Survivors, Timings

__all__ = ["DEFAULT_TOP_K", "Search", "retrieval_of", "search"]

DEFAULT_TOP_K: Final = 10
"""Hits when the request names no ``top_k`` (spec/04-retrieval.md §6)."""
_US_PER_S: Final = 1_000_000
"""EXPLAIN reports its timings in microseconds."""


@dataclass(frozen=True, slots=True)
class Search:
    """A recall's outcome before any record is read: the hits in order, what was
    searched, EXPLAIN's counts and the time each stage took."""

    hits: list[Candidate]
    coverage: Coverage
    survivors: Survivors
    restored: int
    fusion: Fusion
    timings: Timings


def _us(start: float) -> int:
    return max(0, int((time.perf_counter() - start) * _US_PER_S))


def retrieval_of(ctx: ReadContext) -> Retrieval:
    """The read's retrieval services; INVALID_ARGUMENT when the database has none."""
    retrieval = ctx.retrieval
    if not isinstance(retrieval, Retrieval):
        raise InvalidArgument("this database was opened without retrieval")
    return retrieval


def _check_as_of(ctx: ReadContext, request: Recall) -> None:
    if request.as_of is not None and request.as_of > ctx.now:
        raise AsOfInFuture(
            f"as_of {request.as_of} is after the record clock ({ctx.now})", field="as_of"
        )


def _run_arms(
    ctx: ReadContext,
    scope: Scope,
    retrieval: Retrieval,
    request: Recall,
    *,
    weights: dict[str, float],
    filters: Filters,
) -> tuple[dict[str, Scored], dict[str, int], bool]:
    """Each arm's ranking (empty for an arm not run), the microseconds each stage took,
    and whether the semantic arm searched (it had a query vector)."""
    n = arm_candidates(request.top_k or DEFAULT_TOP_K)
    ranked: dict[str, Scored] = {arm: [] for arm in ARMS}
    spent = dict.fromkeys(("embed", "semantic", "lexical", "graph"), 0)
    searched = False
    if weights["semantic"] > 0:
        clock = time.perf_counter()
        vector = query_vector(retrieval, request)
        spent["embed"] = _us(clock)
        if vector is not None:
            clock = time.perf_counter()
            ranked["semantic"] = semantic_arm(ctx, scope, retrieval, vector, n)
            spent["semantic"] = _us(clock)
            searched = True
    if weights["lexical"] > 0 and request.cue.strip():
        clock = time.perf_counter()
        ranked["lexical"] = lexical_arm(ctx, scope, retrieval, request.cue, n)
        spent["lexical"] = _us(clock)
    if weights["graph"] > 0:
        clock = time.perf_counter()
        ranked["graph"] = graph_arm(ctx, scope, request, filters, n)
        spent["graph"] = _us(clock)
    return ranked, spent, searched


def _coverage(
    ctx: ReadContext,
    scope: Scope,
    request: Recall,
    weights: dict[str, float],
    ranked: dict[str, Scored],
    *,
    backlog: int,
    relevance: float | None,
    floor: float | None,
) -> Coverage:
    return Coverage(
        space=scope.space,
        arms=tuple(arm for arm in ARMS if weights[arm] > 0),
        corpus=lexical.corpus_size(ctx.store, ctx.txn, scope),
        candidates=Candidates(
            semantic=len(ranked["semantic"]),
            lexical=len(ranked["lexical"]),
            graph=len(ranked["graph"]),
        ),
        as_of=request.as_of,
        valid_at=request.valid_at,
        min_confidence=request.min_confidence,
        relevance=relevance,
        relevance_floor=floor,
        embed_backlog=backlog or None,
        index_wait_ms=ctx.index_wait_ms,
    )


def search(ctx: ReadContext, scope: Scope, request: Recall, *, account: bool) -> Search:
    """Search, fuse and filter. Without ``account`` (a RECALL that asks for no
    explanation) the filter chain stops at the ``top_k``-th survivor: each
    candidate is judged on its own, in fused order, so the hits are the same,
    but the rows after the last hit need not be read (spec/04-retrieval.md §5 counts
    them only for EXPLAIN); ``survivors`` then covers only the rows judged."""
    started = time.perf_counter()
    _check_as_of(ctx, request)
    retrieval = retrieval_of(ctx)
    top_k = request.top_k or DEFAULT_TOP_K
    fusion = fusion_of(request)
    weights = fusion.weights
    filters = recall_filters(request)
    # Counted before the arms search the indexes, so that none means they saw it all.
    backlog = retrieval.indexer.embed_backlog(ctx.txn, scope.prefix)
    ranked, spent, ran = _run_arms(ctx, scope, retrieval, request, weights=weights, filters=filters)

    clock = time.perf_counter()
    order = fuse(ranked, fusion)
    times_of = TimesOf(ctx, scope)
    if request.context is not False:
        order = spread_context(
            ctx.store,
            ctx.txn,
            scope,
            order,
            filters=filters,
            records=request.records,
            times_of=times_of,
        )
    spans = cue_spans(request.cue) if request.named_time is not False else []
    if spans:
        order = prefer_named_time(order, spans, times_of)
    fuse_us = _us(clock)

    clock = time.perf_counter()
    judged = judge_candidates(
        ctx,
        scope,
        order,
        filters,
        request.records,
        stop_after=None if account else top_k,
        times_of=times_of,
    )
    filter_us = _us(clock)

    hits = judged.kept[:top_k]
    floor = floor_of(request, retrieval.embedder.name, ran=ran, backlog=backlog)
    relevance = relevance_of(hits, ranked["semantic"]) if ran else None
    if floor is not None and relevance is not None and relevance < floor:
        hits = []  # nothing here is about the cue: abstain, and say why in the coverage
    counts = survivors(judged, fused=len(order), limit=len(hits))
    coverage = _coverage(
        ctx, scope, request, weights, ranked, backlog=backlog, relevance=relevance, floor=floor
    )
    timings = Timings(
        embed=spent["embed"],
        semantic=spent["semantic"],
        lexical=spent["lexical"],
        graph=spent["graph"],
        fuse=fuse_us,
        filter_=filter_us,
        total=_us(started),
    )
    retrieval.stats.record({arm: len(found) for arm, found in ranked.items()}, not hits)
    return Search(hits, coverage, counts, judged.restored, fusion, timings)
