"""The typesetting stage: Markdown -> HTML -> PDF with WeasyPrint, on small books (whole file ~10 s)."""

from __future__ import annotations

import gc
import re
from pathlib import Path

import pypdf
import pytest

from pipeline.errors import FanoutError
from pipeline.templating import template_path
from pipeline.typeset import weasy
from pipeline.typeset.book import typeset_html, typeset_pdf
from pipeline.typeset.markdown import markdown_to_html
from tests.fakes.hostile import hostile_markdown

PARTS, CHAPTERS, SECTIONS = 2, 2, 2  # per book, per part, per chapter
PART_NAMES = ["Foundations", "Practice"]
FILLER = (
    "Starter culture keeps best when it is fed on a steady schedule, kept warm but not hot, and "
    "watched for the smell of acetone that signals hunger. "
) * 9


def _section_body(p: int, c: int, s: int) -> str:
    body = f"{FILLER}\n\n"
    if s == 1:
        body += (
            "```python\n"
            f"def feed_{p}{c}(grams: int) -> dict:\n"
            "    return {'flour': grams, 'water': grams, 'note': '" + "x" * 180 + "'}\n"
            "```\n\n"
        )
    else:
        body += (
            "| Day | Flour (g) | Water (g) |\n|---|---|---|\n| 1 | 50 | 50 |\n| 2 | 100 | 100 |\n\n"
            "- discard half\n- feed equal weights\n- wait for the rise\n\n"
        )
    return body + f"{FILLER}\n"


def book_markdown() -> str:
    lines = ["# Keeping Sourdough Alive\n"]
    for p in range(1, PARTS + 1):
        lines.append(f"## Part {p}: {PART_NAMES[p - 1]}\n")
        for c in range(1, CHAPTERS + 1):
            lines.append(f"### Chapter {p}.{c} Rhythm{p}{c}\n")
            for s in range(1, SECTIONS + 1):
                lines.append(f"#### Section {p}.{c}.{s} Topic{p}{c}{s}\n")
                lines.append(_section_body(p, c, s))
    return "\n".join(lines)


def heading_titles() -> list[str]:
    titles = []
    for p in range(1, PARTS + 1):
        titles.append(f"Part {p}: {PART_NAMES[p - 1]}")
        for c in range(1, CHAPTERS + 1):
            titles.append(f"Chapter {p}.{c} Rhythm{p}{c}")
            titles += [f"Section {p}.{c}.{s} Topic{p}{c}{s}" for s in range(1, SECTIONS + 1)]
    return titles


def _outline_count(outline) -> int:
    return sum(_outline_count(item) if isinstance(item, list) else 1 for item in outline)


def _page_lines(reader: pypdf.PdfReader) -> list[list[str]]:
    return [[line.strip() for line in (page.extract_text() or "").splitlines()] for page in reader.pages]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("typeset") / "book.pdf"
    threshold = gc.get_threshold()
    result = typeset_pdf(book_markdown(), "Keeping Sourdough Alive", out)
    assert gc.get_threshold() == threshold, "typeset_pdf must restore the gc thresholds"
    return result


def test_book_pdf_has_pages_bookmarks_and_fonts(rendered):
    assert rendered.path.is_file() and rendered.seconds > 0
    assert not list(rendered.path.parent.glob(".*.tmp")), "temporary file left behind"
    reader = pypdf.PdfReader(rendered.path)
    assert len(reader.pages) == rendered.pages > 3
    assert _outline_count(reader.outline) == PARTS + PARTS * CHAPTERS + PARTS * CHAPTERS * SECTIONS
    top = [item["/Title"] for item in reader.outline if not isinstance(item, list)]
    assert top == [f"Part {p}: {PART_NAMES[p - 1]}" for p in range(1, PARTS + 1)]
    fonts = {
        str(f["/BaseFont"]).replace("-", "")
        for page in reader.pages
        for f in (page["/Resources"].get("/Font") or {}).values()
        if "/BaseFont" in f.get_object()
    }
    assert any("DejaVuSerif" in f for f in fonts) and any("DejaVuSansMono" in f for f in fonts), fonts


