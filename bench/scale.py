"""RECALL latency and server memory as the corpus grows: 10K and 100K statements (1M on request).

For each size a real ``brain serve`` runs on a loaded and indexed copy of
``bench.datagen.generate(size)`` (:mod:`bench.corpus`, shared with the recall
suite through its cache). All the servers run at once and take turns (10K,
100K, 10K, 100K …), each turn asking its own world's cues one at a time over
one connection, twice per cue:

- ``cue``: RECALL with the cue alone (the server embeds it: what clients see);
- ``vector``: RECALL with the cue and its precomputed MiniLM vector (the
  embedding, a constant cost, excluded: what the index and arms scale like).

Resident memory is read from ``/proc`` three times per size: right after the
load and indexing (when the corpus was built, possibly by an earlier run: its
date is in ``corpus``), when the server has opened the loaded directory, and
after the queries; the last two also split into anonymous memory and mapped
file pages (LMDB's, which queries fault in). Memory per million statements is
*extrapolated* linearly from the growth of RSS after the queries between the
smallest and the largest size (and, beside it, of the anonymous part alone).

At the end the largest size's server is killed with SIGKILL and started again on
its directory: the seconds to its ready line (recovery) and to its first RECALL
answered (the vector indexes loaded, or rebuilt when their files are older than
the store) are reported.

Goal (spec/08-benchmarks.md): p50(largest) ≤ 2x p50(10K), taken for the sizes that
were run: 100K against 10K by default. 1M statements takes hours to embed with
the numpy MiniLM on two cores, so it runs only when asked, by hand::

    OPENBLAS_NUM_THREADS=1 python -m bench scale [--quick] [--scale 1000000]
        [--embedder hashing] [--cues N] [--pairs N] [--fresh] [--out PATH] [--no-save]

``--scale N`` adds N as the largest size; ``--quick`` runs 200 and 1,000.
``--embedder hashing`` runs every size with the hashing embedder: a million
statements load in minutes, so the million is measured, not extrapolated. Its
vectors are sums of hashed words: they carry no meaning and cluster less than
MiniLM's, so its latencies are another corpus's, to be compared across its own
sizes only; the memory figures do not depend on the embedder (the same 384
float32 per statement).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from bench import corpus as corpora
from bench import harness
from bench.brainserver import BrainServer, brain_server
from bench.datagen import cues
from bench.recall import CUE_SEED, SEED, TOP_K, RecallClient, turn
from brain.embed import load_embedder

__all__ = [
    "FULL_CUES",
    "FULL_PAIRS",
    "FULL_SIZES",
    "QUICK_CUES",
    "QUICK_PAIRS",
    "QUICK_SIZES",
    "main",
    "rss_parts_mb",
]

FULL_SIZES: Final = (10_000, 100_000)
"""Sizes of a default full run; 1M is added by ``--scale 1000000`` (hours to embed)."""

QUICK_SIZES: Final = (200, 1_000)
"""Sizes of a quick run: seconds of embedding, still a five-fold growth."""

FULL_CUES: Final = 200
"""Cues per turn in a full run: a stable median in well under a minute."""

QUICK_CUES: Final = 12
"""Cues per turn in a quick run."""

FULL_PAIRS: Final = 3
"""Turns each size takes in a full run."""

QUICK_PAIRS: Final = 2
"""Turns in a quick run: two, so per-pair ratios are exercised."""

SCALE_GOAL: Final = harness.Goal("p50(largest) ≤ 2x p50(smallest)", 2.0, at_least=False)
"""spec/08-benchmarks.md: a hundred times the statements may at most double the median."""

ANON_GOAL_GIB: Final = 2.0
"""spec/08-benchmarks.md: a million statements in at most this much anonymous memory."""

ANON_GOAL: Final = harness.Goal(
    f"RssAnon ≤ 1.0x {ANON_GOAL_GIB} GiB at a million statements", 1.0, at_least=False
)
"""Checked only when a run reaches a million: smaller runs measure no million."""

MODES: Final = ("cue", "vector")
"""How each cue is asked: embedded by the server, or with its vector given."""

_MILLION: Final = 1_000_000
"""Statements in the million that memory growth is extrapolated to."""


def rss_parts_mb(pid: int) -> dict[str, float]:
    """Resident memory split as ``/proc`` reports it, in MiB: ``anon`` (the heap: Python
    objects, the HNSW index, the model) and ``file`` (mapped file pages, LMDB's among
    them, which the kernel may drop and read back)."""
    parts: dict[str, float] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            for field, name in (("RssAnon:", "anon"), ("RssFile:", "file")):
                if line.startswith(field):
                    parts[name] = round(int(line.split()[1]) / 1024, 1)
    return parts


def _sizes(args: argparse.Namespace) -> tuple[int, ...]:
    if args.quick:
        return QUICK_SIZES
    sizes = set(FULL_SIZES)
    if args.scale:
        sizes.add(int(args.scale))
    return tuple(sorted(sizes))


def _goal_row(what: str, runs: Mapping[int, Sequence[Mapping[str, Any]]]) -> dict[str, object]:
    smallest, largest = min(runs), max(runs)
    ratio = harness.ratios(runs[largest], runs[smallest], "p50")
    return harness.row(
        what,
        "ms",
        statistics.median(float(r["p50"]) for r in runs[largest]),
        peer=statistics.median(float(r["p50"]) for r in runs[smallest]),
        peer_name=f"itself at {smallest:,} statements",
        ratio=ratio["median"],
        goal=SCALE_GOAL,
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Load (or reuse) each size's corpus, run the turns, read memory; the result document."""
    sizes = _sizes(args)
    count = args.cues or (QUICK_CUES if args.quick else FULL_CUES)
    pairs = args.pairs or (QUICK_PAIRS if args.quick else FULL_PAIRS)
    embedder = load_embedder(args.embedder)
    with tempfile.TemporaryDirectory(prefix="brain-bench-scale-") as tmp:
        # A quick run always builds, in a scratch directory, so it exercises the loader.
        root = Path(tmp) if args.quick else corpora.CACHE
        with contextlib.ExitStack() as stack:
            built: dict[int, corpora.Corpus] = {}
            servers: dict[int, BrainServer] = {}
            clients: dict[int, RecallClient] = {}
            memory: dict[int, dict[str, object]] = {}
            for n in sizes:
                corpus, server = stack.enter_context(
                    corpora.served(n, SEED, root, fresh=bool(args.fresh), embedder=args.embedder)
                )
                built[n] = corpus
                servers[n] = server
                memory[n] = {
                    "after_load_mb": built[n].build["server_rss_after_load_mb"],
                    "after_open_mb": server.rss_mb(),
                    "after_open_parts_mb": rss_parts_mb(server.pid),
                }
            # Connected once every server is up: building a large corpus takes minutes,
            # and a connection opened before it would sit idle past the server's timeout.
            for n in sizes:
                server = servers[n]
                client = RecallClient(server.host, server.port, server.api_key, built[n].index_of())
                stack.callback(client.close)
                clients[n] = client
            asked = {n: cues(built[n].world, count, CUE_SEED) for n in sizes}
            vectors = {n: embedder.embed(asked[n]) for n in sizes}
            # Warm every server's caches and code paths before any timed turn.
            for n in sizes:
                for cue, vector in zip(asked[n], vectors[n], strict=True):
                    clients[n].ask(cue, None, explain=False)
                    clients[n].ask(cue, vector, explain=False)
            systems: dict[str, Callable[[], Mapping[str, Any]]] = {}
            for n in sizes:
                for mode in MODES:
                    systems[f"{n}/{mode}"] = _measure(clients[n], asked[n], vectors[n], mode)
            runs = harness.alternate(systems, pairs)
            for n in sizes:
                memory[n]["after_queries_mb"] = servers[n].rss_mb()
                memory[n]["after_queries_parts_mb"] = rss_parts_mb(servers[n].pid)
            largest = sizes[-1]
            # Killed, not stopped: the reopen below recovers as after a crash.
            servers[largest].spawned.process.kill()
            servers[largest].spawned.process.wait()
        reopen = _reopen(built[largest], asked[largest][0], args.embedder)
    result = _result(sizes, count=count, pairs=pairs, runs=runs, memory=memory, built=built)
    result["reopen_after_kill"] = {"statements": largest, **reopen}
    result["summary"].append(
        harness.row(
            f"reopen after kill -9 at {largest:,} statements, to the first RECALL answered",
            "s",
            reopen["first_recall_s"],
        )
    )
    result["parameters"]["embedder"] = args.embedder
    return result


