"""The part-parallel PDF: parts rendered in a process pool, front matter with real page numbers, pypdf merge.

One three-part book (every Markdown element inside) is rendered once through a 2-process pool; the tests
read it back with pypdf: bookmarks, contents numbers and links against where headings really are, printed
page numbers, right-hand part openers.
"""

from __future__ import annotations

import json
import re
import zipfile

import pypdf
import pytest

from pipeline.cli import main
from pipeline.typeset.book import typeset_book, typeset_html, typeset_pdf
from pipeline.typeset.code import highlight
from pipeline.typeset.markdown import markdown_to_html
from pipeline.typeset.merge import roman
from pipeline.typeset.parts import PartTypesetter, split_book

PARTS, CHAPTERS, SECTIONS = 3, 2, 2
TEXT = (
    "A starter kept on the counter wants feeding twice a day; in the fridge, once a week will do, and "
    "the smell tells you which it needs. "
) * 7
LONG_CODE_LINE = "    return {" + ", ".join(f"'key{i}': {i}" for i in range(40)) + "}"
EVERY_ELEMENT = f"""{TEXT}

```python
def feed(starter, grams=50):
    # a comment, then a line far too long for an A5 page
{LONG_CODE_LINE}
```

| Day | Flour (g) | Water (g) | Note |
|---|---|---|---|
| 1 | 50 | 50 | bubbly |
| 2 | 100 | 100 | doubled by evening |

- first level
  - second level
    - third level item
- back out
  1. ordered inside
  2. and again

> A quoted remark about starters,
> over two lines.

Use `inline_code()` sparingly.

##### A fifth-level heading

###### A sixth-level heading

{TEXT}
"""


def book_markdown() -> str:
    lines = ["# Parallel Sourdough", ""]
    for p in range(1, PARTS + 1):
        lines += [f"## Part {p}. Stage{p}", ""]
        for c in range(1, CHAPTERS + 1):
            lines += [f"### {p}.{c} Habit{p}{c}", ""]
            for s in range(1, SECTIONS + 1):
                body = EVERY_ELEMENT if (p, c, s) == (2, 1, 1) else f"{TEXT}\n\n{TEXT}\n"
                lines += [f"#### {p}.{c}.{s} Topic{p}{c}{s}", "", body, ""]
    return "\n".join(lines)


def heading_titles() -> list[str]:
    titles = []
    for p in range(1, PARTS + 1):
        titles.append(f"Part {p}. Stage{p}")
        for c in range(1, CHAPTERS + 1):
            titles.append(f"{p}.{c} Habit{p}{c}")
            titles += [f"{p}.{c}.{s} Topic{p}{c}{s}" for s in range(1, SECTIONS + 1)]
    return titles


def _outline_titles(outline, depth=0) -> list[tuple[int, str]]:
    out = []
    for item in outline:
        if isinstance(item, list):
            out += _outline_titles(item, depth + 1)
        else:
            out.append((depth, item["/Title"]))
    return out


def _outline_items(outline) -> list:
    return [x for item in outline for x in (_outline_items(item) if isinstance(item, list) else [item])]


def _lines(reader: pypdf.PdfReader) -> list[list[str]]:
    return [
        [line.strip() for line in (page.extract_text() or "").splitlines() if line.strip()] for page in reader.pages
    ]


def _toc(pages: list[list[str]]) -> tuple[dict[str, int], set[int]]:
    entry = re.compile(r"^(.*?)\s*\.{3,}\s*(\d+)$")
    toc, toc_pages = {}, set()
    for index, lines in enumerate(pages):
        for line in lines:
            if match := entry.match(line):
                toc[match[1]] = int(match[2])
                toc_pages.add(index)
    return toc, toc_pages


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    out = tmp_path_factory.mktemp("parallel") / "book.pdf"
    result = typeset_pdf(book_markdown(), "Parallel Sourdough", out, workers=2)
    reader = pypdf.PdfReader(out)
    return result, reader, _lines(reader)


def test_bookmarks_count_parts_chapters_sections(book):
    _, reader, _ = book
    titles = _outline_titles(reader.outline)
    assert len(titles) == PARTS + PARTS * CHAPTERS + PARTS * CHAPTERS * SECTIONS
    assert [t for depth, t in titles if depth == 0] == [f"Part {p}. Stage{p}" for p in range(1, PARTS + 1)]
    assert [t for _, t in titles] == heading_titles()
    _, _, pages = book
    for item in _outline_items(reader.outline):  # every bookmark lands on its heading's page
        assert item["/Title"] in pages[reader.get_destination_page_number(item)], item["/Title"]


