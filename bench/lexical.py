"""The lexical arm alone against bm25s on the same tokens, on Cranfield.

Our side is RECALL's lexical step, :func:`brain.engine.index.lexical.search`:
BM25 over postings in LMDB, the cue tokenized by
:func:`brain.engine.index.tokens.tokenize`, each query in its own LMDB snapshot
as every RECALL reads, with the database's cache of decoded postings
(:mod:`brain.engine.index.postings`) as RECALL uses it. The same search without
the cache, reading every posting from LMDB (what a term not yet cached, or
changed since, costs), is timed in the same turns and reported beside it; the
two must give the same answer for every query. The documents get there the ordinary way: an embedded
database stores every non-empty Cranfield document (title and abstract) as a
memory with ENCODE, which writes its postings in the same transaction.

The peer is bm25s, indexing the very tokens our index holds (our tokenizer's
output for each stored text) and asked with the tokens our search looks up
(the cue's distinct tokens, in order, at most
:data:`~brain.engine.index.lexical.MAX_QUERY_TERMS`); its own timing includes
the same tokenization, since a user of either system starts from text.

The formula: ours is Okapi BM25 with Lucene's idf,
``ln(1 + (N - df + 0.5) / (df + 0.5))``, and the classic saturation
``tf·(k1 + 1) / (tf + k1·(1 - b + b·dl/avgdl))``, with ``k1`` =
:data:`~brain.engine.index.lexical.K1` and ``b`` = :data:`~brain.engine.index.lexical.B`.
bm25s's ``method="lucene"`` (its default) has the same idf and the same
saturation without the constant factor ``k1 + 1`` (Lucene dropped it in 8.0):
every score is ours divided by ``k1 + 1``, so rankings are the same and the
scores are compared after multiplying bm25s's by ``k1 + 1``. bm25s is given our
``k1`` and ``b``, its default float32 scores, and its default retrieval path
(``retrieve``, one query at a time, no worker threads; the numba backend is
used when it is installed).

Two results:

- **Identical top-10 up to ties.** Every query's full ranking is taken from
  both sides. At each of the first ten ranks the two documents must be the
  same, or score the same (within :data:`TIE_TOLERANCE`, bm25s's float32
  precision): score-equal documents may swap, at the cut-off too. Any other
  difference fails the run (exit status 1) after the JSON is written.
- **Latency**: the two sides take turns over every query
  (:data:`PASSES_PER_TURN` passes a turn), A B A B, each query asking the
  :data:`DEPTH` candidates RECALL asks of an arm; the goal (spec/08-benchmarks.md:
  latency ≤ 2 times bm25s) is held to the median of per-pair ratios of the
  median latency. Each turn also records the CPU time its thread used per
  query: on a busy machine that shows each side's own work apart from its
  waits for a core.

``--quick`` loads the first :data:`QUICK_DOCUMENTS` documents and asks the
queries with a relevant document among them.

    python -m bench lexical [--quick] [--out PATH] [--no-save] [--data DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import importlib.metadata
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Final, TypedDict

import brain
from bench import cranfield, harness
from bench.histogram import Histogram
from brain import cbor
from brain.engine.database import Database, DatabaseOptions
from brain.engine.index import lexical
from brain.engine.index.documents import MEMORY_DOC
from brain.engine.index.postings import PostingsCache
from brain.engine.index.tokens import tokenize
from brain.engine.recall.arms import MIN_ARM_CANDIDATES
from brain.engine.store.env import Store
from brain.engine.store.scope import Scope
from brain.engine.write.plan import read_counter
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.opcodes import Opcode

# Untyped third-party modules, loaded by name so that mypy --strict needs no ignore.
bm25s: Any = importlib.import_module("bm25s")

__all__ = ["TIE_TOLERANCE", "TopComparison", "compare_top", "main", "query_terms", "run"]

SUITE: Final = "lexical"

NAMESPACE: Final = "default"
"""The namespace every memory goes to: one corpus, one scope."""
SCOPE: Final = Scope(NAMESPACE, "default")
"""The scope ENCODE writes to when the request names no space."""

EMBEDDER: Final = "hashing"
"""The lexical arm reads no vector; MiniLM would only make the load slower."""

TOP: Final = 10
"""The top-k compared between the two sides (spec/08-benchmarks.md: identical top-10)."""

DEPTH: Final = MIN_ARM_CANDIDATES
"""Candidates asked per timed query: what RECALL asks of an arm for a top-10 answer."""

TIE_TOLERANCE: Final = 1e-5
"""Relative score difference under which two documents count as tied: bm25s keeps
float32 scores (about seven significant digits) summed over a few dozen terms."""

SCORE_TOLERANCE: Final = 1e-4
"""Largest relative difference allowed between our score and bm25s's (scaled by k1 + 1)
for the same document: float32 rounding, with room; more means another formula."""

QUICK_DOCUMENTS: Final = 200
"""Documents a quick run loads: ENCODE and bm25s indexing take a second or two."""

PAIRS_FULL: Final = 8
"""A B pairs in a full run: eight per-pair ratios show whether the median holds."""
PAIRS_QUICK: Final = 2
"""A B pairs in a quick run: the same code path, fewer turns."""

PASSES_PER_TURN: Final = 3
"""Passes over the queries per turn: a full turn is ~700 queries, about a second each side."""

LATENCY_BOUND: Final = 2.0
"""spec/08-benchmarks.md: the arm may take at most twice bm25s's latency."""

