"""Coalescing many threads' embed calls into shared forward passes.

A forward pass over 32 short texts costs little more than over one, so when
many connections ask for embeddings at once it pays to run them together.
:class:`BatchingEmbedder` wraps any :class:`~brain.embed.Embedder`: each caller
queues its texts with a :class:`~concurrent.futures.Future` and waits; a single
worker thread takes everything queued (up to :data:`MAX_COALESCED_TEXTS`
texts), makes one call to the wrapped embedder and hands each caller its rows.

If that combined call fails, the worker runs each caller's texts on their own,
so an exception reaches only the caller whose texts raise it. Texts are checked
in the caller's thread before they are queued, so a wrong argument fails at once.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
from numpy.typing import NDArray

from brain.embed import check_texts

if TYPE_CHECKING:
    from types import TracebackType

    from brain.embed import Embedder

__all__ = ["MAX_COALESCED_TEXTS", "BatchingEmbedder", "EmbedderClosed"]

MAX_COALESCED_TEXTS: Final = 256
"""Texts gathered into one call: enough to keep the model's batches full, few
enough that the first caller of a crowd does not wait for all the others' work.
One caller's request is never split, even when it holds more."""

_JOIN_TIMEOUT_S: Final = 60.0
"""How long close() waits for the queued work to finish before giving up on the worker."""


class EmbedderClosed(RuntimeError):
    """``embed()`` was called on a :class:`BatchingEmbedder` after ``close()``."""


@dataclass(frozen=True, slots=True)
class _Request:
    texts: tuple[str, ...]
    future: Future[NDArray[np.float32]]


class BatchingEmbedder:
    """An :class:`~brain.embed.Embedder` that runs concurrent callers' texts together.

    ``embed()`` blocks until the worker thread has the caller's rows. ``close()``
    lets the queued requests finish, then stops the worker; later calls raise
    :class:`EmbedderClosed`. Usable as a context manager.
    """

    dimensions: int
    name: str

    def __init__(self, inner: Embedder, *, max_texts: int = MAX_COALESCED_TEXTS) -> None:
        if max_texts < 1:
            raise ValueError("max_texts must be at least 1")
        self.dimensions = inner.dimensions
        self.name = inner.name
        self._inner = inner
        self._max_texts = max_texts
        self._pending: deque[_Request] = deque()
        self._wakeup = threading.Condition()
        self._closed = False
        self._worker = threading.Thread(target=self._run, name="brain-embed-batcher", daemon=True)
        self._worker.start()

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit-length float32 rows for ``texts``, computed with other callers' texts."""
        check_texts(texts)
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        request = _Request(tuple(texts), Future())
        with self._wakeup:
            if self._closed:
                raise EmbedderClosed("the embedder is closed")
            self._pending.append(request)
            self._wakeup.notify()
        return request.future.result()

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

    def _take(self) -> list[_Request] | None:
        """Wait for work; take queued requests up to the text limit (at least one).

        None once closed and drained.
        """
        with self._wakeup:
            while not self._pending and not self._closed:
                self._wakeup.wait()
            if not self._pending:
                return None
            taken = [self._pending.popleft()]
            count = len(taken[0].texts)
            while self._pending and count + len(self._pending[0].texts) <= self._max_texts:
                request = self._pending.popleft()
                taken.append(request)
                count += len(request.texts)
            return taken

    def _run(self) -> None:
        while (taken := self._take()) is not None:
            self._serve(taken)

    def _serve(self, taken: list[_Request]) -> None:
        if len(taken) > 1:
            texts = [text for request in taken for text in request.texts]
            try:
                rows = self._inner.embed(texts)
            except Exception:
                pass  # find whose texts fail: each request alone, below
            else:
                start = 0
                for request in taken:
                    end = start + len(request.texts)
                    request.future.set_result(rows[start:end].copy())
                    start = end
                return
        for request in taken:
            try:
                request.future.set_result(self._inner.embed(request.texts))
            except Exception as exc:
                request.future.set_exception(exc)
