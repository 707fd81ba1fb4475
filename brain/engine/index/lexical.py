"""The lexical arm: BM25 over postings kept in LMDB, per scope (spec/04-retrieval.md §2).

Tables, every key scope-prefixed (``S``), written in the same transaction as
the records they index:

- ``lex_postings``: ``S ‖ term hash ‖ doc key`` → ``u32 tf ‖ u32 doc length``;
- ``lex_docs``: ``S ‖ doc key`` → the document's length and its ``[term hash,
  tf]`` pairs, so that it can be removed without its text (a hard forget), and
  so that a re-index can tell whether the text's tokens changed at all;
- ``lex_stats``: ``S ‖ "docs"`` and ``S ‖ "tokens"``, counters of the indexed
  documents and their total length, and ``S ‖ "v:" ‖ term hash``, each term's
  version (one more with every write that adds or removes one of its postings,
  so that decoded postings kept in memory are known to be current:
  :mod:`brain.engine.index.postings`); all changed by
  :class:`~brain.engine.write.plan.Add`, so that several documents indexed by one
  write add up. A term's version row lives exactly while some document holds
  the term: :func:`settle` deletes it in the write that takes the term's last
  posting out, so no hash of a forgotten word stays behind (spec/04-retrieval.md
  §2). ``S ‖ "floor"`` holds the highest version a deleted row had; a term
  indexed again starts above it, so a version is never given to two different
  sets of postings.

A term hash is the first :data:`TERM_HASH_BYTES` bytes of BLAKE2b of the
token: fixed-size keys, and no text of a document in any key. A search looks
up only the query's own terms, under its own scope's prefix, so another
scope's postings cannot be reached.

Scoring is Okapi BM25 with :data:`K1` and :data:`B`, and the idf of Lucene,
``ln(1 + (N - df + 0.5) / (df + 0.5))``, which is never negative.
"""

from __future__ import annotations

import hashlib
import heapq
import math
from collections import Counter
from collections.abc import Sequence
from typing import Final

import lmdb
import numpy as np
from numpy.typing import NDArray

from brain import cbor
from brain.engine.index.documents import DOC_KEY_BYTES
from brain.engine.index.postings import PostingsCache, build
from brain.engine.index.tokens import tokenize
from brain.engine.store.env import Store
from brain.engine.store.scan import scan, scan_keys
from brain.engine.store.scope import SCOPE_PREFIX_BYTES, Scope
from brain.engine.store.tables import LEX_DOCS, LEX_POSTINGS, LEX_STATS
from brain.engine.write.plan import Add, Change, Delete, Put, read_counter

__all__ = [
    "DOCS",
    "K1",
    "POSTINGS",
    "STATS",
    "TERM_HASH_BYTES",
    "B",
    "corpus_size",
    "doc_row",
    "doc_row_of",
    "index_changes",
    "orphan_changes",
    "remove_changes",
    "search",
    "settle",
]

POSTINGS: Final = LEX_POSTINGS
"""The postings table, under the name the index's readers import it by."""
DOCS: Final = LEX_DOCS
"""The document rows table, under the name the index's readers import it by."""
STATS: Final = LEX_STATS
"""The counters table, under the name the index's readers import it by."""

K1: Final = 1.2
"""BM25 term-frequency saturation: the usual value (Robertson; Lucene's default)."""
B: Final = 0.75
"""BM25 length normalisation: the usual value (Robertson; Lucene's default)."""

TERM_HASH_BYTES: Final = 8
"""64 bits: two distinct terms of one scope sharing a hash is vanishingly unlikely."""

MAX_QUERY_TERMS: Final = 256
"""Distinct terms of a cue that are looked up: a long conversation turn still
searches, bounded by its first few hundred distinct words."""

_DOCS_KEY: Final = b"docs"
_TOKENS_KEY: Final = b"tokens"
_VERSION_KEY: Final = b"v:"
_FLOOR_KEY: Final = b"floor"
_U32: Final = 4
_TERM_KEY_BYTES: Final = SCOPE_PREFIX_BYTES + TERM_HASH_BYTES
"""``S ‖ term hash``: the prefix of every posting of one term."""
_POSTING_KEY_BYTES: Final = _TERM_KEY_BYTES + DOC_KEY_BYTES


