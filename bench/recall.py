"""RECALL top-10 hybrid over the wire against SQLite FTS5 + sqlite-vec + RRF in one query.

Our side is a real ``brain serve`` holding ``bench.datagen.generate(100_000)``
(:mod:`bench.corpus`), asked by one connection, one request at a time, with the
server's default RECALL (every arm at weight 1, RRF k=60, ``top_k`` 10,
superseded statements hidden). The peer is :mod:`bench.peers.sqlite_hybrid`
in this process, holding the same statements and the very vectors our server
indexed. Three systems take turns over the same cues (A B C A B C …):

- ``brain``: RECALL with the cue alone, as a client sends it: the server
  embeds the cue itself (a MiniLM forward pass inside every request);
- ``sqlite``: the hybrid SQL query, given the cue and its vector, embedded
  once in this process before any turn (so its figure has no embedding in it);
- ``brain_vector``: RECALL with the cue and that same precomputed vector,
  which the server then uses instead of embedding: our figure with the cue
  embedding excluded, the like-for-like comparison with ``sqlite``.

Our latency is measured in the client and includes the wire, CBOR and full
statement records in every hit; SQLite's is the query in-process returning ids.
An untimed pass first warms both sides (SQLite's page cache, our server's
caches) and records each system's answers for the quality check, and our
server's own per-stage timings (RECALL ``explain``), among them the cue's
embedding time.

Quality is judged by construction: a cue names a person (``what does Mirela
Okafor work on``) or a place (``who visited Oslo``); the relevant statements are
the current statements whose subject is that person, or the current visits to
that place. Precision@10 and recall@10 are averaged over cues with at least one
relevant statement.

Goals (spec/08-benchmarks.md): p50 latency ≤ 0.5x SQLite's; quality not lower.

    OPENBLAS_NUM_THREADS=1 python -m bench recall [--quick] [--scale N] [--cues N]
        [--pairs N] [--fresh] [--out PATH] [--no-save]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from bench import corpus as corpora
from bench import harness
from bench.datagen import World, cues
from bench.histogram import Histogram
from bench.peers.sqlite_hybrid import RRF_K, SqliteHybrid
from brain.client import AsyncClient
from brain.embed import load_embedder
from brain.engine.recall.arms import MIN_ARM_CANDIDATES
from brain.engine.recall.fusion import DEFAULT_RRF_K
from brain.wire.messages.recall_ops import Recall, RecallOk
from brain.wire.opcodes import Opcode

__all__ = [
    "CUE_SEED",
    "DEPTH",
    "FULL_CUES",
    "FULL_PAIRS",
    "FULL_STATEMENTS",
    "QUICK_CUES",
    "QUICK_PAIRS",
    "QUICK_STATEMENTS",
    "SEED",
    "TOP_K",
    "Judged",
    "RecallClient",
    "judge_cues",
    "main",
    "score",
    "turn",
]

FULL_STATEMENTS: Final = 100_000
"""Statements a full run loads (spec/08-benchmarks.md: RECALL at 100K)."""

QUICK_STATEMENTS: Final = 500
"""Statements a quick run loads: a few seconds of MiniLM embedding on two cores."""

FULL_CUES: Final = 200
"""Cues per turn in a full run: enough for a stable p99 per turn, under a minute a turn."""

QUICK_CUES: Final = 12
"""Cues per turn in a quick run."""

FULL_PAIRS: Final = 3
"""Turns each system takes in a full run (each turn is one pair of the ratios)."""

QUICK_PAIRS: Final = 2
"""Turns in a quick run: two, so per-pair ratios are exercised."""

SEED: Final = 1
"""The world's seed, shared with the scale suite so both reuse one cached corpus."""

CUE_SEED: Final = 2
"""The cues' seed (:func:`bench.datagen.cues`)."""

TOP_K: Final = 10
"""Hits per query (spec/08-benchmarks.md: RECALL top-10)."""

DEPTH: Final = max(3 * TOP_K, MIN_ARM_CANDIDATES)
"""Candidates per arm on both sides: what each of our arms contributes for top 10."""

LATENCY_GOAL: Final = harness.Goal("p50 latency ≤ 0.5x SQLite's", 0.5, at_least=False)
"""spec/08-benchmarks.md: HNSW against sqlite-vec's exact scan should halve the median."""

QUALITY_GOAL: Final = harness.Goal("quality not lower", 1.0, at_least=True)
"""spec/08-benchmarks.md: our hybrid must find relevant statements at least as well."""

_VISIT_PREFIX: Final = "who visited "

