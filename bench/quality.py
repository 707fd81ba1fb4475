"""Retrieval quality on Cranfield: nDCG@10 and recall@100 for lexical, semantic and hybrid.

An embedded database in a temporary directory, with the real MiniLM embedder,
stores every Cranfield document (title and abstract) as a memory with ENCODE;
the suite then asks each of the 225 queries three ways with RECALL over
memories only, ``top_k`` 100:

- ``lexical``: the BM25 arm alone (semantic and graph weights 0);
- ``semantic``: the HNSW arm alone (lexical and graph weights 0);
- ``hybrid``: the server's defaults (no ``arms``: the default fusion and weights,
  spec/04-retrieval.md §5).

An arm's mode is its own ranking: it also turns off the steps after fusion
(``context``, ``named_time``), which the hybrid keeps.

Hits are mapped back to Cranfield document ids and scored with
:mod:`bench.metrics` (linear-gain nDCG@10, recall@100 over all relevant
documents). The goal (spec/08-benchmarks.md) is *hybrid ≥ best single arm*, on each
metric; whether it holds is written down either way.

The reference peer is bm25s, set up as its documentation shows: its own
tokenizer with English stop words and the Snowball English stemmer
(PyStemmer), and its default scorer (``method="lucene"``, ``k1`` 1.5, ``b``
0.75). It indexes the same stored texts (one per memory) and answers each
query with its top :data:`TOP_K` (documents scoring 0 left out: they share no
term with the query); its hits are mapped back to Cranfield ids and scored
exactly like a mode. It runs after the database is closed, so the two never
share the cores. Its scores sit next to the modes' in ``peers`` and in the
``summary`` rows; the goal stays *hybrid ≥ best single arm* (spec/08-benchmarks.md).
The lexical suite checks that our BM25 and bm25s's agree when both are given
the same tokens; here bm25s tokenizes the way its users would.

Documents with empty text (471 and 995) are not stored: they are listed as
skipped, and a judgement that names one stays in the query's gains, so it counts
as a relevant document that no mode can find. ENCODE stores a text once per
space; a repeated text answers with the first memory's id, and the suite then
maps that memory to every document that carried the text (all of them, in id
order, at the memory's rank) and counts it.

``--quick`` keeps the harness alive in CI: the first :data:`QUICK_DOCUMENTS`
documents, and of the queries with **at least one** relevant document among
them the first :data:`QUICK_MAX_QUERIES` by id, each judged only on the loaded
documents (a judgement on a document that was never loaded is dropped: no mode
could find it, and keeping it would only lower every score alike). Like
``ingest``, a quick run writes nothing to ``bench/results/``; ``--out`` writes
its JSON wherever asked.

    OPENBLAS_NUM_THREADS=1 python -m bench quality [--quick] [--out PATH] [--no-save]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Final

import brain
from bench import cranfield, harness, metrics
from bench.latency import latency_ms
from bench.modes import ABLATIONS, HYBRID, Mode, alone, parse_mode, request_of
from bench.peers.bm25s_english import NAME as PEER
from bench.peers.bm25s_english import EnglishBm25
from brain import cbor
from brain.engine.database import Database, DatabaseOptions
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.messages.recall_ops import Recall, RecallOk
from brain.wire.opcodes import Opcode

__all__ = [
    "EMBEDDER",
    "INDEX_TIMEOUT_S",
    "MODES",
    "QUICK_DOCUMENTS",
    "QUICK_MAX_QUERIES",
    "TOP_K",
    "Corpus",
    "ModeResult",
    "load_corpus",
    "main",
    "run_mode",
    "run_peer",
    "select_quick",
]

RESULTS: Final = Path(__file__).resolve().parent / "results"
"""Where a full run commits its JSON."""

RESULT_FILE: Final = "quality.json"
"""The file name of this suite's results inside :data:`RESULTS`."""

