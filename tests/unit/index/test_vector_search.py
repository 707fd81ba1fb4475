"""The semantic arm's nearest-neighbour search when hnswlib cannot fill every slot.

hnswlib raises instead of answering short when a search reaches fewer live
entries than asked for. These tests put a real index behind a fault that
raises the way hnswlib does, and check the search widens, then asks for fewer,
and answers the nearest it can instead of nothing.
"""

from __future__ import annotations

import hnswlib  # type: ignore[import-untyped]
import numpy as np
import pytest
from numpy.typing import NDArray

from brain.engine.index.vectors import HNSW_EF_SEARCH, _knn

DIMENSIONS = 16


class _Reaching:
    """A real hnswlib index whose searches reach only ``reach`` entries unless the
    search width covers every element (``wide_enough``), as a poorly linked graph does."""

    def __init__(self, index: hnswlib.Index, reach: int, *, wide_enough: bool) -> None:
        self._index = index
        self._reach = reach
        self._wide_enough = wide_enough
        self._ef = 0
        self.asked: list[tuple[int, int]] = []

    def set_ef(self, ef: int) -> None:
        self._ef = ef
        self._index.set_ef(ef)

    def get_current_count(self) -> int:
        return int(self._index.get_current_count())

    def knn_query(
        self, query: NDArray[np.float32], k: int
    ) -> tuple[NDArray[np.uint64], NDArray[np.float32]]:
        self.asked.append((k, self._ef))
        covers = self._wide_enough and self._ef >= self.get_current_count()
        if k > self._reach and not covers:
            raise RuntimeError("Cannot return the results in a contigious 2D array")
        labels, distances = self._index.knn_query(query, k=k)
        return labels, distances


def _index(count: int) -> tuple[hnswlib.Index, NDArray[np.float32]]:
    vectors = np.random.default_rng(3).standard_normal((count, DIMENSIONS)).astype(np.float32)
    index = hnswlib.Index(space="cosine", dim=DIMENSIONS)
    index.init_index(max_elements=count, ef_construction=100, M=16)
    index.add_items(vectors, np.arange(count, dtype=np.uint64))
    return index, vectors


def test_a_search_that_fills_every_slot_asks_once() -> None:
    index, vectors = _index(50)
    probe = _Reaching(index, reach=50, wide_enough=False)
    found = _knn(probe, vectors[:1], 10)
    assert found[0][0] == 0 and len(found) == 10
    assert probe.asked == [(10, HNSW_EF_SEARCH)]


def test_a_wider_search_fills_the_slots_when_it_can() -> None:
    index, vectors = _index(300)
    probe = _Reaching(index, reach=5, wide_enough=True)
    found = _knn(probe, vectors[:1], 200)
    assert len(found) == 200
    assert probe.asked == [(200, 200), (200, 300)]


@pytest.mark.parametrize(("reach", "k"), [(3, 10), (1, 7), (9, 10), (0, 4)])
def test_the_nearest_the_graph_yields_are_answered(reach: int, k: int) -> None:
    index, vectors = _index(40)
    probe = _Reaching(index, reach=reach, wide_enough=False)
    found = _knn(probe, vectors[:1], k)
    assert len(found) == reach
    if reach:
        index.set_ef(HNSW_EF_SEARCH)
        labels, _ = index.knn_query(vectors[:1], k=reach)
        assert [label for label, _ in found] == [int(label) for label in labels[0]]
    # Bisection: a handful of searches, not one per slot.
    assert len(probe.asked) <= 2 + k.bit_length()
