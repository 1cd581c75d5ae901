"""The title page's title and a part opener's title are set centred by both PDF engines (templates/book.typ,
templates/book.css), never justified: read back from the PDF with pdftotext -bbox-layout (poppler-utils, a test
dependency: Makefile), every line of a title that wraps has its centre where the others have theirs, and the
spaces between its words are plain spaces, not stretched to fill the line."""

from __future__ import annotations

import subprocess
from pathlib import Path
from xml.etree import ElementTree

import pytest

from pipeline.typeset.book import typeset_pdf
from pipeline.typeset.typst import typeset_typst

TITLE = "Sourdough Starter and Bread: Keeping a Culture Alive Through the Seasons"
PART = "Feeding a Starter Through the Seasons of the Year and the Kitchen Table"
PARAGRAPH = "Rye flour feeds a starter faster than white flour because it carries more of the wild yeasts. " * 12
LARGE = 18.0  # points: the title (22pt) and a part opener's title (19pt); no other text is set this large
XHTML = "{http://www.w3.org/1999/xhtml}"


def book_markdown() -> str:
    """Two parts long enough to open on pages of their own (pipeline/typeset/shape.py: OPENER_WORDS)."""
    sections = "".join(f"#### Section {s}\n\n{PARAGRAPH}\n\n" for s in range(1, 7))
    parts = "".join(f"## {title}\n\n### A Chapter\n\n{sections}" for title in (PART, "Baking"))
    return f"# {TITLE}\n\n{parts}"


def large_lines(pdf: Path) -> list[list[list[tuple[float, float, str]]]]:
    """Each page's lines of large type, each line its words as (left, right, text)."""
    layout = subprocess.run(["pdftotext", "-bbox-layout", str(pdf), "-"], capture_output=True, check=True).stdout
    pages = []
    for page in ElementTree.fromstring(layout).iter(f"{XHTML}page"):
        lines = []
        for line in page.iter(f"{XHTML}line"):
            words = [word.attrib | {"text": word.text or ""} for word in line.iter(f"{XHTML}word")]
            if words and all(float(w["yMax"]) - float(w["yMin"]) >= LARGE for w in words):
                lines.append([(float(w["xMin"]), float(w["xMax"]), w["text"]) for w in words])
        pages.append(lines)
    return [lines for lines in pages if lines]


def assert_centred_not_justified(lines: list[list[tuple[float, float, str]]], text: str) -> None:
    assert " ".join(word for line in lines for _, _, word in line) == text and len(lines) >= 3, "wraps"
    centres = [(line[0][0] + line[-1][1]) / 2 for line in lines]
    assert max(centres) - min(centres) < 1.0, f"every line centred alike: {centres}"
    gaps = [right[0] - left[1] for line in lines for left, right in zip(line, line[1:], strict=False)]
    assert max(gaps) < 1.5 * min(gaps), f"plain spaces between words, not stretched: {gaps}"


@pytest.mark.parametrize("engine", ["typst", "weasyprint"])
def test_the_title_and_a_part_opener_are_centred_not_justified(engine, tmp_path):
    pdf = tmp_path / "book.pdf"
    if engine == "typst":
        typeset_typst(book_markdown(), TITLE, pdf)
    else:
        typeset_pdf(book_markdown(), TITLE, pdf, workers=0)
    title_page, part_page, *_ = large_lines(pdf)
    assert_centred_not_justified(title_page, TITLE)
    assert_centred_not_justified(part_page, PART)