NAMESPACE: Final = "default"
"""The namespace every memory goes to: one corpus, one scope."""

EMBEDDER: Final = "minilm"
"""The real model: a quality figure taken with the test-only hashing embedder means nothing."""

TOP_K: Final = metrics.RECALL_DEPTH
"""Hits asked of each RECALL: as deep as recall@100 looks (nDCG@10 reads its top 10)."""

RECORDS: Final = ("memory",)
"""Cranfield documents are memories; no statement exists, but the filter says what is scored."""

INDEX_TIMEOUT_S: Final = 3600.0
"""Longest wait for the vector index to take the corpus: the numpy MiniLM embeds ~10-15
abstracts/s on two cores, so 1,400 need a few minutes; an hour means something is stuck."""

QUICK_DOCUMENTS: Final = 150
"""Documents a quick run loads: about ten seconds of embedding on two cores."""

QUICK_MAX_QUERIES: Final = 15
"""Most queries a quick run asks (each three ways): enough to see three sane scores."""

REQUEST_ID_PREFIX: Final = b"cranfield"
"""Request ids are this prefix and the document id, so a replayed load is idempotent."""

_REQUEST_ID_BYTES: Final = 16
"""Request ids are 16 bytes on the wire (spec/01-wire.md §2)."""

_ROUND: Final = 4
"""Decimal places kept for scores in the JSON: differences below 1e-4 are noise here."""

MODES: Final[Mapping[str, Mode]] = {
    "lexical": alone("lexical"),
    "semantic": alone("semantic"),
    HYBRID: {},
}
"""The modes every run asks (:mod:`bench.modes`): each arm alone, and the defaults."""

SINGLE_ARMS: Final = ("lexical", "semantic")
"""The modes the hybrid is measured against."""

METRICS: Final = (("ndcg_at_10", "nDCG@10"), ("recall_at_100", "recall@100"))
"""Each scored metric's JSON key and its name in the summary rows."""


@dataclasses.dataclass(frozen=True, slots=True)
class Corpus:
    """What loading the documents produced: memory id → Cranfield document ids, and costs."""

    docs_by_memory: dict[bytes, tuple[int, ...]]
    loaded: int
    skipped: tuple[int, ...]
    duplicates: tuple[tuple[int, int], ...]
    """(document, document whose memory it shares) for every deduplicated ENCODE."""
    load_s: float
    index_s: float
    indexed: bool


@dataclasses.dataclass(frozen=True, slots=True)
class ModeResult:
    """One mode's per-query scores and RECALL latencies (seconds)."""

    ndcg: dict[int, float]
    recall: dict[int, float]
    latencies_s: tuple[float, ...]
    empty_answers: int


def select_quick(
    documents: Sequence[cranfield.Document],
    queries: Sequence[cranfield.Query],
    judgements: Mapping[int, Mapping[int, int]],
) -> tuple[list[cranfield.Document], list[cranfield.Query], dict[int, dict[int, int]]]:
    """The quick subset: the first documents, and queries with a relevant one among them.

    A query qualifies when at least one of its relevant documents is loaded
    (requiring all of them would leave only a handful of queries); its gains
    are cut down to the loaded documents. The first :data:`QUICK_MAX_QUERIES`
    qualifying queries by id are kept."""
    kept_docs = list(documents[:QUICK_DOCUMENTS])
    loaded = {doc.doc_id for doc in kept_docs}
    kept_queries: list[cranfield.Query] = []
    kept_gains: dict[int, dict[int, int]] = {}
    for query in sorted(queries, key=lambda q: q.query_id):
        gains = {
            doc: gain for doc, gain in judgements.get(query.query_id, {}).items() if doc in loaded
        }
        if not metrics.has_relevant(gains):
            continue
        kept_queries.append(query)
        kept_gains[query.query_id] = gains
        if len(kept_queries) == QUICK_MAX_QUERIES:
            break
    return kept_docs, kept_queries, kept_gains


