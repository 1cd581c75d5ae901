"""The book's title when the model never gave one the book can use: its subject as the request frames it
(pipeline/meaning/reading.py), as a title ('keeping a sourdough starter alive' -> 'Keeping a Sourdough Starter Alive').
Nothing else of a plan is ever made by fanout: a node the model's lines cannot fill has fewer children.
"""

from __future__ import annotations

from pipeline.meaning.reading import read
from pipeline.text import as_title
from pipeline.titles import clean_title


def fallback_book_title(prompt: str) -> str:
    """The request's subject as the book's title (a brief's too: its first clause may be the asker's story)."""
    title = as_title(clean_title(read(prompt).subject))
    return title if 2 <= len(title) <= 80 else "Handbook"
