"""What RECALL needs beyond the store: the embedder, the HNSW indexes, the indexer."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from brain.embed.batching import BatchingEmbedder
from brain.engine.index.indexer import Indexer
from brain.engine.index.postings import PostingsCache
from brain.engine.index.pressure import EmbedPressure
from brain.engine.index.vectors import VectorIndexes
from brain.engine.write.tuning import DEFAULT_INDEX_WAIT_S

__all__ = ["DEFAULT_INDEX_WAIT_S", "RecallStats", "Retrieval"]


class RecallStats:
    """Running totals of the recalls served, for ``/metrics``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.recalls = 0
        self.abstained = 0
        self.candidates = {"semantic": 0, "lexical": 0, "graph": 0}

    def record(self, candidates: dict[str, int], abstained: bool) -> None:
        """Count one recall and what each arm contributed."""
        with self._lock:
            self.recalls += 1
            self.abstained += int(abstained)
            for arm, count in candidates.items():
                self.candidates[arm] += count


@dataclass(frozen=True, slots=True)
class Retrieval:
    """The retrieval services of one open database."""

    embedder: BatchingEmbedder
    """Coalesces the cues of concurrent recalls and the indexer's documents."""
    indexes: VectorIndexes
    indexer: Indexer
    pressure: EmbedPressure
    """Refuses a namespace's document writes while its embedding backlog is full."""
    index_wait_s: float = DEFAULT_INDEX_WAIT_S
    stats: RecallStats = field(default_factory=RecallStats)
    postings: PostingsCache = field(default_factory=PostingsCache)
    """Decoded postings the lexical arm reuses while they are unchanged."""
