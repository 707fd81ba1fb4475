"""What RECALL needs beyond the store: the embedder, the HNSW indexes, the indexer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from brain.embed import Embedder
from brain.retrieval.indexer import Indexer
from brain.retrieval.vectors import VectorIndexes

__all__ = ["DEFAULT_INDEX_WAIT_S", "Retrieval"]

DEFAULT_INDEX_WAIT_S: Final = 30.0
"""Longest a RECALL waits for the indexer to reach the writes acknowledged before it.
Under a sustained burst of writes the embedder falls behind; past this wait the
recall runs on the vectors there are (the lexical and graph arms see everything)."""


@dataclass(frozen=True, slots=True)
class Retrieval:
    """The retrieval services of one open database."""

    embedder: Embedder
    indexes: VectorIndexes
    indexer: Indexer
    index_wait_s: float = DEFAULT_INDEX_WAIT_S
