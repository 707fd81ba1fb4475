"""The semantic arm alone against raw hnswlib: the same graph, the same queries, taking turns.

What is measured is the arm's own cost on top of hnswlib: RECALL's semantic
step (:func:`brain.engine.recall.arms.semantic_arm`) takes the scope's index lock,
sets ``ef``, asks hnswlib, and maps every label to its record through the
read's LMDB snapshot (a label the snapshot does not hold is a vector it cannot
see: that is how deletions and later writes stay out of a read). The peer is
``hnswlib.Index.knn_query`` on the very same graph, with the same ``ef``.

Setup, all in process:

1. ``N`` vectors are written into a fresh store's vector tables exactly as
   the indexer stores them (``vectors``, ``vector_labels``, ``vector_scopes``),
   each under a memory document key. They are the project's hashing
   embedder's vectors (:mod:`brain.embed.hashing`: unit-length bags of words)
   of the seeded generator's memory texts (:func:`bench.datagen.memory_texts`),
   so texts sharing words are neighbours, as with a real model, and HNSW finds
   the true neighbours (the exact-scan check below says how often). MiniLM
   would take longer than the whole suite may to embed 100K texts on two
   cores; random unit vectors have no neighbourhoods at all (HNSW's recall on
   them is poor, so they time a search nobody runs).
2. The database is opened on that store: its own open-time path finds no index
   file and builds the scope's HNSW index from the stored vectors (cosine,
   ``M`` = :data:`~brain.engine.index.vectors.HNSW_M`, ``ef_construction`` =
   :data:`~brain.engine.index.vectors.HNSW_EF_CONSTRUCTION`); that build is timed.
3. The index is saved, and raw hnswlib loads the saved file: both sides search
   one graph, so a difference in time is the arm's cost alone, and their
   answers must agree label for label (a second, independent build would only
   add hnswlib's insertion randomness, and double the setup time).

Each query vector (the same embedder's vector of a recall cue from
:func:`bench.datagen.cues`, about the same world) is asked
top-``k`` for ``k`` in :data:`DEPTHS`: 10, the top-10 of the goal, and 100, the
depth RECALL asks of an arm for a top-10 answer. Each of our queries opens its
own LMDB snapshot, as every RECALL does. The two sides take turns of
:data:`QUERIES_FULL` queries, A B A B, and the goal (spec/08-benchmarks.md: overhead ≤ 1.5 times
raw) is held to the median of the per-pair ratios of median latency; each
turn also records its thread's CPU time per query, which on a busy machine
shows each side's own work apart from its waits for a core.
Before timing, every query's top-10 is compared between the two (same records
in the same order), and a sample is checked against an exact scan.

    python -m bench semantic [--quick] [--out PATH] [--no-save]
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.metadata
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

import brain
from bench import datagen, harness
from bench.histogram import Histogram
from brain import cbor
from brain.embed.hashing import DIMENSIONS, HashingEmbedder
from brain.engine.database import Database, DatabaseOptions
from brain.engine.index.documents import MEMORY_DOC
from brain.engine.index.vectors import (
    HNSW_EF_CONSTRUCTION,
    HNSW_EF_SEARCH,
    HNSW_M,
    LABEL_BYTES,
    VECTOR_LABELS,
    VECTOR_SCOPES,
    VECTORS,
)
from brain.engine.recall.arms import semantic_arm
from brain.engine.store.env import Store
from brain.engine.store.scope import Scope
from brain.engine.write.reads import ReadContext

# Untyped third-party modules, loaded by name so that mypy --strict needs no ignore.
hnswlib: Any = importlib.import_module("hnswlib")

__all__ = ["DEPTHS", "main", "run"]

SUITE: Final = "semantic"

VECTORS_FULL: Final = 100_000
"""Stored vectors in a full run: the spec/08-benchmarks.md size of a RECALL corpus."""
VECTORS_QUICK: Final = 5_000
"""Stored vectors in a quick run: the index builds in a few seconds on two busy cores."""

QUERIES_FULL: Final = 2_000
"""Queries per turn in a full run: a turn lasts seconds, long enough to even out noise."""
QUERIES_QUICK: Final = 300
"""Queries per turn in a quick run."""

PAIRS_FULL: Final = 4
"""A B pairs per depth in a full run: four per-pair ratios show whether the median holds."""
PAIRS_QUICK: Final = 2
"""A B pairs per depth in a quick run: the same code path, fewer turns."""

WARMUP_QUERIES: Final = 50
"""Untimed queries each side asks before its first turn, so caches and code paths are warm."""

DEPTHS: Final = (10, 100)
"""``k`` asked: the top-10 of the goal, and the 100 candidates RECALL asks of an arm
(``max(3·top_k, 100)`` for a top-10 answer)."""

GOAL_DEPTH: Final = 10
"""The depth whose ratio spec/08-benchmarks.md's goal is held to (both depths are reported)."""

