"""Coalescing many threads' embed calls into shared forward passes, interactive texts first.

A forward pass over 32 short texts costs little more than over one, so when
many connections ask for embeddings at once it pays to run them together.
:class:`BatchingEmbedder` wraps any :class:`~brain.embed.Embedder`: each caller
queues its texts with a :class:`~concurrent.futures.Future` and waits; a single
worker thread takes what is queued, makes one call to the wrapped embedder and
hands each caller its rows.

Every request has a :class:`Priority`. An ``INTERACTIVE`` one (a RECALL's cue: a
client is waiting on it) goes into the very next call, ahead of anything bulk;
interactive requests are gathered up to :data:`MAX_COALESCED_TEXTS` texts and
one is never split. A ``BULK`` one (the indexer's documents) is cut into pieces
taken in order: a call without interactive texts holds :data:`BULK_CHUNK_TEXTS`
bulk texts at most, and a call with them just one (so that a stream of recalls
slows the indexer but never stops it). So an interactive text that arrives
while bulk work is queued or running waits for at most the one call of at most
that many texts already running, and then shares its own call with at most one
bulk text. A bulk request's texts are sorted by length before they are cut, so
each piece pads as little as one call with all of them would; the bulk caller
gets its rows, in its own order, once its last piece is done.

If a combined call fails, the worker runs each piece on its own, so an
exception reaches only the caller whose texts raise it (a bulk caller's
remaining pieces are then dropped). Texts are checked in the caller's thread
before they are queued, so a wrong argument fails at once.
"""

from __future__ import annotations

import enum
import threading
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import numpy as np
from numpy.typing import NDArray

from brain.embed import check_texts

if TYPE_CHECKING:
    from types import TracebackType

    from brain.embed import Embedder

__all__ = [
    "BULK_CHUNK_TEXTS",
    "MAX_COALESCED_TEXTS",
    "BatchingEmbedder",
    "EmbedderClosed",
    "Priority",
]

MAX_COALESCED_TEXTS: Final = 256
"""Interactive texts gathered into one call: enough to serve a crowd of recalls in one
pass, few enough that the first of them does not wait for all the others' work. One
caller's request is never split, even when it holds more."""

BULK_CHUNK_TEXTS: Final = 32
"""Bulk texts in a call without interactive ones: the bound on how long an interactive
text waits behind bulk work (one such call, about 0.1 s of MiniLM on one core). It is
MiniLM's own forward-pass batch (``brain.embed.minilm.MAX_BATCH_TEXTS``), so cutting
bulk work into calls this size keeps its batches full and its throughput."""

_BULK_BESIDE_INTERACTIVE: Final = 1
"""Bulk texts in a call that carries interactive ones: one, so that the indexer still
gains while recalls keep the worker busy, at the cost of one text to the recalls."""

_JOIN_TIMEOUT_S: Final = 60.0
"""How long close() waits for the queued work to finish before giving up on the worker."""


class Priority(enum.Enum):
    """Who waits on an embed request, and so where it goes in the worker's queue."""

    INTERACTIVE = "interactive"
    """A client's request waits on it (a RECALL's cue): taken first into the next call."""
    BULK = "bulk"
    """Background work (the indexer's documents): taken in pieces of at most
    :data:`BULK_CHUNK_TEXTS` texts, after every interactive text queued."""


class EmbedderClosed(RuntimeError):
    """``embed()`` was called on a :class:`BatchingEmbedder` after ``close()``."""


@dataclass(eq=False, slots=True)
class _Request:
    texts: tuple[str, ...]
    future: Future[NDArray[np.float32]]
    taken: int = 0
    """Texts handed to the worker so far (a bulk request is taken in pieces)."""
    rows: list[NDArray[np.float32]] = field(default_factory=list)
    """The rows of the pieces done so far, in order."""
    order: list[int] | None = None
    """Where each of ``texts`` came from in the caller's list, when they were sorted."""


@dataclass(frozen=True, slots=True)
class _Piece:
    """``request.texts[start:end]``, one part of a call."""

    request: _Request
    start: int
    end: int

    @property
    def texts(self) -> tuple[str, ...]:
        return self.request.texts[self.start : self.end]