_NOTHING_FOUND_RATIO: Final = 1e6
"""The quality ratio reported when only our side found anything relevant."""

Answer = list[int]
"""A system's ranked answer to one cue: world indexes of statements, best first."""


@dataclass(frozen=True)
class Judged:
    """A cue, what it names, and the statements relevant to it."""

    cue: str
    names: str
    relevant: frozenset[int]


def judge_cues(world: World, asked: Sequence[str]) -> list[Judged]:
    """The relevant statements of each cue, known from how the world was generated."""
    superseded = {s.supersedes for s in world.statements if s.supersedes is not None}
    current = [s for s in world.statements if s.index not in superseded]
    by_subject: dict[int, set[int]] = {}
    visits: dict[str, set[int]] = {}
    for spec in current:
        by_subject.setdefault(spec.subject, set()).add(spec.index)
        if spec.predicate == "visited":
            visits.setdefault(spec.object_, set()).add(spec.index)
    people = sorted((e for e in world.entities if e.type_ == "person"), key=lambda e: -len(e.name))
    judged = []
    for cue in asked:
        if cue.startswith(_VISIT_PREFIX):
            place = cue[len(_VISIT_PREFIX) :]
            judged.append(Judged(cue, place, frozenset(visits.get(place, ()))))
            continue
        padded = f" {cue} "
        person = next((e for e in people if f" {e.name} " in padded), None)
        if person is None:
            raise ValueError(f"cue {cue!r} names nobody this world knows")
        judged.append(Judged(cue, person.name, frozenset(by_subject.get(person.index, ()))))
    return judged


def score(judged: Sequence[Judged], answers: Sequence[Answer]) -> dict[str, float]:
    """Mean precision@10 and recall@10 over cues with a relevant statement."""
    precision: list[float] = []
    recall: list[float] = []
    for judgement, answer in zip(judged, answers, strict=True):
        if not judgement.relevant:
            continue
        found = len(set(answer[:TOP_K]) & judgement.relevant)
        precision.append(found / TOP_K)
        recall.append(found / len(judgement.relevant))
    return {
        "precision_at_10": round(statistics.fmean(precision), 4) if precision else 0.0,
        "recall_at_10": round(statistics.fmean(recall), 4) if recall else 0.0,
        "scored_cues": len(precision),
    }


class RecallClient:
    """One connection to our server, asking RECALL sequentially on a private event loop
    (so that measuring code stays synchronous, and takes turns with a synchronous peer)."""

    def __init__(self, host: str, port: int, api_key: str, index_of: Mapping[bytes, int]) -> None:
        self.loop = asyncio.new_event_loop()
        self.client: AsyncClient = self.loop.run_until_complete(
            AsyncClient.connect(host, port, api_key=api_key)
        )
        self.index_of = index_of

    def ask(self, cue: str, vector: NDArray[np.float32] | None, *, explain: bool) -> RecallOk:
        """RECALL ``cue`` (top 10, server defaults), with ``vector`` when given."""
        request = Recall(
            cue=cue,
            top_k=TOP_K,
            vector=None if vector is None else np.asarray(vector, dtype="<f4").tobytes(),
            explain=True if explain else None,
        )
        answer = self.loop.run_until_complete(self.client.call(Opcode.RECALL, request))
        assert isinstance(answer, RecallOk)
        return answer

    def ranked(self, answer: RecallOk) -> Answer:
        """The world indexes of an answer's hits, best first."""
        return [self.index_of[hit.id] for hit in answer.hits]

    def close(self) -> None:
        """Close the connection and the loop."""
        self.loop.run_until_complete(self.client.close())
        self.loop.close()


def turn(ask: Callable[[int], object], count: int) -> dict[str, Any]:
    """Ask every cue once, sequentially; the latency summary (ms) and the rate."""
    histogram = Histogram()
    started = time.perf_counter()
    for i in range(count):
        clock = time.perf_counter()
        ask(i)
        histogram.record(time.perf_counter() - clock)
    elapsed = time.perf_counter() - started
    return {**histogram.summary(), "queries_per_s": round(count / elapsed, 1)}


def _quality_ratio(mine: float, theirs: float) -> float:
    """Ours over theirs; when the peer found nothing relevant, 1 if neither did, else a
    ratio that meets any bound (JSON has no infinity)."""
    if theirs > 0:
        return mine / theirs
    return 1.0 if mine == 0 else _NOTHING_FOUND_RATIO


