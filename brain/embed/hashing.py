"""A deterministic hashing embedder, for unit tests only.

Each text is lowercased and cut into runs of letters and digits; each such
token adds ±1 to :data:`BUCKETS_PER_TOKEN` of the 384 components, chosen by its
BLAKE2b digest; the sum is L2-normalised. Texts sharing words therefore have
positive cosine similarity, which is all a unit test of retrieval needs, and
the same text gives the same vector bit for bit in every process (no
``hash()``, whose seed changes per process). It knows no meaning: it is chosen
by name (``load_embedder("hashing")``) and never stands in for a missing model.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from typing import Final

import numpy as np
from numpy.typing import NDArray

from brain.embed import check_texts

__all__ = ["BUCKETS_PER_TOKEN", "DIMENSIONS", "HASHING_NAME", "HashingEmbedder"]

DIMENSIONS: Final = 384
"""The width of all-MiniLM-L6-v2, so tests see the shapes production sees."""

BUCKETS_PER_TOKEN: Final = 4
"""Signed buckets one token touches: fewer collisions than one, still sparse."""

HASHING_NAME: Final = "hashing-blake2b-384"
"""The embedder's name; vectors of another name must not be compared with these."""

_PERSON: Final = b"brain.embed"
"""BLAKE2b personalisation, so these digests match no other use of the hash."""

_TOKEN: Final = re.compile(r"[^\W_]+")
"""Runs of Unicode letters and digits (``\\w`` without the underscore)."""

_EMPTY_VECTOR: Final = np.full(DIMENSIONS, 1.0 / math.sqrt(DIMENSIONS), dtype=np.float32)
_EMPTY_VECTOR.flags.writeable = False


class HashingEmbedder:
    """Bag-of-words vectors from BLAKE2b; deterministic, unit-length, meaningless.

    A text without tokens (empty, spaces, punctuation), or whose token buckets
    cancel out exactly, gets one fixed vector with every component
    1/√384, so that normalisation never divides by zero and every row has norm 1.
    """

    dimensions: int
    name: str

    def __init__(self) -> None:
        self.dimensions = DIMENSIONS
        self.name = HASHING_NAME

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit-length float32 vectors, shape ``(len(texts), 384)``, in input order."""
        check_texts(texts)
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = _embed_one(text)
        return out


def _embed_one(text: str) -> NDArray[np.float32]:
    counts = np.zeros(DIMENSIONS, dtype=np.float64)
    for token in _TOKEN.findall(text.lower()):
        digest = hashlib.blake2b(
            token.encode("utf-8"), digest_size=4 * BUCKETS_PER_TOKEN, person=_PERSON
        ).digest()
        for k in range(BUCKETS_PER_TOKEN):
            word = int.from_bytes(digest[4 * k : 4 * k + 4], "little")
            counts[(word >> 1) % DIMENSIONS] += 1.0 if word & 1 else -1.0
    # Integer counts are exact in float64, so the sum of squares and the
    # division below are the same on every machine.
    norm = math.sqrt(float(np.dot(counts, counts)))
    if norm == 0.0:
        return _EMPTY_VECTOR
    return (counts / norm).astype(np.float32)