def test_toc_numbers_match_heading_pages_across_parts(book):
    _, reader, pages = book
    toc, toc_pages = _toc(pages)
    assert set(heading_titles()) <= set(toc), set(heading_titles()) - set(toc)
    labels = reader.page_labels
    for title in heading_titles():
        found = [i for i, lines in enumerate(pages) if i not in toc_pages and title in lines]
        assert found, f"heading {title!r} not found in the body"
        assert toc[title] == int(labels[found[0]]), (
            f"contents say {title!r} is on {toc[title]}, it is on page {labels[found[0]]}"
        )


def test_printed_page_numbers_are_continuous_and_parts_open_on_right(book):
    result, reader, pages = book
    assert result.pages == len(reader.pages) and len(pages) % 2 == 0
    labels = reader.page_labels
    body = labels.index("1")
    assert labels[:body] == [roman(i) for i in range(1, body + 1)] and body % 2 == 0
    assert labels[body:] == [str(i) for i in range(1, len(pages) - body + 1)]
    blank = {i for i, lines in enumerate(pages) if not lines}
    assert 1 in blank and 0 not in blank, "title page, then its blank verso"
    for i, lines in enumerate(pages):
        if i and i not in blank:
            assert lines[-1] == labels[i], f"page {i}: printed {lines[-1]!r}, label {labels[i]!r}"
    assert pages[0][-1] != "i", "the title page carries no number"
    toc, _ = _toc(pages)
    for p in range(1, PARTS + 1):
        assert toc[f"Part {p}. Stage{p}"] % 2 == 1, "parts open on right-hand (odd) pages"


def test_toc_entries_link_to_their_headings(book):
    _, reader, pages = book
    toc, toc_pages = _toc(pages)
    targets = []
    for index in sorted(toc_pages):
        for annot in reader.pages[index].get("/Annots", []):
            annot = annot.get_object()
            if annot.get("/Subtype") == "/Link" and "/Dest" in annot:
                targets.append(int(reader.page_labels[reader.get_page_number(annot["/Dest"][0].get_object())]))
    assert sorted(targets) == sorted(toc[t] for t in heading_titles())


def test_every_element_renders(book):
    _, _, pages = book
    text = "\n".join(line for lines in pages for line in lines)
    for piece in (
        "Flour (g)",
        "doubled by evening",
        "third level item",
        "ordered inside",
        "A quoted remark about starters,",
        "inline_code()",
        "A fifth-level heading",
        "A sixth-level heading",
        "def feed(starter, grams=50):",
        "'key39': 39}",
    ):
        assert piece in text, piece
    page = markdown_to_html(book_markdown(), "Parallel Sourdough")
    assert "<table>" in page and "<blockquote>" in page and "<h5" in page and "<h6" in page
    assert page.count("<ul>") >= 3 and "<ol>" in page


def test_lean_highlighter_spans_only_styled_tokens():
    code = "def feed(x):\n    return x + 1  # more\n"
    html = highlight(code, "python")
    assert html.startswith('<pre class="code" data-lang="python"><code>')
    spans = re.findall(r'<span class="(\w+)">([^<]*)</span>', html)
    assert ("k", "def") in spans and ("nf", "feed") in spans and ("m", "1") in spans
    assert ("c", "# more") in spans and len(spans) == 5  # def, feed, return, 1, the comment
    assert re.sub(r"<[^>]+>", "", html).replace("&gt;", ">").rstrip("\n") == code.rstrip("\n")
    assert "<span" not in highlight("<script>x</script>", "no-such-language")
    highlighted = highlight("<script>x</script>", "html")
    assert "<script" not in highlighted and "&lt;<span" in highlighted


def test_split_book_ignores_fenced_headings_and_keeps_the_preamble():
    markdown = "# T\nintro text\n## A\n```\n## not a part\n```\ntext\n## B\nmore\n"
    book = split_book(markdown, "fallback")
    assert book.title == "T"
    assert [p.splitlines()[0] for p in book.parts] == ["intro text", "## A", "## B"]
    assert "## not a part" in book.parts[1]