def _median(runs: Sequence[Mapping[str, Any]], key: str) -> float:
    return float(statistics.median(float(run[key]) for run in runs))


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Load (or reuse) the corpus, run the turns, and return the result document."""
    quick = bool(args.quick)
    size = args.scale or (QUICK_STATEMENTS if quick else FULL_STATEMENTS)
    count = args.cues or (QUICK_CUES if quick else FULL_CUES)
    pairs = args.pairs or (QUICK_PAIRS if quick else FULL_PAIRS)
    with (
        tempfile.TemporaryDirectory(prefix="brain-bench-recall-") as tmp,
        # A quick run always builds, in a scratch directory, so it exercises the loader.
        corpora.served(
            size, SEED, Path(tmp) / "corpus" if quick else corpora.CACHE, fresh=bool(args.fresh)
        ) as (corpus, server),
    ):
        world = corpus.world
        vector_check = corpora.check_vectors(corpus)
        asked = cues(world, count, CUE_SEED)
        judged = judge_cues(world, asked)
        clock = time.perf_counter()
        cue_vectors = load_embedder("minilm").embed(asked)
        cue_embed_s = time.perf_counter() - clock
        superseded = {s.supersedes for s in world.statements if s.supersedes is not None}
        peer = SqliteHybrid(Path(tmp))
        try:
            peer.load(
                [s.text(world) for s in world.statements],
                [s.subject for s in world.statements],
                [s.index not in superseded for s in world.statements],
                corpus.vectors,
            )
            rss_start = server.rss_mb()
            ours = RecallClient(server.host, server.port, server.api_key, corpus.index_of())
            try:
                result = _measure(
                    ours, peer, asked=asked, cue_vectors=cue_vectors, judged=judged, pairs=pairs
                )
            finally:
                ours.close()
            rss_end = server.rss_mb()
            configuration = peer.configuration()
        finally:
            peer.close()
    result["parameters"] = {
        "statements": size,
        "seed": SEED,
        "cues": count,
        "cue_seed": CUE_SEED,
        "pairs": pairs,
        "top_k": TOP_K,
        "candidates_per_arm": DEPTH,
        "rrf_k": {"brain": DEFAULT_RRF_K, "sqlite": RRF_K},
        "connections": 1,
        "order": ["brain", "sqlite", "brain_vector"],
        "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
    }
    result["corpus"] = {
        **corpus.build,
        "reused_from_cache": corpus.cached,
        "vector_check": vector_check,
        "cue_embedding_s": round(cue_embed_s, 3),
    }
    result["brain"] = {
        "recall": "server defaults: arms semantic, lexical, graph at weight 1; RRF k=60; "
        "superseded hidden",
        "server_rss_mb": {"at_start": rss_start, "after_queries": rss_end},
    }
    result["sqlite"] = configuration
    return result


def _measure(
    ours: RecallClient,
    peer: SqliteHybrid,
    *,
    asked: Sequence[str],
    cue_vectors: NDArray[np.float32],
    judged: Sequence[Judged],
    pairs: int,
) -> dict[str, Any]:
    # The untimed pass: warms every side, gives each system's answers and our timings.
    explained = [ours.ask(cue, None, explain=True) for cue in asked]
    answers: dict[str, list[Answer]] = {
        "brain": [ours.ranked(answer) for answer in explained],
        "sqlite": [
            peer.query(cue, vec, top_k=TOP_K, depth=DEPTH)
            for cue, vec in zip(asked, cue_vectors, strict=True)
        ],
        "brain_vector": [
            ours.ranked(ours.ask(cue, vec, explain=False))
            for cue, vec in zip(asked, cue_vectors, strict=True)
        ],
    }
    stages: dict[str, list[int]] = {}
    for answer in explained:
        assert answer.explain is not None
        timings = answer.explain.timings_us
        for stage in ("embed", "semantic", "lexical", "graph", "fuse", "filter_", "total"):
            stages.setdefault(stage.rstrip("_"), []).append(int(getattr(timings, stage)))
    count = len(asked)
    runs = harness.alternate(
        {
            "brain": lambda: turn(lambda i: ours.ask(asked[i], None, explain=False), count),
            "sqlite": lambda: turn(
                lambda i: peer.query(asked[i], cue_vectors[i], top_k=TOP_K, depth=DEPTH), count
            ),
            "brain_vector": lambda: turn(
                lambda i: ours.ask(asked[i], cue_vectors[i], explain=False), count
            ),
        },
        pairs,
    )
    quality = {system: score(judged, found) for system, found in answers.items()}
    latency = harness.ratios(runs["brain"], runs["sqlite"], "p50")
    latency_vector = harness.ratios(runs["brain_vector"], runs["sqlite"], "p50")
    p95 = harness.ratios(runs["brain"], runs["sqlite"], "p95")
    p99 = harness.ratios(runs["brain"], runs["sqlite"], "p99")
    server_embed_ms = statistics.median(stages["embed"]) / 1e3
    summary = [
        harness.row(
            "RECALL top-10 hybrid p50, cue embedded by the server",
            "ms",
            _median(runs["brain"], "p50"),
            peer=_median(runs["sqlite"], "p50"),
            peer_name="SQLite FTS5 + sqlite-vec, RRF in SQL",
            ratio=latency["median"],
            goal=LATENCY_GOAL,
        ),
        harness.row(
            "RECALL top-10 hybrid p50, cue vector given (embedding excluded)",
            "ms",
            _median(runs["brain_vector"], "p50"),
            peer=_median(runs["sqlite"], "p50"),
            peer_name="SQLite FTS5 + sqlite-vec, RRF in SQL",
            ratio=latency_vector["median"],
        ),
        harness.row(
            "RECALL top-10 hybrid p95, cue embedded by the server",
            "ms",
            _median(runs["brain"], "p95"),
            peer=_median(runs["sqlite"], "p95"),
            peer_name="SQLite FTS5 + sqlite-vec, RRF in SQL",
            ratio=p95["median"],
        ),
        harness.row(
            "RECALL top-10 hybrid p99, cue embedded by the server",
            "ms",
            _median(runs["brain"], "p99"),
            peer=_median(runs["sqlite"], "p99"),
            peer_name="SQLite FTS5 + sqlite-vec, RRF in SQL",
            ratio=p99["median"],
        ),
    ]
    for metric in ("precision_at_10", "recall_at_10"):
        theirs = quality["sqlite"][metric]
        mine = quality["brain"][metric]
        summary.append(
            harness.row(
                f"RECALL {metric.replace('_at_', '@')} of statements about the named subject",
                "fraction",
                mine,
                peer=theirs,
                peer_name="SQLite FTS5 + sqlite-vec, RRF in SQL",
                ratio=_quality_ratio(mine, theirs),
                goal=QUALITY_GOAL,
            )
        )
    return {
        "summary": summary,
        "runs": runs,
        "ratios": {
            "p50_brain_over_sqlite": latency,
            "p50_brain_vector_over_sqlite": latency_vector,
            "p95_brain_over_sqlite": p95,
            "p99_brain_over_sqlite": p99,
        },
        "quality": quality,
        "brain_stage_us_median": {
            stage: statistics.median(values) for stage, values in stages.items()
        },
        "brain_cue_embedding_ms_median": round(server_embed_ms, 3),
        "same_top10_brain_and_brain_vector": sum(
            a == b for a, b in zip(answers["brain"], answers["brain_vector"], strict=True)
        ),
        # The same ten hits in any order: two near-tied hits may swap places when the
        # cue's vector differs in its last bits, which the ordered count above shows.
        "same_top10_set_brain_and_brain_vector": sum(
            set(a) == set(b) for a, b in zip(answers["brain"], answers["brain_vector"], strict=True)
        ),
        "examples": [
            {
                "cue": j.cue,
                "names": j.names,
                "relevant": len(j.relevant),
                "brain_hits_relevant": len(set(answers["brain"][i]) & j.relevant),
                "sqlite_hits_relevant": len(set(answers["sqlite"][i]) & j.relevant),
            }
            for i, j in enumerate(judged[:10])
        ],
    }


def main(argv: list[str]) -> int:
    """Entry point of the suite."""
    parser = harness.parser("recall", __doc__)
    parser.add_argument("--scale", type=int, help=f"statements (default {FULL_STATEMENTS:,})")
    parser.add_argument("--cues", type=int, help=f"cues per turn (default {FULL_CUES})")
    parser.add_argument("--pairs", type=int, help=f"turns per system (default {FULL_PAIRS})")
    parser.add_argument("--fresh", action="store_true", help="rebuild the cached corpus")
    args = parser.parse_args(argv)
    result = harness.save("recall", args, run(args))
    for line in result["summary"]:
        verdict = "" if "met" not in line else (" met" if line["met"] else " NOT MET")
        print(
            f"{line['what']}: ours {line['ours']} {line['unit']}, "
            f"SQLite {line.get('peer')}, ratio {line.get('ratio')}{verdict}"
        )
    corpus = result["corpus"]
    print(
        f"corpus {result['parameters']['statements']:,} statements: "
        f"{'reused' if corpus['reused_from_cache'] else 'built'}; load {corpus['load_s']} s, "
        f"index wait {corpus['index_wait_after_load_s']} s"
    )
    return 0
