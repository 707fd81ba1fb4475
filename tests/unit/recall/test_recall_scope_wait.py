"""A recall waits for its own scope's index work only, and the indexer serves the
scopes in turn (spec/04-retrieval.md §3); the coverage counts what a recall could
not see (``embed_backlog``, §6); a read-only database answers at once.

The indexer's thread is stopped (``close``) where a test needs its queue to stay
put, and its rounds are then run here one at a time, as ``test_reindex.py`` does.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Final

import numpy as np
import pytest
from numpy.typing import NDArray

import brain
from brain import cbor
from brain.embed.batching import BULK_CHUNK_TEXTS, BatchingEmbedder, Priority
from brain.engine.database import Database, DatabaseOptions
from brain.engine.index.indexer import (
    MAX_INDEX_BATCH,
    MAX_WAITED_ROUNDS,
    RETRY_DELAY_S,
    ROUND_CHUNK_CHARS,
)
from brain.engine.index.vectors import EMBED_QUEUE
from brain.engine.store.scope import Scope
from brain.errors import Unavailable
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.messages.recall_ops import Recall, RecallOk
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid, writer_held

FLOOD: Final = 300
"""Documents the busy scope queues: more than two rounds' worth."""
FEW: Final = 3
"""Documents the quiet scope queues."""
WAIT_S: Final = 4.0
"""The databases' ``retrieval.index_wait_s``: a recall that waited for it took at
least this long and logged that it ran behind."""
AT_ONCE_S: Final = WAIT_S / 2
TOP_K: Final = 100
FAULT_DEADLINE_S: Final = 60.0
"""How long a test waits for something to happen on another thread before it
gives up (only a broken build gets near it)."""
"""A recall that did not wait answers in milliseconds; this bound is far above
that and far below :data:`WAIT_S`."""


def _open(path: Path, **options: object) -> Database:
    return brain.open(path, DatabaseOptions(index_wait_s=WAIT_S, **options))  # type: ignore[arg-type]


def _encode_all(db: Database, space: str, texts: list[str]) -> list[bytes]:
    """ENCODE ``texts`` into ``space``, pipelined (one group commit for many)."""
    futures: list[Future[bytes]] = [
        db.submit(NS, Opcode.ENCODE, Encode(request_id=rid(), text=text, space=space))
        for text in texts
    ]
    return [EncodeOk.from_wire(cbor.decode(future.result())).memory_id for future in futures]


def _recall(db: Database, space: str, cue: str) -> tuple[RecallOk, float]:
    started = time.monotonic()
    answer = db.execute(NS, Opcode.RECALL, Recall(cue=cue, space=space, top_k=TOP_K))
    assert isinstance(answer, RecallOk)
    return answer, time.monotonic() - started


def _queued(db: Database, space: str) -> int:
    prefix = Scope.of(NS, space).prefix
    with db._store.read() as txn:
        cursor = txn.cursor(db=db._store.table(EMBED_QUEUE))
        return sum(1 for key in cursor.iternext(values=False) if key[: len(prefix)] == prefix)


def _ran_behind(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "ran before" in r.getMessage()]


def _busy_and_quiet() -> tuple[str, str]:
    """Two spaces, the busy one first in the queue's key order: taking the queue's
    first entries would serve it alone."""
    first, second = sorted(("north", "south"), key=lambda space: Scope.of(NS, space).prefix)
    return first, second


