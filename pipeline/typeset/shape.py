"""A Markdown book's shape, read from the document itself: which heading is its title, which levels are its
parts, chapters and sections, and which of them start a page.

Takes any Markdown (fanout's `# Title` / `## Part` / `### Chapter` / `#### Section`, or a document no one
wrote for fanout); `structure` returns it with the title's lines blanked, HTML comments and empty anchors
dropped, and every other top-level heading moved so the shallowest one left is level 2, the level the
typesetters read as a part. So `# T` / `# Part I` / `## Chapter 1` is typeset as `## Part I` /
`### Chapter 1`, as `# T` / `## Part I` / `### Chapter 1` always was. Headings, comments, empty anchors and the
title are found by pipeline/document.py, in markdown-it's own block tokens.

The title is the first top-level `# ` heading when it is the only one, or when no heading stands between it
and the next one (a title page followed by `# ` parts) and the two are not numbered alike. A document of many
`# ` headings each with its own subheadings (release notes: one `# ` a version) has no title heading: every
`# ` is a part (pipeline/document.py's `title_index`).

`book_shape` decides from the words under each level what starts a page: a part opens on a right-hand page
of its own only when a typical part fills several pages, a chapter starts a page only when a typical one
fills most of a page; a reference's hundreds of short entries run on.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from enum import StrEnum

from markdown_it.token import Token

from pipeline.document import block_tokens, source_lines, title_index, top_headings, without_silent_markup

PART, CHAPTER, SECTION = 2, 3, 4  # the levels a book's structure is typeset at
UNPRINTABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
OPENER_WORDS = 1_000  # a typical part this long (about four A5 pages) gets an opener page of its own
PAGE_WORDS = 250  # a typical part or chapter this long (most of an A5 page) starts a new page


class Break(StrEnum):
    """Where a heading of one level starts: on a right-hand page of its own, on a new page, or in the text."""

    OPENER = "opener"
    PAGE = "page"
    RUN_ON = "run-on"


@dataclass(frozen=True)
class BookShape:
    parts: Break = Break.OPENER
    chapters: Break = Break.PAGE

    @property
    def classes(self) -> str:
        """The body classes book.css reads (none for fanout's own handbook layout)."""
        names = [f"parts-{self.parts}"] if self.parts is not Break.OPENER else []
        return " ".join(names + ([f"chapters-{self.chapters}"] if self.chapters is not Break.PAGE else []))


HANDBOOK = BookShape()


def printable(text: str) -> str:
    """`text` without the control characters (and non-characters) XML 1.0 cannot hold: model text may carry
    them, the EPUB's XHTML refuses them and the PDF would show each as an empty box."""
    return UNPRINTABLE.sub("", text)


def _heading_line(inline: Token, level: int) -> str:
    text = " ".join(inline.content.split())
    return "#" * level + (" " + text if text else "")


@dataclass(frozen=True)
class Structure:
    text: str  # the Markdown, printable, comments and empty anchors dropped, title blanked, parts at level 2
    title: str | None  # the title heading's inline source, or None
    tokens: list[Token]  # the block tokens of `text`


def structure(markdown: str, *, with_tokens: bool = True) -> Structure:
    """The book with its title taken out and its headings moved so the shallowest is level 2 (see above).
    `with_tokens` False: the caller parses the text itself, so the block tokens of the result are not made (they
    cost a parse of the whole book: 0.3 s at 1,536 sections) and `Structure.tokens` is empty."""
    markdown = without_silent_markup(printable(markdown))
    tokens = block_tokens(markdown)
    headings = top_headings(tokens)
    title_at = title_index(tokens, headings)
    rest = [i for i in headings if i != title_at]
    shift = PART - min((int(tokens[i].tag[1]) for i in rest), default=PART)
    if title_at is None and shift == 0:
        return Structure(markdown, None, tokens)
    lines = source_lines(markdown)
    title = None
    if title_at is not None:
        title = tokens[title_at + 1].content
        start, end = tokens[title_at].map or (0, 0)
        lines[start:end] = [""] * (end - start)
    for i in rest if shift else []:
        start, end = tokens[i].map or (0, 0)
        level = max(1, min(6, int(tokens[i].tag[1]) + shift))
        lines[start:end] = [_heading_line(tokens[i + 1], level)] + [""] * (end - start - 1)
    text = "\n".join(lines)
    # Leading blank lines change nothing; blank lines after a list or a quote may join what follows to it.
    return Structure(text, title, block_tokens(text) if with_tokens else [])


def book_shape(tokens: list[Token], lines: list[str]) -> BookShape:
    """Where parts and chapters start, from the words under a typical one (the median; headings of deeper
    levels count as the text they are)."""
    starts = [(t.map[0], int(t.tag[1])) for t in tokens if t.type == "heading_open" and t.level == 0 and t.map]
    words: dict[int, list[int]] = {PART: [], CHAPTER: []}
    for index, (line, level) in enumerate(starts):
        if level not in words:
            continue
        end = next((at for at, deeper in starts[index + 1 :] if deeper <= level), len(lines))
        words[level].append(sum(len(text.split()) for text in lines[line + 1 : end]))
    part_words = statistics.median(words[PART]) if words[PART] else OPENER_WORDS
    chapter_words = statistics.median(words[CHAPTER]) if words[CHAPTER] else PAGE_WORDS
    parts = Break.OPENER if part_words >= OPENER_WORDS else Break.PAGE if part_words >= PAGE_WORDS else Break.RUN_ON
    return BookShape(parts=parts, chapters=Break.PAGE if chapter_words >= PAGE_WORDS else Break.RUN_ON)
