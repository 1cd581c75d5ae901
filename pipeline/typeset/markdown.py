"""Typesetting: book Markdown in, a PDF and a single-file HTML edition out.

Takes the assembled book Markdown (`# Title`, `## Part`, `### Chapter`, `#### Section`; section bodies are
untrusted model output) and a title. Any Markdown is a book: `untitled` reads its shape with `typeset.shape`
(which heading is the title, parts moved to level 2, HTML comments, empty anchors and control characters
XML cannot hold dropped) and gives the title's plain text.

- `markdown_to_html`: the whole book as one HTML document (stable heading ids, a table of contents, raw
  HTML escaped, images shown as their alt text, code highlighted by `typeset.code`), linking
  `templates/book.css`; `render_markdown` / `markdown_body` / `document`: the pieces the PDF parts
  (`typeset.parts`), the EPUB (`typeset.epub`) and the entry points (`typeset.book`) share.

It imports nothing else of the package but `typeset.code` and `typeset.shape`. WeasyPrint and its safety
(only templates/ files may be fetched) live in `typeset.weasy`; files are written atomically by the
entry points in `typeset.book`.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

from pipeline.document import drop_inline_comments
from pipeline.templating import template_path
from pipeline.typeset.code import highlight
from pipeline.typeset.shape import (
    CHAPTER,
    PART,
    SECTION,
    printable,
    structure,
)

TOC_LEVELS = (PART, CHAPTER, SECTION)


@dataclass(frozen=True)
class TypesetResult:
    """What one PDF render produced. `seconds` is wall time from the call (or from `finish` when typesetting
    part by part) to the PDF on disk; `render_seconds` sums the workers' render times; `peak_rss_mb` is the
    largest peak resident set of any one process that rendered or merged."""

    pages: int
    seconds: float
    path: Path
    render_seconds: float = 0.0
    peak_rss_mb: float = 0.0
    worker_rss_mb: tuple[float, ...] = field(default=())


@dataclass(frozen=True)
class Heading:
    level: int
    anchor: str
    text: str


# ---------------------------------------------------------------- Markdown -> HTML


def _render_image_as_alt(renderer, tokens: list[Token], idx: int, options, env) -> str:
    """Images never become <img>: nothing may be fetched, so show the alt text instead."""
    token = tokens[idx]
    alt = inline_text(token.children or [])
    return f'<span class="image-alt">{html.escape(alt)}</span>' if alt else ""


def _render_link_open(renderer, tokens: list[Token], idx: int, options, env) -> str:
    """Plain <a>; autolinks get a class so the stylesheet does not print their URL twice."""
    token = tokens[idx]
    if token.markup == "autolink":
        token.attrJoin("class", "autolink")
    return renderer.renderToken(tokens, idx, options, env)


def _render_fence(renderer, tokens: list[Token], idx: int, options, env) -> str:
    token = tokens[idx]
    return highlight(token.content, token.info)


def _render_code_block(renderer, tokens: list[Token], idx: int, options, env) -> str:
    return highlight(tokens[idx].content, "")


def _drop_comments(state: StateCore) -> None:
    """HTML comments inside a paragraph render nothing (pipeline/document.py's without_silent_markup takes out
    comment blocks and empty anchors)."""
    for token in state.tokens:
        for child in token.children or []:
            if child.type == "text":
                child.content = drop_inline_comments(child.content)


@lru_cache(maxsize=1)
def _markdown_parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    md.core.ruler.push("drop_comments", _drop_comments)
    md.add_render_rule("image", _render_image_as_alt)
    md.add_render_rule("link_open", _render_link_open)
    md.add_render_rule("fence", _render_fence)
    md.add_render_rule("code_block", _render_code_block)
    return md


def inline_text(children: list[Token]) -> str:
    """The plain text of inline tokens (what a heading or an image alt says, without markup)."""
    parts = []
    for child in children:
        if child.type in ("text", "code_inline", "html_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.children:
            parts.append(inline_text(child.children))
    return "".join(parts)


def slugify(text: str) -> str:
    """A URL-fragment-safe id: lowercase words joined by hyphens; never empty, never starts with a digit."""
    slug = re.sub(r"[^\w\s-]", "", text.lower()).strip()
    slug = re.sub(r"[\s_-]+", "-", slug).strip("-")
    if not slug or not slug[0].isalpha():
        slug = f"h-{slug}" if slug else "h"
    return slug


def assign_heading_ids(tokens: list[Token], prefix: str = "") -> list[Heading]:
    """Give every heading a stable, de-duplicated id (in document order) and list them."""
    headings, seen = [], set()
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        text = " ".join(inline_text(tokens[i + 1].children or []).split())
        base = anchor = prefix + slugify(text)
        n = 2
        while anchor in seen:
            anchor, n = f"{base}-{n}", n + 1
        seen.add(anchor)
        token.attrSet("id", anchor)
        headings.append(Heading(level=int(token.tag[1]), anchor=anchor, text=text))
    return headings


def toc_html(entries: list[tuple[Heading, int | None]], *, target_counter: bool = False, title: bool = True) -> str:
    """The contents list. Each entry is a heading and its page number (printed after a dotted leader), or
    None for no number; `target_counter` lets WeasyPrint fill the numbers in a single-document render."""
    items = []
    for heading, page in entries:
        if heading.level not in TOC_LEVELS or not heading.text:  # an empty heading has nothing to list
            continue
        number = f' data-page="{page}"' if page is not None else ""
        kind = " counted" if target_counter else ""
        items.append(
            f'<li class="toc-h{heading.level}"><a href="#{heading.anchor}" class="toc-link{kind}"'
            f"{number}>{html.escape(heading.text)}</a></li>"
        )
    if not items:
        return ""
    head = '<nav class="toc" id="contents"><p class="toc-title">Contents</p>' if title else '<nav class="toc">'
    return head + "\n<ul>\n" + "\n".join(items) + "\n</ul>\n</nav>\n"


def heading_counts(headings: list[Heading]) -> tuple[int, ...]:
    return tuple(sum(h.level == level for h in headings) for level in TOC_LEVELS)


def held_line(counts: tuple[int, ...]) -> str:
    """What the book holds, for its title page: "2 parts · 6 chapters · 24 sections"."""
    names = [("part", "parts"), ("chapter", "chapters"), ("section", "sections")]
    return " · ".join(f"{n:,} {one if n == 1 else many}" for n, (one, many) in zip(counts, names) if n)


def title_page_html(title: str, counts: tuple[int, ...]) -> str:
    """The title page: the book's title and what it holds (parts, chapters, sections)."""
    held = held_line(counts)
    return (
        f'<section class="title-page"><h1 id="title">{html.escape(title)}</h1>\n'
        f'<p class="subtitle">A handbook</p>\n'
        + (f'<p class="held">{held}</p>\n' if held else "")
        + '<p class="imprint">Written and typeset by fanout</p></section>\n'
    )


