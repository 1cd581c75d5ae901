"""Typesetting: book Markdown in, a PDF or a single-file HTML edition out.

Takes the assembled book Markdown (`# Title`, `## Part`, `### Chapter`, `#### Section`; section bodies are
untrusted model output) and a title. `markdown_to_html` returns a full HTML document (stable heading ids, a
table of contents, raw HTML escaped, images shown as their alt text) that links `templates/book.css`.
`typeset_pdf` renders it with WeasyPrint into a PDF (written atomically) and returns a `TypesetResult`;
`typeset_html` writes the same document with the CSS inlined. WeasyPrint may read only files inside the
project's `templates/` directory; every other URL is refused, so untrusted text cannot make it fetch
anything.

Everything here is plain module-level functions and classes on picklable arguments, so a later process pool
can call `typeset_pdf` (or a per-part variant) in workers unchanged.
"""

from __future__ import annotations

import gc
import html
import os
import re
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

from pipeline.errors import FanoutError

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"
BOOK_CSS = TEMPLATES_DIR / "book.css"
TOC_LEVELS = (2, 3, 4)
RENDER_GC_THRESHOLD = (100000, 50, 100)
CONTENT_TYPES = {".css": "text/css", ".ttf": "font/ttf", ".otf": "font/otf", ".woff": "font/woff",
                 ".woff2": "font/woff2", ".png": "image/png", ".svg": "image/svg+xml"}


@dataclass(frozen=True)
class TypesetResult:
    """What one PDF render produced."""

    pages: int
    seconds: float
    path: Path


@dataclass(frozen=True)
class Heading:
    level: int
    anchor: str
    text: str


# ---------------------------------------------------------------- Markdown -> HTML


def _render_image_as_alt(renderer, tokens: list[Token], idx: int, options, env) -> str:
    """Images never become <img>: nothing may be fetched, so show the alt text instead."""
    token = tokens[idx]
    alt = _inline_text(token.children or [])
    return f'<span class="image-alt">{html.escape(alt)}</span>' if alt else ""


def _render_link_open(renderer, tokens: list[Token], idx: int, options, env) -> str:
    """Plain <a>; autolinks get a class so the stylesheet does not print their URL twice."""
    token = tokens[idx]
    if token.markup == "autolink":
        token.attrJoin("class", "autolink")
    return renderer.renderToken(tokens, idx, options, env)


def _markdown_parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    md.add_render_rule("image", _render_image_as_alt)
    md.add_render_rule("link_open", _render_link_open)
    return md


def _inline_text(children: list[Token]) -> str:
    """The plain text of inline tokens (what a heading or an image alt says, without markup)."""
    parts = []
    for child in children:
        if child.type in ("text", "code_inline", "html_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.children:
            parts.append(_inline_text(child.children))
    return "".join(parts)


def slugify(text: str) -> str:
    """A URL-fragment-safe id: lowercase words joined by hyphens; never empty, never starts with a digit."""
    slug = re.sub(r"[^\w\s-]", "", text.lower()).strip()
    slug = re.sub(r"[\s_-]+", "-", slug).strip("-")
    if not slug or not slug[0].isalpha():
        slug = f"h-{slug}" if slug else "h"
    return slug


def _assign_heading_ids(tokens: list[Token]) -> list[Heading]:
    """Give every heading a stable, de-duplicated id (in document order) and list them."""
    headings, seen = [], set()
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        text = _inline_text(tokens[i + 1].children or [])
        base = anchor = slugify(text)
        n = 2
        while anchor in seen:
            anchor, n = f"{base}-{n}", n + 1
        seen.add(anchor)
        token.attrSet("id", anchor)
        headings.append(Heading(level=int(token.tag[1]), anchor=anchor, text=text))
    return headings


def _toc_html(headings: list[Heading]) -> str:
    items = [f'<li class="toc-h{h.level}"><a href="#{h.anchor}">{html.escape(h.text)}</a></li>'
             for h in headings if h.level in TOC_LEVELS]
    if not items:
        return ""
    return ('<nav class="toc" id="contents"><p class="toc-title">Contents</p>\n<ul>\n'
            + "\n".join(items) + "\n</ul>\n</nav>\n")


def _split_after_title(tokens: list[Token]) -> int:
    """Index just after the first h1's closing token, or 0 when the book has no h1 heading."""
    for i, token in enumerate(tokens):
        if token.type == "heading_close" and token.tag == "h1":
            return i + 1
    return 0


def markdown_body(markdown: str, title: str) -> str:
    """The <body> content: the title (h1), the table of contents, then the book."""
    md = _markdown_parser()
    env: dict = {}
    tokens = md.parse(markdown, env)
    headings = _assign_heading_ids(tokens)
    split = _split_after_title(tokens)
    head = (md.renderer.render(tokens[:split], md.options, env) if split
            else f'<h1 id="title">{html.escape(title)}</h1>\n')
    rest = md.renderer.render(tokens[split:], md.options, env)
    return head + _toc_html(headings) + rest


def _document(title: str, style: str, body: str) -> str:
    return ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html.escape(title)}</title>\n{style}</head>\n<body>\n{body}</body>\n</html>\n")


