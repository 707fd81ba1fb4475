"""Decoded postings kept in memory, used only by the snapshots they are exact for.

A BM25 search reads every posting of every cue term; read from LMDB one cursor
step at a time, that is most of a RECALL's cost once a corpus has common
terms. :class:`PostingsCache` keeps a term's postings as numpy arrays (document
number, term frequency, document length), built from one snapshot and reused
by later searches while that term's postings are unchanged.

Unchanged is decided by the store itself: every write that adds or removes a
posting of a term also adds one to that term's **version** counter, in the same
transaction (:mod:`brain.engine.index.lexical`). Arrays built from a snapshot in
which the term had version ``v`` are exactly the postings of every snapshot in
which it has version ``v``; a search reads the version in its own snapshot (one
lookup) and takes the arrays only when it matches. So the cache needs no news
from the writer, is never ahead of or behind a reader, and the answer is the
same with it or without it, to the last bit (the arrays hold exactly the
snapshot's postings, and scores are summed in the same order).

Memory is bounded: at most :data:`MAX_CACHED_POSTINGS` postings in all, least
recently used terms evicted first; a scope's table of document numbers starts
over, with its terms dropped, when it passes :data:`MAX_DOCUMENTS_PER_SCOPE`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "MAX_CACHED_POSTINGS",
    "MAX_DOCUMENTS_PER_SCOPE",
    "Numbering",
    "Postings",
    "PostingsCache",
    "build",
]

MAX_CACHED_POSTINGS: Final = 16_000_000
"""Postings held in all (12 bytes each, about 190 MiB at most): the common terms
of a few million documents, which are the ones worth keeping."""

MAX_DOCUMENTS_PER_SCOPE: Final = 4_000_000
"""Document numbers handed out per scope before its table starts over (each costs
a dictionary entry; forgotten documents keep theirs until then)."""

_SCOPE_BYTES: Final = 32
"""Length of a scope prefix, which begins every term key."""


class Numbering:
    """A scope's document numbering: document key to dense integer and back."""

    __slots__ = ("_lock", "keys", "numbers")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.numbers: dict[bytes, int] = {}
        self.keys: list[bytes] = []

    def number_all(self, keys: Sequence[bytes]) -> NDArray[np.int32]:
        """The numbers of ``keys``, handing out new ones as needed."""
        # int32: a numbering starts over past MAX_DOCUMENTS_PER_SCOPE, far below 2**31.
        out = np.empty(len(keys), dtype=np.int32)
        with self._lock:
            numbers = self.numbers
            for index, key in enumerate(keys):
                found = numbers.get(key)
                if found is None:
                    found = len(self.keys)
                    numbers[key] = found
                    self.keys.append(key)
                out[index] = found
        return out


@dataclass(frozen=True, slots=True)
class Postings:
    """One term's postings at ``version``; ``documents`` are numbers of ``numbering``."""

    version: int
    numbering: Numbering
    documents: NDArray[np.int32]
    frequencies: NDArray[np.uint32]
    lengths: NDArray[np.uint32]


class PostingsCache:
    """Terms' postings, decoded, shared by every search of one open database."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._terms: OrderedDict[bytes, Postings] = OrderedDict()
        self._held = 0
        self._scopes: dict[bytes, Numbering] = {}

    def scope(self, prefix: bytes) -> Numbering:
        """The document numbering of the scope with key prefix ``prefix``."""
        with self._lock:
            numbering = self._scopes.get(prefix)
            if numbering is None or len(numbering.keys) > MAX_DOCUMENTS_PER_SCOPE:
                for term in [t for t in self._terms if t.startswith(prefix)]:
                    self._held -= len(self._terms.pop(term).documents)
                numbering = Numbering()
                self._scopes[prefix] = numbering
            return numbering

    def get(self, term: bytes, version: int) -> Postings | None:
        """The term's postings if held at ``version`` (the version in the caller's
        snapshot) and numbered by the scope's current numbering."""
        with self._lock:
            found = self._terms.get(term)
            if found is None or found.version != version:
                return None
            if self._scopes.get(term[:_SCOPE_BYTES]) is not found.numbering:
                return None
            self._terms.move_to_end(term)
            return found

    def put(self, term: bytes, postings: Postings) -> None:
        """Keep a term's postings, replacing any other version of them."""
        with self._lock:
            old = self._terms.pop(term, None)
            if old is not None:
                self._held -= len(old.documents)
            self._terms[term] = postings
            self._held += len(postings.documents)
            while self._held > MAX_CACHED_POSTINGS and len(self._terms) > 1:
                _, evicted = self._terms.popitem(last=False)
                self._held -= len(evicted.documents)

    @property
    def held(self) -> int:
        """How many postings are held."""
        return self._held


def build(version: int, numbering: Numbering, rows: Sequence[tuple[bytes, int, int]]) -> Postings:
    """Postings arrays from ``(document key, tf, length)`` rows read in one snapshot."""
    documents = numbering.number_all([key for key, _, _ in rows])
    # Counts kept as the integers they are, 4 bytes each (half of float64's memory);
    # a search widens them to float64 exactly, so its scores do not change.
    frequencies = np.fromiter((tf for _, tf, _ in rows), dtype=np.uint32, count=len(rows))
    lengths = np.fromiter((length for _, _, length in rows), dtype=np.uint32, count=len(rows))
    return Postings(version, numbering, documents, frequencies, lengths)