def untitled(markdown: str, *, with_tokens: bool = True) -> tuple[str, str | None, list[Token]]:
    """(the Markdown as typeset: printable, comments and empty anchors dropped, its title's lines blanked, its
    headings moved so parts are level 2 (`shape.structure`); the title's plain text or None; the block tokens
    of that Markdown, unless `with_tokens` is False)."""
    book = structure(markdown, with_tokens=with_tokens)
    if book.title is None:
        return book.text, None, book.tokens
    inline = _markdown_parser().parseInline(book.title)
    title = " ".join(inline_text(inline[0].children or []).split()) if inline else ""
    return book.text, title, book.tokens


def book_title(markdown: str, fallback: str) -> str:
    """The plain text of the book's title heading (`untitled`), or `fallback` when it has none or it is empty."""
    return untitled(markdown)[1] or fallback


def render_markdown(markdown: str, prefix: str = "") -> tuple[str, list[Heading]]:
    """(body HTML, its headings): every heading rendered, none taken for a title (see `untitled`)."""
    md = _markdown_parser()
    env: dict = {}
    tokens = md.parse(printable(markdown), env)
    headings = assign_heading_ids(tokens, prefix)
    return md.renderer.render(tokens, md.options, env), headings


def markdown_body(markdown: str, title: str, *, target_counter: bool = False) -> str:
    """The whole book as one <body>: title page, table of contents, then the book."""
    text, h1, _ = untitled(markdown)
    body, headings = render_markdown(text)
    contents = toc_html([(h, None) for h in headings], target_counter=target_counter)
    return title_page_html(h1 or title, heading_counts(headings)) + contents + body


def document(title: str, style: str, body: str, body_class: str = "") -> str:
    cls = f' class="{body_class}"' if body_class else ""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n{style}</head>\n<body{cls}>\n{body}</body>\n</html>\n"
    )


def css_link() -> str:
    return f'<link rel="stylesheet" href="{html.escape(template_path("book.css").as_uri())}">\n'


def markdown_to_html(markdown: str, title: str) -> str:
    """A full HTML document for the book, linking templates/book.css by its file URL."""
    return document(title, css_link(), markdown_body(markdown, title))
