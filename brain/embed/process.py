"""An embedder whose work runs in a child process at a lower OS priority.

The indexer embeds every document written, and with MiniLM that is 30 to 95 ms
of CPU a text, on every core OpenBLAS finds. Inside the server's process that
work competes for the CPU, and for the GIL, with every thread answering
clients, at their priority. :class:`ProcessEmbedder` runs it in a child,
``python -m brain.embed.worker`` (:mod:`brain.embed.worker`, which also holds
the framing), that lowers its priority by
:data:`~brain.embed.worker.BULK_EMBED_NICE` before it loads the model: the
server's threads then get the CPU first, and the embedding every idle cycle.

One request at a time goes down the child's stdin and its answer comes back on
its stdout; the rows are the very bytes the child's embedder made, so they are
bit-identical to the same embedder's in this process. Texts are checked here,
before anything is sent. A child that dies during a call (killed, out of
memory) fails that call with :class:`EmbedWorkerFailed`, and the next call
starts a new one. The child never outlives the server: it ends at EOF on its
stdin, which only the server holds, so a killed server ends it too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final

import numpy as np
from numpy.typing import NDArray

from brain import cbor
from brain.embed import EMBEDDER_KINDS, Embedder, ModelMissing, check_texts
from brain.embed.batching import EmbedderClosed
from brain.embed.worker import (
    ERROR,
    MAX_FRAME_BYTES,
    READY,
    ROWS,
    encode_texts,
    read_frame,
    write_frame,
)
from brain.errors import InvalidArgument

if TYPE_CHECKING:
    from types import TracebackType

__all__ = [
    "CLOSE_WAIT_S",
    "MAX_REQUEST_TEXTS",
    "EmbedWorkerFailed",
    "ProcessEmbedder",
]

CLOSE_WAIT_S: Final = 5.0
"""How long ``close()`` waits for a call in progress and then for the child to exit
at EOF, before it kills the child: far past one bulk chunk of short texts; a call
still running then only fails, and nothing it was doing is lost (the indexer keeps
its queue until a round commits)."""

MAX_REQUEST_TEXTS: Final = cbor.MAX_ARRAY_LENGTH
"""Most texts in one call: the longest array :mod:`brain.cbor` decodes. Its answer,
100,000 rows of 384 float32, fits a frame (``MAX_FRAME_BYTES``)."""

_SOURCE_ROOT: Final = str(Path(__file__).resolve().parents[2])
"""The folder holding the ``brain`` package this module came from: first on the
child's ``PYTHONPATH``, so that it runs this very code wherever the server started."""


class EmbedWorkerFailed(RuntimeError):
    """The embedding process gave no rows: it could not start, it died during the call
    (killed, out of memory), or its embedder raised. The message says which; after a
    death, the next call starts a new process."""


