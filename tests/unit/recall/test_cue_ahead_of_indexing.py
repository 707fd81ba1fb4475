"""A recall's cue is embedded ahead of another tenant's documents the indexer is
embedding: it waits for at most one bulk chunk (spec/04-retrieval.md §3).

The database's embedder is the real hashing embedder; the test puts a recorder
between it and the batching worker, whose calls wait for a gate, so that the
indexer is held inside a round while the recall arrives.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray

import brain
from brain import cbor
from brain.embed import Embedder
from brain.embed.batching import BULK_CHUNK_TEXTS
from brain.engine.database import Database
from brain.engine.index.indexer import MAX_INDEX_BATCH
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.messages.recall_ops import Recall, RecallOk
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid

FLOOD: Final = 2 * MAX_INDEX_BATCH
"""Documents the busy tenant queues: two full rounds of the indexer."""
DEADLINE_S: Final = 30.0
"""How long the test waits for another thread to get somewhere (only a broken
build gets near it)."""
CUE: Final = "who keeps bees"


class GatedRecorder:
    """The database's own embedder, recording each call's texts; while ``gate`` is
    shut, a call waits for it."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.dimensions = inner.dimensions
        self.name = inner.name
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls.append(list(texts))
        self.entered.set()
        assert self.gate.wait(DEADLINE_S), "the test never opened the gate"
        return self.inner.embed(texts)


def _encode_all(db: Database, space: str, texts: list[str]) -> list[bytes]:
    futures: list[Future[bytes]] = [
        db.submit(NS, Opcode.ENCODE, Encode(request_id=rid(), text=text, space=space))
        for text in texts
    ]
    return [EncodeOk.from_wire(cbor.decode(future.result())).memory_id for future in futures]


def test_a_recall_cue_waits_for_one_chunk_of_another_tenants_indexing(tmp_path: Path) -> None:
    db = brain.open(tmp_path / "d")
    try:
        (mine,) = _encode_all(db, "quiet", ["the quiet tenant keeps bees"])
        assert db.wait_indexed()
        batcher = db.retrieval.embedder
        recorder = GatedRecorder(batcher._inner)
        batcher._inner = recorder  # the worker's next call goes through the recorder
        _encode_all(db, "busy", [f"busy tenant note {i}" for i in range(FLOOD)])
        assert recorder.entered.wait(DEADLINE_S)  # the indexer is inside a round

        answers: list[object] = []
        recall = threading.Thread(
            target=lambda: answers.append(
                db.execute(NS, Opcode.RECALL, Recall(cue=CUE, space="quiet", top_k=5))
            )
        )
        recall.start()
        try:
            deadline = time.monotonic() + DEADLINE_S
            while batcher.queued()[0] == 0:  # until the cue is queued
                assert recall.is_alive() and time.monotonic() < deadline, "no cue came"
                time.sleep(0.001)
        finally:
            recorder.gate.set()
            recall.join(DEADLINE_S)
        (answer,) = answers
        assert isinstance(answer, RecallOk)
        assert [hit.id for hit in answer.hits][:1] == [mine]
        assert db.wait_indexed()
    finally:
        db.close()
    calls = recorder.calls
    held, following = calls[0], calls[1]
    assert all(text.startswith("busy tenant note") for text in held)
    # the cue went into the very next model call, behind one chunk of the round's texts
    # and beside at most one of them
    assert following[0] == CUE and len(following) <= 2
    assert len(held) <= BULK_CHUNK_TEXTS
    # and every document was still embedded, in calls of at most one chunk
    documents = [text for call in calls for text in call if text != CUE]
    assert sorted(documents) == sorted(f"busy tenant note {i}" for i in range(FLOOD))
    assert max(len(call) for call in calls) <= BULK_CHUNK_TEXTS
