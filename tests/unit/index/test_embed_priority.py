"""The batching embedder serves interactive texts on a worker of their own and cuts bulk
work into chunks on another (``brain/embed/batching.py``, spec/04-retrieval.md §3).

The embedders are the real hashing embedder behind recorders (``HeldEmbedder``) whose
calls may wait for a gate, so a test can hold one worker inside a call, send work to
the other, and then read what reached each embedder.
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

    def done(self) -> bool:
        """True once the call has returned or raised."""
        return not self._thread.is_alive()

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


def free_embedder() -> HeldEmbedder:
    """A recorder whose gate is open: its calls go straight through."""
    free = HeldEmbedder()
    free.gate.set()
    return free


def test_a_cue_is_answered_while_a_bulk_call_runs_and_more_bulk_work_waits() -> None:
    cues, held = free_embedder(), HeldEmbedder()
    docs, more = documents(INDEX_BATCH), documents(INDEX_BATCH, word="later")
    cue = "where did alice move"
    with BatchingEmbedder(cues, bulk=held) as batcher:
        indexing = bulk(batcher, docs)
        assert held.entered.wait(DEADLINE_S)  # the bulk worker is inside its first call
        queued = bulk(batcher, more)
        wait_until(lambda: batcher.queued() == (0, 2))
        # The cue's rows come while that call is still held and the rest waits.
        rows_of(interactive(batcher, [cue]).result(), [cue])
        assert not held.gate.is_set() and batcher.queued() == (0, 2)
        assert held.calls == [docs[:BULK_CHUNK_TEXTS]]
        held.gate.set()
        rows_of(indexing.result(), docs)
        rows_of(queued.result(), more)
    # the two never shared a call: the cue went to its own embedder, alone
    assert cues.calls == [[cue]]
    chunk = BULK_CHUNK_TEXTS
    assert held.calls == [docs[i : i + chunk] for i in range(0, INDEX_BATCH, chunk)] + [
        more[i : i + chunk] for i in range(0, INDEX_BATCH, chunk)
    ]


def test_without_a_bulk_embedder_both_workers_share_the_one_given() -> None:
    shared = free_embedder()
    docs, cue = documents(40), "budget review"
    with BatchingEmbedder(shared, bulk_chunk=16) as batcher:
        rows_of(batcher.embed(docs, priority=Priority.BULK), docs)
        rows_of(batcher.embed([cue]), [cue])
    assert shared.calls == [docs[:16], docs[16:32], docs[32:], [cue]]


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


def test_bulk_work_goes_on_while_an_interactive_call_is_held() -> None:
    cues, documented = HeldEmbedder(), free_embedder()
    docs = documents(10)
    with BatchingEmbedder(cues, bulk=documented, bulk_chunk=4) as batcher:
        recall = interactive(batcher, ["a recall held in its call"])
        assert cues.entered.wait(DEADLINE_S)
        # recalls keeping their worker busy never stop the indexer
        rows_of(batcher.embed(docs, priority=Priority.BULK), docs)
        assert not recall.done()
        cues.gate.set()
        rows_of(recall.result(), ["a recall held in its call"])
    assert documented.calls == [docs[0:4], docs[4:8], docs[8:]]


def test_a_failing_bulk_piece_fails_its_caller_only() -> None:
    cues, held = free_embedder(), HeldEmbedder()
    docs = documents(12)
    docs[4] = docs[4].replace("budget", "boom!!")  # the same length: the order stands
    cue = "budget review"
    with BatchingEmbedder(cues, bulk=held, bulk_chunk=4) as batcher:
        indexing = bulk(batcher, docs)
        assert held.entered.wait(DEADLINE_S)
        rows_of(interactive(batcher, [cue]).result(), [cue])
        held.gate.set()
        assert isinstance(indexing.result(), ValueError)
        assert batcher.queued() == (0, 0)
        rows_of(batcher.embed(["after"], priority=Priority.BULK), ["after"])
    # the failing piece ran alone and failed; the rest of that request was dropped
    assert held.calls == [docs[:4], docs[4:8], ["after"]]


def test_a_failing_shared_bulk_call_is_retried_piece_by_piece() -> None:
    held = HeldEmbedder()
    failing, fine = ["a doc to boom"], ["fine one", "fine two"]
    with BatchingEmbedder(free_embedder(), bulk=held, bulk_chunk=4) as batcher:
        first = bulk(batcher, ["the first"])
        assert held.entered.wait(DEADLINE_S)
        doomed = bulk(batcher, failing)
        wait_until(lambda: batcher.queued() == (0, 1))
        kept = bulk(batcher, fine)
        wait_until(lambda: batcher.queued() == (0, 2))
        held.gate.set()
        rows_of(first.result(), ["the first"])
        assert isinstance(doomed.result(), ValueError)
        rows_of(kept.result(), fine)
    # the two queued requests shared a call, which failed; then each ran alone
    assert held.calls == [["the first"], failing + fine, failing, fine]


def test_the_bulk_embedder_must_make_the_same_vectors() -> None:
    other = HashingEmbedder()
    other.name = "another model"
    with pytest.raises(ValueError, match="another model"):
        BatchingEmbedder(HashingEmbedder(), bulk=other)


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
