"""RECALL and EXPLAIN (WIRE.md §8, SEMANTICS.md §6): three arms, fusion, the filter chain.

1. **Arms**, each within the request's scope by construction (the HNSW index of
   the scope, postings under the scope's prefix, the scope's entities), each
   contributing its best ``max(3·top_k, 100)`` candidates:
   semantic (the cue's embedding, or the request's ``vector``), lexical
   (BM25) and graph (:mod:`brain.engine.recall.graph`). No arm filters its
   candidates: every one goes through fusion and is judged by the chain, so
   EXPLAIN counts each row the filters drop, whichever arm found it (the graph
   arm's walk follows only the links the request's time filters keep, but every
   statement it reaches is a candidate). An arm whose weight is 0 is not run;
   an empty cue runs only the arms that do not need it (the semantic arm with a
   ``vector``, the graph arm with an ``entity_anchor``).
2. **Fusion**: ``score = Σ w_arm / (rrf_k + rank_arm)``, ranks from 1; ties by
   record id, then record type. Each hit reports its rank in every arm.
3. **The filter chain** of :mod:`brain.engine.records.filters`, in its binding order,
   over every fused candidate, then the limit ``top_k``. The record type
   filter (``records``) belongs to step 1; a memory has no kind or predicate,
   so a ``kinds`` or ``predicates`` filter leaves memories out. A memory is
   judged like an event at ``occurred_at`` (else ``recorded_at``), with
   confidence 1 (it is what was seen), as tombstoned from a soft forget on,
   and never restored once hard-forgotten.
4. **Abstention**: no hit answers ``abstained: true``; the coverage says what
   was searched either way.
5. **Evidence**: each statement hit carries its evidence memories with their
   SHA-256 (a memory forgotten since has no hash left to give and is left out).

Every candidate an arm returns is looked up in the read's own snapshot, so a
record another scope holds, or one the snapshot cannot see, never appears.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import numpy as np
from numpy.typing import NDArray

from brain.engine.index import lexical
from brain.engine.index.documents import MEMORY_DOC, STATEMENT_DOC
from brain.engine.index.service import Retrieval
from brain.engine.index.vectors import VECTOR_LABELS
from brain.engine.recall.graph import cue_entities, graph_search
from brain.engine.records.filters import Filters, RowTimes, Step, Verdict, judge
from brain.engine.records.memories import get_memory, memory_row
from brain.engine.records.refs import ENTITY_TAG, answers_as
from brain.engine.records.statements import get_loaded, statement_times, to_message
from brain.engine.store.scope import Scope
from brain.engine.write.reads import ReadContext
from brain.errors import AsOfInFuture, InvalidArgument, NotFound
from brain.wire.messages.recall_ops import (
    Candidates,
    Coverage,
    Explain,
    ExplainOk,
    ExplainRequest,
    Hit,
    RankedHit,
    Ranks,
    Recall,
    RecallOk,
    Survivors,
    Timings,
)
from brain.wire.messages.records import Citation
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = [
    "ARMS",
    "DEFAULT_RRF_K",
    "DEFAULT_TOP_K",
    "MIN_ARM_CANDIDATES",
    "RECALL_READS",
    "read_explain",
    "read_recall",
]

ARMS: Final = ("semantic", "lexical", "graph")
DEFAULT_TOP_K: Final = 10
"""Hits when the request names no ``top_k`` (WIRE.md §8)."""
DEFAULT_RRF_K: Final = 60
"""Fusion's ``k`` when the request names none (SEMANTICS.md §6)."""
MIN_ARM_CANDIDATES: Final = 100
"""Each arm contributes ``max(3·top_k, 100)`` candidates (SEMANTICS.md §6)."""
_CANDIDATE_FACTOR: Final = 3

_STEPS: Final = (Step.TYPE, Step.TEMPORAL, Step.CONFIDENCE, Step.TOMBSTONE, Step.SUPERSESSION)


@dataclass(slots=True)
class _Candidate:
    key: bytes
    score: float = 0.0
    ranks: dict[str, int] = field(default_factory=dict)
    verdict: Verdict | None = None


@dataclass(slots=True)
class _Run:
    """A recall's working state: candidates, counts, timings."""

    hits: list[_Candidate]
    coverage: Coverage
    survivors: Survivors
    restored: int
    rrf_k: int
    timings: Timings


def _us(start: float) -> int:
    return max(0, int((time.perf_counter() - start) * 1_000_000))


def _query_vector(retrieval: Retrieval, request: Recall) -> NDArray[np.float32] | None:
    dims = retrieval.embedder.dimensions
    if request.vector is not None:
        if len(request.vector) != 4 * dims:
            raise InvalidArgument(
                f"vector has {len(request.vector) // 4} values; this server's embeddings have "
                f"{dims}",
                field="vector",
            )
        return np.frombuffer(request.vector, dtype="<f4").astype(np.float32)
    if not request.cue.strip():
        return None
    vectors = retrieval.embedder.embed([request.cue])
    return np.asarray(vectors[0], dtype=np.float32)


