"""What RECALL needs beyond the store: the embedder, the HNSW indexes, the indexer."""

from __future__ import annotations

from dataclasses import dataclass

from brain.embed.batching import BatchingEmbedder
from brain.engine.tuning import DEFAULT_INDEX_WAIT_S
from brain.retrieval.indexer import Indexer
from brain.retrieval.vectors import VectorIndexes

__all__ = ["DEFAULT_INDEX_WAIT_S", "Retrieval"]


@dataclass(frozen=True, slots=True)
class Retrieval:
    """The retrieval services of one open database."""

    embedder: BatchingEmbedder
    """Coalesces the cues of concurrent recalls and the indexer's documents."""
    indexes: VectorIndexes
    indexer: Indexer
    index_wait_s: float = DEFAULT_INDEX_WAIT_S
