"""Reading the documents a user gives: files and folders -> each file's text as blocks (a heading path, a paragraph,
a page) with what the file is (records.sources.SourceFile), or a line saying why it was skipped.

Kinds by suffix: Markdown (.md, .markdown, .mdx; read with markdown-it-py, the book's own parser; code blocks kept
fenced), plain text (.txt,
.text, .rst), HTML (.html, .htm, .xhtml; parsed by lxml, a real HTML parser, with scripts, styles, navigation,
headers and footers left out) and PDF (pypdf: the text of each page, and the PDF's own outline as the heading path
of its pages). A file named on its own with another suffix is read as plain text when it is text; in a folder such
files are skipped, counted by suffix. A folder is walked in name order, links followed once: a link back to a folder
already walked is a symlink loop, skipped. Files and folders whose name starts with a dot are left out.

Nothing a file holds is trusted: its text is data for the model's prompt and the references, never markup, a path
or a URL fetched. What is skipped is skipped with why (Skipped): a file over MAX_SOURCE_BYTES, a binary file (a NUL
byte in its first block), text that is not UTF-8, an encrypted PDF that opens with no password, a PDF pypdf cannot
read or whose pages hold no text (a scan), a file with no text at all, a broken link, a path that is not there.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import lxml.html
from lxml import etree

from pipeline.document import inline_tokens
from pipeline.records.sources import Skipped, SourceFile
from pipeline.text import paragraphs

MAX_SOURCE_BYTES = 64 * 1024 * 1024  # a larger file is skipped: 64 MB is a 20,000-page manual's text
SNIFF_BYTES = 8192
NOT_A_KIND = "not a kind fanout reads"
MARKDOWN = frozenset({".md", ".markdown", ".mdx"})
TEXT = frozenset({".txt", ".text", ".rst"})
HTML = frozenset({".html", ".htm", ".xhtml"})
PDF = frozenset({".pdf"})
HTML_LEFT_OUT = ("script", "style", "noscript", "nav", "header", "footer", "aside", "form", "template", "svg")
HTML_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
HTML_BLOCKS = frozenset(
    {"p", "li", "pre", "blockquote", "dd", "dt", "td", "th", "div", "section", "article", "main", "figcaption"}
)
FRONT_MATTER = re.compile(r"\A---\s*\n.*?\n(---|\.\.\.)\s*\n", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Block:
    """One paragraph (or code block, list item, table cell) of a file, under its heading path, on its page."""

    headings: tuple[str, ...]
    text: str
    page: int | None = None


class Unreadable(Exception):
    """A file that cannot be read as a source; its message says why, in a few words."""


def files_under(paths: list[Path]) -> Iterator[tuple[Path, str] | Skipped]:
    """Every file to read, (path, its name as shown), in the order given and in name order within a folder; or a
    Skipped for a path that is not there, a broken link or a symlink loop."""
    for path in paths:
        if not os.path.lexists(path):
            yield Skipped(str(path), "no such file or folder")
        elif path.is_dir():
            yield from _walk(path)
        elif not path.exists():
            yield Skipped(str(path), _link_trouble(path))
        else:
            yield path, str(path)


def _link_trouble(path: Path) -> str:
    try:
        path.stat()
    except OSError as error:
        return "symlink loop" if error.errno == 40 else "broken link"  # 40: ELOOP
    return "broken link"


def _walk(folder: Path) -> Iterator[tuple[Path, str] | Skipped]:
    seen = {folder.resolve()}
    for root, dirs, names in os.walk(folder, followlinks=True):
        here = Path(root)
        for name in sorted(dirs):
            real = (here / name).resolve()
            if real in seen:
                yield Skipped(str(here / name), f"symlink loop (back to {real.name}/)")
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and (here / d).resolve() not in seen)
        seen.update((here / d).resolve() for d in dirs)
        for name in sorted(names):
            if name.startswith("."):
                continue
            path = here / name
            if not path.exists():
                yield Skipped(str(path), _link_trouble(path))
            elif kind_of(path) is None:
                yield Skipped(str(path), f"{NOT_A_KIND} ({path.suffix or 'no suffix'})")
            else:
                yield path, str(path)


def kind_of(path: Path) -> str | None:
    suffix = path.suffix.lower()
    for kind, suffixes in (("markdown", MARKDOWN), ("text", TEXT), ("html", HTML), ("pdf", PDF)):
        if suffix in suffixes:
            return kind
    return None


def too_large(size: int) -> str | None:
    """Why a file of `size` bytes is not read, or None."""
    if size <= MAX_SOURCE_BYTES:
        return None
    return f"{size / 1e6:,.0f} MB, over the {MAX_SOURCE_BYTES // 2**20} MB a source may be"


def parse_file(data: bytes, path: Path, shown: str) -> tuple[SourceFile, list[Block]]:
    """What the file is (no passages cut yet) and its blocks, by the kind its suffix names (text when it names
    none); Unreadable says why not."""
    kind = kind_of(path) or "text"
    if kind == "pdf":
        blocks, pages = pdf_blocks(data)
        return SourceFile(shown, kind, pages=pages), blocks
    if b"\x00" in data[:SNIFF_BYTES]:
        raise Unreadable("binary file")
    if kind == "html":
        return SourceFile(shown, kind), html_blocks(data)
    text = utf8(data)
    return SourceFile(shown, kind), markdown_blocks(text) if kind == "markdown" else text_blocks(text)


def utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise Unreadable(f"not UTF-8 (byte 0x{data[error.start]:02x} at {error.start:,})") from error


def text_blocks(text: str, *, page: int | None = None, headings: tuple[str, ...] = ()) -> list[Block]:
    """Paragraphs at blank lines, each one line."""
    return [Block(headings, paragraph, page) for paragraph in paragraphs(text) if paragraph]


def markdown_blocks(text: str) -> list[Block]:
    """Headings make the path; paragraphs, list items, code blocks and table rows are blocks (front matter and raw
    HTML left out)."""
    tokens = inline_tokens(FRONT_MATTER.sub("", text, count=1))
    path: list[tuple[int, str]] = []
    blocks: list[Block] = []
    for at, token in enumerate(tokens):
        if token.type == "heading_open":
            level = int(token.tag[1:])
            path = [(lv, title) for lv, title in path if lv < level] + [(level, _inline_text(tokens[at + 1]))]
        elif token.type == "inline" and tokens[at - 1].type != "heading_open":
            blocks += _block(path, _inline_text(token))
        elif token.type in ("fence", "code_block") and token.content.strip():
            blocks += _block(path, fenced(token.content, token.info.strip()))
    return blocks


def fenced(code: str, info: str = "") -> str:
    """A code block as the model and the reader should see it: fenced (with its language), so that what it holds
    is never prose (its brackets are no citations)."""
    fence = "````" if "```" in code else "```"
    return f"{fence}{info}\n{code.strip(chr(10))}\n{fence}"


def _block(path: list[tuple[int, str]], text: str) -> list[Block]:
    return [Block(tuple(title for _, title in path if title), text)] if text.strip() else []


def _inline_text(token: object) -> str:
    children = getattr(token, "children", None) or []
    pieces = []
    for child in children:
        if child.type in ("text", "code_inline"):
            pieces.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            pieces.append(" ")
        elif child.type == "image":
            pieces.append(child.content)
    return " ".join("".join(pieces).split())


def html_blocks(data: bytes) -> list[Block]:
    """Headings make the path; the innermost text-bearing blocks are blocks."""
    try:
        root = lxml.html.document_fromstring(data)
    except (etree.ParserError, ValueError) as error:
        raise Unreadable(f"unreadable HTML ({error})") from error
    for element in root.iter(*HTML_LEFT_OUT):
        element.drop_tree()
    path: list[tuple[int, str]] = []
    blocks: list[Block] = []
    wanted = HTML_HEADINGS | HTML_BLOCKS
    for element in root.iter(*wanted):
        text = " ".join(element.text_content().split())
        if element.tag in HTML_HEADINGS:
            level = int(element.tag[1:])
            path = [(lv, title) for lv, title in path if lv < level] + [(level, text)]
        elif not any(inner.tag in wanted for inner in element.iterdescendants()):
            blocks += _block(path, text)
    return blocks


def pdf_blocks(data: bytes) -> tuple[list[Block], int]:
    """Each page's text as paragraphs, under the PDF's outline entry that covers the page."""
    from io import BytesIO

    from pypdf import PdfReader
    from pypdf.errors import DependencyError, PyPdfError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings on a damaged file would reach the terminal
    try:
        reader = PdfReader(BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise Unreadable("encrypted PDF (it needs a password)")
        headings = _outline_by_page(reader)
        blocks: list[Block] = []
        for number, page in enumerate(reader.pages):
            text = _dehyphenate(page.extract_text() or "")
            blocks += text_blocks(text, page=number + 1, headings=headings.get(number, ()))
        pages = len(reader.pages)
    except Unreadable:
        raise
    except DependencyError as error:
        raise Unreadable("encrypted PDF (AES: opening it needs the cryptography package)") from error
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, NotImplementedError) as error:
        raise Unreadable(f"unreadable PDF ({type(error).__name__}: {str(error)[:80]})") from error
    if not blocks:
        raise Unreadable(f"PDF of {pages} page{'s' if pages != 1 else ''} with no text (a scan?)")
    return blocks, pages


def _dehyphenate(text: str) -> str:
    """A PDF page's lines joined: a word broken at a line's end made whole; a line break kept where a blank line
    or a short line ending a sentence is."""
    text = re.sub(r"(\w)-\n(\w)", r"\1\2", text)
    return re.sub(r"([.!?:])\n", r"\1\n\n", text)


def _outline_by_page(reader: object) -> dict[int, tuple[str, ...]]:
    """Page index -> the outline's path to the last entry that starts on or before it."""
    starts: list[tuple[int, tuple[str, ...]]] = []

    def walk(entries: list[object], path: tuple[str, ...]) -> None:
        last: tuple[str, ...] = path
        for entry in entries:
            if isinstance(entry, list):
                walk(entry, last)
                continue
            title = " ".join(str(getattr(entry, "title", "") or "").split())
            try:
                page = reader.get_destination_page_number(entry)  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - a broken outline entry is left out, not the file
                continue
            last = (*path, title) if title else path
            starts.append((page, last))

    try:
        walk(list(getattr(reader, "outline", []) or []), ())
    except Exception:  # noqa: BLE001 - a PDF whose outline cannot be read is read without one
        return {}
    pages = len(getattr(reader, "pages", []))
    found: dict[int, tuple[str, ...]] = {}
    for page, path in sorted(starts, key=lambda start: start[0]):
        for at in range(page, pages):
            found[at] = path
    return found
