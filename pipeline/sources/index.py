"""A source index: the passages of a set of files, by their words (BM25) and by their meaning (the meaning model's
vectors), and retrieval that fuses the two.

- Words: bm25s (MIT; BM25 over a sparse matrix in numpy, no scipy needed), its tokens English stems
  (snowballstemmer, the stems the planner's titles compare by) with English stop words left out. A query's score
  over every passage is one sparse product.
- Meaning: each passage's heading path and text embedded once (pipeline/meaning/embed.py: wordllama's static
  table unless an embedding endpoint is set), unit rows of float32; a query is one matrix product over all of
  them (brute force: docs/sources.md gives the sizes at which it stops meeting the query budget, and what takes
  over there).
- A query has parts of different weight (records.Query: a section's title, its chapter's, the request): each is
  scored and the scores summed by weight (LEXICAL_WEIGHTS), or embedded and averaged by weight (MEANING_WEIGHTS).
- Fused by score (a convex combination of each retriever's scores scaled to 0..1, as Weaviate's relative-score
  fusion does): on the corpus it found more than reciprocal-rank fusion did when one retriever is much the weaker
  (docs/sources.md).

An index is saved in the cache under a key of its files' contents, the passage rules and the embedder
(`index_key`), and loaded whole when the same files are given again: a book resumed or a second book on the same
sources reads none of them again.
"""

from __future__ import annotations

import json
import shutil
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

from pipeline.meaning.embed import CachedEmbedder, Embedder, Vectors
from pipeline.records.sources import Hit, Passage, Query
from pipeline.text import stem_words

# How a query's parts (its focus, what it is under, the request) weigh, by words and by meaning, and the words'
# share of the fused score: chosen on five tuned books of the corpus (examples/source_retrieval.py; docs/sources.md
# has the variants measured): the request alone weighed as the title, recall@5 fell from 0.98 to 0.86.
LEXICAL_WEIGHTS = (1.0, 0.5, 0.1)
MEANING_WEIGHTS = (1.0, 0.5, 0.25)
LEXICAL_SHARE = 0.5
KEPT_SCORES = 32  # texts whose BM25 scores an index keeps (the request's, the chapters' titles)
KEPT_SEARCHES = 4096  # searches of all passages an index keeps: a node's, asked as it is planned and written
EMBED_BATCH = 512
LEXICAL, MEANING, FUSED = "bm25", "meaning", "fused"  # the retrievers a search may use


def tokens(texts: Sequence[str]) -> list[list[str]]:
    """Lower-cased English stems of words of two letters or more, stop words left out."""
    found = bm25s.tokenize(list(texts), stopwords="en", stemmer=stem_words, return_ids=False, show_progress=False)
    return [list(words) for words in found]