def _exit_text(code: int) -> str:
    """How a child ended, from its return code."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _stop(process: subprocess.Popen[bytes]) -> int:
    """End ``process``: EOF on its stdin, up to :data:`CLOSE_WAIT_S` to exit, then
    SIGKILL; close its pipes. Its return code. Safe to repeat."""
    assert process.stdin is not None and process.stdout is not None
    with contextlib.suppress(OSError):  # it is gone already, with bytes unsent
        process.stdin.close()
    try:
        code = process.wait(CLOSE_WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        code = process.wait()
    process.stdout.close()
    return code


class ProcessEmbedder:
    """An :class:`~brain.embed.Embedder` whose ``embed()`` runs in a child process.

    ``kind`` and ``model_dir`` are those of :func:`brain.embed.load_embedder`, which the
    child calls. The constructor starts the child and waits until it is ready; a
    model it cannot load raises :class:`~brain.embed.ModelMissing`, any other failure
    to start :class:`EmbedWorkerFailed`. Calls from many threads take turns: one
    request is in the child at a time. ``close()`` ends the child; later calls raise
    :class:`~brain.embed.batching.EmbedderClosed`. Usable as a context manager.
    """

    dimensions: int
    name: str

    def __init__(
        self, kind: str, *, model_dir: Path | None = None, like: Embedder | None = None
    ) -> None:
        """Without ``like``, wait until the child is ready (its failure raises here).
        With ``like``, the embedder of this process the child must match (a server's
        own model, loaded already), return at once and let the child load the model
        while the server goes on starting: the first call waits for it, and raises
        what the constructor would have, or :class:`EmbedWorkerFailed` when the child
        embeds with another name or length than ``like``."""
        if kind not in EMBEDDER_KINDS:
            raise ValueError(
                f"unknown embedder kind {kind!r}; choose one of {', '.join(EMBEDDER_KINDS)}"
            )
        self.kind = kind
        self.model_dir = model_dir
        self._lock = threading.Lock()
        self._closed = False
        self._unready = False
        """The child is started but its READY frame is not read yet (``like`` given)."""
        if like is None:
            process, self.name, self.dimensions = self._start()
        else:
            self.name, self.dimensions = like.name, like.dimensions
            process, self._unready = self._spawn(), True
        self._process: subprocess.Popen[bytes] | None = process

    @property
    def pid(self) -> int | None:
        """The child's process id; None while none runs (after a death, until the next
        call, and once closed)."""
        process = self._process
        return None if process is None else process.pid

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One unit-length float32 row per text, computed in the child.

        TypeError for texts that are not a sequence of str and ValueError past
        :data:`MAX_REQUEST_TEXTS` or a frame, both before anything is sent;
        :class:`EmbedWorkerFailed` when the child fails.
        """
        check_texts(texts)
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        if len(texts) > MAX_REQUEST_TEXTS:
            raise ValueError(f"{len(texts)} texts in one call; at most {MAX_REQUEST_TEXTS}")
        request = encode_texts(list(texts))
        if len(request) > MAX_FRAME_BYTES:
            raise ValueError(f"the texts take {len(request)} bytes; at most {MAX_FRAME_BYTES}")
        with self._lock:
            if self._closed:
                raise EmbedderClosed("the embedder is closed")
            process = self._process
            if process is None:
                process = self._process = self._restart()
            elif self._unready:
                # Until it proves ready: after a failure the next call starts anew.
                self._process, self._unready = None, False
                try:
                    self._check_like(self._ready(process))
                except EmbedWorkerFailed:
                    _stop(process)
                    raise
                self._process = process
            return self._call(process, request, len(texts))

    def close(self) -> None:
        """End the child (EOF, then SIGKILL after :data:`CLOSE_WAIT_S`); idempotent."""
        locked = self._lock.acquire(timeout=CLOSE_WAIT_S)
        try:
            self._closed = True
            process, self._process = self._process, None
        finally:
            if locked:
                self._lock.release()
        if process is not None:
            if not locked:  # a call has held it too long: it fails, the child goes now
                process.kill()
            _stop(process)

    def __enter__(self) -> ProcessEmbedder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- the child -----------------------------------------------------------------------

    def _start(self) -> tuple[subprocess.Popen[bytes], str, int]:
        """Start a child and wait for its READY frame: the process, name, dimensions."""
        process = self._spawn()
        name, dimensions = self._ready(process)
        return process, name, dimensions

    def _spawn(self) -> subprocess.Popen[bytes]:
        """Start a child (it loads the model, then sends READY)."""
        command = [sys.executable, "-m", "brain.embed.worker", self.kind]
        if self.model_dir is not None:
            command += ["--model-dir", str(self.model_dir)]
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": _SOURCE_ROOT + (os.pathsep + path if path else "")}
        return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def _ready(self, process: subprocess.Popen[bytes]) -> tuple[str, int]:
        """Wait for the child's READY frame: its name and dimensions. A child that
        sends anything else is stopped, and its failure raised."""
        try:
            answer = read_frame(_pipe(process.stdout))
        except (OSError, EOFError, ValueError):
            answer = None
        if answer is not None and answer[:1] == bytes((READY,)):
            name, dimensions = _decode_pair(answer[1:])
            if isinstance(name, str) and isinstance(dimensions, int):
                return name, dimensions
        code = _stop(process)
        if answer is not None and answer[:1] == bytes((ERROR,)):
            kind, message = _decode_pair(answer[1:])
            if kind == ModelMissing.__name__:
                raise ModelMissing(str(message), self.model_dir)
            raise EmbedWorkerFailed(
                f"the embedding process could not load the {self.kind!r} embedder "
                f"({kind}: {message}) and {_exit_text(code)}"
            )
        raise EmbedWorkerFailed(
            f"the embedding process ({self.kind}) {_exit_text(code)} before it was ready; "
            "its error, if any, is on the server's stderr"
        )

    def _restart(self) -> subprocess.Popen[bytes]:
        """A new child in place of one that died; it must embed as the first did."""
        process = self._spawn()
        try:
            self._check_like(self._ready(process))
        except EmbedWorkerFailed:
            _stop(process)
            raise
        return process

    def _check_like(self, found: tuple[str, int]) -> None:
        """EmbedWorkerFailed unless the child embeds as this embedder says it does."""
        name, dimensions = found
        if (name, dimensions) != (self.name, self.dimensions):
            raise EmbedWorkerFailed(
                f"the embedding process embeds with {name!r} ({dimensions} dimensions), "
                f"not {self.name!r} ({self.dimensions})"
            )

    def _call(
        self, process: subprocess.Popen[bytes], request: bytes, count: int
    ) -> NDArray[np.float32]:
        """Send one request to ``process`` and read its answer (the lock is held)."""
        try:
            write_frame(_pipe(process.stdin), request)
            answer = read_frame(_pipe(process.stdout))
        except (OSError, EOFError, ValueError):
            answer = None
        if answer is not None:
            status, body = answer[:1], answer[1:]
            if status == bytes((ROWS,)) and len(body) == count * self.dimensions * 4:
                rows = np.frombuffer(body, dtype="<f4").reshape(count, self.dimensions)
                return rows.astype(np.float32)  # a copy: writable, in native order
            if status == bytes((ERROR,)):
                kind, message = _decode_pair(body)
                raise EmbedWorkerFailed(f"the embedder raised {kind} in its process: {message}")
        # Dead, or out of step: this child is done; the next call starts another.
        self._process = None
        code = _stop(process)
        raise EmbedWorkerFailed(
            f"the embedding process {process.pid} {_exit_text(code)} during a call; "
            "the next call starts a new one"
        )


def _pipe(stream: IO[bytes] | None) -> IO[bytes]:
    """One of a child's pipes (Popen was asked for both)."""
    assert stream is not None
    return stream


def _decode_pair(body: bytes) -> tuple[object, object]:
    """The two items of a CBOR array of two; ``(None, None)`` for anything else."""
    try:
        value = cbor.decode_stored(body)
    except InvalidArgument:
        return None, None
    if isinstance(value, list) and len(value) == 2:
        return value[0], value[1]
    return None, None