def test_a_recall_does_not_wait_for_another_scopes_documents(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    busy, quiet = _busy_and_quiet()
    db = _open(tmp_path / "d")
    try:
        (mine,) = _encode_all(db, quiet, ["the quiet tenant keeps bees"])
        assert db.wait_indexed()
        indexer = db.retrieval.indexer
        indexer.close()  # from here the indexer does nothing unless a test runs a round
        _encode_all(db, busy, [f"busy tenant note {i}" for i in range(FLOOD)])
        caplog.set_level(logging.WARNING, logger="brain.engine")

        # Nothing of the quiet scope waits: its recall neither waits nor misses anything.
        answer, took = _recall(db, quiet, "bees")
        assert took < AT_ONCE_S and not _ran_behind(caplog)
        assert [hit.id for hit in answer.hits] == [mine]
        assert answer.coverage.candidates.semantic == 1
        assert answer.coverage.embed_backlog is None
        assert answer.coverage.index_wait_ms is None

        # The busy scope's recall waits for its own documents, in vain here: it says so.
        answer, took = _recall(db, busy, "busy tenant note")
        assert took >= WAIT_S
        assert answer.coverage.embed_backlog == FLOOD
        assert answer.coverage.index_wait_ms is not None
        assert WAIT_S * 1000 <= answer.coverage.index_wait_ms <= took * 1000
        assert answer.coverage.candidates.semantic == 0
        assert len(_ran_behind(caplog)) == 1

        while indexer._round():  # now index everything, as the thread would have
            pass
        caplog.clear()
        answer, _ = _recall(db, busy, "busy tenant note")
        assert answer.coverage.embed_backlog is None
        assert answer.coverage.candidates.semantic > 0
        assert db.retrieval.indexes.size(Scope.of(NS, busy).prefix) == FLOOD
        assert len(answer.hits) == TOP_K and not _ran_behind(caplog)
    finally:
        db.close()


def test_every_round_serves_each_scope_with_queued_work(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    busy, quiet = _busy_and_quiet()
    db = _open(tmp_path / "d")
    try:
        indexer = db.retrieval.indexer
        indexer.close()
        _encode_all(db, busy, [f"busy tenant note {i}" for i in range(FLOOD)])
        mine = _encode_all(db, quiet, [f"quiet tenant bee {i}" for i in range(FEW)])
        caplog.set_level(logging.WARNING, logger="brain.engine")

        assert indexer._round()  # one round: a full batch, both scopes in it
        assert _queued(db, quiet) == 0
        assert _queued(db, busy) == FLOOD - (MAX_INDEX_BATCH - FEW)

        # So the quiet scope's recall, its own documents all in, answers at once.
        answer, took = _recall(db, quiet, "quiet tenant bee")
        assert took < AT_ONCE_S and not _ran_behind(caplog)
        assert sorted(hit.id for hit in answer.hits) == sorted(mine)
        assert answer.coverage.candidates.semantic == FEW
        assert answer.coverage.embed_backlog is None
    finally:
        db.close()


def test_the_scopes_recalls_wait_on_are_served_first(tmp_path: Path) -> None:
    """More scopes have work than a round serves: the one a recall waits on is in the
    first round although the queue's key order puts it last."""
    spaces = [f"tenant-{i}" for i in range(MAX_INDEX_BATCH + 2)]
    db = _open(tmp_path / "d")
    try:
        indexer = db.retrieval.indexer
        indexer.close()
        for space in spaces:
            _encode_all(db, space, [f"note of {space}"])
        last = max(spaces, key=lambda space: Scope.of(NS, space).prefix)
        answers: list[RecallOk] = []
        waiting = threading.Thread(
            target=lambda: answers.append(_recall(db, last, f"note of {last}")[0])
        )
        waiting.start()
        deadline = time.monotonic() + FAULT_DEADLINE_S
        while Scope.of(NS, last).prefix not in indexer._waited:  # the recall is waiting
            assert time.monotonic() < deadline, "the recall never waited"
            time.sleep(0.001)
        assert indexer._round()
        waiting.join()
        assert _queued(db, last) == 0
        assert len(answers) == 1 and len(answers[0].hits) == 1
        assert answers[0].coverage.embed_backlog is None
        # That round served the waited scope alone; the next, with nobody waiting,
        # serves the others in turn, every one of them but one.
        assert sum(_queued(db, space) for space in spaces) == len(spaces) - 1
        assert indexer._round()
        assert sum(_queued(db, space) for space in spaces) == len(spaces) - 1 - MAX_INDEX_BATCH
    finally:
        db.close()


class _GatedIndexerEmbedder:
    """The indexer's embedder, recording each call's texts; the calls wait for
    ``gate`` (set once, it lets every later call through)."""

    def __init__(self, inner: BatchingEmbedder) -> None:
        self.inner = inner
        self.dimensions = inner.dimensions
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str], *, priority: Priority) -> NDArray[np.float32]:
        self.calls.append(list(texts))
        self.entered.set()
        assert self.gate.wait(FAULT_DEADLINE_S), "the test never opened the gate"
        return self.inner.embed(texts, priority=priority)


