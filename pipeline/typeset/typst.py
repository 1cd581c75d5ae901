"""The Typst typesetter: book Markdown in, the PDF out, in one compile (the `typst` wheel: the Rust compiler
in a binary wheel from PyPI, no network, no process of its own).

Takes the same inputs as the WeasyPrint path (the book's Markdown, a fallback title, the appendix HTML of
`typeset.appendix`) and returns the same TypesetResult. The Markdown is read by markdown-it, as the HTML path
reads it (`shape.structure`: title, comments dropped, parts at level 2), and turned into plain data: blocks
(headings, paragraphs, code, lists, quotes, tables, rules) holding inline runs (text, emphasis, strong, code,
links, image alt text, line breaks). templates/book.typ lays that data out with book.css's design.

Model text never becomes Typst code: the data reaches the compiler as one JSON string in `sys.inputs`, and
the template only ever shows its strings as text. The compiler's root is an empty folder of its own, so
nothing outside it can be read, and no package is imported. Fonts: DejaVu Serif, Sans and Sans Mono from
the folder fontconfig names (the Debian fonts-dejavu-core package that `make` installs), system fonts
ignored, so every machine sets the same book; a glyph DejaVu lacks (CJK, emoji) falls back to the fonts
inside the typst wheel and otherwise shows as DejaVu's visible .notdef box, never a crash.
"""

from __future__ import annotations

import json
import logging
import re
import resource
import shutil
import subprocess
import tempfile
import time
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from pipeline.document import drop_inline_comments, source_lines
from pipeline.errors import FanoutError
from pipeline.files import atomic_target
from pipeline.templating import template_path
from pipeline.typeset.markdown import Heading, TypesetResult, heading_counts, held_line, inline_text, untitled
from pipeline.typeset.shape import BookShape, book_shape

log = logging.getLogger("fanout")
DEJAVU_FALLBACK_FOLDERS = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/dejavu")
CODE_COLUMNS = 72  # mono 7.6pt across A5's 116 mm text width: longer code lines are folded here
LONG_WORD = 30  # a run of this many characters with no space gets break points (a URL, "xxxx…")
BREAK = "\u200b"  # zero-width space: an allowed line break that shows nothing
PAGE_TREE = re.compile(rb"<</Type\s*/Pages\s*/Count\s+(\d+)")

Node = str | dict[str, Any]
Block = dict[str, Any]


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False}).enable("table")


# ---------------------------------------------------------------- inline runs


def _breakable(text: str) -> str:
    """Long runs without a space get zero-width break points, so a line can end inside them."""
    if len(text) < LONG_WORD:
        return text
    words = text.split(" ")
    return " ".join(
        BREAK.join(word[i : i + LONG_WORD] for i in range(0, len(word), LONG_WORD)) if len(word) > LONG_WORD else word
        for word in words
    )


def _inline(children: list[Token], *, in_heading: bool = False) -> list[Node]:
    """Inline tokens as nested runs: strings, and {"t": em|strong|link, "c": [...]}, code, img, br."""
    root: list[Node] = []
    stack = [root]
    for token in children:
        here = stack[-1]
        kind = token.type
        if kind == "text":
            text = drop_inline_comments(token.content)
            here.append(text if in_heading else _breakable(text))
        elif kind == "softbreak":
            here.append(" ")
        elif kind == "hardbreak":
            here.append({"t": "br"})
        elif kind == "code_inline":
            here.append({"t": "code", "s": token.content})
        elif kind == "image":
            here.append({"t": "img", "alt": inline_text(token.children or [])})
        elif kind in ("em_open", "strong_open", "link_open"):
            node: dict[str, Any] = {"t": kind.removesuffix("_open"), "c": []}
            if kind == "link_open":
                href = str(token.attrGet("href") or "")
                shown = bool(href) and not href.startswith("#") and token.markup != "autolink" and not in_heading
                node.update({"href": href, "show-href": shown})  # a heading keeps its text only
            here.append(node)
            stack.append(node["c"])
        elif kind in ("em_close", "strong_close", "link_close") and len(stack) > 1:
            stack.pop()
    return root


# ---------------------------------------------------------------- blocks


def _code(text: str, info: str) -> Block:
    lines = []
    for line in text.rstrip("\n").split("\n"):
        lines += [line[i : i + CODE_COLUMNS] for i in range(0, len(line), CODE_COLUMNS)] or [""]
    language = info.split()[0] if info.strip() else ""
    return {"t": "code", "s": "\n".join(lines), "lang": language or None}