def test_part_typesetter_takes_parts_in_any_order(tmp_path):
    parts = split_book("# T\n## P1\n### C1\n#### S1\ntext one\n## P2\n### C2\n#### S2\ntext two\n", "T").parts
    with PartTypesetter("T", tmp_path / "book.pdf", workers=0) as typesetter:
        typesetter.submit_part(1, parts[1])
        typesetter.submit_part(0, parts[0])
        result = typesetter.finish()
    reader = pypdf.PdfReader(result.path)
    assert [t for _, t in _outline_titles(reader.outline)] == ["P1", "C1", "S1", "P2", "C2", "S2"]
    with PartTypesetter("T", tmp_path / "gap.pdf", workers=0) as typesetter:
        typesetter.submit_part(1, parts[1])
        with pytest.raises(Exception, match="expected 0"):
            typesetter.finish()
    assert not (tmp_path / "gap.pdf").exists()


def test_run_folder_gets_an_appendix_and_survives_a_bad_audit(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "book.md").write_text("# Tiny\n## Part 1. One\n### 1. Chapter\n#### 1.1 Section\nSome text.\n")
    (folder / "stats.json").write_text(
        json.dumps(
            {"sections": 1, "write_tok_s": 51.7, "complete": True, "backends": [{"name": "embedded", "cap": 16}]}
        )
    )
    (folder / "audit.json").write_text(json.dumps({"counts": {"truncated": 2}, "summary": ["two cut short"]}))
    result, html_path, epub_path = typeset_book(folder, workers=2)
    text = "\n".join(p.extract_text() or "" for p in pypdf.PdfReader(result.path).pages)
    for piece in ("Run statistics", "Write tok s", "51.7", "embedded", "Audit", "truncated", "two cut short"):
        assert piece in text, piece
    assert "Run statistics" in html_path.read_text()
    assert "Run statistics" in zipfile.ZipFile(epub_path).read("EPUB/appendix.xhtml").decode()
    (folder / "audit.json").write_text("[not an object")
    (folder / "stats.json").unlink()
    result, _, _ = typeset_book(folder, tmp_path / "out", workers=0)
    text = "\n".join(p.extract_text() or "" for p in pypdf.PdfReader(result.path).pages)
    assert "Appendix" not in text and "Some text." in text


def test_hostile_parts_through_the_pool_fetch_nothing(tmp_path):
    from tests.fakes.hostile import Listener, hostile_markdown

    listener = Listener()
    try:
        markdown = hostile_markdown(listener.port) + "\n## Part Two\n" + hostile_markdown(listener.port)
        result = typeset_pdf(markdown, "Hostile", tmp_path / "book.pdf", workers=2)
        single = typeset_html(markdown, "Hostile", tmp_path / "book.html").read_text()
    finally:
        listener.close()
    text = "\n".join(p.extract_text() or "" for p in pypdf.PdfReader(result.path).pages)
    assert "root:x:0:0" not in text and "<script>alert(1)</script>" in text
    assert "<script" not in single and "<iframe" not in single
    assert listener.connections == 0


def test_cli_typeset_writes_pdf_html_and_epub(tmp_path, capsys):
    source = tmp_path / "notes.md"
    source.write_text("# Notes\n## Part 1. Only\n### 1. Chapter\n#### 1.1 Section\nText.\n")
    assert main(["typeset", str(source), "--out", str(tmp_path / "out"), "--workers", "0"]) == 0
    for edition in ("book.pdf", "book.html", "book.epub"):
        assert (tmp_path / "out" / edition).is_file(), edition
    assert "book.pdf" in capsys.readouterr().err
    assert main(["typeset", str(tmp_path / "missing.md")]) == 2


def test_a_part_whose_render_worker_dies_is_rendered_again_at_the_end(tmp_path, caplog):
    """A render worker SIGKILLed while parts are in the pool breaks it: the parts it took down are rendered
    again on a fresh pool, behind the rest, and the book has every part."""
    import os
    import signal

    source = "# T\n" + "".join(f"## P{n}\n### C{n}\n#### S{n}\n{TEXT}\n" for n in range(1, 5))
    parts = split_book(source, "T").parts
    with PartTypesetter("T", tmp_path / "book.pdf", workers=2) as typesetter:
        typesetter.warm()
        workers = list(typesetter.scheduler.pool._processes)
        for index, part in enumerate(parts):
            typesetter.submit_part(index, part)
        os.kill(workers[0], signal.SIGKILL)
        result = typesetter.finish()
    reader = pypdf.PdfReader(result.path)
    assert [t for _, t in _outline_titles(reader.outline) if t.startswith("P")] == ["P1", "P2", "P3", "P4"]
    assert "rendering it again after the rest" in caplog.text
