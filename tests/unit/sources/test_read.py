"""Reading sources: every kind to blocks with its heading path and page, and every bad input skipped with one
reason while the rest is read (pipeline/sources/read.py, collect.py)."""

from __future__ import annotations

import os

import pytest

from pipeline.errors import UsageError
from pipeline.meaning.embed import open_embedder
from pipeline.sources.collect import open_sources
from pipeline.sources.read import html_blocks, markdown_blocks
from tests.unit.sources.pdfs import write_pdf

GOOD = "# Knives\n\n## Sharpening\n\nHold the blade at fifteen degrees to the stone.\n"


def whys(found) -> dict[str, str]:
    return {os.path.basename(item.path): item.why for item in found.report.skipped}


def test_markdown_heading_paths_front_matter_and_raw_html():
    text = (
        "---\ntitle: x\n---\n# Book\n\nIntro *text*.\n\n## Part\n\n<div>raw</div>\n\n"
        "### Deep\n\n- one `item`\n\n## Next\n\nLast."
    )
    blocks = markdown_blocks(text)
    assert [(b.headings, b.text) for b in blocks] == [
        (("Book",), "Intro text."),
        (("Book", "Part", "Deep"), "one item"),
        (("Book", "Next"), "Last."),
    ]


def test_html_leaves_out_scripts_navigation_and_nests_headings():
    page = b"""<html><head><style>p{}</style><script>var secret = 1;</script></head><body>
    <nav><p>Home | About</p></nav><h1>Cats</h1><p>Cats sleep <b>sixteen</b> hours.</p>
    <h2>Food</h2><ul><li><p>Feed twice a day.</p></li></ul><footer>(c) someone</footer></body></html>"""
    blocks = html_blocks(page)
    assert [(b.headings, b.text) for b in blocks] == [
        (("Cats",), "Cats sleep sixteen hours."),
        (("Cats", "Food"), "Feed twice a day."),
    ]


def test_pdf_pages_and_outline(tmp_path):
    pdf = write_pdf(
        tmp_path / "manual.pdf",
        [["Safety first.", "Wear gloves."], ["Dry the blade after washing."]],
        outline=[("Safety", 0), ("Care", 1)],
    )
    found = open_sources([pdf], open_embedder())
    passages = found.index.passages
    assert [(p.headings, p.page) for p in passages] == [(("Safety",), 1), (("Care",), 2)]
    assert found.report.read[0].pages == 2 and passages[1].place().endswith("Care, p. 2")


def test_bad_inputs_are_skipped_with_why_and_the_rest_is_read(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.md").write_text(GOOD)
    write_pdf(folder / "locked.pdf", [["Secret."]], password="pw")
    write_pdf(folder / "open-locked.pdf", [["Opens with no password."]], password="")
    write_pdf(folder / "scan.pdf", [[]])
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\n not a pdf")
    (folder / "blob.txt").write_bytes(bytes(range(256)) * 4)
    (folder / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    (folder / "empty.md").write_text("\n\n")
    with (folder / "huge.txt").open("wb") as handle:
        handle.truncate(2**30)  # a sparse 1 GB file: never read
    (folder / "photo.png").write_bytes(b"\x89PNG")
    os.symlink(".", folder / "loop")
    os.symlink("gone.md", folder / "dangling.md")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref")
    found = open_sources([folder, tmp_path / "missing.md"], open_embedder())
    assert [file.file.rsplit("/", 1)[1] for file in found.report.read] == ["good.md", "open-locked.pdf"]
    assert whys(found) == {
        "locked.pdf": "encrypted PDF (it needs a password)",
        "scan.pdf": "PDF of 1 page with no text (a scan?)",
        "broken.pdf": whys(found)["broken.pdf"],
        "blob.txt": "binary file",
        "latin.txt": "not UTF-8 (byte 0xe9 at 3)",
        "empty.md": "no text",
        "huge.txt": "1,074 MB, over the 64 MB a source may be",
        "photo.png": "not a kind fanout reads (.png)",
        "loop": "symlink loop (back to docs/)",
        "dangling.md": "broken link",
        "missing.md": "no such file or folder",
    }
    assert whys(found)["broken.pdf"].startswith("unreadable PDF (")


def test_no_readable_source_is_a_usage_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no source file in"):
        open_sources([tmp_path / "empty"], open_embedder())
    (tmp_path / "bin.txt").write_bytes(b"\x00\x01")
    with pytest.raises(UsageError, match="no readable source in .*bin.txt: binary file") as caught:
        open_sources([tmp_path / "bin.txt"], open_embedder())
    assert caught.value.exit_code == 2