INDEX_TIMEOUT_S: Final = 600.0
"""Longest wait for the indexer to embed the corpus (hashing vectors, seconds in practice)
before timing starts, so it does not compete with the measured queries."""

REQUEST_ID_PREFIX: Final = b"lexical"
"""Request ids are this prefix and the document id, so a replayed load is idempotent."""
_REQUEST_ID_BYTES: Final = 16
_US: Final = 1e6


@dataclasses.dataclass(frozen=True, slots=True)
class Corpus:
    """The stored memories, in load order, with the texts and tokens bm25s is given."""

    keys: tuple[bytes, ...]
    """Document keys (``m`` ‖ memory id), one per stored memory."""
    doc_ids: tuple[tuple[int, ...], ...]
    """The Cranfield documents each memory holds (more than one when texts repeat)."""
    tokens: tuple[tuple[str, ...], ...]
    skipped: tuple[int, ...]
    load_s: float


def query_terms(text: str) -> list[str]:
    """The terms our search looks up for ``text``: distinct tokens, in order, capped."""
    return list(dict.fromkeys(tokenize(text)))[: lexical.MAX_QUERY_TERMS]


def _request_id(doc_id: int) -> bytes:
    tail = _REQUEST_ID_BYTES - len(REQUEST_ID_PREFIX)
    return REQUEST_ID_PREFIX + doc_id.to_bytes(tail, "big")


def load(db: Database, documents: Sequence[cranfield.Document]) -> Corpus:
    """ENCODE every non-empty document (all queued, then awaited); one entry per memory."""
    skipped = tuple(doc.doc_id for doc in documents if not doc.text.strip())
    started = time.perf_counter()
    pending: list[tuple[cranfield.Document, Future[bytes]]] = [
        (
            doc,
            db.submit(
                NAMESPACE, Opcode.ENCODE, Encode(request_id=_request_id(doc.doc_id), text=doc.text)
            ),
        )
        for doc in documents
        if doc.text.strip()
    ]
    order: list[bytes] = []
    owners: dict[bytes, list[int]] = {}
    texts: dict[bytes, str] = {}
    for doc, future in pending:
        answer = EncodeOk.from_wire(cbor.decode(future.result()))
        key = MEMORY_DOC + answer.memory_id
        if key not in owners:
            order.append(key)
            owners[key] = []
            texts[key] = doc.text
        owners[key].append(doc.doc_id)
    load_s = time.perf_counter() - started
    return Corpus(
        keys=tuple(order),
        doc_ids=tuple(tuple(owners[key]) for key in order),
        tokens=tuple(tuple(tokenize(texts[key])) for key in order),
        skipped=skipped,
        load_s=load_s,
    )


def _store_of(db: Database) -> Store:
    # The arm reads through the database's own LMDB environment (one per process), as
    # the unit tests of recall do; the embedded API exposes no snapshot of its own.
    return db._store


def _check_same_tokens(store: Store, corpus: Corpus) -> dict[str, int]:
    """Our index's document and token counts must be what bm25s is given."""
    with store.read() as txn:
        documents = lexical.corpus_size(store, txn, SCOPE)
        raw = txn.get(SCOPE.key(b"tokens"), db=store.table(lexical.STATS))
    tokens = read_counter(None if raw is None else bytes(raw))
    given = sum(len(t) for t in corpus.tokens)
    if documents != len(corpus.keys) or tokens != given:
        raise RuntimeError(
            f"our index holds {documents} documents and {tokens} tokens; bm25s is given "
            f"{len(corpus.keys)} and {given}"
        )
    return {"documents": documents, "tokens": tokens}


Ranked = list[tuple[bytes, float]]
"""A ranking: (document key, score), best first."""