AGREEMENT_DEPTH: Final = 10
"""The top-k the two sides' answers are compared on."""

EXACT_SAMPLE: Final = 200
"""Queries also checked against an exact scan: enough to estimate recall@10 within a few
hundredths, cheap next to the timed turns."""

OVERHEAD_BOUND: Final = 1.5
"""spec/08-benchmarks.md: the arm may cost at most 1.5 times raw hnswlib."""

WRITE_CHUNK: Final = 10_000
"""Vectors written per LMDB transaction while filling the store: bounded dirty pages."""

BUILD_TIMEOUT_S: Final = 1_800.0
"""Longest wait for the open-time index build: 100K vectors take a few minutes on two
busy cores; half an hour means something is stuck."""

POLL_S: Final = 0.2
"""How often the index size is read while the build runs."""

WORLD_SEED: Final = 20_251_130
"""Seed of the generated world and its memory texts: every run indexes the same vectors."""
CUE_SEED: Final = 20_251_131
"""Seed of the recall cues asked."""
ID_SEED: Final = 20_251_132
"""Seed of the memory ids the vectors are stored under."""

MIN_WORLD: Final = 100
"""The least world :func:`bench.datagen.memory_texts` generates its texts from."""

NAMESPACE: Final = "bench"
"""The namespace of the benchmark's scope."""
SPACE: Final = "semantic"
"""The space of the benchmark's scope."""

_US: Final = 1e6


def embed_world(count: int, queries: int) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """The stored vectors (``count`` memory texts) and the query vectors (``queries``
    cues about the same world), from the hashing embedder."""
    embedder = HashingEmbedder()
    texts = datagen.memory_texts(count, WORLD_SEED)
    # memory_texts draws from generate(max(count, 100), seed): the cues ask about that world.
    world = datagen.generate(max(count, MIN_WORLD), WORLD_SEED)
    cues = datagen.cues(world, queries, CUE_SEED)
    return embedder.embed(texts), embedder.embed(cues)


def _doc_keys(count: int, seed: int) -> list[bytes]:
    """Memory document keys with random 16-byte ids, so LMDB key order is not label order."""
    rng = np.random.default_rng(seed)
    ids = rng.bytes(16 * count)
    keys = [MEMORY_DOC + ids[16 * i : 16 * (i + 1)] for i in range(count)]
    if len(set(keys)) != count:
        raise RuntimeError("two random document ids collided; change the seed")
    return keys


def fill_store(
    path: Path, scope: Scope, keys: Sequence[bytes], vectors: NDArray[np.float32]
) -> None:
    """Write ``vectors`` (label = position) into a fresh store, as the indexer stores them."""
    store = Store(path)
    try:
        vectors_db = store.table(VECTORS)
        labels_db = store.table(VECTOR_LABELS)
        for start in range(0, len(keys), WRITE_CHUNK):
            with store.write() as txn:
                for label in range(start, min(start + WRITE_CHUNK, len(keys))):
                    raw_label = label.to_bytes(LABEL_BYTES, "big")
                    row = raw_label + vectors[label].astype("<f4").tobytes()
                    txn.put(scope.key(keys[label]), row, db=vectors_db)
                    txn.put(scope.key(raw_label), keys[label], db=labels_db)
        state = {
            "namespace": scope.namespace,
            "space": scope.space,
            "next_label": len(keys),
            "lsn": 0,
        }
        with store.write() as txn:
            txn.put(scope.prefix, cbor.encode(state), db=store.table(VECTOR_SCOPES))
        # Written past the WAL: a checkpoint makes it the state the database opens at.
        store.checkpoint()
    finally:
        store.close()


