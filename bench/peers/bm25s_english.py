"""bm25s as its documentation shows it for English text: the retrieval suites' lexical peer.

Its own tokenizer with English stop words and the Snowball English stemmer
(PyStemmer), and its default scorer (``method="lucene"``, ``k1`` 1.5, ``b``
0.75), never tuned down. The ``quality`` suite (Cranfield) and the ``locomo``
suite (conversations) index the texts the database stored, one per memory,
and rank them for each cue with :meth:`EnglishBm25.ranked`; a text scoring 0
shares no term with the cue and is left out, as a lexical index would.
(The ``lexical`` suite sets bm25s up differently: fed our own tokens, so the
two rankings can be compared term for term.)
"""

from __future__ import annotations

import importlib
import importlib.metadata
import time
from collections.abc import Sequence
from typing import Any, Final

# Untyped third-party modules, loaded by name so that mypy --strict needs no ignore.
bm25s: Any = importlib.import_module("bm25s")
Stemmer: Any = importlib.import_module("Stemmer")

__all__ = ["NAME", "STEMMER", "STOPWORDS", "EnglishBm25"]

NAME: Final = "bm25s"
"""The peer's name in the results."""

STOPWORDS: Final = "en"
"""bm25s's English stop-word list, as its documentation's examples use."""

STEMMER: Final = "english"
"""The Snowball stemmer bm25s's documentation pairs it with (PyStemmer)."""

_DECIMALS: Final = 3
"""Decimal places kept for the index time in seconds."""


class EnglishBm25:
    """A bm25s index of ``texts`` (at least one), set up as its documentation shows."""

    def __init__(self, texts: Sequence[str]) -> None:
        if not texts:
            raise ValueError("bm25s needs at least one text to index")
        self._count = len(texts)
        self._stemmer = Stemmer.Stemmer(STEMMER)
        started = time.perf_counter()
        tokens = bm25s.tokenize(
            list(texts), stopwords=STOPWORDS, stemmer=self._stemmer, show_progress=False
        )
        self._retriever = bm25s.BM25()
        self._retriever.index(tokens, show_progress=False)
        self.index_s = time.perf_counter() - started
        """Seconds spent tokenizing and indexing the texts."""

    def ranked(self, cue: str, depth: int) -> list[int]:
        """The positions in ``texts`` of the best ``depth`` texts for ``cue``, best first.

        Texts scoring 0 are left out. ``depth`` is cut to the number of texts,
        which is all bm25s can return; the time of a call covers tokenizing
        the cue and ``retrieve``."""
        asked = bm25s.tokenize(cue, stopwords=STOPWORDS, stemmer=self._stemmer, show_progress=False)
        found, scores = self._retriever.retrieve(
            asked, k=min(depth, self._count), show_progress=False
        )
        return [int(index) for index, score in zip(found[0], scores[0], strict=True) if score > 0.0]

    def config(self) -> dict[str, object]:
        """How the peer was set up, for the results."""
        retriever = self._retriever
        return {
            "name": NAME,
            "version": importlib.metadata.version("bm25s"),
            "tokenizer": f"bm25s.tokenize, stopwords={STOPWORDS!r}, PyStemmer {STEMMER!r}",
            "method": retriever.method,
            "idf_method": retriever.idf_method,
            "k1": retriever.k1,
            "b": retriever.b,
            "backend": retriever.backend,
            "zero_scores": "left out",
            "index_seconds": round(self.index_s, _DECIMALS),
        }
