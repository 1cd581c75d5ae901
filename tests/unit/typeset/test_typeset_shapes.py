"""Documents no one wrote for fanout, typeset by both PDF engines: their shapes are fixtures written here
(tests/fixtures/typeset/), after two real ones: release notes (a `====` level-1 heading a version, `----` groups
under each; no title heading) and an API reference (one title, a `##` a class, many short `###` entries whose
metadata sits in HTML comments). The book's structure and where pages start come from the document
(pipeline/typeset/shape.py); both engines must give the same bookmarks and contents."""

from __future__ import annotations

from pathlib import Path

import pypdf
import pytest

from pipeline.typeset.parts import render_units, split_book
from pipeline.typeset.shape import BookShape, Break
from tests.unit.typeset.test_typeset_robust import contents_links, expected_bookmarks, pdf_bookmarks, run_cli

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "typeset"
ENGINES = ["typst", "weasyprint"]


def typeset(source: Path, out: Path, engine: str) -> pypdf.PdfReader:
    code, _, err = run_cli(["typeset", str(source), "--out", str(out), "--workers", "0", "--pdf-engine", engine])
    assert code == 0, err
    return pypdf.PdfReader(out / "book.pdf")


def pdf_text(reader: pypdf.PdfReader) -> str:
    return "\n".join(page.extract_text() or "" for page in reader.pages)


def test_the_shapes_are_read_from_the_documents():
    notes = split_book((FIXTURES / "release_notes.md").read_text(), "release_notes")
    assert notes.title == "release_notes" and len(notes.parts) == 40, "forty versions, none taken for the title"
    assert notes.shape == BookShape(parts=Break.RUN_ON, chapters=Break.RUN_ON) and len(render_units(notes)) == 2
    api = split_book((FIXTURES / "api_reference.md").read_text(), "api")
    assert api.title == "HTTP" and api.shape == BookShape(parts=Break.RUN_ON, chapters=Break.RUN_ON)
    handbook = split_book("# T\n" + "".join(f"## P{p}\n" + "### C\n" + "word " * 1200 + "\n" for p in range(3)), "T")
    assert handbook.shape == BookShape(parts=Break.OPENER, chapters=Break.PAGE)


@pytest.mark.parametrize("engine", ENGINES)
def test_release_notes_keep_every_version_and_few_pages(engine, tmp_path):
    source = FIXTURES / "release_notes.md"
    reader = typeset(source, tmp_path, engine)
    bookmarks = pdf_bookmarks(reader.outline)
    assert bookmarks == expected_bookmarks(source.read_text()) and len(bookmarks) == 40 + 120
    assert bookmarks[0] == (0, "Version 1.60.0 (2024-01-07)") and contents_links(reader) == len(bookmarks)
    assert len(reader.pages) < 70, "forty short versions run on: not two pages a version"


@pytest.mark.parametrize("engine", ENGINES)
def test_an_api_reference_runs_its_entries_on_and_drops_its_comments(engine, tmp_path):
    source = FIXTURES / "api_reference.md"
    reader = typeset(source, tmp_path, engine)
    assert pdf_bookmarks(reader.outline) == expected_bookmarks(source.read_text())
    assert len(reader.pages) < 20, "thirty short entries do not each start a page"
    text = pdf_text(reader)
    assert "HTTP" in text and "added: v0.3.6" not in text and "<!--" not in text and "introduced_in" not in text
    assert "Stability: 2 - Stable" in text


@pytest.mark.parametrize("engine", ENGINES)
def test_empty_anchors_print_nothing_and_code_keeps_them(engine, tmp_path):
    source = tmp_path / "releases.md"
    versions = (
        f'Version 1.{v}.0\n==============\n\n<a id="1.{v}-Language"></a>\n\nLanguage\n--------\n- Change {v}.\n\n'
        for v in (2, 1)
    )
    source.write_text("".join(versions) + '```html\n<a id="kept"></a>\n```\n')
    reader = typeset(source, tmp_path / "out", engine)
    assert pdf_bookmarks(reader.outline) == [
        (0, "Version 1.2.0"),
        (1, "Language"),
        (0, "Version 1.1.0"),
        (1, "Language"),
    ]
    text = pdf_text(reader)
    assert "1.2-Language" not in text and "1.1-Language" not in text and 'id="kept"' in text


def test_both_engines_give_the_same_bookmarks_and_contents(tmp_path):
    source = tmp_path / "book.md"
    source.write_text(
        "# T\n# Part I\n## Chapter 1\n### Section a\nText.\n\n## Chapter 2\nMore.\n"
        "# Part II\n## Chapter 3\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nx = 1\n```\n"
    )
    readers = {engine: typeset(source, tmp_path / engine, engine) for engine in ENGINES}
    trees = {engine: pdf_bookmarks(reader.outline) for engine, reader in readers.items()}
    assert trees["typst"] == trees["weasyprint"] == expected_bookmarks(source.read_text())
    assert trees["typst"][:2] == [(0, "Part I"), (1, "Chapter 1")]
    assert {contents_links(reader) for reader in readers.values()} == {len(trees["typst"])}
