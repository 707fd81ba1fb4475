"""The lexical tokenizer: what BM25 counts (spec/04-retrieval.md §2).

Text is casefolded and split into runs of word characters (Unicode letters,
digits and the underscore), so an identifier such as ``user_id`` or
``x86_64`` stays one token while ``boundary-layer`` and ``v2.1`` split at
their punctuation. Tokens of one character and the English stop words of
:data:`STOP_WORDS` are dropped: they carry no meaning a search could use, and
their postings would be the longest of all. Purely alphabetic tokens are
stemmed with the Snowball English stemmer (PyStemmer); a token holding a
digit or an underscore is an identifier and is kept as written, since
stemming ``users_v2`` would only damage it.
"""

from __future__ import annotations

import re
import threading
from typing import Final

import Stemmer  # type: ignore[import-not-found]

__all__ = ["STOP_WORDS", "tokenize"]

_WORD: Final = re.compile(r"\w+")

_STOP_LIST: Final = """
    a about above after again against all am an and any are as at be because been
    before being below between both but by can did do does doing down during each
    few for from further had has have having he her here hers herself him himself
    his how i if in into is it its itself just me more most my myself no nor not now
    of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this
    those through to too under until up very was we were what when where which while
    who whom why will with you your yours yourself yourselves
"""

STOP_WORDS: Final = frozenset(_STOP_LIST.split())
"""Words too common to tell documents apart (the usual English list)."""

_local = threading.local()


def _stemmer() -> Stemmer.Stemmer:
    # A Stemmer object is not safe to share between threads; one per thread is cheap.
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = Stemmer.Stemmer("english")
        _local.stemmer = stemmer
    return stemmer


def tokenize(text: str) -> list[str]:
    """The tokens of ``text``, in order, repeats kept."""
    words = [w for w in _WORD.findall(text.casefold()) if len(w) > 1 and w not in STOP_WORDS]
    stemmer = _stemmer()
    return [stemmer.stemWord(w) if w.isalpha() else w for w in words]
