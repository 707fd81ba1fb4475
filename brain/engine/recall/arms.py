"""The three arms as RECALL runs them (spec/04-retrieval.md §2 to §4).

Each arm contributes its best :func:`arm_candidates` documents, as
``(document key, score)`` pairs, best first: semantic (the cue's embedding, or
the request's ``vector``, against the scope's HNSW index, scored by cosine
similarity), lexical (BM25 over the postings under the
scope's prefix, :mod:`brain.engine.index.lexical`) and graph (the entities the
cue names and the ``entity_anchor``, :mod:`brain.engine.recall.graph`). No
arm filters its candidates: every one goes through fusion and is judged by
the chain, so EXPLAIN counts each row the filters drop, whichever arm found
it (the graph arm's walk follows only the links the request's time filters
keep, but every statement it reaches is a candidate).
"""

from __future__ import annotations

from typing import Final

import numpy as np
from numpy.typing import NDArray

from brain.embed.batching import Priority
from brain.engine.index import lexical
from brain.engine.index.service import Retrieval
from brain.engine.index.vectors import LABEL_BYTES
from brain.engine.recall.graph import cue_entities, graph_search
from brain.engine.records.filters import Filters
from brain.engine.records.refs import ENTITY_TAG, answers_as
from brain.engine.store.scope import Scope
from brain.engine.store.tables import VECTOR_LABELS
from brain.engine.write.reads import ReadContext
from brain.errors import InvalidArgument
from brain.wire.messages.recall_ops import Recall

__all__ = [
    "MIN_ARM_CANDIDATES",
    "Scored",
    "arm_candidates",
    "graph_arm",
    "lexical_arm",
    "query_vector",
    "semantic_arm",
]

MIN_ARM_CANDIDATES: Final = 100
"""Each arm contributes ``max(3·top_k, 100)`` candidates (spec/04-retrieval.md §5)."""
_CANDIDATE_FACTOR: Final = 3
"""Candidates per hit asked of each arm, so the chain has rows to spare when it drops some."""
_VECTOR_VALUE_BYTES: Final = 4
"""A request's ``vector`` is little-endian float32 values."""


def arm_candidates(top_k: int) -> int:
    """How many candidates each arm contributes for ``top_k`` hits."""
    return max(_CANDIDATE_FACTOR * top_k, MIN_ARM_CANDIDATES)


def query_vector(retrieval: Retrieval, request: Recall) -> NDArray[np.float32] | None:
    """The semantic arm's query: the request's ``vector``, else the cue's embedding; None
    for an empty cue without a ``vector`` (the arm then has nothing to search with)."""
    dims = retrieval.embedder.dimensions
    if request.vector is not None:
        if len(request.vector) != _VECTOR_VALUE_BYTES * dims:
            raise InvalidArgument(
                f"vector has {len(request.vector) // _VECTOR_VALUE_BYTES} values; this "
                f"server's embeddings have {dims}",
                field="vector",
            )
        return np.frombuffer(request.vector, dtype="<f4").astype(np.float32)
    if not request.cue.strip():
        return None
    # A client waits on this: it goes ahead of the indexer's queued documents.
    vectors = retrieval.embedder.embed([request.cue], priority=Priority.INTERACTIVE)
    return np.asarray(vectors[0], dtype=np.float32)


Scored = list[tuple[bytes, float]]
"""An arm's answer: ``(document key, the arm's own score)``, best first."""


def semantic_arm(
    ctx: ReadContext, scope: Scope, retrieval: Retrieval, vector: NDArray[np.float32], n: int
) -> Scored:
    """The ``n`` documents nearest ``vector`` in the scope's index that the read can see,
    each scored by its cosine similarity to ``vector`` (1 minus the index's distance)."""
    found: Scored = []
    labels = ctx.store.table(VECTOR_LABELS)
    for label, distance in retrieval.indexes.search(scope.prefix, vector, n):
        # The snapshot decides: a label it does not hold is a vector it cannot see.
        key = ctx.txn.get(scope.key(label.to_bytes(LABEL_BYTES, "big")), db=labels)
        if key is not None:
            # Clamped: float error can take a distance just below 0 or above 2.
            found.append((bytes(key), min(1.0, max(-1.0, 1.0 - float(distance)))))
    return found


def lexical_arm(ctx: ReadContext, scope: Scope, retrieval: Retrieval, cue: str, n: int) -> Scored:
    """The ``n`` documents of the scope that BM25 ranks best for ``cue``, with their BM25."""
    return lexical.search(ctx.store, ctx.txn, scope, cue, n, cache=retrieval.postings)


def graph_arm(ctx: ReadContext, scope: Scope, request: Recall, filters: Filters, n: int) -> Scored:
    """The ``n`` records best connected to the entities the cue names and the anchor."""
    starts = cue_entities(
        ctx.store, ctx.txn, scope, request.cue, ctx.resolution, as_of=filters.as_of
    )
    if request.entity_anchor is not None:
        anchored = answers_as(
            ctx.store, ctx.txn, scope, ENTITY_TAG + request.entity_anchor, as_of=filters.as_of
        )
        starts.add(anchored[1:])
    return graph_search(
        ctx.store, ctx.txn, scope, starts=starts, filters=filters, limit=n, cue=request.cue
    )
