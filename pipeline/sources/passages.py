"""Blocks -> passages: a file's paragraphs under one heading path packed into passages of about PASSAGE_WORDS
words, never across a heading; a paragraph longer than MAX_PASSAGE_WORDS is cut at its sentences' ends (a
sentence longer than that at a word; a code block, ``` or ~~~, at its lines, each piece fenced again). Each passage
keeps its file, its heading path and the page it starts on.
"""

from __future__ import annotations

from collections.abc import Iterator

from pipeline.records.sources import Passage
from pipeline.sources.read import Block
from pipeline.text import FENCE, closes, sentences

PASSAGE_WORDS = 120  # a passage closes once it holds this many words
MAX_PASSAGE_WORDS = 200  # a paragraph past this is cut at sentences


def passages_of(file: str, blocks: list[Block], *, first: int = 0) -> list[Passage]:
    """The passages of a file's blocks (`file` its name as shown), numbered from `first`."""
    found: list[Passage] = []
    for headings, page, text in _packed(blocks):
        found.append(Passage(first + len(found), file, headings, text, page))
    return found


def _packed(blocks: list[Block]) -> Iterator[tuple[tuple[str, ...], int | None, str]]:
    held: list[str] = []
    words = 0
    start: Block | None = None
    for block in blocks:
        if start is not None and (block.headings != start.headings or words >= PASSAGE_WORDS):
            yield start.headings, start.page, "\n\n".join(held)
            held, words, start = [], 0, None
        for piece in _pieces(block.text):
            count = len(piece.split())
            if start is not None and words + count > MAX_PASSAGE_WORDS:
                yield start.headings, start.page, "\n\n".join(held)
                held, words, start = [], 0, None
            start = start or block
            held.append(piece)
            words += count
    if start is not None:
        yield start.headings, start.page, "\n\n".join(held)


def code_fence(text: str) -> str | None:
    """The fence of a text that is one fenced code block, ``` or ~~~ (pipeline/text.py's FENCE and closes: its first
    line opens it, its last line closes it), or None: a paragraph that only starts with a fence, on one line (a
    reStructuredText heading's ~~~~ overline and the text after it, read as one paragraph), is prose."""
    opening, _, rest = text.partition("\n")
    match = FENCE.match(opening)
    if match is None or not rest or not closes(rest.rsplit("\n", 1)[-1], match.group(1)):
        return None
    return match.group(1)


def _code_pieces(text: str, fence: str) -> list[str]:
    opening, *lines = text.split("\n")
    pieces: list[list[str]] = [[]]
    for line in lines[:-1]:
        if pieces[-1] and len(" ".join(pieces[-1] + [line]).split()) > MAX_PASSAGE_WORDS:
            pieces.append([])
        pieces[-1].append(line)
    return ["\n".join([opening, *piece, fence]) for piece in pieces if piece]


def _pieces(text: str) -> list[str]:
    """The paragraph whole, or cut at its sentences into pieces of at most MAX_PASSAGE_WORDS words (a code block at
    its lines, each piece fenced again with its own fence)."""
    if len(text.split()) <= MAX_PASSAGE_WORDS:
        return [text]
    if fence := code_fence(text):
        return _code_pieces(text, fence)
    pieces: list[str] = []
    current: list[str] = []
    for sentence in sentences(text, starts="capital"):
        words = sentence.split()
        while len(words) > MAX_PASSAGE_WORDS:  # one sentence past the limit: cut at a word
            pieces.append(" ".join(words[:MAX_PASSAGE_WORDS]))
            words = words[MAX_PASSAGE_WORDS:]
        if current and len(" ".join(current).split()) + len(words) > PASSAGE_WORDS:
            pieces.append(" ".join(current))
            current = []
        if words:
            current.append(" ".join(words))
    if current:
        pieces.append(" ".join(current))
    return pieces