def _request_id(doc_id: int) -> bytes:
    tail = _REQUEST_ID_BYTES - len(REQUEST_ID_PREFIX)
    return REQUEST_ID_PREFIX + doc_id.to_bytes(tail, "big")


def load_corpus(db: Database, documents: Sequence[cranfield.Document]) -> Corpus:
    """ENCODE every non-empty document, then wait for the vector index to hold them all.

    Every write is queued before any answer is awaited, so the writer commits
    them in large groups; the load time ends with the last acknowledgement, and
    the index time is the wait for the embedder to catch up after it."""
    skipped = tuple(doc.doc_id for doc in documents if not doc.text.strip())
    to_load = [doc for doc in documents if doc.text.strip()]
    started = time.perf_counter()
    pending: list[tuple[int, Future[bytes]]] = [
        (
            doc.doc_id,
            db.submit(
                NAMESPACE, Opcode.ENCODE, Encode(request_id=_request_id(doc.doc_id), text=doc.text)
            ),
        )
        for doc in to_load
    ]
    docs_by_memory: dict[bytes, list[int]] = {}
    duplicates: list[tuple[int, int]] = []
    for doc_id, future in pending:
        answer = EncodeOk.from_wire(cbor.decode(future.result()))
        owners = docs_by_memory.setdefault(answer.memory_id, [])
        if answer.deduplicated or owners:
            duplicates.append((doc_id, owners[0] if owners else doc_id))
        owners.append(doc_id)
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    indexed = db.wait_indexed(timeout=INDEX_TIMEOUT_S)
    index_s = time.perf_counter() - started
    return Corpus(
        docs_by_memory={memory: tuple(sorted(docs)) for memory, docs in docs_by_memory.items()},
        loaded=len(to_load),
        skipped=skipped,
        duplicates=tuple(duplicates),
        load_s=load_s,
        index_s=index_s,
        indexed=indexed,
    )


def _ranked_doc_ids(answer: RecallOk, corpus: Corpus) -> list[int]:
    """The answer's hits as Cranfield document ids, best first, each document once."""
    ranked: list[int] = []
    seen: set[int] = set()
    for hit in answer.hits:
        if hit.record != "memory":
            raise RuntimeError(f"RECALL over memories answered a {hit.record} hit")
        docs = corpus.docs_by_memory.get(hit.id)
        if docs is None:
            raise RuntimeError(f"RECALL answered memory {hit.id.hex()}, which was never loaded")
        for doc in docs:
            if doc not in seen:
                seen.add(doc)
                ranked.append(doc)
    return ranked


def _recall_request(query: cranfield.Query, mode: Mode) -> Recall:
    return request_of(mode, query.text, top_k=TOP_K, records=RECORDS, space=None)


def run_mode(
    db: Database,
    mode: Mode,
    queries: Sequence[cranfield.Query],
    judgements: Mapping[int, Mapping[int, int]],
    corpus: Corpus,
) -> ModeResult:
    """Ask every query with ``mode``; score nDCG@10 and recall@100; time each RECALL.

    Queries without a relevant document are asked but not scored (see
    :func:`bench.metrics.has_relevant`). One unscored RECALL first warms the
    mode's code paths, so the first timed query does not pay for them."""
    if queries:
        db.execute(NAMESPACE, Opcode.RECALL, _recall_request(queries[0], mode))
    ndcg: dict[int, float] = {}
    recall: dict[int, float] = {}
    latencies: list[float] = []
    empty = 0
    for query in queries:
        request = _recall_request(query, mode)
        started = time.perf_counter()
        answer = db.execute(NAMESPACE, Opcode.RECALL, request)
        latencies.append(time.perf_counter() - started)
        assert isinstance(answer, RecallOk)
        empty += not answer.hits
        gains = judgements.get(query.query_id, {})
        if not metrics.has_relevant(gains):
            continue
        ranked = _ranked_doc_ids(answer, corpus)
        relevant = [doc for doc, gain in gains.items() if gain > 0]
        ndcg[query.query_id] = metrics.ndcg_at_k(ranked, gains, metrics.NDCG_DEPTH)
        recall[query.query_id] = metrics.recall_at_k(ranked, relevant, metrics.RECALL_DEPTH)
    return ModeResult(ndcg=ndcg, recall=recall, latencies_s=tuple(latencies), empty_answers=empty)