def test_toc_page_numbers_match_heading_pages(rendered):
    """Front matter is numbered i, ii, ...; the body 1, 2, ... from its first page: the PDF's page labels
    say so too, and the contents, the printed numbers and the labels all agree."""
    reader = pypdf.PdfReader(rendered.path)
    pages = _page_lines(reader)
    labels = reader.page_labels
    toc_entry = re.compile(r"^(.*?)\s*\.{3,}\s*(\d+)$")
    toc = {}
    toc_pages = set()
    for index, lines in enumerate(pages):
        for line in lines:
            if match := toc_entry.match(line):
                toc[match[1]] = int(match[2])
                toc_pages.add(index)
    assert set(heading_titles()) <= set(toc), f"TOC misses entries: {set(heading_titles()) - set(toc)}"
    for title in heading_titles():
        found = [i for i, lines in enumerate(pages) if i not in toc_pages and title in lines]
        assert found, f"heading {title!r} not found in the body"
        page_number = int(labels[found[0]])
        assert toc[title] == page_number, f"TOC says {title!r} is on {toc[title]}, it is on {page_number}"
        assert pages[found[0]][-1] == str(page_number), "printed page number differs from the page label"
    section_pages = {toc[t] for t in heading_titles() if t.startswith("Section")}
    assert len(section_pages) > 2, "test book too small: sections should spread over several pages"


def test_hostile_markdown_is_escaped_and_fetches_nothing(listener, tmp_path):
    markdown = hostile_markdown(listener.port)
    page = markdown_to_html(markdown, "Hostile")
    single = typeset_html(markdown, "Hostile", tmp_path / "book.html").read_text()
    for document in (page, single):
        for tag in ("<script", "<img", "<iframe", "<object", "<embed", f':{listener.port}/evil.css"'):
            assert tag not in document.lower(), tag
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in document
    result = typeset_pdf(markdown, "Hostile", tmp_path / "book.pdf")
    text = "\n".join(p.extract_text() or "" for p in pypdf.PdfReader(result.path).pages)
    assert "root:x:0:0" not in text
    assert "<script>alert(1)</script>" in text, "escaped model text should still be shown"
    assert listener.connections == 0


def test_url_fetcher_serves_only_templates(listener):
    fetcher = weasy.templates_only_fetcher()
    response = fetcher(template_path("book.css").as_uri())
    assert b"@page" in response.read()
    response.close()
    refused = [
        "file:///etc/passwd",
        f"http://127.0.0.1:{listener.port}/x.png",
        (template_path("book.css").parent / ".." / "pyproject.toml").as_uri(),
        "data:text/css,body{}",
    ]
    for url in refused:
        with pytest.raises(ValueError):
            fetcher(url)
    assert listener.connections == 0


def test_heading_ids_are_unique_and_toc_links_resolve():
    page = markdown_to_html("# T\n## Intro\n### Intro\n#### Intro\n#### 1. Über *Alles*\n", "T")
    ids = re.findall(r'<h\d id="([^"]+)"', page)
    assert len(ids) == len(set(ids)) == 5
    assert ids[1:4] == ["intro", "intro-2", "intro-3"]
    assert set(re.findall(r'<a href="#([^"]+)"', page)) == set(ids[1:])
    assert "über-alles" in ids[-1]


def test_no_fonts_fails_cleanly(tmp_path, monkeypatch):
    config = tmp_path / "fonts.conf"
    config.write_text('<?xml version="1.0"?>\n<fontconfig></fontconfig>\n')
    monkeypatch.setenv("FONTCONFIG_FILE", str(config))
    with pytest.raises(FanoutError, match="no fonts installed"):
        typeset_pdf("# T\n", "T", tmp_path / "book.pdf")
    assert not (tmp_path / "book.pdf").exists()


def test_failed_render_leaves_no_file(tmp_path, monkeypatch):
    from weasyprint.document import Document

    def half_written(self, target=None, *args, **options):
        Path(target).write_bytes(b"%PDF-1.7 half")
        raise RuntimeError("disk full")

    monkeypatch.setattr(Document, "write_pdf", half_written)
    with pytest.raises(RuntimeError, match="disk full"):
        typeset_pdf("# T\n## P\n", "T", tmp_path / "book.pdf")
    assert list(tmp_path.iterdir()) == []