def _term_hash(term: str) -> bytes:
    return hashlib.blake2b(term.encode("utf-8"), digest_size=TERM_HASH_BYTES).digest()


def _terms(text: str) -> tuple[int, list[tuple[bytes, int]]]:
    """The length of ``text`` in tokens and its ``(term hash, tf)`` pairs, sorted."""
    counts = Counter(_term_hash(t) for t in tokenize(text))
    return sum(counts.values()), sorted(counts.items())


def _encode_row(length: int, terms: list[tuple[bytes, int]]) -> bytes:
    return cbor.encode([length, [[th, tf] for th, tf in terms]])


def doc_row(text: str) -> bytes:
    """The ``lex_docs`` value of a document with ``text``: its length and sorted
    ``[term hash, tf]`` pairs. Two texts have equal rows exactly when their token
    multisets are equal (up to a term hash collision), so comparing a stored row
    with this one tells, without touching a posting, whether re-indexing a
    document would change anything."""
    return _encode_row(*_terms(text))


def doc_row_of(store: Store, txn: lmdb.Transaction, scope: Scope, key: bytes) -> bytes | None:
    """The stored ``lex_docs`` value of document ``key`` (None when it is not indexed)."""
    raw = txn.get(scope.key(key), db=store.table(LEX_DOCS))
    return None if raw is None else bytes(raw)


def index_changes(scope: Scope, key: bytes, text: str) -> list[Change]:
    """The changes that index document ``key`` with ``text``: once per document, or
    right after :func:`remove_changes` of the same document (a re-index: the
    counters then net out, and every term of either text has its version raised)."""
    length, counts = _terms(text)
    changes: list[Change] = [
        Put(
            LEX_POSTINGS,
            scope.key(th, key),
            tf.to_bytes(_U32, "big") + length.to_bytes(_U32, "big"),
        )
        for th, tf in counts
    ]
    changes.append(Put(LEX_DOCS, scope.key(key), _encode_row(length, counts)))
    changes.extend(Add(LEX_STATS, scope.key(_VERSION_KEY, th), 1) for th, _ in counts)
    changes.append(Add(LEX_STATS, scope.key(_DOCS_KEY), 1))
    changes.append(Add(LEX_STATS, scope.key(_TOKENS_KEY), length))
    return changes


def remove_changes(store: Store, txn: lmdb.Transaction, scope: Scope, key: bytes) -> list[Change]:
    """The changes that take document ``key`` out of the index (none if it is not in)."""
    raw = txn.get(scope.key(key), db=store.table(LEX_DOCS))
    if raw is None:
        return []
    stored = cbor.decode_stored(bytes(raw))
    assert isinstance(stored, list) and len(stored) == 2
    length, terms = stored
    assert isinstance(length, int) and isinstance(terms, list)
    changes: list[Change] = [Delete(LEX_POSTINGS, scope.key(bytes(th), key)) for th, _ in terms]
    changes.extend(Add(LEX_STATS, scope.key(_VERSION_KEY, bytes(th)), 1) for th, _ in terms)
    changes.append(Delete(LEX_DOCS, scope.key(key)))
    changes.append(Add(LEX_STATS, scope.key(_DOCS_KEY), -1))
    changes.append(Add(LEX_STATS, scope.key(_TOKENS_KEY), -length))
    return changes


