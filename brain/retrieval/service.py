"""What RECALL needs beyond the store: the embedder, the HNSW indexes, the indexer."""

from __future__ import annotations

from dataclasses import dataclass

from brain.embed import Embedder
from brain.engine.tuning import DEFAULT_INDEX_WAIT_S
from brain.retrieval.indexer import Indexer
from brain.retrieval.vectors import VectorIndexes

__all__ = ["DEFAULT_INDEX_WAIT_S", "Retrieval"]


@dataclass(frozen=True, slots=True)
class Retrieval:
    """The retrieval services of one open database."""

    embedder: Embedder
    indexes: VectorIndexes
    indexer: Indexer
    index_wait_s: float = DEFAULT_INDEX_WAIT_S
