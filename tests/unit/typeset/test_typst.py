"""The Typst typesetter (pipeline/typeset/typst.py, templates/book.typ) against the real compiler: model text is
shown as text whatever characters it holds and never reads a file; glyphs DejaVu lacks do not stop a book; the
book's data keeps what markdown-it read; a page left blank carries no running head and no number."""

from __future__ import annotations

import io
import re
import string

import pypdf
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline.typeset.shape import BookShape
from pipeline.typeset.typst import book_data, compile_pdf, markdown_blocks, typeset_typst

MARKUP = "#$@<>*_`[]\\=-+/~\"'{}();:.,!?%^&|"  # what Typst markup or code would read as syntax
TEXTS = st.text(alphabet=MARKUP + string.ascii_letters + " ", min_size=1, max_size=40).filter(lambda s: s.strip())
ROBUST = {"deadline": None, "derandomize": True, "database": None, "suppress_health_check": [HealthCheck.too_slow]}


def data_with(paragraph: str, heading: str = "Section") -> dict:
    return {
        "title": "T",
        "held": "",
        "shape": {"parts": "opener", "chapters": "page"},
        "blocks": [
            {"t": "h", "l": 2, "c": ["Part"], "has-text": True},
            {"t": "h", "l": 4, "c": [heading], "has-text": bool(heading.strip())},
            {"t": "p", "c": [paragraph]},
        ],
        "appendix": [],
    }


def body_text(pdf: bytes) -> str:
    reader = pypdf.PdfReader(io.BytesIO(pdf))
    return " ".join((page.extract_text() or "") for page in reader.pages)


def squeeze(text: str) -> str:
    return "".join(text.split())


@settings(max_examples=30, **ROBUST)
@given(TEXTS)
@example('#read("/etc/passwd")')
@example('#image("/etc/hostname") $x^2$ @ref <label> = Heading\n- item\n+ item\n/ term: x // comment')
@example("\\ #{1 + 1} #let x = 1; #x ] [ ``` ~ --- ...")
def test_any_text_is_shown_as_itself(text):
    pdf = compile_pdf(data_with(text, heading=text))
    assert squeeze(text) in squeeze(body_text(pdf))
    reader = pypdf.PdfReader(io.BytesIO(pdf))
    titles = [item.title for item in reader.outline if not isinstance(item, list)]
    nested = [" ".join(item.title.split()) for group in reader.outline if isinstance(group, list) for item in group]
    assert titles == ["Part"] and nested == [" ".join(text.split())]


def test_section_text_cannot_read_a_file():
    markdown = (
        "# T\n## Part\n### Chapter\n#### Section\n"
        '#read("/etc/passwd") and #image("/etc/hostname")\n\n'
        '```typ\n#read("/etc/passwd")\n```\n\n`#include "/etc/passwd"`\n'
    )
    text = body_text(compile_pdf(book_data(markdown, "T")))
    assert '#read("/etc/passwd")' in text and '#image("/etc/hostname")' in text and "root:" not in text


def test_glyphs_dejavu_lacks_do_not_stop_the_book():
    markdown = "# T\n## 中文の部\n### 🙂 Chapter\nמילים, مرحبا, 日本語の本 🙂🍞 e\u0301 zero\u200bwidth\n"
    pdf = compile_pdf(book_data(markdown, "T"))
    reader = pypdf.PdfReader(io.BytesIO(pdf))
    assert len(reader.pages) >= 4 and reader.outline[0].title == "中文の部"


def test_the_blocks_keep_what_markdown_it_read():
    blocks = markdown_blocks(
        "## Part\n\nSome *em* and **strong** with `code` and [a link](http://x.invalid/) <!-- gone -->.\n\n"
        "1. one\n2. two\n   - nested\n\n> quoted\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nx = 1\n```\n"
    )
    kinds = [b["t"] for b in blocks]
    assert kinds == ["h", "p", "ol", "quote", "table", "code"]
    paragraph = blocks[1]["c"]
    assert {"t": "code", "s": "code"} in paragraph and not any("gone" in str(run) for run in paragraph)
    link = next(run for run in paragraph if isinstance(run, dict) and run["t"] == "link")
    assert link["href"] == "http://x.invalid/" and link["show-href"]
    assert blocks[2]["start"] == 1 and blocks[2]["items"][1][1]["t"] == "ul"
    assert blocks[4]["columns"] == 2 and blocks[4]["head"] == 1 and len(blocks[4]["cells"]) == 4
    assert blocks[5]["lang"] == "python" and blocks[5]["s"] == "x = 1"


def test_the_page_count_is_the_pdfs(tmp_path):
    markdown = "# T\n" + "".join(f"## Part {p}\n### Chapter\n" + "word " * 900 + "\n" for p in range(3))
    result = typeset_typst(markdown, "T", tmp_path / "book.pdf")
    assert result.pages == len(pypdf.PdfReader(tmp_path / "book.pdf").pages) > 6


def test_a_page_left_blank_before_a_right_hand_page_has_no_head_and_no_number():
    # each part's one chapter runs over two pages, so it ends on a right-hand page and the next part's opener,
    # which starts on the right, leaves a left-hand page blank; so do the title page and the contents
    markdown = "# T\n" + "".join(f"## Part {p}\n### Chapter {p}\n" + "word " * 600 + "\n" for p in range(1, 4))
    reader = pypdf.PdfReader(io.BytesIO(compile_pdf(book_data(markdown, "T", shape=BookShape()))))
    pages = [" ".join((page.extract_text() or "").split()) for page in reader.pages]
    openers = [index for index, text in enumerate(pages) if re.fullmatch(r"Part \d \d+", text)]
    assert len(openers) == 3 and openers[0] == 4
    assert [pages[index - 1] for index in (2, 4, *openers[1:])] == ["", "", "", ""]
