"""Plain-text measures the audit rules and the quality figures share.

Takes a section's text; returns its words, its word n-grams, and whether it ends closed (on closing
punctuation or a closed code fence). A leaf: the audit and the quality figures both import it.
"""

from __future__ import annotations

import re

from pipeline.assemble import FENCE, close_open_fence

CLOSING = tuple('.!?:;)]}"\'`*_…»”’')
LOOP_WORDS = 8  # a run of this many words three times in one section is a repetition loop
LOOP_REPEATS = 3


def words_of(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def shingles(words: list[str], size: int) -> list[tuple[str, ...]]:
    return [tuple(words[i:i + size]) for i in range(len(words) - size + 1)]


def ends_closed(block: str) -> bool:
    """Seed 003's test: the block ends on closing punctuation (or a closed code fence), not mid-sentence."""
    stripped = block.rstrip()
    if not stripped:
        return True
    if close_open_fence(stripped) != stripped:
        return False
    last_line = stripped.splitlines()[-1]
    return bool(FENCE.match(last_line)) or stripped.endswith(CLOSING) or last_line.lstrip().startswith("|")