def _ours(store: Store, cache: PostingsCache | None) -> Callable[[str, int], Ranked]:
    def ask(text: str, k: int) -> Ranked:
        with store.read() as txn:
            return lexical.search(store, txn, SCOPE, text, k, cache=cache)

    return ask


def _peer(retriever: Any, keys: Sequence[bytes]) -> Callable[[str, int], Ranked]:
    scale = lexical.K1 + 1.0

    def ask(text: str, k: int) -> Ranked:
        terms = query_terms(text)
        found, scores = retriever.retrieve(
            [terms], k=min(k, len(keys)), show_progress=False, n_threads=0
        )
        return [
            (keys[int(index)], float(score) * scale)
            for index, score in zip(found[0], scores[0], strict=True)
            if score > 0.0
        ]

    return ask


def _close(a: float, b: float, tolerance: float) -> bool:
    return abs(a - b) <= tolerance * max(abs(a), abs(b))


class TopComparison(TypedDict):
    """How two rankings compare on their top: see :func:`compare_top`."""

    exact: bool
    up_to_ties: bool
    matched_ours: int
    matched_bm25s: int
    unmatched: int
    max_relative_score_difference: float


def compare_top(ours: Ranked, theirs: Ranked, top: int = TOP) -> TopComparison:
    """Whether two full rankings agree on their first ``top`` up to ties.

    At each rank the two documents must be the same, or have equal scores by our
    own scoring (relative :data:`TIE_TOLERANCE`); a document bm25s ranks that we
    did not score at all is a difference. Also reports the largest relative
    difference between the two sides' scores of any document both scored."""
    mine = dict(ours)
    worst_score = 0.0
    unmatched = 0
    for key, score in theirs:
        if key not in mine:
            unmatched += 1
            continue
        worst_score = max(worst_score, abs(mine[key] - score) / max(abs(mine[key]), 1e-12))
    head_ours = [key for key, _ in ours[:top]]
    head_theirs = [key for key, _ in theirs[:top]]
    exact = head_ours == head_theirs
    tied = len(head_ours) == len(head_theirs) and all(
        a == b or (b in mine and _close(mine[a], mine[b], TIE_TOLERANCE))
        for a, b in zip(head_ours, head_theirs, strict=True)
    )
    return TopComparison(
        exact=exact,
        up_to_ties=tied,
        matched_ours=len(ours),
        matched_bm25s=len(theirs),
        unmatched=unmatched,
        max_relative_score_difference=worst_score,
    )


def _turn(ask: Callable[[str, int], Ranked], queries: Sequence[str], passes: int) -> dict[str, Any]:
    hist = Histogram()
    cpu = time.thread_time()
    started = time.perf_counter()
    for _ in range(passes):
        for text in queries:
            clock = time.perf_counter()
            ask(text, DEPTH)
            hist.record(time.perf_counter() - clock)
    return {
        "queries": hist.total,
        "seconds": round(time.perf_counter() - started, 4),
        "mean_us": round(hist.sum_us / hist.total, 2),
        "cpu_us": round((time.thread_time() - cpu) * _US / hist.total, 2),
        "p50_us": round(hist.percentile(50.0) * 1e3, 1),
        "p99_us": round(hist.percentile(99.0) * 1e3, 1),
        "histogram_ms": hist.summary(),
    }


def select(
    documents: Sequence[cranfield.Document],
    queries: Sequence[cranfield.Query],
    judgements: Mapping[int, Mapping[int, int]],
    *,
    quick: bool,
) -> tuple[list[cranfield.Document], list[cranfield.Query]]:
    """Everything, or (quick) the first documents and the queries judged relevant to one."""
    if not quick:
        return list(documents), list(queries)
    kept = list(documents[:QUICK_DOCUMENTS])
    loaded = {doc.doc_id for doc in kept}
    asked = [
        query
        for query in queries
        if any(
            gain > 0 and doc in loaded for doc, gain in judgements.get(query.query_id, {}).items()
        )
    ]
    return kept, asked


def _build_peer(corpus: Corpus) -> tuple[Any, float]:
    started = time.perf_counter()
    retriever = bm25s.BM25(method="lucene", k1=lexical.K1, b=lexical.B, backend="auto")
    retriever.index([list(tokens) for tokens in corpus.tokens], show_progress=False)
    return retriever, time.perf_counter() - started