def _wait_built(db: Database, scope: Scope, count: int, started: float) -> float:
    """Seconds from ``started`` until the index of ``scope`` holds ``count`` vectors."""
    while db.retrieval.indexes.size(scope.prefix) < count:
        if time.perf_counter() - started > BUILD_TIMEOUT_S:
            raise RuntimeError(f"the index did not reach {count} vectors in {BUILD_TIMEOUT_S} s")
        time.sleep(POLL_S)
    return time.perf_counter() - started


def _store_of(db: Database) -> Store:
    # The arm reads through the database's own LMDB environment (one per process), as
    # the unit tests of recall do; the embedded API exposes no snapshot of its own.
    return db._store


def _ours(db: Database, scope: Scope) -> Callable[[NDArray[np.float32], int], list[bytes]]:
    store = _store_of(db)
    retrieval = db.retrieval

    def ask(vector: NDArray[np.float32], k: int) -> list[bytes]:
        with store.read() as txn:
            ctx = ReadContext(store, txn, 0, retrieval=retrieval)
            return [key for key, _ in semantic_arm(ctx, scope, retrieval, vector, k)]

    return ask


def _raw(index: Any) -> Callable[[NDArray[np.float32], int], NDArray[np.uint64]]:
    # The labels as hnswlib gives them: turning them into anything else is the arm's work.
    def ask(vector: NDArray[np.float32], k: int) -> NDArray[np.uint64]:
        labels, _ = index.knn_query(vector.reshape(1, -1), k=k)
        found: NDArray[np.uint64] = labels[0]
        return found

    return ask


def _turn(
    ask: Callable[[NDArray[np.float32], int], object], queries: NDArray[np.float32], k: int
) -> dict[str, Any]:
    hist = Histogram()
    cpu = time.thread_time()
    started = time.perf_counter()
    for vector in queries:
        clock = time.perf_counter()
        ask(vector, k)
        hist.record(time.perf_counter() - clock)
    elapsed = time.perf_counter() - started
    return {
        "queries": len(queries),
        "seconds": round(elapsed, 4),
        "mean_us": round(hist.sum_us / hist.total, 2),
        "cpu_us": round((time.thread_time() - cpu) * _US / hist.total, 2),
        "p50_us": round(hist.percentile(50.0) * 1e3, 1),
        "p99_us": round(hist.percentile(99.0) * 1e3, 1),
        "histogram_ms": hist.summary(),
    }


def _agreement(
    ours: Callable[[NDArray[np.float32], int], list[bytes]],
    raw: Callable[[NDArray[np.float32], int], NDArray[np.uint64]],
    keys: Sequence[bytes],
    stored: NDArray[np.float32],
    queries: NDArray[np.float32],
) -> dict[str, object]:
    """Top-10 of both sides per query, compared; and recall@10 of both against an exact scan."""
    identical = 0
    overlap = 0
    differing: list[int] = []
    answers_ours: list[list[bytes]] = []
    answers_raw: list[list[bytes]] = []
    for number, vector in enumerate(queries):
        mine = ours(vector, AGREEMENT_DEPTH)
        theirs = [keys[int(label)] for label in raw(vector, AGREEMENT_DEPTH)]
        answers_ours.append(mine)
        answers_raw.append(theirs)
        if mine == theirs:
            identical += 1
        else:
            differing.append(number)
        overlap += len(set(mine) & set(theirs))
    sample = min(EXACT_SAMPLE, len(queries))
    similarity = queries[:sample] @ stored.T
    exact = np.argsort(-similarity, axis=1)[:, :AGREEMENT_DEPTH]
    found_ours = found_raw = 0
    for number in range(sample):
        truth = {keys[int(label)] for label in exact[number]}
        found_ours += len(truth & set(answers_ours[number]))
        found_raw += len(truth & set(answers_raw[number]))
    wanted = sample * AGREEMENT_DEPTH
    return {
        "queries": len(queries),
        "identical_top10": identical,
        "identical_share": round(identical / len(queries), 4),
        "mean_overlap_top10": round(overlap / len(queries), 3),
        "differing_queries": differing[:20],
        "exact_sample": sample,
        "recall_at_10_vs_exact": {
            "ours": round(found_ours / wanted, 4),
            "hnswlib": round(found_raw / wanted, 4),
        },
    }