def settle(store: Store, txn: lmdb.Transaction, changes: Sequence[Change]) -> list[Change]:
    """The ``lex_stats`` changes that end a plan whose postings changes are among
    ``changes``, ``txn`` holding the state before the plan: the version row of every
    term the plan leaves without a posting is deleted, and a term whose row is
    created again starts above its scope's floor.

    Call it once per plan (or per write of a transaction, each planned on the
    one before), on all of the plan's lexical changes: whether a term keeps a
    posting depends on every removal and indexing the plan makes. It is exact at
    planning time because the writer plans each write on the state its
    predecessors left; the changes it returns are logged with the rest, so
    replay lands on the same rows. Per term it reads the version row and, when
    the plan removes postings of the term and adds none, the term's postings only
    until one the plan does not remove.
    """
    finals: dict[bytes, dict[bytes, bool]] = {}
    version_changes: dict[bytes, list[Change]] = {}
    for change in changes:
        if change.table == LEX_POSTINGS and len(change.key) == _POSTING_KEY_BYTES:
            term = change.key[:_TERM_KEY_BYTES]
            finals.setdefault(term, {})[change.key] = isinstance(change, Put)
        elif change.table == LEX_STATS:
            version_changes.setdefault(change.key, []).append(change)
    stats = store.table(LEX_STATS)
    floors: dict[bytes, tuple[int, int]] = {}  # scope prefix: (floor before, floor after)
    settled: list[Change] = []
    for term, postings in finals.items():
        prefix, th = term[:SCOPE_PREFIX_BYTES], term[SCOPE_PREFIX_BYTES:]
        version_key = prefix + _VERSION_KEY + th
        raw = txn.get(version_key, db=stats)
        before = None if raw is None else read_counter(bytes(raw))
        after = _replayed(before, version_changes.get(version_key, []))
        if prefix not in floors:
            floor = read_counter(_raw(txn.get(prefix + _FLOOR_KEY, db=stats)))
            floors[prefix] = (floor, floor)
        floor_before, floor_after = floors[prefix]
        if not _holds_a_posting(store, txn, term, postings):
            if after is not None:
                settled.append(Delete(LEX_STATS, version_key))
                floors[prefix] = (floor_before, max(floor_after, after))
        elif before is None and floor_before > 0:
            # Created again: every version it had before is at most the floor.
            settled.append(Add(LEX_STATS, version_key, floor_before))
    for prefix, (floor_before, floor_after) in floors.items():
        if floor_after > floor_before:
            settled.append(Add(LEX_STATS, prefix + _FLOOR_KEY, floor_after - floor_before))
    return settled


def orphan_changes(store: Store, txn: lmdb.Transaction) -> list[Change]:
    """The changes that delete every version row whose term has no posting in ``txn``'s
    snapshot, raising each scope's floor past them: rows an earlier build, which
    kept them for good, left behind (the purge applies them)."""
    stats, postings = store.table(LEX_STATS), store.table(LEX_POSTINGS)
    floors: dict[bytes, tuple[int, int]] = {}
    changes: list[Change] = []
    for key, value in scan(txn, stats, b""):
        if len(key) != _TERM_KEY_BYTES + len(_VERSION_KEY):
            continue
        prefix, name = key[:SCOPE_PREFIX_BYTES], key[SCOPE_PREFIX_BYTES:]
        if name[: len(_VERSION_KEY)] != _VERSION_KEY:
            continue
        term = prefix + name[len(_VERSION_KEY) :]
        if next(iter(scan_keys(txn, postings, term)), None) is not None:
            continue
        if prefix not in floors:
            floor = read_counter(_raw(txn.get(prefix + _FLOOR_KEY, db=stats)))
            floors[prefix] = (floor, floor)
        before, after = floors[prefix]
        floors[prefix] = (before, max(after, read_counter(value)))
        changes.append(Delete(LEX_STATS, key))
    changes += [
        Add(LEX_STATS, prefix + _FLOOR_KEY, after - before)
        for prefix, (before, after) in floors.items()
        if after > before
    ]
    return changes


def _raw(value: bytes | memoryview | None) -> bytes | None:
    return None if value is None else bytes(value)


def _replayed(value: int | None, changes: list[Change]) -> int | None:
    """A ``lex_stats`` row after ``changes`` to it (None: absent)."""
    for change in changes:
        if isinstance(change, Add):
            value = (value or 0) + change.delta
        elif isinstance(change, Put):
            value = read_counter(change.value)
        else:
            value = None
    return value


def _holds_a_posting(
    store: Store, txn: lmdb.Transaction, term: bytes, finals: dict[bytes, bool]
) -> bool:
    """Whether the term still has a posting once the plan's changes to its postings
    (``finals``: posting key to whether it is put, by the last change) are made."""
    if any(finals.values()):
        return True
    for key in scan_keys(txn, store.table(LEX_POSTINGS), term):
        if len(key) == _POSTING_KEY_BYTES and key not in finals:
            return True
    return False


def _counter(store: Store, txn: lmdb.Transaction, scope: Scope, name: bytes) -> int:
    raw = txn.get(scope.key(name), db=store.table(LEX_STATS))
    return read_counter(None if raw is None else bytes(raw))


def corpus_size(store: Store, txn: lmdb.Transaction, scope: Scope) -> int:
    """How many documents of ``scope`` the lexical index holds."""
    return _counter(store, txn, scope, _DOCS_KEY)


