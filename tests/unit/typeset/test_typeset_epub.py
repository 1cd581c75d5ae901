"""The EPUB edition: a well-formed package whose navigation tree is the book's outline, with model text
escaped and nothing referenced outside the package."""

from __future__ import annotations

import re
import zipfile
from xml.etree import ElementTree

from pipeline.bench.studies.typeset import synthetic_book
from pipeline.typeset.epub import typeset_epub
from tests.fakes.hostile import hostile_markdown

XHTML = "{http://www.w3.org/1999/xhtml}"


def _documents(path) -> dict[str, ElementTree.Element]:
    package = zipfile.ZipFile(path)
    assert package.namelist()[0] == "mimetype" and package.read("mimetype") == b"application/epub+zip"
    return {
        name: ElementTree.fromstring(package.read(name))
        for name in package.namelist()
        if name.endswith((".xhtml", ".opf", ".ncx"))
    }


def test_nav_tree_is_the_outline_and_every_link_lands(tmp_path):
    path = typeset_epub(
        synthetic_book(2, 3, 4),
        "Synthetic",
        tmp_path / "book.epub",
        "<section class='appendix'><h2>Appendix</h2><p>stats</p></section>",
    )
    documents = _documents(path)
    nav = documents["EPUB/nav.xhtml"]
    toc = next(n for n in nav.iter(f"{XHTML}nav"))
    top = toc.find(f"{XHTML}ol").findall(f"{XHTML}li")
    assert len(top) == 2 + 1  # two parts, the appendix
    assert [len(part.find(f"{XHTML}ol").findall(f"{XHTML}li")) for part in top[:2]] == [3, 3]
    links = [a.get("href") for a in toc.iter(f"{XHTML}a")]
    assert len(links) == 2 + 6 + 24 + 1
    ids = {
        f"{name.removeprefix('EPUB/')}#{element.get('id')}"
        for name, doc in documents.items()
        for element in doc.iter()
        if element.get("id")
    }
    assert all(href in ids for href in links if "#" in href), [h for h in links if "#" in h and h not in ids]
    spine = [item.get("idref") for item in documents["EPUB/content.opf"].iter() if item.tag.endswith("itemref")]
    assert len(spine) == 1 + 1 + 2 + 1  # title page, contents, two parts, appendix


def test_hostile_model_text_is_escaped_and_references_nothing_outside(tmp_path):
    path = typeset_epub(hostile_markdown(9), "Hostile", tmp_path / "book.epub")
    documents = _documents(path)
    for name, document in documents.items():
        tags = {element.tag.removeprefix(XHTML) for element in document.iter()}
        assert not tags & {"script", "iframe", "img", "object", "embed"}, (name, tags)
        for element in document.iter():
            for attribute in ("src", "href", "data"):
                value = element.get(attribute) or ""
                assert not re.match(r"(?i)(file|https?):", value) or element.tag == f"{XHTML}a", (name, value)
    body = zipfile.ZipFile(path).read("EPUB/part-0000.xhtml").decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_written_atomically(tmp_path):
    target = tmp_path / "book.epub"
    typeset_epub("# T\n## P\n### C\n#### S\ntext\n", "T", target)
    assert target.is_file() and [p.name for p in tmp_path.iterdir()] == ["book.epub"]
