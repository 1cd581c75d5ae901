"""Typesetting entry points: book Markdown in; the PDF, the single-file HTML and the EPUB editions out.

- `typeset_html(markdown, title, out_html)`: the whole book as one HTML document (CSS inlined).
- `typeset_pdf(markdown, title, out_pdf) -> TypesetResult`: the PDF, parts in a process pool
  (`typeset.parts`), then the front matter, then the merge (`typeset.merge`).
- `typeset_book(source, out_dir, engine=)`: what `fanout typeset` does for a run folder or a Markdown file (the
  PDF by Typst (`typeset.typst`) or WeasyPrint, the HTML edition and the EPUB edition of `typeset.epub`, with the
  appendix of `typeset.appendix`).
"""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.errors import UsageError
from pipeline.files import atomic_target
from pipeline.records import PdfEngine
from pipeline.templating import template_path
from pipeline.typeset.appendix import appendix_html as make_appendix
from pipeline.typeset.epub import typeset_epub
from pipeline.typeset.markdown import TypesetResult, book_title, document, markdown_body
from pipeline.typeset.parts import PartTypesetter, render_units, split_book
from pipeline.typeset.typst import typeset_typst
from pipeline.typeset.weasy import require_fonts


def typeset_html(markdown: str, title: str, out_html: Path, appendix_html: str = "") -> Path:
    """Write the single-file HTML edition (CSS inlined, nothing external) and return its path."""
    css = template_path("book.css").read_text(encoding="utf-8")
    page = document(title, f"<style>\n{css}</style>\n", markdown_body(markdown, title) + appendix_html, "html-edition")
    with atomic_target(out_html) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return out_html


def typeset_pdf(
    markdown: str, title: str, out_pdf: Path, workers: int | None = None, appendix_html: str = ""
) -> TypesetResult:
    """Render the book to `out_pdf` (atomically): parts in a process pool, then front matter, then merge.

    `workers` None: one a core (at most 4), or none for a one-part book; 0 renders in this process."""
    require_fonts()
    book = split_book(markdown, title)
    units = render_units(book)
    if workers is None and len(units) + bool(appendix_html) < 2:
        workers = 0  # one document: a pool would only add its start-up
    with PartTypesetter(book.title, out_pdf, workers=workers, shape=book.shape) as typesetter:
        for index, part in enumerate(units):
            typesetter.submit_part(index, part)
        return typesetter.finish(appendix_html=appendix_html)


def typeset_book(
    source: Path, out_dir: Path | None = None, workers: int | None = None, *, engine: PdfEngine = PdfEngine.TYPST
) -> tuple[TypesetResult, Path, Path]:
    """`fanout typeset`: a run folder (its book.md, plus stats.json / audit.json as an appendix when there)
    or a Markdown file in; book.pdf, book.html and book.epub out (next to the source unless `out_dir`).
    Returns (the PDF's result, the HTML path, the EPUB path)."""
    if source.is_dir():
        markdown_path, folder = source / "book.md", source
    else:
        markdown_path, folder = source, source.parent
    if not markdown_path.is_file():
        raise UsageError(f"no book to typeset: {markdown_path} is not a file")
    out_dir = out_dir or folder
    markdown = markdown_path.read_text(encoding="utf-8", errors="replace")
    title = book_title(markdown, markdown_path.stem)
    appendix = (
        make_appendix(_read_json(folder / "stats.json"), _read_json(folder / "audit.json")) if source.is_dir() else ""
    )
    if engine is PdfEngine.TYPST:
        result = typeset_typst(markdown, title, out_dir / "book.pdf", appendix_html=appendix)
    else:
        result = typeset_pdf(markdown, title, out_dir / "book.pdf", workers=workers, appendix_html=appendix)
    html_path = typeset_html(markdown, title, out_dir / "book.html", appendix)
    epub_path = typeset_epub(markdown, title, out_dir / "book.epub", appendix)
    return result, html_path, epub_path


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