def run(*, quick: bool, data: Path | None) -> dict[str, Any]:
    """Load, compare every query's top-10, time both sides in turns; the result document."""
    documents, queries = select(
        cranfield.load_documents(data),
        cranfield.load_queries(data),
        cranfield.load_judgements(data),
        quick=quick,
    )
    pairs = PAIRS_QUICK if quick else PAIRS_FULL
    with (
        tempfile.TemporaryDirectory(prefix="brain-bench-lexical-") as tmp,
        brain.open(Path(tmp) / "data", DatabaseOptions(embedder=EMBEDDER)) as db,
    ):
        corpus = load(db, documents)
        if not db.wait_indexed(timeout=INDEX_TIMEOUT_S):
            raise RuntimeError(f"the indexer did not catch up within {INDEX_TIMEOUT_S} s")
        store = _store_of(db)
        counts = _check_same_tokens(store, corpus)
        retriever, peer_index_s = _build_peer(corpus)
        # RECALL's path: postings decoded once and kept while unchanged; and the
        # same search reading every posting from LMDB each time (a cold term).
        ours = _ours(store, db.retrieval.postings)
        ours_lmdb = _ours(store, None)
        peer = _peer(retriever, corpus.keys)
        everything = len(corpus.keys)
        comparisons: list[dict[str, object]] = []
        for query in queries:
            verdict = compare_top(ours(query.text, everything), peer(query.text, everything))
            if ours_lmdb(query.text, everything) != ours(query.text, everything):
                raise RuntimeError(f"query {query.query_id}: the cache changed the answer")
            comparisons.append({"query": query.query_id, **verdict})
        texts = [query.text for query in queries]
        _turn(ours, texts, 1)
        _turn(peer, texts, 1)
        runs = harness.alternate(
            {
                "ours": functools.partial(_turn, ours, texts, PASSES_PER_TURN),
                "bm25s": functools.partial(_turn, peer, texts, PASSES_PER_TURN),
                "ours_lmdb": functools.partial(_turn, ours_lmdb, texts, PASSES_PER_TURN),
            },
            pairs,
        )
    measured = _Measured(
        documents=documents,
        queries=queries,
        corpus=corpus,
        counts=counts,
        retriever=retriever,
        peer_index_s=peer_index_s,
        comparisons=comparisons,
        runs=runs,
        pairs=pairs,
    )
    return _result(quick, measured)


@dataclasses.dataclass(frozen=True, slots=True)
class _Measured:
    """What a run measured, for :func:`_result` to write down."""

    documents: Sequence[cranfield.Document]
    queries: Sequence[cranfield.Query]
    corpus: Corpus
    counts: Mapping[str, int]
    retriever: Any
    peer_index_s: float
    comparisons: Sequence[Mapping[str, object]]
    runs: Mapping[str, Sequence[Mapping[str, Any]]]
    pairs: int