def _reopen(corpus: corpora.Corpus, cue: str, embedder: str) -> dict[str, float]:
    """Start a server on a corpus whose server was killed: seconds to its ready line
    (recovery: the checkpoint restored, the WAL replayed) and to the first RECALL
    answered (the vector indexes loaded, or rebuilt from LMDB when their files were
    older than the store)."""
    started = time.monotonic()
    env = {"BRAIN_RETRIEVAL__EMBEDDER": embedder}
    with brain_server(env=env, data_dir=corpus.data_dir) as server:
        ready = time.monotonic() - started
        client = RecallClient(server.host, server.port, server.api_key, corpus.index_of())
        try:
            client.ask(cue, None, explain=False)
        finally:
            client.close()
        answered = time.monotonic() - started
        parts = rss_parts_mb(server.pid)
    return {
        "ready_s": round(ready, 2),
        "first_recall_s": round(answered, 2),
        "rss_anon_mb_after_reopen": parts.get("anon", 0.0),
    }


def _measure(
    client: RecallClient, asked: Sequence[str], vectors: NDArray[np.float32], mode: str
) -> Callable[[], Mapping[str, Any]]:
    if mode == "cue":
        return lambda: turn(lambda i: client.ask(asked[i], None, explain=False), len(asked))
    return lambda: turn(lambda i: client.ask(asked[i], vectors[i], explain=False), len(asked))


