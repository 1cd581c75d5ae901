"""Ending well: the word budget's token cap, and an answer cut at that cap taken back to its last full sentence.

Takes the words asked for (returns the token cap and paragraph count that fit them), or a text that stopped
at the cap (returns it cut after its last full sentence, or None when it has none to cut back to). STORM
trims unfinished sentences the same way; the journal keeps both texts.
"""

from __future__ import annotations

import math
import re

TOKENS_PER_WORD = 1.4  # English prose with Markdown marks, SmolLM2's and Llama's tokenizers alike
HEADROOM = 1.5  # a model asked for N words often writes more; the cap is a backstop, not the target
WORDS_PER_PARAGRAPH = 90
FENCE_LINE = re.compile(r"^\s*(```|~~~)")
SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]*_]*(?=\s|$)")
ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|Dr|Mr|Mrs|Ms|St|No|Fig)\.|\b[A-Z]\.)$")


def token_cap(words: int) -> int:
    """The max_tokens that lets an answer of about `words` words end on its own."""
    return math.ceil(words * TOKENS_PER_WORD * HEADROOM)


def paragraphs_for(words: int) -> int:
    return max(1, round(words / WORDS_PER_PARAGRAPH))


def without_open_fence(text: str) -> str:
    """The text before a code fence that was opened and never closed (a block cut mid-code goes whole)."""
    lines = text.splitlines(keepends=True)
    opened_at = None
    for index, line in enumerate(lines):
        if FENCE_LINE.match(line):
            opened_at = None if opened_at is not None else index
    return text if opened_at is None else "".join(lines[:opened_at])


def last_sentence_end(text: str) -> int | None:
    """Where the last full sentence (or closed code block) ends, or None."""
    best = None
    for match in SENTENCE_END.finditer(text):
        if not ABBREVIATION.search(text[max(0, match.start() - 6):match.start() + 1]):
            best = match.end()
    for match in re.finditer(r"^\s*(?:```|~~~)\s*$", text, re.M):
        if best is None or match.end() > best:
            best = match.end()
    return best


def cut_to_sentence(text: str) -> str | None:
    """The text up to its last full sentence; None if it has none (then it stays as it is, truncated)."""
    kept = without_open_fence(text)
    end = last_sentence_end(kept)
    if end is None:
        return None
    cut = kept[:end].rstrip()
    return cut if cut and cut != text.rstrip() else None
