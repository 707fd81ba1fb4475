"""A recall's cue is embedded while another tenant's documents are being embedded: it
never waits for the indexer's embedding (spec/04-retrieval.md §3).

The database embeds with the real hashing embedder; the test puts a gate in front of
it that holds every call carrying the busy tenant's documents, so that the indexer is
held inside a round while the recall arrives, and lets every other call through.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Final

import numpy as np
import pytest
from numpy.typing import NDArray

import brain
from brain import cbor
from brain.embed.batching import BULK_CHUNK_TEXTS
from brain.embed.hashing import HashingEmbedder
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
BUSY: Final = "busy tenant note"


class BusyGate:
    """Holds each call of the hashing embedder that carries a busy tenant's document
    until ``gate`` opens, and records those calls; other calls pass at once."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls: list[list[str]] = []
        self.passed: list[list[str]] = []
        self._embed = HashingEmbedder.embed

    def embed(self, model: HashingEmbedder, texts: Sequence[str]) -> NDArray[np.float32]:
        """The hashing embedder's own ``embed``, held at the gate for busy documents."""
        if any(text.startswith(BUSY) for text in texts):
            self.calls.append(list(texts))
            self.entered.set()
            assert self.gate.wait(DEADLINE_S), "the test never opened the gate"
        else:
            self.passed.append(list(texts))
        return self._embed(model, texts)


def _encode_all(db: Database, space: str, texts: list[str]) -> list[bytes]:
    futures: list[Future[bytes]] = [
        db.submit(NS, Opcode.ENCODE, Encode(request_id=rid(), text=text, space=space))
        for text in texts
    ]
    return [EncodeOk.from_wire(cbor.decode(future.result())).memory_id for future in futures]


def test_a_recall_is_answered_while_another_tenants_documents_are_embedded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = brain.open(tmp_path / "d")
    busy = BusyGate()
    try:
        (mine,) = _encode_all(db, "quiet", ["the quiet tenant keeps bees"])
        assert db.wait_indexed()

        def gated(model: HashingEmbedder, texts: Sequence[str]) -> NDArray[np.float32]:
            return busy.embed(model, texts)

        monkeypatch.setattr(HashingEmbedder, "embed", gated)
        _encode_all(db, "busy", [f"{BUSY} {i}" for i in range(FLOOD)])
        assert busy.entered.wait(DEADLINE_S)  # the indexer is inside a round's call

        answers: list[object] = []
        recall = threading.Thread(
            target=lambda: answers.append(
                db.execute(NS, Opcode.RECALL, Recall(cue=CUE, space="quiet", top_k=5))
            )
        )
        recall.start()
        try:
            recall.join(DEADLINE_S)
            # answered while the indexer's call is still held at the gate
            assert not recall.is_alive(), "the recall waited for the indexer's embedding"
            assert len(busy.calls) == 1
        finally:
            busy.gate.set()
            recall.join(DEADLINE_S)
        (answer,) = answers
        assert isinstance(answer, RecallOk)
        assert [hit.id for hit in answer.hits][:1] == [mine]
        assert busy.passed == [[CUE]]  # the cue went alone, beside no document
        assert db.wait_indexed()
    finally:
        busy.gate.set()
        db.close()
    # every document was still embedded, in calls of at most one chunk
    documents = [text for call in busy.calls for text in call]
    assert sorted(documents) == sorted(f"{BUSY} {i}" for i in range(FLOOD))
    assert max(len(call) for call in busy.calls) <= BULK_CHUNK_TEXTS
