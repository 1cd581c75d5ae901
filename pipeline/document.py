"""A Markdown document's block structure, as markdown-it reads it: the one owner of where headings are, which
`# ` heading is the document's title, and which lines are HTML comments or empty anchors rather than text.

Takes Markdown text; returns markdown-it block tokens (inline text left unparsed), the source lines as
`Token.map` numbers them, the text with its comment blocks and empty anchors blanked, and the index of the
title heading. A leaf: the audit (pipeline/audit/book.py) and the typesetters (pipeline/typeset/shape.py)
read a document through it, so the two never disagree on its headings or its title.
"""

from __future__ import annotations

import re
from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.token import Token

COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
EMPTY_ANCHOR = re.compile(r'\s*<a\s+(?:id|name)\s*=\s*"[^"<>]*"\s*>\s*</a>\s*')


def _new_parser(*, html: bool) -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": html}).enable("table")


@lru_cache(maxsize=2)
def _block_parser(*, html: bool) -> MarkdownIt:
    return _new_parser(html=html).disable("inline")


def block_tokens(markdown: str, *, html: bool = False) -> list[Token]:
    """The document's block structure (headings, code, lists, quotes; inline text left unparsed). `html` False,
    as the renderers read it: raw HTML is text. `html` True: HTML blocks are tokens of their own
    (`html_block`), so a measure can tell an anchor or a comment from prose."""
    return _block_parser(html=html).parse(markdown)


@lru_cache(maxsize=1)
def _full_parser() -> MarkdownIt:
    return _new_parser(html=True)


def inline_tokens(markdown: str) -> list[Token]:
    """The document's blocks with their inline text parsed (each `inline` token's children): raw HTML is tokens of
    its own (`html_block`, `html_inline`), never text."""
    return _full_parser().parse(markdown)


def source_lines(markdown: str) -> list[str]:
    """The lines as markdown-it numbers them in `Token.map`: split at \\n, \\r\\n and \\r only (not at the
    form feeds or U+2028 that `str.splitlines` also splits at)."""
    return re.split(r"\r\n?|\n", markdown)


def is_comment(token: Token) -> bool:
    """An HTML block that is nothing but a comment (`<!-- YAML added: v14.5.0 -->`)."""
    return token.type == "html_block" and bool(COMMENT.fullmatch(token.content.strip()))


def silent_lines(token: Token, lines: list[str]) -> range | list[int]:
    """The source lines of `token` that a browser shows nothing of: a comment block's lines, and in a
    paragraph the lines that hold only an empty anchor (`<a id="1.95-Language"></a>`, a link target for the
    document's own contents)."""
    if not token.map:
        return []
    start, end = token.map
    if is_comment(token):
        return range(start, end)
    if token.type == "paragraph_open":
        return [i for i in range(start, end) if EMPTY_ANCHOR.fullmatch(lines[i])]
    return []


def without_silent_markup(markdown: str) -> str:
    """What renders nothing in a browser renders nothing here either: comment blocks and empty-anchor lines
    are blanked (the line numbers stay); a comment inside a paragraph is taken out of its text by
    `drop_inline_comments`. Code stays code."""
    if "<!--" not in markdown and "<a" not in markdown:  # EMPTY_ANCHOR allows any space after `<a`
        return markdown
    lines = source_lines(markdown)
    for token in block_tokens(markdown, html=True):
        for i in silent_lines(token, lines):
            lines[i] = ""
    return "\n".join(lines)


def drop_inline_comments(text: str) -> str:
    """A text run without the HTML comments it holds (the renderers call it on inline text tokens)."""
    return COMMENT.sub("", text) if "<!--" in text else text


def top_headings(tokens: list[Token]) -> list[int]:
    """The indices of the headings outside lists and quotes (those the document's structure is made of)."""
    return [i for i, t in enumerate(tokens) if t.type == "heading_open" and t.level == 0 and t.map]


def heading_level(token: Token) -> int:
    return int(token.tag[1])


def title_index(tokens: list[Token], headings: list[int]) -> int | None:
    """The title heading: the first `# ` when it is the only one, or when no heading stands between it and the
    next `# ` (a title page followed by `# ` parts) and the two are not numbered alike. A document of many `# `
    headings each with subheadings of its own (release notes: one `# ` a version) has none, nor has one whose
    newest version is a point release with no subheadings: `Version 1.77.2` is the next version's sibling."""
    ones = [i for i in headings if tokens[i].tag == "h1"]
    if not ones:
        return None
    if len(ones) > 1:
        first, second = ones[0], ones[1]
        if any(first < i < second for i in headings) or numbered_alike(tokens[first + 1], tokens[second + 1]):
            return None
    return ones[0]


NUMBERS = re.compile(r"\d+|\b[IVXLC]+\b")


def numbered_alike(a: Token, b: Token) -> bool:
    """Two headings that differ only in their numbers: `Version 1.77.2 (2024-04-09)` / `Version 1.77.1 (…)`."""
    return NUMBERS.sub("#", a.content).casefold() == NUMBERS.sub("#", b.content).casefold() and bool(
        NUMBERS.search(a.content)
    )
