"""Merge the rendered front matter and parts into one PDF with pypdf.

Takes the front matter's and the parts' render reports (`typeset.pages.FrontDone` / `PartDone`) and writes
the book atomically; returns its page count. Each part keeps its bookmarks and links
(`PdfWriter.append(import_outline=True)`); each contents entry becomes a link to its heading; the front
matter and every part fill an even number of pages (a blank page pads), so every part opens on a right-hand
page; page numbers are stamped at the outer foot, roman in the front matter (from the contents, iii) and
arabic from 1 through the whole body, in DejaVu Sans taken from a rendered sample (no font is fetched or
guessed); the PDF's page labels say the same, so a viewer's page box matches the printed numbers. The title
page, its blank verso and padding pages carry no number.

Stamping writes a few bytes of content stream per page and never parses the page's own content, so it
costs microseconds a page (pypdf's merge_page would parse every page: tens of seconds for a big book).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import cast

from pypdf import PdfReader, PdfWriter
from pypdf.annotations import Link
from pypdf.constants import PageLabelStyle
from pypdf.generic import ArrayObject, DecodedStreamObject, DictionaryObject, Fit, IndirectObject, NameObject

from pipeline.files import atomic_target
from pipeline.typeset.pages import PAGE_NUMBER_GLYPHS, FrontDone, PartDone

MM = 72 / 25.4
NUMBER_SIZE = 8.0
NUMBER_BASELINE = 11 * MM  # from the bottom edge
OUTER_MARGIN = 15 * MM  # book.css: the outer margin of both left and right pages
FONT_NAME = "/FanoutPageNumber"


class DigitFont:
    """The DejaVu Sans subset of a rendered "0123456789ivxlcdm" sample: its font object and glyph codes."""

    def __init__(self, sample: Path, writer: PdfWriter) -> None:
        page = PdfReader(sample).pages[0]
        contents = page.get_contents()
        if contents is None:
            raise ValueError("page number glyphs: the sample page is empty")
        data = contents.get_data().decode("latin-1")
        codes = re.findall(r"<([0-9a-fA-F]+)>", data)
        if len(codes) != len(PAGE_NUMBER_GLYPHS):
            raise ValueError(f"page number glyphs: expected {len(PAGE_NUMBER_GLYPHS)}, found {len(codes)}")
        self.codes = dict(zip(PAGE_NUMBER_GLYPHS, codes))
        resources = cast(DictionaryObject, page["/Resources"])  # pypdf types entries as PdfObject
        font = next(iter(cast(DictionaryObject, resources["/Font"]).values())).get_object()
        self.ref = font.clone(writer).indirect_reference
        self.widths = _cid_widths(font["/DescendantFonts"][0].get_object())

    def width(self, text: str) -> float:
        return sum(self.widths.get(int(self.codes[c], 16), 1000) for c in text) / 1000 * NUMBER_SIZE

    def show(self, text: str) -> str:
        return "<" + "".join(self.codes[c] for c in text) + ">"


def _cid_widths(cid_font: DictionaryObject) -> dict[int, float]:
    """The /W array of a CID font as {glyph: width}."""
    widths: dict[int, float] = {}
    w = list(cid_font.get("/W", []))
    i = 0
    while i < len(w):
        first = int(w[i])
        if isinstance(w[i + 1], list):
            widths.update({first + k: float(v) for k, v in enumerate(w[i + 1])})
            i += 2
        else:
            widths.update({g: float(w[i + 2]) for g in range(first, int(w[i + 1]) + 1)})
            i += 3
    return widths


def _stream(writer: PdfWriter, data: bytes) -> IndirectObject:
    stream = DecodedStreamObject()
    stream.set_data(data)
    return writer._add_object(stream)


def stamp_number(writer: PdfWriter, page_index: int, text: str, font: DigitFont, save: IndirectObject) -> None:
    """Print `text` at the outer foot: right on right-hand pages (even index), left on left-hand ones."""
    page = writer.pages[page_index]
    width = float(page.mediabox.width)
    x = width - OUTER_MARGIN - font.width(text) if page_index % 2 == 0 else OUTER_MARGIN
    stamp = (
        f"Q q 0.2 g BT {FONT_NAME} {NUMBER_SIZE:g} Tf 1 0 0 1 {x:.2f} {NUMBER_BASELINE:.2f} Tm "
        f"{font.show(text)} Tj ET Q\n"
    ).encode()
    contents = page.get("/Contents")
    assert contents is not None, "a rendered page has contents"
    existing = list(contents.get_object()) if isinstance(contents.get_object(), ArrayObject) else [contents]
    page[NameObject("/Contents")] = ArrayObject([save, *[c for c in existing if c is not None], _stream(writer, stamp)])
    resources = cast(DictionaryObject, page["/Resources"].get_object())  # pypdf types entries as PdfObject
    if "/Font" not in resources:
        resources[NameObject("/Font")] = DictionaryObject()
    cast(DictionaryObject, resources["/Font"].get_object())[NameObject(FONT_NAME)] = font.ref


def _pad_to_even(writer: PdfWriter) -> None:
    if len(writer.pages) % 2:
        box = writer.pages[-1].mediabox
        writer.add_blank_page(float(box.width), float(box.height))


def roman(number: int) -> str:
    out = []
    for value, letters in (
        (1000, "m"),
        (900, "cm"),
        (500, "d"),
        (400, "cd"),
        (100, "c"),
        (90, "xc"),
        (50, "l"),
        (40, "xl"),
        (10, "x"),
        (9, "ix"),
        (5, "v"),
        (4, "iv"),
        (1, "i"),
    ):
        count, number = divmod(number, value)
        out.append(letters * count)
    return "".join(out)


def merge(front: list[FrontDone], parts: list[PartDone], out_pdf: Path, title: str = "") -> int:
    """Write title page + contents slices + parts to `out_pdf`; return the page count.

    `front[0]` is the title page (with the digits sample), `front[1:]` the contents slice of each part, in
    order; slice k's links point at part k's headings."""
    writer = PdfWriter()
    writer.append(PdfReader(front[0].path), import_outline=False)
    _pad_to_even(writer)
    slices = []
    for piece in front[1:]:
        slices.append(len(writer.pages))
        writer.append(PdfReader(piece.path), import_outline=False)
    stamped = list(range(2, len(writer.pages)))
    _pad_to_even(writer)
    front_pages = len(writer.pages)
    starts = []
    for part in parts:
        starts.append(len(writer.pages))
        writer.append(PdfReader(part.path), import_outline=True)
        stamped += range(starts[-1], starts[-1] + part.pages)
        _pad_to_even(writer)
    for toc_start, piece, part_start, part in zip(slices, front[1:], starts, parts):
        for link in piece.links:
            heading = part.headings[link.entry]
            writer.add_annotation(
                toc_start + link.page,
                Link(
                    rect=link.rect,
                    border=[0, 0, 0],
                    target_page_index=part_start + heading.page,
                    fit=Fit.xyz(left=heading.x, top=heading.y),
                ),
            )
    font = DigitFont(Path(front[0].digits_path), writer)
    save = _stream(writer, b"q\n")
    for index in stamped:
        label = roman(index + 1) if index < front_pages else str(index - front_pages + 1)
        stamp_number(writer, index, label, font, save)
    writer.set_page_label(0, front_pages - 1, style=PageLabelStyle.LOWERCASE_ROMAN, start=1)
    writer.set_page_label(front_pages, len(writer.pages) - 1, style=PageLabelStyle.DECIMAL, start=1)
    writer.add_metadata({"/Title": title, "/Creator": "fanout (WeasyPrint, pypdf)"})
    writer.page_mode = "/UseOutlines"
    with atomic_target(out_pdf) as tmp:
        with open(tmp, "wb") as handle:
            writer.write(handle)
    return len(writer.pages)
