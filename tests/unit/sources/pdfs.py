"""Real PDF files for the reader's tests, written with pypdf: pages of text in Helvetica (one content stream a
page), an outline over them, encrypted with a password or with none."""

from __future__ import annotations

from pathlib import Path

from pypdf import PdfWriter
from pypdf.generic import ArrayObject, DecodedStreamObject, DictionaryObject, NameObject


def _escaped(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def text_page(writer: PdfWriter, lines: list[str]) -> None:
    page = writer.add_blank_page(width=612, height=792)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
    )
    shown = " ".join(f"({_escaped(line)}) Tj 0 -16 Td" for line in lines)
    stream = DecodedStreamObject()
    stream.set_data(f"BT /F1 11 Tf 72 720 Td {shown} ET".encode("latin-1"))
    page[NameObject("/Contents")] = ArrayObject([writer._add_object(stream)])


def write_pdf(
    path: Path,
    pages: list[list[str]],
    *,
    outline: list[tuple[str, int]] = (),  # type: ignore[assignment]
    password: str | None = None,
) -> Path:
    """A PDF of these pages (each a list of lines), with outline entries (title, page index), encrypted when a
    password is given ("" encrypts with an empty user password, which readers open without asking)."""
    writer = PdfWriter()
    for lines in pages:
        text_page(writer, lines)
    for title, page in outline:
        writer.add_outline_item(title=title, page_number=page)
    if password is not None:
        writer.encrypt(user_password=password, owner_password="owner", algorithm="RC4-128")
    with path.open("wb") as handle:
        writer.write(handle)
    return path