def test_a_round_stops_between_calls_for_a_recall_on_another_scope(tmp_path: Path) -> None:
    """The indexer is inside a round of another scope's documents when a recall starts
    waiting: the round writes what its first call embedded and stops, and the next
    round embeds the recall's one document alone, not beside a share of the flood."""
    busy, quiet = _busy_and_quiet()
    db = _open(tmp_path / "d")
    try:
        indexer = db.retrieval.indexer
        gated = _GatedIndexerEmbedder(db.retrieval.embedder)
        indexer._embedder = gated  # type: ignore[assignment]
        # Texts of about 100 characters: a round's call holds about ten of them.
        note = " ".join(["a busy tenant's long note about nothing much at all"] * 2)
        # Queued behind a held writer, so they commit together and the indexer's
        # first round finds them all (not only the first, on a loaded machine).
        with writer_held(db):
            flood = [
                db.submit(
                    NS, Opcode.ENCODE, Encode(request_id=rid(), text=f"{note} {i}", space=busy)
                )
                for i in range(FLOOD)
            ]
        for future in flood:
            future.result()
        assert gated.entered.wait(FAULT_DEADLINE_S)  # the indexer is inside a round
        (mine,) = _encode_all(db, quiet, ["the quiet tenant keeps bees"])
        answers: list[RecallOk] = []
        recall = threading.Thread(
            target=lambda: answers.append(_recall(db, quiet, "the quiet tenant keeps bees")[0])
        )
        recall.start()
        try:
            deadline = time.monotonic() + FAULT_DEADLINE_S
            while Scope.of(NS, quiet).prefix not in indexer._waited:
                assert time.monotonic() < deadline, "the recall never waited"
                time.sleep(0.001)
        finally:
            gated.gate.set()
            recall.join(FAULT_DEADLINE_S)
        (answer,) = answers
        assert [hit.id for hit in answer.hits] == [mine]
        assert answer.coverage.embed_backlog is None
        first, following = gated.calls[0], gated.calls[1]
        assert 1 < len(first) <= BULK_CHUNK_TEXTS
        assert sum(len(text) for text in first) <= ROUND_CHUNK_CHARS + len(first[0])
        assert following == ["the quiet tenant keeps bees"]
        assert db.wait_indexed()  # and the flood is still indexed, every document
        assert db.retrieval.indexes.size(Scope.of(NS, busy).prefix) == FLOOD
    finally:
        db.close()


def test_a_scope_recalls_keep_waiting_on_does_not_starve_the_others(tmp_path: Path) -> None:
    """A scope that recalls wait on round after round, with new documents each time:
    the other scopes' documents are still embedded, a call's worth every
    :data:`MAX_WAITED_ROUNDS` + 1 rounds at least."""
    busy, quiet = _busy_and_quiet()
    db = _open(tmp_path / "d")
    try:
        indexer = db.retrieval.indexer
        indexer.close()
        _encode_all(db, quiet, [f"quiet tenant note {i}" for i in range(FLOOD)])
        waited = Scope.of(NS, busy).prefix
        indexer._waited[waited] = 1  # as a recall waiting on it would
        rounds = 3 * (MAX_WAITED_ROUNDS + 1)
        for i in range(rounds):
            _encode_all(db, busy, [f"busy tenant note {i}"])
            assert indexer._round()
        assert _queued(db, busy) <= 1
        assert FLOOD - _queued(db, quiet) >= 3
    finally:
        db.close()


def test_a_read_only_database_answers_a_recall_at_once_with_its_backlog(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A full disk (ENOSPC from fsync) strikes the indexer's own write: the documents
    it was indexing stay queued until a restart, and a recall must not wait for them."""
    budget: dict[str, int | None] = {"passes": None}

    def fsync(fd: int) -> None:
        passes = budget["passes"]
        if passes is not None:
            if passes == 0:
                raise OSError(errno.ENOSPC, "injected ENOSPC")
            budget["passes"] = passes - 1
        os.fdatasync(fd)

    db = _open(tmp_path / "d", fsync=fsync)
    try:
        (kept,) = _encode_all(db, "work", ["indexed before the fault"])
        assert db.wait_indexed()
        budget["passes"] = 1  # the ENCODE below is synced; the indexer's write is not
        answer = db.execute(
            NS, Opcode.ENCODE, Encode(request_id=rid(), text="acknowledged late", space="work")
        )
        assert isinstance(answer, EncodeOk)
        deadline = time.monotonic() + FAULT_DEADLINE_S
        while db.read_only_reason is None:
            assert time.monotonic() < deadline, "the indexer's write never failed"
            time.sleep(0.001)
        with pytest.raises(Unavailable):
            db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text="refused", space="work"))
        caplog.set_level(logging.WARNING, logger="brain.engine")

        found, took = _recall(db, "work", "acknowledged late before the fault")
        assert took < AT_ONCE_S and not _ran_behind(caplog)
        assert found.coverage.embed_backlog == 1
        assert kept in [hit.id for hit in found.hits]  # the lexical arm sees the new one too
        assert answer.memory_id in [hit.id for hit in found.hits]

        # The indexer stopped trying: one failed round, not one a second.
        indexer = db.retrieval.indexer
        time.sleep(3 * RETRY_DELAY_S)
        assert indexer.failures == 1
        assert _queued(db, "work") == 1
    finally:
        db.close()