def run_peer(
    documents: Sequence[cranfield.Document],
    queries: Sequence[cranfield.Query],
    judgements: Mapping[int, Mapping[int, int]],
    corpus: Corpus,
) -> tuple[ModeResult, dict[str, object]]:
    """Index the stored texts with bm25s, ask every query, score it like a mode.

    One text per memory (the text of its first document), so the peer sees the
    corpus the database holds; a hit maps to every document of its memory, as
    :func:`_ranked_doc_ids` does. Each query's time covers tokenizing it and
    ``retrieve``. Returns the scores and how the peer was set up."""
    text_of = {doc.doc_id: doc.text for doc in documents}
    memories = list(corpus.docs_by_memory)
    texts = [text_of[corpus.docs_by_memory[memory][0]] for memory in memories]
    peer = EnglishBm25(texts)
    depth = min(TOP_K, len(memories))
    ndcg: dict[int, float] = {}
    recall: dict[int, float] = {}
    latencies: list[float] = []
    empty = 0
    for query in queries:
        started = time.perf_counter()
        found = peer.ranked(query.text, depth)
        latencies.append(time.perf_counter() - started)
        ranked: list[int] = []
        seen: set[int] = set()
        for index in found:
            fresh = [d for d in corpus.docs_by_memory[memories[index]] if d not in seen]
            seen.update(fresh)
            ranked.extend(fresh)
        empty += not ranked
        gains = judgements.get(query.query_id, {})
        if not metrics.has_relevant(gains):
            continue
        relevant = [doc for doc, gain in gains.items() if gain > 0]
        ndcg[query.query_id] = metrics.ndcg_at_k(ranked, gains, metrics.NDCG_DEPTH)
        recall[query.query_id] = metrics.recall_at_k(ranked, relevant, metrics.RECALL_DEPTH)
    config: dict[str, object] = {**peer.config(), "top_k": depth}
    result = ModeResult(ndcg=ndcg, recall=recall, latencies_s=tuple(latencies), empty_answers=empty)
    return result, config


def _mode_summary(result: ModeResult) -> dict[str, object]:
    ndcg = metrics.summarise(result.ndcg)
    recall = metrics.summarise(result.recall)
    return {
        "ndcg_at_10": round(ndcg["mean"], _ROUND),
        "recall_at_100": round(recall["mean"], _ROUND),
        "scored_queries": ndcg["count"],
        "empty_answers": result.empty_answers,
        "latency_ms": latency_ms(result.latencies_s),
    }


def _goal(results: Mapping[str, ModeResult]) -> dict[str, object]:
    """Whether hybrid ≥ the best single arm, per metric, with the margin."""
    goal: dict[str, object] = {"statement": "hybrid >= best single arm"}
    by_metric = {
        "ndcg_at_10": {mode: results[mode].ndcg for mode in MODES},
        "recall_at_100": {mode: results[mode].recall for mode in MODES},
    }
    for name, per_mode in by_metric.items():
        means = {mode: metrics.mean(scores.values()) for mode, scores in per_mode.items()}
        best_arm = max(SINGLE_ARMS, key=lambda mode: means[mode])
        margin = means["hybrid"] - means[best_arm]
        goal[name] = {
            "met": margin >= 0.0,
            "hybrid": round(means["hybrid"], _ROUND),
            "best_single_arm": best_arm,
            "best_single_arm_value": round(means[best_arm], _ROUND),
            "margin": round(margin, _ROUND),
        }
    return goal