def _depth_result(runs: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, object]:
    ours, raw = runs["ours"], runs["hnswlib"]
    p50 = harness.ratios(ours, raw, "p50_us")
    mean = harness.ratios(ours, raw, "mean_us")
    cpu = harness.ratios(ours, raw, "cpu_us")
    overhead = [float(a["mean_us"]) - float(b["mean_us"]) for a, b in zip(ours, raw, strict=True)]
    return {
        "ours": list(ours),
        "hnswlib": list(raw),
        "ratio_p50": p50,
        "ratio_mean": mean,
        "ratio_cpu": cpu,
        "overhead_us_mean_per_pair": [round(x, 2) for x in overhead],
        "overhead_us_median": round(statistics.median(overhead), 2),
        "ours_p50_us_median": statistics.median(float(r["p50_us"]) for r in ours),
        "ours_cpu_us_median": statistics.median(float(r["cpu_us"]) for r in ours),
        "hnswlib_cpu_us_median": statistics.median(float(r["cpu_us"]) for r in raw),
        "hnswlib_p50_us_median": statistics.median(float(r["p50_us"]) for r in raw),
    }


def _summary(
    depths: Mapping[str, object], agreement: Mapping[str, object], count: int
) -> list[dict[str, object]]:
    """The summary rows: latency and CPU time per depth against raw hnswlib (latency
    held to the goal), then the share of queries whose top-10 the two agree on."""
    goal = harness.Goal(
        f"overhead <= {OVERHEAD_BOUND}x raw hnswlib", OVERHEAD_BOUND, at_least=False
    )
    summary: list[dict[str, object]] = []
    for k in DEPTHS:
        found = depths[f"top_{k}"]
        assert isinstance(found, dict)
        ratio = found["ratio_p50"]
        assert isinstance(ratio, dict)
        summary.append(
            harness.row(
                f"semantic arm top-{k} over {count:,} vectors (p50 latency)",
                "µs",
                float(found["ours_p50_us_median"]),
                peer=float(found["hnswlib_p50_us_median"]),
                peer_name="raw hnswlib knn_query",
                ratio=ratio["median"],
                goal=goal,
            )
        )
        cpu = found["ratio_cpu"]
        assert isinstance(cpu, dict)
        summary.append(
            harness.row(
                f"semantic arm top-{k} over {count:,} vectors (CPU time per query)",
                "µs",
                float(found["ours_cpu_us_median"]),
                peer=float(found["hnswlib_cpu_us_median"]),
                peer_name="raw hnswlib knn_query",
                ratio=cpu["median"],
            )
        )
    agreeing = harness.row(
        "semantic arm top-10 identical to raw hnswlib",
        "% of queries",
        100.0 * float(str(agreement["identical_share"])),
    )
    agreeing["met"] = agreement["identical_top10"] == agreement["queries"]
    agreeing["goal"] = "same records in the same order"
    summary.append(agreeing)
    return summary


