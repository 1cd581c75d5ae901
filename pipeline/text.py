"""Plain-text measures the audit rules and the quality figures share.

Takes a section's text; returns its words, its word n-grams, and whether it ends closed (on closing
punctuation or a closed code fence); `close_open_fence` closes a code fence a truncated answer left open.
A leaf: the audit, the quality figures and the book's assembly and trimming import it.
"""

from __future__ import annotations

import re

CLOSING = tuple(".!?:;)]}\"'`*_…»”’")
LOOP_WORDS = 8  # a run of this many words three times in one section is a repetition loop
LOOP_REPEATS = 3
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


# Where a CommonMark link points, not what it says: an inline destination `](https://…)` (a title after it too),
# or a reference label `][label]`. The link text before it, brackets and all, is left.
LINK_TARGET = re.compile(
    r"\]\(\s*(?:<[^<>\n]*>|(?:[^\s()]|\([^\s()]*\))*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)|\]\[[^\[\]]*\]"
)


def without_link_targets(text: str) -> str:
    """The text as a reader reads its links: `[the text](https://…)` keeps `[the text]`, so a URL's parts are
    not counted as words (nor, repeated from link to link, as a loop)."""
    return LINK_TARGET.sub("]", text) if "](" in text or "][" in text else text


def words_of(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def shingles(words: list[str], size: int) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + size]) for i in range(len(words) - size + 1)]


def ends_closed(block: str) -> bool:
    """Seed 003's test: the block ends on closing punctuation (or a closed code fence), not mid-sentence."""
    stripped = block.rstrip()
    if not stripped:
        return True
    if close_open_fence(stripped) != stripped:
        return False
    last_line = stripped.splitlines()[-1]
    return bool(FENCE.match(last_line)) or stripped.endswith(CLOSING) or last_line.lstrip().startswith("|")


def close_open_fence(body: str) -> str:
    """Append the closing fence when the text ends inside a fenced code block (CommonMark's rules)."""
    opener: str | None = None
    for line in body.splitlines():
        match = FENCE.match(line)
        if not match:
            continue
        marker = match.group(1)
        if opener is None:
            opener = marker
        elif marker[0] == opener[0] and len(marker) >= len(opener) and not line.strip()[len(marker) :].strip():
            opener = None
    return body if opener is None else body.rstrip("\n") + "\n" + opener
