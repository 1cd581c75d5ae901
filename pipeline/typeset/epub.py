"""The EPUB edition: the same Markdown, the same HTML renderer and stylesheet as the PDF, packed by EbookLib.

One XHTML document a part (so a reader opens a 1,536-section book without parsing it whole), a title page,
the appendix when there is one, and a navigation tree parts > chapters > sections (EPUB 3 nav and the
EPUB 2 NCX, for older readers). Model text reaches the EPUB only through `render_markdown` (raw HTML
escaped, images reduced to their alt text), so the package references nothing outside itself.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pipeline.files import atomic_target
from pipeline.templating import template_path
from pipeline.typeset.markdown import TOC_LEVELS, Heading, heading_counts, render_markdown, title_page_html
from pipeline.typeset.parts import split_book

CSS_NAME = "style/book.css"


def typeset_epub(markdown: str, title: str, out_epub: Path, appendix_html: str = "") -> Path:
    """Write `out_epub` atomically and return its path."""
    from ebooklib import epub

    split = split_book(markdown, title)
    book = epub.EpubBook()
    book.set_identifier("fanout-" + hashlib.sha256(markdown.encode()).hexdigest()[:24])
    book.set_title(split.title)
    book.set_language("en")
    style = epub.EpubItem(
        uid="style", file_name=CSS_NAME, media_type="text/css", content=template_path("book.css").read_bytes()
    )
    book.add_item(style)

    rendered = [render_markdown(part, prefix=f"p{i}-") for i, part in enumerate(split.parts)]
    counts = heading_counts([h for _, headings in rendered for h in headings])
    title_page = _document("title.xhtml", split.title, title_page_html(split.title, counts), style)
    documents = [title_page]
    toc: list = []
    for index, (body, headings) in enumerate(rendered):
        if not body.strip():  # nothing to read (a preamble of link definitions); EbookLib refuses empty bodies
            continue
        name = f"part-{index:04d}.xhtml"
        label = next((h.text for h in headings if h.level == 2 and h.text), f"Part {index + 1}")
        documents.append(_document(name, label, body, style))
        toc.extend(_nav_tree(name, [h for h in headings if h.level in TOC_LEVELS and h.text]))
    if appendix_html.strip():
        appendix = _document("appendix.xhtml", "Appendix", appendix_html, style)
        documents.append(appendix)
        toc.append(epub.Link(appendix.file_name, "Appendix", "appendix"))

    for document in documents:
        book.add_item(document)
    book.toc = toc
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = [title_page, "nav", *documents[1:]]
    with atomic_target(out_epub) as tmp:
        epub.write_epub(str(tmp), book)
    return out_epub


def _document(name: str, label: str, body: str, style):
    from ebooklib import epub

    document = epub.EpubHtml(title=label, file_name=name, lang="en")
    document.content = f"<html><head></head><body>{body}</body></html>"
    document.add_item(style)
    return document


def _nav_tree(file_name: str, headings: list[Heading]) -> list:
    """Headings in document order -> EbookLib's nested toc: a Link, or (Link, [children]) when it has any."""
    from ebooklib import epub

    root: list = []
    stack: list[tuple[int, list]] = [(0, root)]
    for heading in headings:
        while stack[-1][0] >= heading.level:
            stack.pop()
        children: list = []
        link = epub.Link(f"{file_name}#{heading.anchor}", heading.text, heading.anchor)
        stack[-1][1].append((link, children))
        stack.append((heading.level, children))
    return [_leaf_or_branch(item) for item in root]


def _leaf_or_branch(item: tuple) -> object:
    link, children = item
    return (link, [_leaf_or_branch(child) for child in children]) if children else link