class _Blocks:
    """markdown-it's flat token stream -> nested blocks."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.at = 0

    def until(self, closing: str | None) -> list[Block]:
        out: list[Block] = []
        while self.at < len(self.tokens):
            token = self.tokens[self.at]
            self.at += 1
            if closing is not None and token.type == closing:
                return out
            block = self.one(token)
            if block is not None:
                out.append(block)
        return out

    def one(self, token: Token) -> Block | None:
        """The block that starts at `token` (its tokens consumed), or None for a token that makes none."""
        kind = token.type
        if kind in ("heading_open", "paragraph_open"):
            return self.text_block(token)
        if kind in ("fence", "code_block"):
            return _code(token.content, token.info if kind == "fence" else "")
        if kind in ("bullet_list_open", "ordered_list_open"):
            return self.list(token)
        if kind == "blockquote_open":
            return {"t": "quote", "c": self.until("blockquote_close")}
        if kind == "table_open":
            return self.table()
        if kind == "hr":
            return {"t": "hr"}
        return None  # raw HTML never makes a block: the parser has html off, so it is paragraph text

    def text_block(self, opening: Token) -> Block:
        """A heading or a paragraph: its inline token, then its closing token."""
        inline = self.tokens[self.at]
        self.at += 2
        if opening.type == "paragraph_open":
            return {"t": "p", "c": _inline(inline.children or [])}
        text = " ".join(inline_text(inline.children or []).split())
        runs = _inline(inline.children or [], in_heading=True)
        return {"t": "h", "l": int(opening.tag[1]), "c": runs, "has-text": bool(text)}

    def list(self, opening: Token) -> Block:
        ordered = opening.type == "ordered_list_open"
        closing = "ordered_list_close" if ordered else "bullet_list_close"
        items: list[list[Block]] = []
        tight = True
        while self.at < len(self.tokens) and self.tokens[self.at].type != closing:
            token = self.tokens[self.at]
            self.at += 1
            if token.type == "list_item_open":
                start = self.at
                items.append(self.until("list_item_close"))
                tight = tight and all(t.hidden for t in self.tokens[start : self.at] if t.type == "paragraph_open")
        self.at += 1
        block: Block = {"t": "ol" if ordered else "ul", "items": items, "tight": tight}
        if ordered:
            block["start"] = int(opening.attrGet("start") or 1)
        return block

    def table(self) -> Block:
        rows: list[list[list[Node]]] = []
        head = 0
        while self.at < len(self.tokens) and self.tokens[self.at].type != "table_close":
            token = self.tokens[self.at]
            self.at += 1
            if token.type == "thead_open":
                head = 1
            elif token.type == "tr_open":
                rows.append([])
            elif token.type == "inline" and rows:
                rows[-1].append(_inline(token.children or []))
        self.at += 1
        columns = max((len(row) for row in rows), default=1) or 1
        cells = [cell for row in rows for cell in row + [[]] * (columns - len(row))]
        return {"t": "table", "columns": columns, "head": head, "cells": cells, "key-column": False}


def markdown_blocks(markdown: str) -> list[Block]:
    """Markdown (already `untitled`) as blocks."""
    return _Blocks(_parser().parse(markdown)).until(None)


# ---------------------------------------------------------------- the appendix (our own HTML)


TEXT_TAGS = ("h2", "h3", "h4", "p", "li", "th", "td")  # the appendix's elements that hold a run of text


class _AppendixReader(HTMLParser):
    """typeset.appendix's HTML (headings, paragraphs, lists, tables, code; every text escaped) as blocks."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self.runs: list[Node] | None = None  # the heading, paragraph, item or cell being read
        self.items: list[list[Block]] | None = None
        self.table: Block | None = None
        self.level = 0
        self.code = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in TEXT_TAGS:
            self.runs = []
            self.level = int(tag[1]) if tag[0] == "h" else 0
        elif tag == "ul":
            self.items = []
        elif tag == "table":
            self.table = {"t": "table", "columns": 0, "head": 0, "cells": [], "row": 0, "key-column": False}
        elif tag == "thead" and self.table is not None:
            self.table["head"] = 1
        elif tag == "tr" and self.table is not None:
            self.table["row"] = 0
        elif tag == "code":
            self.code = True

    def handle_endtag(self, tag: str) -> None:
        runs = self.runs
        if tag in TEXT_TAGS:
            self.runs = None
        if tag in ("h2", "h3", "h4") and runs is not None:
            text = "".join(r for r in runs if isinstance(r, str)).strip()
            self.blocks.append({"t": "h", "l": self.level, "c": runs, "has-text": bool(text)})
        elif tag == "p" and runs is not None:
            self.blocks.append({"t": "p", "c": runs})
        elif tag == "li" and runs is not None and self.items is not None:
            self.items.append([{"t": "p", "c": runs}])
        elif tag == "ul" and self.items is not None:
            self.blocks.append({"t": "ul", "items": self.items, "tight": True})
            self.items = None
        elif tag in ("th", "td") and runs is not None and self.table is not None:
            self.table["key-column"] |= tag == "th" and self.table["row"] == 0 and not self.table["head"]
            self.table["cells"].append(runs)
            self.table["row"] += 1
            self.table["columns"] = max(self.table["columns"], self.table["row"])
        elif tag == "table" and self.table is not None:
            self.blocks.append(_square(self.table))
            self.table = None
        elif tag == "code":
            self.code = False

    def handle_data(self, data: str) -> None:
        if self.runs is not None:
            self.runs.append({"t": "code", "s": data} if self.code else _breakable(data))


