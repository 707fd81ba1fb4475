"""The lexical arm's cache of decoded postings: the same answers as LMDB, to the last
bit, for every snapshot, across writes, forgets and eviction."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import brain
from brain.engine.database import Database
from brain.engine.index import lexical, postings
from brain.engine.index.postings import PostingsCache
from brain.engine.store.scope import Scope
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid

COMMON = ["alpha", "beta", "gamma"]
RARE = [f"word{i}" for i in range(30)]
SCOPE = Scope.of(NS, None)
cues = st.lists(st.sampled_from(COMMON + RARE + ["absent"]), min_size=1, max_size=6).map(" ".join)


def _text(rng: random.Random) -> str:
    words = [rng.choice(COMMON) for _ in range(rng.randrange(0, 6))]
    words += [rng.choice(RARE) for _ in range(rng.randrange(1, 4))]
    rng.shuffle(words)
    return " ".join(words) + f" n{rng.randrange(10**9)}"


def _encode(db: Database, text: str) -> bytes:
    answer = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text=text))
    assert isinstance(answer, EncodeOk)
    return answer.memory_id


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    db = brain.open(tmp_path_factory.mktemp("postings") / "d")
    rng = random.Random(11)
    made = [_encode(db, _text(rng)) for _ in range(300)]
    for memory in rng.sample(made, 30):
        db.execute(NS, Opcode.FORGET, Forget(request_id=rid(), memory=memory, mode="hard"))
    try:
        yield db
    finally:
        db.close()


@settings(max_examples=200, deadline=None)
@given(cue=cues, limit=st.integers(min_value=1, max_value=80))
def test_cached_search_is_the_lmdb_search_cold_and_warm(
    corpus: Database, cue: str, limit: int
) -> None:
    store, cache = corpus._store, corpus.retrieval.postings
    with store.read() as txn:
        plain = lexical.search(store, txn, SCOPE, cue, limit)
        assert lexical.search(store, txn, SCOPE, cue, limit, cache=cache) == plain
        assert lexical.search(store, txn, SCOPE, cue, limit, cache=cache) == plain


def test_every_snapshot_gets_its_own_answer_across_writes(db: Database) -> None:
    store, cache = db._store, db.retrieval.postings
    rng = random.Random(3)
    made = [_encode(db, _text(rng)) for _ in range(80)]
    cue = "alpha word1 word2 beta"
    old = store.read()
    old_txn = old.__enter__()
    try:
        before = lexical.search(store, old_txn, SCOPE, cue, 20)
        assert lexical.search(store, old_txn, SCOPE, cue, 20, cache=cache) == before
        for _ in range(3):  # new documents with the cue's terms, and forgets of old ones
            _encode(db, "alpha word1 beta " + str(rng.random()))
            db.execute(NS, Opcode.FORGET, Forget(request_id=rid(), memory=made.pop(), mode="hard"))
            with store.read() as txn:
                now = lexical.search(store, txn, SCOPE, cue, 20)
                assert lexical.search(store, txn, SCOPE, cue, 20, cache=cache) == now
                assert lexical.search(store, txn, SCOPE, cue, 20, cache=cache) == now
            assert now != before
            # The snapshot taken before the writes still answers as it did.
            assert lexical.search(store, old_txn, SCOPE, cue, 20, cache=cache) == before
    finally:
        old.__exit__(None, None, None)
    assert cache.held > 0


def test_recall_uses_the_cache(db: Database) -> None:
    from brain.wire.messages.recall_ops import ArmWeights, Recall, RecallOk

    rng = random.Random(4)
    for _ in range(40):
        _encode(db, _text(rng))
    held = db.retrieval.postings.held
    answer = db.execute(
        NS, Opcode.RECALL, Recall(cue="alpha word3", arms=ArmWeights(semantic=0.0, graph=0.0))
    )
    assert isinstance(answer, RecallOk) and answer.hits
    assert db.retrieval.postings.held > held


def test_memory_is_bounded(corpus: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postings, "MAX_CACHED_POSTINGS", 50)
    cache = PostingsCache()
    store = corpus._store
    with store.read() as txn:
        for word in COMMON + RARE:
            got = lexical.search(store, txn, SCOPE, word, 10, cache=cache)
            assert got == lexical.search(store, txn, SCOPE, word, 10)
            assert cache.held <= 50 or len(cache._terms) == 1


def test_a_changed_version_or_a_new_numbering_is_never_served() -> None:
    cache = PostingsCache()
    prefix = b"s" * 32
    term = prefix + b"t" * 8
    numbering = cache.scope(prefix)
    cache.put(term, postings.build(3, numbering, [(b"d" * 17, 1, 3)]))
    assert cache.get(term, 3) is not None
    assert cache.get(term, 4) is None and cache.get(term, 2) is None
    monkeypatched = postings.MAX_DOCUMENTS_PER_SCOPE
    try:
        postings.MAX_DOCUMENTS_PER_SCOPE = 0  # type: ignore[misc]
        fresh = cache.scope(prefix)  # the numbering starts over: its terms go
    finally:
        postings.MAX_DOCUMENTS_PER_SCOPE = monkeypatched  # type: ignore[misc]
    assert fresh is not numbering and cache.get(term, 3) is None and cache.held == 0


def test_every_postings_write_moves_the_terms_version(db: Database) -> None:
    from brain.engine.write.plan import read_counter

    store = db._store
    th = lexical._term_hash("alpha")

    def version() -> int:
        with store.read() as txn:
            raw = txn.get(SCOPE.key(b"v:", th), db=store.table(lexical.STATS))
            return read_counter(None if raw is None else bytes(raw))

    start = version()
    made = _encode(db, "alpha first")
    assert version() == start + 1
    _encode(db, "beta only")
    assert version() == start + 1
    kept = _encode(db, "alpha kept")
    assert version() == start + 2
    db.execute(NS, Opcode.FORGET, Forget(request_id=rid(), memory=made, mode="hard"))
    assert version() == start + 3
    # The last posting gone, the row goes; indexed again, the term starts above
    # every version it had, so no cached postings of before can match.
    db.execute(NS, Opcode.FORGET, Forget(request_id=rid(), memory=kept, mode="hard"))
    assert version() == 0
    _encode(db, "alpha again")
    assert version() > start + 4


def test_a_posting_costs_twelve_bytes_and_counts_stay_exact() -> None:
    # Numbers int32 and counts uint32: half of int64 and float64's 24 bytes, and a
    # count past float32's exact range (2**24) still exact.
    numbering = PostingsCache().scope(b"s" * 32)
    rows = [(bytes([i]) * 17, (1 << 24) + 1 + i, 1_000_000 - i) for i in range(10)]
    built = postings.build(1, numbering, rows)
    held = built.documents.nbytes + built.frequencies.nbytes + built.lengths.nbytes
    assert held == 12 * len(rows)
    assert built.frequencies.tolist() == [tf for _, tf, _ in rows]
    assert built.lengths.tolist() == [length for _, _, length in rows]