class SourceIndex:
    """Passages by words and by meaning; `search` fuses both."""

    def __init__(self, passages: list[Passage], lexical: bm25s.BM25, vectors: Vectors, embedder: Embedder) -> None:
        self.passages = passages
        self.lexical = lexical
        self.vectors = vectors
        self.embedder = embedder
        self._by_place: dict[str, list[int]] | None = None
        self._scored: dict[str, Vectors] = {}  # a text's BM25 scores, the latest KEPT_SCORES texts
        self._found: dict[tuple[Query, int, str], list[Hit]] = {}  # the latest KEPT_SEARCHES searches of all
        self._keeping = threading.Lock()

    @classmethod
    def build(cls, passages: list[Passage], embedder: Embedder) -> SourceIndex:
        texts = [passage.indexed_text() for passage in passages]
        lexical = bm25s.BM25()
        lexical.index(tokens(texts), show_progress=False)
        return cls(passages, lexical, embed_all(embedder, texts), embedder)

    def lexical_scores(self, query: Query) -> Vectors:
        """BM25 of each part of the query, weighed (LEXICAL_WEIGHTS) and summed."""
        total = np.zeros(len(self.passages), dtype=np.float32)
        for text, weight in zip(query.texts(), LEXICAL_WEIGHTS):
            if text and weight:
                total += weight * self._bm25(text)
        return total

    def _bm25(self, text: str) -> Vectors:
        """One text's BM25 scores, kept for the next queries (a book's request and a chapter's title recur in
        every query of the book and of the chapter)."""
        if (kept := self._scored.get(text)) is not None:
            return kept
        known = [word for word in tokens([text])[0] if word in self.lexical.vocab_dict]
        zero = np.zeros(len(self.passages), dtype=np.float32)
        scores = np.asarray(self.lexical.get_scores(known), dtype=np.float32) if known else zero
        self._keep(self._scored, text, scores, KEPT_SCORES)
        return scores

    def _keep(self, kept: dict[Any, Any], key: object, value: object, limit: int) -> None:
        """Keep a result, the oldest dropped past `limit` (searches run on worker threads too: one at a time)."""
        with self._keeping:
            if len(kept) >= limit:
                kept.pop(next(iter(kept)), None)
            kept[key] = value

    def meaning_scores(self, query: Query) -> Vectors:
        """The cosine of each passage to the weighed mean of the query's parts (MEANING_WEIGHTS)."""
        texts = [text for text in query.texts() if text]
        rows = self.embedder.embed(texts)
        weights = [weight for text, weight in zip(query.texts(), MEANING_WEIGHTS) if text]
        mean = np.asarray(weights, dtype=np.float32) @ rows
        norm = float(np.linalg.norm(mean))
        scores: Vectors = self.vectors @ (mean / norm if norm > 0 else mean)
        return scores

    def search(self, query: Query, k: int = 5, *, by: str = FUSED, within: frozenset[int] | None = None) -> list[Hit]:
        """The `k` passages nearest the query: by both retrievers' scores fused (each scaled to 0..1 over the
        passages, then LEXICAL_SHARE of the words' and the rest of the meaning's), or `by` one of them (LEXICAL,
        MEANING: what the retrieval study compares); only those numbered `within`, when given."""
        if not self.passages:
            return []
        key = (query, k, by)
        if within is None and (found := self._found.get(key)) is not None:
            return found
        hits = self._search(query, k, by, within)
        if within is None:
            self._keep(self._found, key, hits, KEPT_SEARCHES)
        return hits

    def _search(self, query: Query, k: int, by: str, within: frozenset[int] | None) -> list[Hit]:
        zero = np.zeros(len(self.passages), dtype=np.float32)
        lexical = self.lexical_scores(query) if by != MEANING else zero
        meaning = self.meaning_scores(query) if by != LEXICAL else zero
        if by == FUSED:
            scores = LEXICAL_SHARE * scaled(lexical) + (1 - LEXICAL_SHARE) * scaled(meaning)
        else:
            scores = scaled(lexical if by == LEXICAL else meaning)
        if within is not None:
            scores = np.where(np.isin(np.arange(len(scores)), list(within)), scores, -np.inf).astype(np.float32)
        count = min(k, len(scores) if within is None else len(within))
        if count == 0:
            return []
        top = np.argpartition(-scores, count - 1)[:count]
        order = [int(at) for at in top[np.argsort(-scores[top], kind="stable")]]
        return [Hit(self.passages[at], float(scores[at]), float(lexical[at]), float(meaning[at])) for at in order]

    def from_places(self, places: list[str]) -> frozenset[int]:
        """The passages from these places (Passage.where: file, heading path, page)."""
        if self._by_place is None:
            self._by_place = {}
            for passage in self.passages:
                self._by_place.setdefault(passage.place(), []).append(passage.number)
        return frozenset(number for place in places for number in self._by_place.get(place, []))

    def save(self, folder: Path, *, beside: dict[str, str] | None = None) -> None:
        """Written to a fresh folder beside `folder` (with the files `beside` names: name -> text), then renamed onto
        it: a reader finds a whole index or none. An index saved there before is replaced."""
        folder.parent.mkdir(parents=True, exist_ok=True)
        temporary = folder.parent / f".{folder.name}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            temporary.mkdir()
            self.lexical.save(str(temporary / "bm25"), show_progress=False)
            np.save(temporary / "vectors.npy", self.vectors)
            rows = (json.dumps([p.number, p.file, list(p.headings), p.text, p.page]) for p in self.passages)
            (temporary / "passages.jsonl").write_text("".join(row + "\n" for row in rows))
            for name, text in (beside or {}).items():
                (temporary / name).write_text(text)
            shutil.rmtree(folder, ignore_errors=True)
            try:
                temporary.rename(folder)
            except OSError:
                if not folder.is_dir():  # else another process saved the same index (its key is its contents)
                    raise
        finally:
            shutil.rmtree(temporary, ignore_errors=True)

    @classmethod
    def load(cls, folder: Path, embedder: Embedder) -> SourceIndex:
        lexical = bm25s.BM25.load(str(folder / "bm25"), show_progress=False)
        vectors = np.load(folder / "vectors.npy")
        passages = []
        for line in (folder / "passages.jsonl").read_text().splitlines():
            number, file, headings, text, page = json.loads(line)
            passages.append(Passage(number, file, tuple(headings), text, page))
        return cls(passages, lexical, vectors, embedder)


def embed_all(embedder: Embedder, texts: list[str]) -> Vectors:
    """Every text's unit row, in batches, none kept in the embedder's cache."""
    embed = embedder.embed_fresh if isinstance(embedder, CachedEmbedder) else embedder.embed
    rows = [embed(texts[at : at + EMBED_BATCH]) for at in range(0, len(texts), EMBED_BATCH)]
    return np.concatenate(rows).astype(np.float32) if rows else np.zeros((0, 0), dtype=np.float32)


def scaled(scores: Vectors) -> Vectors:
    """Scores scaled to 0..1 over the passages (min-max); all equal: all 0."""
    low, high = float(scores.min()), float(scores.max())
    if high <= low:
        return np.zeros_like(scores)
    return ((scores - low) / (high - low)).astype(np.float32)