def _square(table: Block) -> Block:
    """A table's cells, padded so every row has the table's column count (ours always are)."""
    columns = max(1, table["columns"])
    cells = table["cells"] + [[]] * (-len(table["cells"]) % columns)
    return {"t": "table", "columns": columns, "head": table["head"], "cells": cells, "key-column": table["key-column"]}


def appendix_blocks(appendix_html: str) -> list[Block]:
    if not appendix_html.strip():
        return []
    reader = _AppendixReader()
    reader.feed(appendix_html)
    reader.close()
    return reader.blocks


# ---------------------------------------------------------------- compiling


def book_data(markdown: str, title: str, appendix_html: str = "", shape: BookShape | None = None) -> dict[str, Any]:
    """What templates/book.typ lays out: the title, what the book holds, where parts and chapters start,
    the blocks of the book and of its appendix."""
    text, heading, _ = untitled(markdown, with_tokens=False)
    tokens = _parser().parse(text)
    blocks = _Blocks(tokens).until(None)
    headings = [Heading(b["l"], "", "") for b in _headings(blocks) if b["has-text"]]
    shape = shape or book_shape(tokens, source_lines(text))
    return {
        "title": heading or title,
        "held": held_line(heading_counts(headings)),
        "shape": {"parts": str(shape.parts), "chapters": str(shape.chapters)},
        "blocks": blocks,
        "appendix": appendix_blocks(appendix_html),
    }


def _headings(blocks: list[Block]) -> list[Block]:
    """Every heading block, those inside quotes and list items too."""
    found = []
    for block in blocks:
        if block["t"] == "h":
            found.append(block)
        elif block["t"] == "quote":
            found += _headings(block["c"])
        for item in block.get("items") or []:
            found += _headings(item)
    return found


@lru_cache(maxsize=1)
def dejavu_folder() -> Path:
    """The folder of the DejaVu fonts (fontconfig's answer, else the Debian path), asked once a process: a
    book run checks it at start and every compile needs it."""
    try:
        found = subprocess.run(
            ["fc-match", "-f", "%{file}", "DejaVu Serif"], capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        found = ""
    if found.endswith(("DejaVuSerif.ttf", "DejaVuSerif-Book.ttf")) and Path(found).is_file():
        return Path(found).parent
    for folder in DEJAVU_FALLBACK_FOLDERS:
        if (Path(folder) / "DejaVuSerif.ttf").is_file():
            return Path(folder)
    raise FanoutError("the DejaVu fonts are not installed (fonts-dejavu-core): run make setup")


def compile_pdf(data: dict[str, Any]) -> bytes:
    """The PDF bytes of templates/book.typ laid out from `data`, in a root folder holding that file alone."""
    import typst

    root = Path(tempfile.mkdtemp(prefix="fanout-typst-"))
    main = root / "book.typ"
    shutil.copyfile(template_path("book.typ"), main)
    try:
        pdf, warnings = typst.compile_with_warnings(
            main,
            None,
            root=root,
            font_paths=[dejavu_folder()],
            ignore_system_fonts=True,
            format="pdf",
            sys_inputs={"book": json.dumps(data, ensure_ascii=False)},
        )
    except typst.TypstError as error:
        log.debug("typst: %s", error.diagnostic)
        raise FanoutError(f"typst could not typeset the book: {error.message}") from None
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for warning in warnings:
        log.debug("typst: %s", getattr(warning, "message", warning))
    assert isinstance(pdf, bytes), "a PDF compile returns one document's bytes"
    return pdf


def typeset_typst(
    markdown: str, title: str, out_pdf: Path, appendix_html: str = "", *, shape: BookShape | None = None
) -> TypesetResult:
    """Typeset the book to `out_pdf` (atomically) with Typst, in this process. `shape` None: read from the
    book (`shape.book_shape`); a fanout run passes the handbook's own (parts open, chapters start a page)."""
    started = time.perf_counter()
    pdf = compile_pdf(book_data(markdown, title, appendix_html, shape))
    with atomic_target(out_pdf) as tmp:
        tmp.write_bytes(pdf)
    return TypesetResult(
        pages=_page_count(pdf),
        seconds=time.perf_counter() - started,
        path=out_pdf,
        render_seconds=time.perf_counter() - started,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )


def _page_count(pdf: bytes) -> int:
    """Typst writes its one page-tree node first (`<</Type/Pages/Count N/Kids[...]>>`): read N there, and
    only when it is not there (another Typst version) read the PDF with pypdf, which takes 0.3 s at 700 pages."""
    found = PAGE_TREE.search(pdf, 0, 4096)
    if found:
        return int(found[1])
    import io

    import pypdf

    root: Any = pypdf.PdfReader(io.BytesIO(pdf)).trailer["/Root"]
    return int(root["/Pages"]["/Count"])
