"""The real hashing embedder held at a gate, so a test can queue work while the
batching embedder's worker is inside a call, then read what reached the model."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Final

import numpy as np
from numpy.typing import NDArray

from brain.embed.hashing import HashingEmbedder

Vectors = NDArray[np.float32]

DEADLINE_S: Final = 10.0
"""How long a test waits for another thread to get somewhere (only a broken build
gets near it)."""


class HeldEmbedder:
    """The hashing embedder, recording each call's texts; every call waits for
    ``gate``. Texts containing ``boom`` raise ValueError, as a model fault would."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.dimensions = self.inner.dimensions
        self.name = self.inner.name
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Record ``texts``, wait for the gate, then embed them (or fail on ``boom``)."""
        self.calls.append(list(texts))
        self.entered.set()
        assert self.gate.wait(DEADLINE_S), "the test never opened the gate"
        if any("boom" in text for text in texts):
            raise ValueError("boom")
        return self.inner.embed(texts)