def search(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    cue: str,
    limit: int,
    *,
    cache: PostingsCache | None = None,
) -> list[tuple[bytes, float]]:
    """The ``limit`` best documents of ``scope`` for ``cue``: ``(doc key, score)``,
    best first, ties by key. With ``cache``, terms' postings are taken from it when
    it holds them for this snapshot (:mod:`brain.engine.index.postings`), and kept in
    it when read; the answer is the same."""
    documents = _counter(store, txn, scope, _DOCS_KEY)
    if documents <= 0:
        return []
    average = max(_counter(store, txn, scope, _TOKENS_KEY) / documents, 1.0)
    terms = list(dict.fromkeys(tokenize(cue)))[:MAX_QUERY_TERMS]
    if cache is not None:
        corpus = (documents, average)
        return _search_cached(store, txn, scope, terms, limit, corpus=corpus, cache=cache)
    scores: dict[bytes, float] = {}
    table = store.table(LEX_POSTINGS)
    # The per-posting loop is the cost of a search: it keeps to slicing and
    # local arithmetic, and the length norm of each posting is one multiply-add.
    base = K1 * (1.0 - B)
    per_length = K1 * B / average
    for term in terms:
        prefix = scope.key(_term_hash(term))
        postings = _read(txn, table, prefix)
        df = len(postings)
        if not df:
            continue
        idf = math.log(1.0 + (documents - df + 0.5) / (df + 0.5))
        lift = idf * (K1 + 1.0)
        get = scores.get
        for key, tf, length in postings:
            norm = tf + base + per_length * length
            scores[key] = get(key, 0.0) + lift * tf / norm
    return heapq.nsmallest(limit, scores.items(), key=lambda item: (-item[1], item[0]))


def _read(
    txn: lmdb.Transaction, table: lmdb._Database, prefix: bytes
) -> list[tuple[bytes, int, int]]:
    """A term's postings, ``(doc key, tf, doc length)``, in key order."""
    start = len(prefix)
    end = start + DOC_KEY_BYTES
    return [
        (key[start:], int.from_bytes(value[:_U32]), int.from_bytes(value[_U32:]))
        for key, value in scan(txn, table, prefix)
        if len(key) == end
    ]


def _search_cached(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    terms: list[str],
    limit: int,
    *,
    corpus: tuple[int, float],
    cache: PostingsCache,
) -> list[tuple[bytes, float]]:
    """:func:`search` over cached postings arrays: the same shares, summed in the same
    (term) order, so the same scores to the last bit."""
    documents, average = corpus
    stats = store.table(LEX_STATS)
    numbering = cache.scope(scope.key())
    base = K1 * (1.0 - B)
    per_length = K1 * B / average
    table = store.table(LEX_POSTINGS)
    numbers: list[NDArray[np.int32]] = []
    shares: list[NDArray[np.float64]] = []
    for term in terms:
        th = _term_hash(term)
        prefix = scope.key(th)
        raw = txn.get(scope.key(_VERSION_KEY, th), db=stats)
        version = read_counter(None if raw is None else bytes(raw))
        postings = cache.get(prefix, version)
        if postings is None or postings.numbering is not numbering:
            postings = build(version, numbering, _read(txn, table, prefix))
            cache.put(prefix, postings)
        df = len(postings.documents)
        if not df:
            continue
        idf = math.log(1.0 + (documents - df + 0.5) / (df + 0.5))
        lift = idf * (K1 + 1.0)
        # The counts are uint32; each step with a Python float widens them to float64
        # exactly, so the shares are those of float64 counts to the last bit.
        tf = postings.frequencies
        numbers.append(postings.documents)
        shares.append(lift * tf / (tf + base + per_length * postings.lengths))
    if not numbers:
        return []
    # bincount adds each document's shares in input order, from 0.0: term order.
    totals = np.bincount(np.concatenate(numbers), weights=np.concatenate(shares))
    found = np.flatnonzero(totals)
    if len(found) > limit:
        cut = np.partition(totals[found], len(found) - limit)[len(found) - limit]
        found = found[totals[found] >= cut]
    keys = numbering.keys
    ranked = [(keys[i], float(totals[i])) for i in found.tolist()]
    ranked.sort(key=lambda item: (-item[1], item[0]))
    return ranked[:limit]