def run(*, quick: bool) -> dict[str, Any]:
    """Build, check agreement, time both sides in turns; return the result document."""
    count = VECTORS_QUICK if quick else VECTORS_FULL
    per_turn = QUERIES_QUICK if quick else QUERIES_FULL
    pairs = PAIRS_QUICK if quick else PAIRS_FULL
    scope = Scope(NAMESPACE, SPACE)
    with tempfile.TemporaryDirectory(prefix="brain-bench-semantic-") as tmp:
        root = Path(tmp) / "data"
        # The hashing embedder: nothing is embedded here (vectors are given), and loading
        # MiniLM would only cost start-up time.
        options = DatabaseOptions(embedder="hashing")
        dimensions = DIMENSIONS
        started = time.perf_counter()
        stored, queries = embed_world(count, per_turn)
        embed_s = time.perf_counter() - started
        keys = _doc_keys(count, ID_SEED)
        started = time.perf_counter()
        fill_store(root / "lmdb", scope, keys, stored)
        fill_s = time.perf_counter() - started
        started = time.perf_counter()
        with brain.open(root, options) as db:
            build_s = _wait_built(db, scope, count, started)
            started = time.perf_counter()
            db.retrieval.indexes.save_dirty()
            save_s = time.perf_counter() - started
            raw_index = hnswlib.Index(space="cosine", dim=dimensions)
            raw_index.load_index(str(root / "index" / f"{scope.prefix.hex()}.hnsw"))
            graph = {
                "space": raw_index.space,
                "dim": raw_index.dim,
                "M": raw_index.M,
                "ef_construction": raw_index.ef_construction,
                "elements": raw_index.get_current_count(),
            }
            if (graph["M"], graph["ef_construction"]) != (HNSW_M, HNSW_EF_CONSTRUCTION):
                raise RuntimeError(f"the saved graph has other parameters than ours: {graph}")
            ours = _ours(db, scope)
            raw = _raw(raw_index)
            raw_index.set_ef(max(AGREEMENT_DEPTH, HNSW_EF_SEARCH))
            agreement = _agreement(ours, raw, keys, stored, queries)
            depths: dict[str, object] = {}
            for k in DEPTHS:
                # The same ef our arm sets for this k (max(k, HNSW_EF_SEARCH)), set once:
                # that is how a raw hnswlib user would search.
                raw_index.set_ef(max(k, HNSW_EF_SEARCH))
                _turn(ours, queries[:WARMUP_QUERIES], k)
                _turn(raw, queries[:WARMUP_QUERIES], k)
                runs = harness.alternate(
                    {
                        "ours": functools.partial(_turn, ours, queries, k),
                        "hnswlib": functools.partial(_turn, raw, queries, k),
                    },
                    pairs,
                )
                depths[f"top_{k}"] = _depth_result(runs)
    summary = _summary(depths, agreement, count)
    return {
        "summary": summary,
        "parameters": {
            "vectors": count,
            "vector_kind": "hashing-embedder vectors (brain.embed.hashing) of "
            "bench.datagen.memory_texts; queries: vectors of bench.datagen.cues",
            "dimensions": dimensions,
            "world_seed": WORLD_SEED,
            "cue_seed": CUE_SEED,
            "queries_per_turn": per_turn,
            "pairs": pairs,
            "depths": list(DEPTHS),
            "goal_depth": GOAL_DEPTH,
            "space": "cosine",
            "M": HNSW_M,
            "ef_construction": HNSW_EF_CONSTRUCTION,
            "ef_search": f"max(k, {HNSW_EF_SEARCH})",
            "ours": "brain.engine.recall.arms.semantic_arm, one LMDB snapshot per query",
            "peer": "hnswlib.Index.knn_query on the same saved graph, ef set once per depth",
            "raw_index_source": "hnswlib load_index of the graph our open-time build saved",
        },
        "peer": {"name": "hnswlib", "version": importlib.metadata.version("hnswlib")},
        "graph": graph,
        "seconds": {
            "embed": round(embed_s, 3),
            "fill_store": round(fill_s, 3),
            "build_index": round(build_s, 3),
            "save_index": round(save_s, 3),
        },
        "agreement": agreement,
        "depths": depths,
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
    args: argparse.Namespace = harness.parser(SUITE, __doc__).parse_args(argv)
    result = harness.save(SUITE, args, run(quick=args.quick))
    for line in result["summary"]:
        print(_line(line))
    agreement = result["agreement"]
    if agreement["identical_top10"] != agreement["queries"]:
        print("the arm's top-10 differs from raw hnswlib on the same graph", file=sys.stderr)
        return 1
    return 0