def _semantic(
    ctx: ReadContext, scope: Scope, retrieval: Retrieval, vector: NDArray[np.float32], n: int
) -> list[bytes]:
    found: list[bytes] = []
    labels = ctx.store.table(VECTOR_LABELS)
    for label, _ in retrieval.indexes.search(scope.prefix, vector, n):
        # The snapshot decides: a label it does not hold is a vector it cannot see.
        key = ctx.txn.get(scope.key(label.to_bytes(8, "big")), db=labels)
        if key is not None:
            found.append(bytes(key))
    return found


def _memory_times(row: dict[str, object]) -> RowTimes:
    recorded = row["recorded_at"]
    assert isinstance(recorded, int)
    occurred = row.get("occurred_at")
    forgotten_at = row.get("forgotten_at")
    soft = row.get("forgotten") == "soft"
    return RowTimes(
        kind=None,
        predicate=None,
        confidence=1.0,
        recorded_at=recorded,
        event_at=occurred if isinstance(occurred, int) else recorded,
        record_invalidated_at=forgotten_at if soft and isinstance(forgotten_at, int) else None,
        tombstoned_at=forgotten_at if soft and isinstance(forgotten_at, int) else None,
        retracted=row.get("forgotten") == "hard",
    )


def _times(ctx: ReadContext, scope: Scope, key: bytes) -> RowTimes | None:
    if key[:1] == MEMORY_DOC:
        row = memory_row(ctx.store, ctx.txn, scope, key[1:])
        return None if row is None else _memory_times(row)
    try:
        return statement_times(get_loaded(ctx.store, ctx.txn, scope, key[1:], "id"))
    except NotFound:
        return None


def _filters(request: Recall) -> Filters:
    return Filters(
        kinds=request.kinds,
        predicates=request.predicates,
        valid_at=request.valid_at,
        valid_from=request.valid_from,
        valid_to=request.valid_to,
        min_confidence=request.min_confidence,
        include_tombstoned=bool(request.include_tombstoned),
        include_superseded=bool(request.include_superseded),
        as_of=request.as_of,
    )


