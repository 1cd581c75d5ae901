"""The book's title when the model never gave one the book can use: its subject as the request frames it
(pipeline/meaning/reading.py), as a title ('keeping a sourdough starter alive' -> 'Keeping a Sourdough Starter Alive').
Nothing else of a plan is ever made by fanout: a node the model's lines cannot fill has fewer children.
"""

from __future__ import annotations

from pipeline.meaning.reading import read
from pipeline.titles import clean_title

SMALL_WORDS = frozenset("a an the of and or to in on for with by at as how is are".split())


def subject_title(subject: str) -> str:
    """A subject as a title: its words capitalised but the small ones inside it."""
    words = clean_title(subject).split()
    return " ".join(
        word if (at and word.casefold() in SMALL_WORDS) or not word[:1].islower() else word[:1].upper() + word[1:]
        for at, word in enumerate(words)
    )


def fallback_book_title(prompt: str) -> str:
    """The request's subject as the book's title (a brief's too: its first clause may be the asker's story)."""
    title = subject_title(read(prompt).subject)
    return title if 2 <= len(title) <= 80 else "Handbook"