class BatchingEmbedder:
    """An :class:`~brain.embed.Embedder` that runs concurrent callers' texts together.

    ``embed()`` blocks until the worker thread has the caller's rows. ``close()``
    lets the queued requests finish, then stops the worker; later calls raise
    :class:`EmbedderClosed`. Usable as a context manager.
    """

    dimensions: int
    name: str

    def __init__(
        self,
        inner: Embedder,
        *,
        max_texts: int = MAX_COALESCED_TEXTS,
        bulk_chunk: int = BULK_CHUNK_TEXTS,
    ) -> None:
        if max_texts < 1:
            raise ValueError("max_texts must be at least 1")
        if bulk_chunk < 1:
            raise ValueError("bulk_chunk must be at least 1")
        self.dimensions = inner.dimensions
        self.name = inner.name
        self._inner = inner
        self._max_texts = max_texts
        self._bulk_chunk = bulk_chunk
        self._interactive: deque[_Request] = deque()
        self._bulk: deque[_Request] = deque()
        self._wakeup = threading.Condition()
        self._closed = False
        self._worker = threading.Thread(target=self._run, name="brain-embed-batcher", daemon=True)
        self._worker.start()

    def embed(
        self, texts: Sequence[str], *, priority: Priority = Priority.INTERACTIVE
    ) -> NDArray[np.float32]:
        """Unit-length float32 rows for ``texts``, computed with other callers' texts.

        ``priority`` says where they queue (:class:`Priority`); without it they are
        interactive, as for any :class:`~brain.embed.Embedder` caller that waits.
        """
        check_texts(texts)
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        if priority is Priority.BULK and len(texts) > self._bulk_chunk:
            # Pieces of texts of like length pad little in the model's passes, as one
            # call with all of them would; the caller still gets its rows in its order.
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            request = _Request(tuple(texts[i] for i in order), Future(), order=order)
        else:
            request = _Request(tuple(texts), Future())
        with self._wakeup:
            if self._closed:
                raise EmbedderClosed("the embedder is closed")
            queue = self._bulk if priority is Priority.BULK else self._interactive
            queue.append(request)
            self._wakeup.notify()
        return request.future.result()

    def queued(self) -> tuple[int, int]:
        """Requests waiting for the worker: ``(interactive, bulk)``; a bulk request
        counts until its last piece is taken."""
        with self._wakeup:
            return len(self._interactive), len(self._bulk)

    def close(self) -> None:
        """Finish the queued requests, then stop the worker thread; idempotent."""
        with self._wakeup:
            self._closed = True
            self._wakeup.notify()
        if self._worker is not threading.current_thread():
            self._worker.join(_JOIN_TIMEOUT_S)

    def __enter__(self) -> BatchingEmbedder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- the worker ----------------------------------------------------------------------

    def _take(self) -> list[_Piece] | None:
        """Wait for work; take the next call's pieces (at least one). None once closed
        and drained."""
        with self._wakeup:
            while not self._interactive and not self._bulk and not self._closed:
                self._wakeup.wait()
            if not self._interactive and not self._bulk:
                return None
            taken: list[_Piece] = []
            count = 0  # interactive texts taken
            interactive = self._interactive
            while interactive and (
                not taken or count + len(interactive[0].texts) <= self._max_texts
            ):
                request = interactive.popleft()
                taken.append(_Piece(request, 0, len(request.texts)))
                count += len(request.texts)
            # Beside interactive texts, one bulk text: any more would make the
            # waiting client wait for them too, and none could stop the indexer.
            room = _BULK_BESIDE_INTERACTIVE if taken else self._bulk_chunk
            while self._bulk and room > 0:
                request = self._bulk[0]
                end = min(request.taken + room, len(request.texts))
                taken.append(_Piece(request, request.taken, end))
                room -= end - request.taken
                request.taken = end
                if end == len(request.texts):
                    self._bulk.popleft()
            return taken

    def _run(self) -> None:
        while (taken := self._take()) is not None:
            self._serve(taken)

    def _serve(self, taken: list[_Piece]) -> None:
        if len(taken) > 1:
            texts = [text for piece in taken for text in piece.texts]
            try:
                rows = self._inner.embed(texts)
            except Exception:
                pass  # find whose texts fail: each piece alone, below
            else:
                start = 0
                for piece in taken:
                    end = start + piece.end - piece.start
                    self._done(piece, rows[start:end].copy())
                    start = end
                return
        for piece in taken:  # a call holds at most one piece of each request
            try:
                rows = self._inner.embed(piece.texts)
            except Exception as exc:
                self._fail(piece.request, exc)
            else:
                self._done(piece, rows)

    def _done(self, piece: _Piece, rows: NDArray[np.float32]) -> None:
        """Keep a piece's rows; answer its caller once the request's last piece is in."""
        request = piece.request
        request.rows.append(rows)
        if piece.end == len(request.texts):
            parts = request.rows
            joined = parts[0] if len(parts) == 1 else np.concatenate(parts)
            if request.order is not None:
                unsorted = np.empty_like(joined)
                unsorted[request.order] = joined
                joined = unsorted
            request.future.set_result(joined)

    def _fail(self, request: _Request, exc: Exception) -> None:
        """Send ``exc`` to the request's caller and drop whatever of it is still queued."""
        with self._wakeup:  # first, so that the caller never sees it still queued
            if request in self._bulk:
                self._bulk.remove(request)
        request.future.set_exception(exc)