def _run(ctx: ReadContext, scope: Scope, request: Recall, *, account: bool) -> _Run:
    """Search, fuse and filter. Without ``account`` (a RECALL that asks for no
    explanation) the filter chain stops at the ``top_k``-th survivor: each
    candidate is judged on its own, in fused order, so the hits are the same,
    but the rows after the last hit need not be read (SEMANTICS.md §6 counts
    them only for EXPLAIN); ``survivors`` then covers only the rows judged."""
    started = time.perf_counter()
    if request.as_of is not None and request.as_of > ctx.now:
        raise AsOfInFuture(
            f"as_of {request.as_of} is after the record clock ({ctx.now})", field="as_of"
        )
    retrieval = ctx.retrieval
    if retrieval is None:
        raise InvalidArgument("this database was opened without retrieval")
    top_k = request.top_k or DEFAULT_TOP_K
    rrf_k = request.rrf_k or DEFAULT_RRF_K
    n = max(_CANDIDATE_FACTOR * top_k, MIN_ARM_CANDIDATES)
    weights = dict.fromkeys(ARMS, 1.0)
    if request.arms is not None:
        for arm in ARMS:
            given = getattr(request.arms, arm)
            if given is not None:
                weights[arm] = given
    filters = _filters(request)
    ranked: dict[str, list[bytes]] = {arm: [] for arm in ARMS}
    spent = dict.fromkeys(("embed", "semantic", "lexical", "graph"), 0)

    if weights["semantic"] > 0:
        clock = time.perf_counter()
        vector = _query_vector(retrieval, request)
        spent["embed"] = _us(clock)
        if vector is not None:
            clock = time.perf_counter()
            ranked["semantic"] = _semantic(ctx, scope, retrieval, vector, n)
            spent["semantic"] = _us(clock)
    if weights["lexical"] > 0 and request.cue.strip():
        clock = time.perf_counter()
        ranked["lexical"] = [
            k
            for k, _ in lexical.search(
                ctx.store, ctx.txn, scope, request.cue, n, cache=retrieval.postings
            )
        ]
        spent["lexical"] = _us(clock)
    if weights["graph"] > 0:
        clock = time.perf_counter()
        starts = cue_entities(ctx.store, ctx.txn, scope, request.cue, ctx.resolution)
        if request.entity_anchor is not None:
            anchored = answers_as(ctx.store, ctx.txn, scope, ENTITY_TAG + request.entity_anchor)
            starts.add(anchored[1:])
        found = graph_search(ctx.store, ctx.txn, scope, starts=starts, filters=filters, limit=n)
        ranked["graph"] = [k for k, _ in found]
        spent["graph"] = _us(clock)

    clock = time.perf_counter()
    fused: dict[bytes, _Candidate] = {}
    for arm in ARMS:
        for rank, key in enumerate(ranked[arm], start=1):
            candidate = fused.setdefault(key, _Candidate(key))
            candidate.ranks[arm] = rank
            candidate.score += weights[arm] / (rrf_k + rank)
    order = sorted(fused.values(), key=lambda c: (-c.score, c.key[1:], c.key[:1]))
    fuse_us = _us(clock)

    clock = time.perf_counter()
    allowed = set(request.records) if request.records is not None else {"statement", "memory"}
    first_failed: list[Step] = []
    kept: list[_Candidate] = []
    restored = 0
    for candidate in order:
        record = "memory" if candidate.key[:1] == MEMORY_DOC else "statement"
        times = _times(ctx, scope, candidate.key)
        if times is None:
            first_failed.append(Step.TYPE)  # gone from this snapshot: nothing to show
            continue
        verdict = (
            Verdict(Step.TYPE, first_failed=Step.TYPE)
            if record not in allowed
            else judge(times, filters)
        )
        candidate.verdict = verdict
        first_failed.append(verdict.first_failed)
        if verdict.kept:
            kept.append(candidate)
            restored += int(verdict.restored)
            if not account and len(kept) == top_k:
                break
    filter_us = _us(clock)

    def surviving(step: Step) -> int:
        return sum(1 for f in first_failed if f is Step.SURVIVED or f > step)

    counts = [surviving(step) for step in _STEPS]
    hits = kept[:top_k]
    survivors = Survivors(
        fused=len(order),
        type_=counts[0],
        temporal=counts[1],
        confidence=counts[2],
        tombstone=counts[3],
        supersession=counts[4],
        as_of=len(kept),
        limit=len(hits),
    )
    coverage = Coverage(
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
    return _Run(hits, coverage, survivors, restored, rrf_k, timings)


def _ranks(candidate: _Candidate) -> Ranks:
    return Ranks(**candidate.ranks)


def _explain(run: _Run) -> Explain:
    return Explain(
        survivors=run.survivors,
        restored_by_as_of=run.restored,
        rrf_k=run.rrf_k,
        timings_us=run.timings,
    )


def _evidence(ctx: ReadContext, scope: Scope, content: dict[str, object]) -> tuple[Citation, ...]:
    cited = content.get("evidence")
    citations: list[Citation] = []
    for item in cited if isinstance(cited, list) else []:
        memory_id = item.get("memory") if isinstance(item, dict) else None
        if not isinstance(memory_id, bytes):
            continue
        row = memory_row(ctx.store, ctx.txn, scope, memory_id)
        sha = None if row is None else row.get("sha256")
        if isinstance(sha, bytes) and "text" in (row or {}):
            citations.append(Citation(memory=memory_id, sha256=sha))
    return tuple(citations)


def _hit(ctx: ReadContext, scope: Scope, request: Recall, candidate: _Candidate) -> Hit:
    ranks = _ranks(candidate)
    if candidate.key[:1] == STATEMENT_DOC:
        loaded = get_loaded(ctx.store, ctx.txn, scope, candidate.key[1:], "id")
        statement = to_message(loaded, scope, request.as_of, ctx.store, ctx.txn)
        return Hit(
            record="statement",
            id=candidate.key[1:],
            score=candidate.score,
            ranks=ranks,
            statement=statement,
            evidence=_evidence(ctx, scope, loaded.content),
        )
    memory = get_memory(ctx.store, ctx.txn, scope, candidate.key[1:])
    return Hit(
        record="memory", id=candidate.key[1:], score=candidate.score, ranks=ranks, memory=memory
    )


def read_recall(ctx: ReadContext, scope: Scope, request: Recall) -> RecallOk:
    """RECALL: the hits, whether the answer abstains, what was searched, and on request
    the account of how."""
    run = _run(ctx, scope, request, account=bool(request.explain))
    hits = tuple(_hit(ctx, scope, request, c) for c in run.hits)
    return RecallOk(
        hits=hits,
        abstained=not hits,
        coverage=run.coverage,
        explain=_explain(run) if request.explain else None,
    )


def read_explain(ctx: ReadContext, scope: Scope, request: ExplainRequest) -> ExplainOk:
    """EXPLAIN: RECALL's account, and its hits without their records."""
    run = _run(ctx, scope, request, account=True)
    hits = tuple(
        RankedHit(
            record="memory" if c.key[:1] == MEMORY_DOC else "statement",
            id=c.key[1:],
            score=c.score,
            ranks=_ranks(c),
        )
        for c in run.hits
    )
    return ExplainOk(explain=_explain(run), coverage=run.coverage, hits=hits)


RECALL_READS: Final[dict[Opcode, Callable[..., Message]]] = {
    Opcode.RECALL: read_recall,
    Opcode.EXPLAIN: read_explain,
}
"""The retrieval readers, for :data:`brain.engine.dispatch.READS`."""
