"""The batching embedder serves interactive texts first and cuts bulk work into chunks
(``brain/embed/batching.py``, spec/04-retrieval.md §3).

The wrapped embedder is the real hashing embedder behind a recorder whose calls wait
for a gate, so a test can queue requests while the worker is inside a call and then
read the order in which texts reached the model.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

import numpy as np
import pytest

from brain.embed.batching import BULK_CHUNK_TEXTS, BatchingEmbedder, Priority
from brain.embed.hashing import HashingEmbedder
from tests.unit.index.held_embedder import DEADLINE_S, HeldEmbedder, Vectors

INDEX_BATCH: Final = 128
"""Texts in one bulk request: what the indexer sends in a round."""


class Caller:
    """One ``embed`` call on its own thread; ``result()`` joins it."""

    def __init__(self, call: Callable[[], Vectors]) -> None:
        self._outcome: list[Vectors | Exception] = []

        def run() -> None:
            try:
                self._outcome.append(call())
            except Exception as exc:
                self._outcome.append(exc)

        self._thread = threading.Thread(target=run)
        self._thread.start()

    def result(self) -> Vectors | Exception:
        self._thread.join(DEADLINE_S)
        assert not self._thread.is_alive(), "the caller never got its rows"
        return self._outcome[0]


def bulk(batcher: BatchingEmbedder, texts: list[str]) -> Caller:
    return Caller(lambda: batcher.embed(texts, priority=Priority.BULK))


def interactive(batcher: BatchingEmbedder, texts: list[str]) -> Caller:
    return Caller(lambda: batcher.embed(texts, priority=Priority.INTERACTIVE))


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, "the callers never queued"
        time.sleep(0.001)


def documents(count: int, word: str = "document") -> list[str]:
    """``count`` distinct texts whose lengths never fall, so that sorting a bulk
    request by length keeps their order."""
    return [f"{word} {i} about the budget review" for i in range(count)]


def rows_of(result: Vectors | Exception, texts: list[str]) -> None:
    """``result`` is exactly what the hashing embedder gives for ``texts``."""
    assert not isinstance(result, Exception), result
    assert np.array_equal(result, HashingEmbedder().embed(texts))


def texts_before(calls: list[list[str]], text: str) -> int:
    """How many texts reached the model before ``text``."""
    seen = 0
    for call in calls:
        if text in call:
            return seen + call.index(text)
        seen += len(call)
    raise AssertionError(f"{text!r} never reached the model")


def test_a_cue_waits_for_one_bulk_chunk_not_the_whole_batch() -> None:
    held = HeldEmbedder()
    docs = documents(INDEX_BATCH)
    cue = "where did alice move"
    with BatchingEmbedder(held) as batcher:
        indexing = bulk(batcher, docs)
        assert held.entered.wait(DEADLINE_S)  # the worker is inside the first call
        recall = interactive(batcher, [cue])
        wait_until(lambda: batcher.queued()[0] == 1)
        held.gate.set()
        rows_of(recall.result(), [cue])
        rows_of(indexing.result(), docs)
    # The bulk request was cut: the cue went into the very next call, behind one
    # chunk, with one bulk text beside it; the rest ran in full chunks.
    chunk = BULK_CHUNK_TEXTS
    assert held.calls[0] == docs[:chunk]
    assert held.calls[1] == [cue, docs[chunk]]
    assert texts_before(held.calls, cue) == chunk
    rest = INDEX_BATCH - chunk - 1
    assert [len(call) for call in held.calls[2:]] == [chunk] * (rest // chunk) + [rest % chunk]


def test_a_cue_goes_ahead_of_queued_bulk_work() -> None:
    held = HeldEmbedder()
    docs = documents(INDEX_BATCH)
    cue = "budget review"
    with BatchingEmbedder(held) as batcher:
        first = interactive(batcher, ["an earlier recall"])
        assert held.entered.wait(DEADLINE_S)
        indexing = bulk(batcher, docs)
        wait_until(lambda: sum(batcher.queued()) == 1)
        recall = interactive(batcher, [cue])
        wait_until(lambda: sum(batcher.queued()) == 2)
        held.gate.set()
        rows_of(first.result(), ["an earlier recall"])
        rows_of(recall.result(), [cue])
        rows_of(indexing.result(), docs)
    # queued after the bulk request, embedded before any of it
    assert held.calls[1] == [cue, docs[0]]
    assert texts_before(held.calls, cue) == 1


def test_bulk_is_cut_into_chunks_in_order() -> None:
    held = HeldEmbedder()
    held.gate.set()
    docs = documents(100)
    with BatchingEmbedder(held, bulk_chunk=16) as batcher:
        rows_of(batcher.embed(docs, priority=Priority.BULK), docs)
        assert batcher.queued() == (0, 0)
    assert held.calls == [docs[i : i + 16] for i in range(0, 100, 16)]


def test_interactive_requests_are_never_cut() -> None:
    held = HeldEmbedder()
    held.gate.set()
    texts = documents(40, word="cue")
    with BatchingEmbedder(held, bulk_chunk=16) as batcher:
        rows_of(batcher.embed(texts, priority=Priority.INTERACTIVE), texts)
        rows_of(batcher.embed(texts), texts)  # the default, for any Embedder caller
    assert held.calls == [texts, texts]


def test_bulk_moves_while_interactive_texts_fill_every_call() -> None:
    held = HeldEmbedder()
    docs = documents(3)
    cues = documents(40, word="cue")
    with BatchingEmbedder(held, bulk_chunk=4) as batcher:
        first = interactive(batcher, ["an earlier recall"])
        assert held.entered.wait(DEADLINE_S)
        indexing = bulk(batcher, docs)
        recall = interactive(batcher, cues)
        wait_until(lambda: sum(batcher.queued()) == 2)
        held.gate.set()
        rows_of(first.result(), ["an earlier recall"])
        rows_of(recall.result(), cues)
        rows_of(indexing.result(), docs)
    # the cues take more than a chunk, and still one bulk text goes along
    assert held.calls[1] == [*cues, docs[0]]
    assert held.calls[2:] == [docs[1:]]


def test_a_failing_bulk_piece_fails_its_caller_only() -> None:
    held = HeldEmbedder()
    docs = documents(12)
    docs[4] = docs[4].replace("budget", "boom!!")  # the same length: the order stands
    cue = "budget review"
    with BatchingEmbedder(held, bulk_chunk=4) as batcher:
        indexing = bulk(batcher, docs)
        assert held.entered.wait(DEADLINE_S)
        recall = interactive(batcher, [cue])
        wait_until(lambda: batcher.queued()[0] == 1)
        held.gate.set()
        rows_of(recall.result(), [cue])
        assert isinstance(indexing.result(), ValueError)
        assert batcher.queued() == (0, 0)
        rows_of(batcher.embed(["after"], priority=Priority.BULK), ["after"])
    # the shared call failed, so each piece ran alone; the rest of the bulk was dropped
    assert held.calls[:4] == [docs[:4], [cue, docs[4]], [cue], [docs[4]]]
    assert held.calls[4:] == [["after"]]


def test_bulk_chunk_must_be_positive() -> None:
    with pytest.raises(ValueError, match="bulk_chunk"):
        BatchingEmbedder(HashingEmbedder(), bulk_chunk=0)


def test_bulk_pieces_are_sorted_by_length_and_rows_keep_the_callers_order() -> None:
    held = HeldEmbedder()
    held.gate.set()
    lengths = [9, 2, 14, 5, 1, 11, 7, 3, 12, 6]
    texts = [" ".join(f"w{n}x{i}" for i in range(n)) for n in lengths]
    with BatchingEmbedder(held, bulk_chunk=4) as batcher:
        rows_of(batcher.embed(texts, priority=Priority.BULK), texts)
    by_length = sorted(texts, key=len)
    assert held.calls == [by_length[0:4], by_length[4:8], by_length[8:]]