def _result(
    sizes: Sequence[int],
    *,
    count: int,
    pairs: int,
    runs: Mapping[str, Sequence[Mapping[str, Any]]],
    memory: Mapping[int, Mapping[str, object]],
    built: Mapping[int, corpora.Corpus],
) -> dict[str, Any]:
    smallest, largest = sizes[0], sizes[-1]
    by_mode = {mode: {n: runs[f"{n}/{mode}"] for n in sizes} for mode in MODES}
    grown = float(str(memory[largest]["after_queries_mb"])) - float(
        str(memory[smallest]["after_queries_mb"])
    )
    per_million = grown / (largest - smallest) * _MILLION
    anon = [memory[n]["after_queries_parts_mb"] for n in (smallest, largest)]
    assert isinstance(anon[0], dict) and isinstance(anon[1], dict)
    anon_per_million = (anon[1]["anon"] - anon[0]["anon"]) / (largest - smallest) * _MILLION
    summary = [
        _goal_row(
            f"RECALL top-10 p50 at {largest:,} vs {smallest:,} statements, cue embedded by "
            "the server",
            by_mode["cue"],
        ),
        _goal_row(
            f"RECALL top-10 p50 at {largest:,} vs {smallest:,} statements, cue vector given "
            "(embedding excluded)",
            by_mode["vector"],
        ),
        harness.row(
            f"server memory per million statements (extrapolated from RSS growth "
            f"{smallest:,} → {largest:,})",
            "MiB",
            per_million,
        ),
        harness.row(
            "server anonymous memory (RssAnon) per million statements (extrapolated, same way)",
            "MiB",
            anon_per_million,
        ),
    ]
    for n in sizes:
        for share in ("p50", "p99"):
            summary.append(
                harness.row(
                    f"RECALL top-10 {share} at {n:,} statements, cue vector given",
                    "ms",
                    statistics.median(float(r[share]) for r in by_mode["vector"][n]),
                )
            )
    if largest >= _MILLION:
        anon_gib = float(anon[1]["anon"]) / 1024
        summary.append(
            harness.row(
                f"server anonymous memory (RssAnon) at {largest:,} statements, measured",
                "GiB",
                anon_gib,
                peer=ANON_GOAL_GIB,
                peer_name="the goal's bound",
                ratio=anon_gib / ANON_GOAL_GIB,
                goal=ANON_GOAL,
            )
        )
    for n in sizes:
        parts = memory[n]["after_queries_parts_mb"]
        assert isinstance(parts, dict)
        summary.append(
            harness.row(
                f"server RSS after queries at {n:,} statements",
                "MiB",
                float(str(memory[n]["after_queries_mb"])),
            )
        )
        summary.append(
            harness.row(
                f"server anonymous memory (RssAnon) after queries at {n:,} statements",
                "MiB",
                float(parts["anon"]),
            )
        )
    return {
        "summary": summary,
        "parameters": {
            "sizes": list(sizes),
            "seed": SEED,
            "cues_per_turn": count,
            "cue_seed": CUE_SEED,
            "pairs": pairs,
            "top_k": TOP_K,
            "connections": 1,
            "order": list(runs),
            "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        },
        "latency_ms": {
            mode: {
                str(n): {
                    "p50_median": statistics.median(float(r["p50"]) for r in per_size[n]),
                    "runs": per_size[n],
                }
                for n in sizes
            }
            for mode, per_size in by_mode.items()
        },
        "memory_mb": {str(n): memory[n] for n in sizes},
        "memory_per_million_statements_mb": {
            "value": round(per_million, 1),
            "method": f"linear extrapolation of RSS after queries, {smallest:,} → {largest:,}",
            "anon_only": round(anon_per_million, 1),
            "anon_only_method": "the same from RssAnon alone (without mapped LMDB file pages)",
        },
        "corpus": {str(n): {**built[n].build, "reused_from_cache": built[n].cached} for n in sizes},
    }


def main(argv: list[str]) -> int:
    """Entry point of the suite."""
    parser = harness.parser("scale", __doc__)
    parser.add_argument(
        "--scale", type=int, help="add this size as the largest (1000000: a manual run)"
    )
    parser.add_argument("--cues", type=int, help=f"cues per turn (default {FULL_CUES})")
    parser.add_argument("--pairs", type=int, help=f"turns per size (default {FULL_PAIRS})")
    parser.add_argument("--fresh", action="store_true", help="rebuild the cached corpora")
    parser.add_argument(
        "--embedder",
        choices=("minilm", "hashing"),
        default="minilm",
        help="the servers' embedder: hashing builds 1M statements in minutes, not hours",
    )
    args = parser.parse_args(argv)
    result = harness.save("scale", args, run(args))
    for line in result["summary"]:
        verdict = "" if "met" not in line else (" met" if line["met"] else " NOT MET")
        peer = f" vs {line['peer']} ({line['peer_name']})" if "peer" in line else ""
        ratio = f", ratio {line['ratio']}" if "ratio" in line else ""
        print(f"{line['what']}: {line['ours']} {line['unit']}{peer}{ratio}{verdict}")
    return 0