def _machine() -> dict[str, object]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
    }


def _summary_rows(
    summaries: Mapping[str, Mapping[str, object]],
    peer: Mapping[str, object],
    goal: Mapping[str, object],
) -> list[dict[str, object]]:
    """The results-table rows: the goal per metric, then each mode next to bm25s."""
    rows: list[dict[str, object]] = []
    holds = harness.Goal("hybrid >= best single arm", 1.0, at_least=True)
    for key, label in METRICS:
        verdict = goal[key]
        assert isinstance(verdict, dict)
        best = float(verdict["best_single_arm_value"])
        hybrid = float(verdict["hybrid"])
        held = harness.row(
            f"Cranfield {label}: hybrid vs best single arm",
            label,
            hybrid,
            peer=best,
            peer_name=f"our {verdict['best_single_arm']} arm",
            ratio=hybrid / best if best > 0 else None,
            goal=holds if best > 0 else None,
        )
        # The verdict of :func:`_goal`, taken on unrounded means, is the one that counts.
        held.update(goal=holds.text, met=verdict["met"])
        rows.append(held)
        theirs = float(str(peer[key]))
        for mode in MODES:
            ours = float(str(summaries[mode][key]))
            rows.append(
                harness.row(
                    f"Cranfield {label}: {mode}",
                    label,
                    ours,
                    peer=theirs,
                    peer_name="bm25s BM25",
                    ratio=ours / theirs if theirs > 0 else None,
                )
            )
    return rows


