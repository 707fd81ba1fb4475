"""Coalescing many threads' embed calls into shared forward passes; cues never wait for bulk.

A forward pass over 32 short texts costs little more than over one, so when
many connections ask for embeddings at once it pays to run them together.
:class:`BatchingEmbedder` wraps any :class:`~brain.embed.Embedder`: each caller
queues its texts with a :class:`~concurrent.futures.Future` and waits; a
worker thread takes what is queued, makes one call to its embedder and hands
each caller its rows.

Every request has a :class:`Priority`, and each priority has its own queue,
worker thread and embedder, so the two never share a call. ``INTERACTIVE``
requests (a RECALL's cue: a client is waiting on it) are served by one worker
calling ``inner``, gathered up to :data:`MAX_COALESCED_TEXTS` texts a call; one
is never split. ``BULK`` requests (the indexer's documents) are served by the
other worker calling ``bulk`` (``inner`` unless another is given; the database
gives a :class:`~brain.embed.process.ProcessEmbedder`, which runs them in a
child process at a lower OS priority), in calls of at most
:data:`BULK_CHUNK_TEXTS` texts taken in order. So an interactive text never
waits for bulk work, queued or running: only for the interactive call already
running, if any. A bulk request's texts are sorted by length before they are
cut, so each piece pads as little as one call with all of them would; the bulk
caller gets its rows, in its own order, once its last piece is done.

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
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

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
"""Bulk texts in one call. It is MiniLM's own forward-pass batch
(``brain.embed.minilm.MAX_BATCH_TEXTS``), so cutting bulk work into calls this size
keeps its batches full and its throughput; and it bounds what one call holds: the
request sent to the embedding process, the work a failing piece is retried alone
over, and what ``close()`` waits behind (at most about 3 s of MiniLM)."""

_JOIN_TIMEOUT_S: Final = 60.0
"""How long close() waits for the queued work to finish before giving up on a worker."""


class Priority(enum.Enum):
    """Who waits on an embed request, and so which worker serves it."""

    INTERACTIVE = "interactive"
    """A client's request waits on it (a RECALL's cue): served by the interactive
    worker, which never takes bulk work."""
    BULK = "bulk"
    """Background work (the indexer's documents): served by the bulk worker, in pieces
    of at most :data:`BULK_CHUNK_TEXTS` texts."""


class EmbedderClosed(RuntimeError):
    """``embed()`` was called on an embedder after its ``close()``."""


@runtime_checkable
class _Closing(Protocol):
    """An embedder with something to release (a child process)."""

    def close(self) -> None: ...


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


class _Lane:
    """One priority's queue and the worker thread that serves it with one embedder.

    A call takes ``room`` texts at most: whole requests (at least one, however long)
    unless ``split``, when requests are cut into pieces to fill it, in order.
    """

    def __init__(self, name: str, embedder: Embedder, room: int, *, split: bool) -> None:
        self.embedder = embedder
        self.queue: deque[_Request] = deque()
        self.wakeup = threading.Condition()
        self.closed = False
        self._room = room
        self._split = split
        self.worker = threading.Thread(target=self._run, name=name, daemon=True)
        self.worker.start()

    def put(self, request: _Request) -> None:
        """Queue ``request`` for the worker; EmbedderClosed after ``close()``."""
        with self.wakeup:
            if self.closed:
                raise EmbedderClosed("the embedder is closed")
            self.queue.append(request)
            self.wakeup.notify()

    def waiting(self) -> int:
        """Requests queued; one taken in pieces counts until its last piece is taken."""
        with self.wakeup:
            return len(self.queue)

    def close(self) -> None:
        """Take no more requests; the worker ends once the queued ones are done."""
        with self.wakeup:
            self.closed = True
            self.wakeup.notify()

    def join(self) -> None:
        """Wait for the worker to end (not from the worker itself)."""
        if self.worker is not threading.current_thread():
            self.worker.join(_JOIN_TIMEOUT_S)

    def _take(self) -> list[_Piece] | None:
        """Wait for work; take the next call's pieces (at least one). None once closed
        and drained."""
        with self.wakeup:
            while not self.queue and not self.closed:
                self.wakeup.wait()
            taken: list[_Piece] = []
            room = self._room
            while self.queue and room > 0:
                request = self.queue[0]
                if self._split:
                    end = min(request.taken + room, len(request.texts))
                elif not taken or len(request.texts) <= room:
                    end = len(request.texts)
                else:
                    break
                taken.append(_Piece(request, request.taken, end))
                room -= end - request.taken
                request.taken = end
                if end == len(request.texts):
                    self.queue.popleft()
            return taken or None

    def _run(self) -> None:
        while (taken := self._take()) is not None:
            self._serve(taken)

    def _serve(self, taken: list[_Piece]) -> None:
        if len(taken) > 1:
            texts = [text for piece in taken for text in piece.texts]
            try:
                rows = self.embedder.embed(texts)
            except Exception:
                pass  # find whose texts fail: each piece alone, below
            else:
                start = 0
                for piece in taken:
                    end = start + piece.end - piece.start
                    _done(piece, rows[start:end].copy())
                    start = end
                return
        for piece in taken:  # a call holds at most one piece of each request
            try:
                rows = self.embedder.embed(piece.texts)
            except Exception as exc:
                self._fail(piece.request, exc)
            else:
                _done(piece, rows)

    def _fail(self, request: _Request, exc: Exception) -> None:
        """Send ``exc`` to the request's caller and drop whatever of it is still queued."""
        with self.wakeup:  # first, so that the caller never sees it still queued
            if request in self.queue:
                self.queue.remove(request)
        request.future.set_exception(exc)


def _done(piece: _Piece, rows: NDArray[np.float32]) -> None:
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


class BatchingEmbedder:
    """An :class:`~brain.embed.Embedder` that runs concurrent callers' texts together.

    ``inner`` embeds the interactive requests, ``bulk`` (by default ``inner`` as well)
    the bulk ones, each on its own worker thread; both must make the same vectors
    (the same ``name`` and ``dimensions``). A ``bulk`` given belongs to the batcher:
    ``close()`` closes it too when it has a ``close()`` (a ProcessEmbedder's child
    process ends there); ``inner`` stays its creator's. ``embed()`` blocks until a
    worker has the caller's rows. ``close()`` lets the queued requests finish, then
    stops the workers; later calls raise :class:`EmbedderClosed`. Usable as a context
    manager.
    """

    dimensions: int
    name: str

    def __init__(
        self,
        inner: Embedder,
        *,
        bulk: Embedder | None = None,
        max_texts: int = MAX_COALESCED_TEXTS,
        bulk_chunk: int = BULK_CHUNK_TEXTS,
    ) -> None:
        if max_texts < 1:
            raise ValueError("max_texts must be at least 1")
        if bulk_chunk < 1:
            raise ValueError("bulk_chunk must be at least 1")
        if bulk is not None and (bulk.name, bulk.dimensions) != (inner.name, inner.dimensions):
            raise ValueError(
                f"the bulk embedder makes {bulk.name!r} vectors of {bulk.dimensions}, "
                f"the interactive one {inner.name!r} of {inner.dimensions}"
            )
        self.dimensions = inner.dimensions
        self.name = inner.name
        self._owned = None if bulk is inner else bulk
        self._bulk_chunk = bulk_chunk
        self._interactive = _Lane("brain-embed-interactive", inner, max_texts, split=False)
        self._bulk = _Lane(
            "brain-embed-bulk", inner if bulk is None else bulk, bulk_chunk, split=True
        )

    def embed(
        self, texts: Sequence[str], *, priority: Priority = Priority.INTERACTIVE
    ) -> NDArray[np.float32]:
        """Unit-length float32 rows for ``texts``, computed with other callers' texts.

        ``priority`` says which worker serves them (:class:`Priority`); without it they
        are interactive, as for any :class:`~brain.embed.Embedder` caller that waits.
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
        lane = self._bulk if priority is Priority.BULK else self._interactive
        lane.put(request)
        return request.future.result()

    def queued(self) -> tuple[int, int]:
        """Requests waiting for a worker: ``(interactive, bulk)``; a bulk request
        counts until its last piece is taken."""
        return self._interactive.waiting(), self._bulk.waiting()

    def close(self) -> None:
        """Finish the queued requests, stop both workers, then close the ``bulk``
        embedder it was given (when it has a ``close()``); idempotent."""
        for lane in (self._interactive, self._bulk):
            lane.close()
        for lane in (self._interactive, self._bulk):
            lane.join()
        if isinstance(self._owned, _Closing):
            self._owned.close()

    def __enter__(self) -> BatchingEmbedder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