def markdown_to_html(markdown: str, title: str) -> str:
    """A full HTML document for the book, linking templates/book.css by its file URL."""
    style = f'<link rel="stylesheet" href="{html.escape(BOOK_CSS.as_uri())}">\n'
    return _document(title, style, markdown_body(markdown, title))


# ---------------------------------------------------------------- output


@contextmanager
def _atomic_target(out: Path):
    """Yield a temporary path next to `out`; rename it onto `out` only if the block succeeds."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        yield tmp
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


def typeset_html(markdown: str, title: str, out_html: Path) -> Path:
    """Write the single-file HTML edition (CSS inlined, nothing external) and return its path."""
    css = BOOK_CSS.read_text(encoding="utf-8")
    document = _document(title, f"<style>\n{css}</style>\n", markdown_body(markdown, title))
    with _atomic_target(out_html) as tmp:
        tmp.write_text(document, encoding="utf-8")
    return out_html


# ---------------------------------------------------------------- PDF (WeasyPrint)


def _templates_path(url: str) -> Path:
    """The file inside templates/ that `url` names; ValueError for anything else."""
    parts = urlsplit(url)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        raise ValueError(f"fetching refused (only templates/ files): {url}")
    path = Path(unquote(parts.path)).resolve()
    if not path.is_relative_to(TEMPLATES_DIR.resolve()) or not path.is_file():
        raise ValueError(f"fetching refused (only templates/ files): {url}")
    return path


def _templates_only_fetcher():
    """A WeasyPrint URL fetcher that serves files from templates/ and raises for every other URL."""
    from weasyprint.urls import URLFetcher, URLFetcherResponse

    class TemplatesOnlyFetcher(URLFetcher):
        def fetch(self, url, headers=None):
            path = _templates_path(url)
            content_type = CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream")
            return URLFetcherResponse(url, path.read_bytes(), {"Content-Type": content_type})

    return TemplatesOnlyFetcher(allowed_protocols=("file",))


def installed_font_count() -> int:
    """How many fonts fontconfig finds (read fresh, so FONTCONFIG_FILE changes are seen)."""
    from weasyprint.text.ffi import ffi, fontconfig

    config = fontconfig.FcInitLoadConfigAndFonts()
    if config == ffi.NULL:
        return 0
    try:
        fonts = fontconfig.FcConfigGetFonts(config, fontconfig.FcSetSystem)
        return 0 if fonts == ffi.NULL else fonts.nfont
    finally:
        fontconfig.FcConfigDestroy(config)


def require_fonts() -> None:
    """WeasyPrint segfaults when fontconfig has no fonts; fail cleanly instead."""
    if installed_font_count() == 0:
        raise FanoutError("no fonts installed: fontconfig finds none (WeasyPrint would crash); "
                          "run make setup")


@contextmanager
def _render_gc_threshold():
    """Fewer gen-0 collections while WeasyPrint builds its millions of boxes (measured ~1.8x faster)."""
    saved = gc.get_threshold()
    gc.set_threshold(*RENDER_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def typeset_pdf(markdown: str, title: str, out_pdf: Path) -> TypesetResult:
    """Render the book to `out_pdf` (atomically) and report its page count and render time."""
    require_fonts()
    from weasyprint import HTML

    started = time.perf_counter()
    document_html = markdown_to_html(markdown, title)
    with _render_gc_threshold(), _atomic_target(out_pdf) as tmp:
        document = HTML(string=document_html, base_url=TEMPLATES_DIR.as_uri() + "/",
                        url_fetcher=_templates_only_fetcher()).render()
        document.write_pdf(tmp)
    return TypesetResult(pages=len(document.pages), seconds=time.perf_counter() - started, path=out_pdf)
