"""A book's claim on its titles: every title taken at each level, by its key, by its words (titles.TitleIndex) and by
its meaning (MeaningIndex), so that the planner's claim rules (pipeline/book/plan/policy.py) can refuse a line whose
title another node has, or one of its level nearly has."""

from __future__ import annotations

import numpy as np

from pipeline.meaning.embed import Embedder
from pipeline.meaning.nearness import SIMILAR_TITLE
from pipeline.titles import TitleIndex, title_key

TITLE_LEVELS = ("parts", "chapters", "sections")


class MeaningIndex:
    """The titles of one level across the book, embedded as they are taken: a new title that says what one
    of them says (pipeline/meaning/nearness.py's SIMILAR_TITLE, the audit's own) is found."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.titles: list[str] = []
        self.vectors = np.zeros((0, 0), dtype=np.float32)

    def add(self, title: str) -> None:
        row = self.embedder.embed([title])
        self.vectors = row if not self.titles else np.vstack([self.vectors, row])
        self.titles.append(title)

    def near(self, title: str) -> str | None:
        """The first title of the book at this level that says what `title` says, or None."""
        if not self.titles:
            return None
        scores = self.vectors @ self.embedder.embed([title])[0]
        best = int(np.argmax(scores))
        return self.titles[best] if scores[best] >= SIMILAR_TITLE else None


class Claims:
    """The titles taken at each level: their keys, and their distinctive words (the request's subject taken out) by
    words and by meaning, each mapped back to the whole title."""

    def __init__(self, embedder: Embedder) -> None:
        self.keys: dict[str, set[str]] = {level: set() for level in TITLE_LEVELS}
        self.words: dict[str, TitleIndex] = {level: TitleIndex() for level in TITLE_LEVELS}
        self.meanings: dict[str, MeaningIndex] = {level: MeaningIndex(embedder) for level in TITLE_LEVELS}
        self.whole: dict[str, str] = {}  # a title without the subject's words -> the title

    def taken(self, title: str) -> bool:
        """Another node of the book, at any level, has this title."""
        key = title_key(title)
        return any(key in keys for keys in self.keys.values())

    def near(self, level: str, distinctive: str, *, meaning: bool) -> str | None:
        """The whole title of its level that nearly repeats these words, by words (and by `meaning`), or None."""
        other = self.words[level].near(distinctive) or (self.meanings[level].near(distinctive) if meaning else None)
        return None if other is None else self.whole.get(other, other)

    def key_only(self, level: str, title: str) -> None:
        """A capable author's title: its key is taken, and nothing is compared with its words."""
        self.keys[level].add(title_key(title))

    def add(self, level: str, title: str, distinctive: str) -> None:
        self.keys[level].add(title_key(title))
        self.whole.setdefault(distinctive, title)
        self.words[level].add(distinctive)
        self.meanings[level].add(distinctive)
