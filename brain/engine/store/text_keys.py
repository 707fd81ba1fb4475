"""When two memory texts are the same text, and the key that says so.

Deduplication (``memory_by_sha``), the copies a hard forget reaches
(``memory_by_text``) and the forget ledger (``forget_ledger``) are keyed on a
text's *text key*: the SHA-256 of its UTF-8 after :func:`normalise_text`. Texts
that differ only in Unicode composition or in whitespace are one text to all
three, so a text stored or forgotten once is not stored again because a client
re-encoded it, re-wrapped it or added a trailing newline
(``spec/02-data-model.md`` §3).

A memory's ``sha256`` stays the SHA-256 of the exact bytes it holds: it is what
a citation checks the text against, and a client can compute it.

Stores of format 2 and older keyed the two memory indexes and the ledger on the
exact bytes' SHA-256. The indexes are re-keyed when such a store is opened
(:mod:`brain.engine.store.upgrade`); the ledger cannot be, since it keeps no
text, so a ledger entry is looked for under both keys (:func:`ledger_keys`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Final

__all__ = ["exact_digest", "ledger_keys", "normalise_text", "text_key"]

_WHITESPACE_RUN: Final = re.compile(r"\s+")
"""A run of whitespace characters (Unicode's, as ``str.isspace`` knows them)."""


def normalise_text(text: str) -> str:
    """The form two texts are compared in: Unicode NFC, every run of whitespace one
    space, none at either end."""
    composed = unicodedata.normalize("NFC", text)
    return _WHITESPACE_RUN.sub(" ", composed).strip(" ")


def exact_digest(text: str) -> bytes:
    """The SHA-256 of ``text``'s UTF-8 as it is: a memory's ``sha256``."""
    return hashlib.sha256(text.encode("utf-8")).digest()


def text_key(text: str) -> bytes:
    """The SHA-256 of ``text``'s normalised UTF-8: what deduplication and forgetting
    by value key on."""
    return exact_digest(normalise_text(text))


def ledger_keys(text: str) -> tuple[bytes, ...]:
    """Every key a ledger entry for ``text`` may be stored under: its text key, and
    the exact bytes' digest an older store's hard forget wrote when that differs."""
    key, exact = text_key(text), exact_digest(text)
    return (key,) if key == exact else (key, exact)
