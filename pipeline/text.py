"""Plain-text measures the audit rules and the quality figures share.

Takes a section's text; returns its words (all of them, or its prose's, fenced code left out), its word n-grams,
its loop (a stretch said again and again), and whether it ends closed (on closing punctuation or a closed code
fence); `close_open_fence` closes a code fence a truncated answer left open.
A leaf: the audit, the quality figures and the book's assembly and trimming import it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

CLOSING = tuple(".!?:;)]}\"'`*_…»”’")
LOOP_WORDS = 8  # a run of this many words three times in one section, two of them back to back, is a loop
LOOP_REPEATS = 3
LOOP_LIKENESS = 0.95  # a loop's copy matches the one before it in this share of its words, at the least
LOOP_TAIL = 0.5  # the share of the stretch a copy cut short by the text's end must still say
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
WORD_EDGES = ".,;:!?\"'()[]{}“”‘’*_`"
WORDS_KEPT = 2048  # texts whose words prose_words keeps: a 1,536-section book's, at about 60 kB a 400-word text


# Where a CommonMark link points, not what it says: an inline destination `](https://…)` (a title after it too),
# or a reference label `][label]`. The link text before it, brackets and all, is left.
LINK_TARGET = re.compile(
    r"\]\(\s*(?:<[^<>\n]*>|(?:[^\s()]|\([^\s()]*\))*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)|\]\[[^\[\]]*\]"
)


@dataclass(frozen=True)
class Loop:
    """A run of text said again and again back to back: where its second copy starts (a character offset), the
    LOOP_WORDS words that come back, and how often they do."""

    start: int
    words: tuple[str, ...]
    times: int


def repetition_loop(text: str, times: int = LOOP_REPEATS, *, cut: bool = False) -> Loop | None:
    """The earliest loop of the text: a run of LOOP_WORDS words that comes `times` times or more, two of them back
    to back (the stretch from the one to the next said again, LOOP_LIKENESS of its words alike). What a model
    stuck in a loop writes ('The key is to use a starter. The key is to use a starter. …'), and not what an author
    repeats across a page ('it is not the case that …' in sentences of a logic textbook). Words are compared with
    their symbols ('(𝒜∧ℬ)' is not '(𝒜∨ℬ)'), and code blocks are not read: code says a line again on purpose."""
    spans = prose_words(text)
    words = [word for _, word in spans]
    where: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for index, gram in enumerate(shingles(words, LOOP_WORDS)):
        where[gram].append(index)
    found: Loop | None = None
    for gram, places in where.items():
        if len(places) < times:
            continue
        for earlier, later in zip(places, places[1:]):
            if (found is None or later < found.start) and said_again(words, earlier, later, cut=cut):
                found = Loop(start=later, words=gram, times=len(places))
                break
    return None if found is None else Loop(start=spans[found.start][0], words=found.words, times=found.times)


def said_again(words: list[str], earlier: int, later: int, *, cut: bool = False) -> bool:
    """The stretch of words from `earlier` up to `later` comes again from `later` on (LOOP_LIKENESS of it). Where the
    text ends first, a text that was `cut` (an answer at its token cap) may end anywhere in the copy; one that ended
    where its writer chose must say LOOP_TAIL of the stretch again: a reference's 'See: the spec.' at a section's
    end, a page after its last, is no loop."""
    stretch, again = words[earlier:later], words[later : later + later - earlier]
    if not cut and len(again) < LOOP_TAIL * len(stretch):
        return False
    return sum(a == b for a, b in zip(stretch, again)) >= LOOP_LIKENESS * len(again)


@lru_cache(maxsize=WORDS_KEPT)
def prose_words(text: str) -> tuple[tuple[int, str], ...]:
    """(offset, word) of each word outside fenced code, lower case, its surrounding punctuation stripped and its
    symbols kept; a token with no letter or digit (a bullet, a dash) is not a word. Kept for the last WORDS_KEPT
    texts: the writer's loop check and three audit rules read each section's words."""
    found = []
    for offset, line in prose_lines(text):
        for token in re.finditer(r"\S+", line):
            word = token.group().lower().strip(WORD_EDGES)
            if any(char.isalnum() for char in word):
                found.append((offset + token.start(), word))
    return tuple(found)


def without_code(text: str) -> str:
    """The text with its fenced code blocks, fences and all, left out."""
    return "".join(line for _, line in prose_lines(text))


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(offset, line) of each line outside fenced code (a fence closes on its own character, as CommonMark's do)."""
    found = []
    fenced: str | None = None
    offset = 0
    for line in text.splitlines(keepends=True):
        marker = match.group(1) if (match := FENCE.match(line)) else None
        if marker and fenced is None:
            fenced = marker
        elif marker and fenced and marker[0] == fenced[0] and len(marker) >= len(fenced):
            fenced = None
        elif fenced is None:
            found.append((offset, line))
        offset += len(line)
    return found


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