def _result(quick: bool, measured: _Measured) -> dict[str, Any]:
    documents, queries, corpus = measured.documents, measured.queries, measured.corpus
    retriever, comparisons, runs = measured.retriever, measured.comparisons, measured.runs
    exact = sum(1 for c in comparisons if c["exact"])
    tied = sum(1 for c in comparisons if c["up_to_ties"])
    differing = [c for c in comparisons if not c["up_to_ties"]]
    worst = max((float(str(c["max_relative_score_difference"])) for c in comparisons), default=0.0)
    ratio = harness.ratios(runs["ours"], runs["bm25s"], "p50_us")
    mean_ratio = harness.ratios(runs["ours"], runs["bm25s"], "mean_us")
    cpu_ratio = harness.ratios(runs["ours"], runs["bm25s"], "cpu_us")
    ours_p50 = statistics.median(float(r["p50_us"]) for r in runs["ours"])
    peer_p50 = statistics.median(float(r["p50_us"]) for r in runs["bm25s"])
    goal = harness.Goal(f"latency <= {LATENCY_BOUND}x bm25s", LATENCY_BOUND, at_least=False)
    top_row = harness.row(
        f"lexical arm top-{TOP} identical to bm25s up to ties (Cranfield)",
        f"of {len(queries)} queries",
        float(tied),
    )
    top_row["goal"] = "identical top-10 up to ties on every query"
    top_row["met"] = tied == len(queries) and worst <= SCORE_TOLERANCE
    summary = [
        harness.row(
            f"lexical arm query, top-{DEPTH}, Cranfield {len(corpus.keys):,} documents (p50)",
            "µs",
            ours_p50,
            peer=peer_p50,
            peer_name="bm25s",
            ratio=ratio["median"],
            goal=goal,
        ),
        harness.row(
            f"lexical arm query, top-{DEPTH}, Cranfield (CPU time per query)",
            "µs",
            statistics.median(float(r["cpu_us"]) for r in runs["ours"]),
            peer=statistics.median(float(r["cpu_us"]) for r in runs["bm25s"]),
            peer_name="bm25s",
            ratio=cpu_ratio["median"],
        ),
        harness.row(
            "lexical arm query read from LMDB, no cached postings (CPU time per query)",
            "µs",
            statistics.median(float(r["cpu_us"]) for r in runs["ours_lmdb"]),
            peer=statistics.median(float(r["cpu_us"]) for r in runs["bm25s"]),
            peer_name="bm25s",
            ratio=harness.ratios(runs["ours_lmdb"], runs["bm25s"], "cpu_us")["median"],
        ),
        top_row,
    ]
    return {
        "summary": summary,
        "collection": {
            "documents": len(documents),
            "memories": len(corpus.keys),
            "skipped_empty": list(corpus.skipped),
            "deduplicated": [list(ids) for ids in corpus.doc_ids if len(ids) > 1],
            "queries": len(queries),
            "indexed": dict(measured.counts),
            "quick_rule": (
                f"first {QUICK_DOCUMENTS} documents; the queries with a relevant document "
                "among them"
                if quick
                else None
            ),
        },
        "parameters": {
            "k1": lexical.K1,
            "b": lexical.B,
            "formula_ours": "Okapi BM25, Lucene idf ln(1+(N-df+0.5)/(df+0.5)), "
            "tf*(k1+1)/(tf+k1*(1-b+b*dl/avgdl))",
            "formula_bm25s": "method='lucene': the same idf, tf/(tf+k1*(1-b+b*dl/avgdl)); "
            "scores multiplied by k1+1 before comparing",
            "tokens": "brain.engine.index.tokens.tokenize for documents; the cue's distinct "
            "tokens (what our search looks up) for queries, tokenized inside each timed call",
            "depth_timed": DEPTH,
            "top_compared": TOP,
            "tie_tolerance": TIE_TOLERANCE,
            "score_tolerance": SCORE_TOLERANCE,
            "pairs": measured.pairs,
            "passes_per_turn": PASSES_PER_TURN,
            "embedder": EMBEDDER,
            "ours": "brain.engine.index.lexical.search with the database's postings cache, as "
            "RECALL calls it, one LMDB snapshot per query",
            "ours_lmdb": "the same search without the cache: every posting read from LMDB",
        },
        "peer": {
            "name": "bm25s",
            "version": importlib.metadata.version("bm25s"),
            "method": retriever.method,
            "idf_method": retriever.idf_method,
            "k1": retriever.k1,
            "b": retriever.b,
            "dtype": retriever.dtype,
            "backend": retriever.backend,
            "numba_installed": importlib.util.find_spec("numba") is not None,
            "retrieve": "retrieve([terms], k, n_threads=0), one query per call",
            "index_seconds": round(measured.peer_index_s, 3),
        },
        "seconds": {"load": round(corpus.load_s, 3)},
        "top10": {
            "queries": len(queries),
            "identical_exact": exact,
            "identical_up_to_ties": tied,
            "differing": differing,
            "max_relative_score_difference": worst,
        },
        "latency": {
            "ours": list(runs["ours"]),
            "bm25s": list(runs["bm25s"]),
            "ours_lmdb": list(runs["ours_lmdb"]),
            "ratio_p50": ratio,
            "ratio_mean": mean_ratio,
            "ratio_cpu": cpu_ratio,
        },
    }


def _line(row: Mapping[str, object]) -> str:
    """One summary row as a line of text."""
    text = f"{row['what']}: ours {row['ours']} {row['unit']}"
    if "peer" in row:
        text += f", {row['peer_name']} {row['peer']} {row['unit']}, ratio {row['ratio']}"
    if "met" in row:
        text += f"; goal {row['goal']}: {'met' if row['met'] else 'NOT MET'}"
    return text


def main(argv: list[str]) -> int:
    """Entry point of the suite."""
    parser = harness.parser(SUITE, __doc__)
    parser.add_argument(
        "--data", type=Path, help="the Cranfield directory (default: bench/data/cranfield)"
    )
    args: argparse.Namespace = parser.parse_args(argv)
    result = harness.save(SUITE, args, run(quick=args.quick, data=args.data))
    for line in result["summary"]:
        print(_line(line))
    top = result["top10"]
    if top["differing"] or top["max_relative_score_difference"] > SCORE_TOLERANCE:
        print(
            f"{len(top['differing'])} queries differ from bm25s beyond ties "
            f"(largest relative score difference {top['max_relative_score_difference']:.2e})",
            file=sys.stderr,
        )
        return 1
    return 0