def _table(
    summaries: Mapping[str, Mapping[str, object]],
    goal: Mapping[str, object],
    peers: Mapping[str, Mapping[str, object]] | None = None,
) -> str:
    """The results as a Markdown table (the peers' rows last), then one line per goal."""
    lines = [
        "| mode | nDCG@10 | recall@100 | p50 ms | p95 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    shown = dict(summaries)
    shown.update({f"{name} (peer)": peer for name, peer in (peers or {}).items()})
    for mode, summary in shown.items():
        latency = summary["latency_ms"]
        assert isinstance(latency, dict)
        lines.append(
            f"| {mode} | {summary['ndcg_at_10']:.4f} | {summary['recall_at_100']:.4f} "
            f"| {latency['p50']:.1f} | {latency['p95']:.1f} |"
        )
    lines.append("")
    for metric in ("ndcg_at_10", "recall_at_100"):
        verdict = goal[metric]
        assert isinstance(verdict, dict)
        status = "met" if verdict["met"] else "NOT MET"
        lines.append(
            f"goal hybrid >= best single arm on {metric}: {status} "
            f"(hybrid {verdict['hybrid']:.4f} vs {verdict['best_single_arm']} "
            f"{verdict['best_single_arm_value']:.4f}, margin {verdict['margin']:+.4f})"
        )
    return "\n".join(lines)


def run(*, quick: bool, data: Path | None, modes: Mapping[str, Mode] = MODES) -> dict[str, object]:
    """Load the corpus, ask every query three ways, and return the result document."""
    documents = cranfield.load_documents(data)
    queries = cranfield.load_queries(data)
    judgements: dict[int, dict[int, int]] = cranfield.load_judgements(data)
    if quick:
        documents, queries, judgements = select_quick(documents, queries, judgements)
    with (
        tempfile.TemporaryDirectory(prefix="brain-bench-quality-") as tmp,
        brain.open(Path(tmp) / "data", DatabaseOptions(embedder=EMBEDDER)) as db,
    ):
        embedder_name = db.retrieval.embedder.name
        corpus = load_corpus(db, documents)
        if not corpus.indexed:
            raise RuntimeError(
                f"the vector index did not take the corpus within {INDEX_TIMEOUT_S} s"
            )
        started = time.perf_counter()
        results = {
            name: run_mode(db, mode, queries, judgements, corpus) for name, mode in modes.items()
        }
        query_s = time.perf_counter() - started
    peer_result, peer_config = run_peer(documents, queries, judgements, corpus)
    summaries = {name: _mode_summary(result) for name, result in results.items()}
    for name, mode in modes.items():
        summaries[name]["request"] = dict(mode)
    peer_summary = {**_mode_summary(peer_result), "config": peer_config}
    goal = _goal(results)
    skipped_judged = sorted(
        (query, doc)
        for query, gains in judgements.items()
        for doc in gains
        if doc in corpus.skipped
    )
    return {
        "suite": "quality",
        "quick": quick,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": _machine(),
        "embedder": {"kind": EMBEDDER, "name": embedder_name},
        "collection": {
            "documents": len(documents),
            "loaded": corpus.loaded,
            "memories": len(corpus.docs_by_memory),
            "skipped_empty": list(corpus.skipped),
            "judged_relevant_but_skipped": [list(pair) for pair in skipped_judged],
            "deduplicated": len(corpus.duplicates),
            "deduplicated_pairs": [list(pair) for pair in corpus.duplicates],
            "queries": len(queries),
            "quick_rule": (
                f"first {QUICK_DOCUMENTS} documents; first {QUICK_MAX_QUERIES} queries with at "
                "least one relevant document among them, judged on loaded documents only"
                if quick
                else None
            ),
        },
        "recall": {"top_k": TOP_K, "records": list(RECORDS), "ndcg_gain": "linear"},
        "seconds": {
            "load": round(corpus.load_s, 3),
            "index": round(corpus.index_s, 3),
            "queries": round(query_s, 3),
        },
        "modes": summaries,
        "goal": goal,
        "peers": {PEER: peer_summary},
        "summary": _summary_rows(summaries, peer_summary, goal),
    }


def main(argv: list[str]) -> int:
    """Entry point of the suite."""
    parser = argparse.ArgumentParser(prog="python -m bench quality")
    parser.add_argument(
        "--quick", action="store_true", help=f"first {QUICK_DOCUMENTS} documents, a few queries"
    )
    parser.add_argument("--out", type=Path, help="write the JSON here (quick runs too)")
    parser.add_argument("--no-save", action="store_true", help="do not write bench/results/")
    parser.add_argument("--ablations", action="store_true", help="also ask bench.modes.ABLATIONS")
    parser.add_argument(
        "--mode",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="add a mode of RECALL fields",
    )
    parser.add_argument(
        "--data", type=Path, help="the Cranfield directory (default: bench/data/cranfield)"
    )
    args = parser.parse_args(argv)
    chosen = dict(MODES)
    if args.ablations:
        chosen.update(ABLATIONS)
    for text in args.mode:
        try:
            name, mode = parse_mode(text)
        except ValueError as exc:
            parser.error(str(exc))
        chosen[name] = mode
    result = run(quick=args.quick, data=args.data, modes=chosen)
    modes = result["modes"]
    goal = result["goal"]
    assert isinstance(modes, dict) and isinstance(goal, dict)
    collection = result["collection"]
    seconds = result["seconds"]
    assert isinstance(collection, dict) and isinstance(seconds, dict)
    print(
        f"Cranfield{' (quick)' if args.quick else ''}: {collection['loaded']} documents loaded "
        f"(skipped empty: {collection['skipped_empty'] or 'none'}; "
        f"deduplicated: {collection['deduplicated']}), {collection['queries']} queries; "
        f"load {seconds['load']} s, index {seconds['index']} s, queries {seconds['queries']} s"
    )
    print()
    peers = result["peers"]
    assert isinstance(peers, dict)
    print(_table(modes, goal, peers))
    targets: list[Path] = []
    if args.out is not None:
        targets.append(args.out)
    if not args.quick and not args.no_save:
        targets.append(RESULTS / RESULT_FILE)
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(result, indent=2) + "\n")
    return 0
