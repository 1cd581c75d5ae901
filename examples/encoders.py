"""The sentence encoder three ways, side by side on the same texts: the numpy forward pass fanout ran before
(written out below, kept only as this measurement's baseline), all-MiniLM-L6-v2 on onnxruntime at one thread and at
every core (pipeline/meaning/minilm.py), and the static token table (wordllama, pipeline/meaning/embed.py).

    PYTHONPATH=. .venv/bin/python examples/encoders.py [--run FOLDER] [--count 1536] [--numpy-sample 256]

The texts are the section openings the on-subject judge embeds (pipeline/meaning/onsubject.py's `opening`): of a run
folder's sections.jsonl, else of the good-writing corpus's sections (tests/fixtures/corpus/), the first --count.
The numpy forward is timed on --numpy-sample of them and scaled to the count (it is linear in the texts); each
encoder's rows are compared with numpy's on that sample (largest difference of a coordinate, lowest cosine).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.bench.studies.corpus import load_corpus  # noqa: E402
from pipeline.meaning.embed import StaticEmbedder, Vectors, unit_rows  # noqa: E402
from pipeline.meaning.minilm import HEADS, LAYERS, MAX_TOKENS, MiniLMEmbedder, minilm_zip, read_model  # noqa: E402
from pipeline.meaning.onsubject import opening  # noqa: E402


class NumpyMiniLM:
    """The forward pass fanout ran in numpy before onnxruntime: BERT, one text at a time, exact GELU, mean-pooled."""

    def __init__(self) -> None:
        from tokenizers import Tokenizer

        self.w, tokenizer = read_model(minilm_zip())
        self.tokenizer = Tokenizer.from_str(tokenizer)
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()

    def embed(self, texts: list[str]) -> Vectors:
        return unit_rows(np.stack([self.forward(encoding.ids) for encoding in self.tokenizer.encode_batch(texts)]))

    def norm(self, x: Vectors, key: str) -> Vectors:
        mean, variance = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        normed: Vectors = (x - mean) / np.sqrt(variance + 1e-12) * self.w[f"{key}.weight"] + self.w[f"{key}.bias"]
        return normed

    def dense(self, x: Vectors, key: str) -> Vectors:
        out: Vectors = x @ self.w[f"{key}.weight"].T + self.w[f"{key}.bias"]
        return out

    def forward(self, ids: list[int]) -> Vectors:
        w, tokens = self.w, len(ids)
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:tokens]
        x = self.norm(x + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
        for index in range(LAYERS):
            name = f"encoder.layer.{index}"
            heads = [
                self.dense(x, f"{name}.attention.self.{part}").reshape(tokens, HEADS, -1).transpose(1, 0, 2)
                for part in ("query", "key", "value")
            ]
            scores = heads[0] @ heads[1].transpose(0, 2, 1) / math.sqrt(heads[0].shape[-1])
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            context = ((scores / scores.sum(-1, keepdims=True)) @ heads[2]).transpose(1, 0, 2).reshape(tokens, -1)
            attended = x + self.dense(context, f"{name}.attention.output.dense")
            x = self.norm(attended, f"{name}.attention.output.LayerNorm")
            inner = self.dense(x, f"{name}.intermediate.dense")
            inner = 0.5 * inner * (1 + erf(inner / math.sqrt(2)))  # exact GELU
            x = self.norm(x + self.dense(inner, f"{name}.output.dense"), f"{name}.output.LayerNorm")
        pooled: Vectors = x.mean(0)
        return pooled


def erf(x: Vectors) -> Vectors:
    """The error function to within 1.5e-7 (Abramowitz and Stegun 7.1.26): numpy has none."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    value: Vectors = np.sign(x) * (1.0 - poly * np.exp(-x * x))
    return value


def openings(run: Path | None, count: int) -> list[str]:
    if run is not None:
        lines = (run / "sections.jsonl").read_text().splitlines()
        texts = [json.loads(line).get("text") or "" for line in lines]
    else:
        chapters = [chapter for book in load_corpus() for part in book.parts for chapter in part.chapters]
        texts = [section.text for chapter in chapters for section in chapter.sections]
    return [opening(text) for text in texts[:count]]


def timed(embed, texts: list[str]) -> tuple[float, Vectors]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    rows = embed(texts)
    return time.perf_counter() - start, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="a run folder whose sections' openings are embedded")
    parser.add_argument("--count", type=int, default=1536)
    parser.add_argument("--numpy-sample", type=int, default=256)
    args = parser.parse_args()
    texts = openings(args.run, args.count)
    sample = texts[: args.numpy_sample]
    numpy_seconds, reference = timed(NumpyMiniLM().embed, sample)
    pieces = sum(len(encoding.ids) for encoding in MiniLMEmbedder(threads=1).tokenizer.encode_batch(texts))
    print(f"{len(texts)} texts, {pieces:,} word pieces ({'run ' + str(args.run) if args.run else 'the corpus'})\n")
    print("| encoder | seconds | texts/s | largest difference from numpy | lowest cosine to numpy |")
    print("|---|---:|---:|---:|---:|")
    scaled = numpy_seconds * len(texts) / len(sample)
    numpy_row = f"numpy forward, one core (timed on {len(sample)}, scaled)"
    print(f"| {numpy_row} | {scaled:.1f} | {len(texts) / scaled:.0f} | - | - |")
    for threads in (1, 2):
        name, encoder = f"onnxruntime, {threads} thread{'s' * (threads > 1)}", MiniLMEmbedder(threads=threads)
        seconds, rows = timed(encoder.embed_fresh, texts)
        near = rows[: len(sample)]
        print(
            f"| {name} | {seconds:.1f} | {len(texts) / seconds:.0f} | {np.abs(near - reference).max():.1e} | "
            f"{(near * reference).sum(1).min():.7f} |"
        )
    seconds, _ = timed(StaticEmbedder().embed_fresh, texts)
    print(f"| static table (wordllama), one core | {seconds:.2f} | {len(texts) / seconds:.0f} | another model | - |")


if __name__ == "__main__":
    main()
