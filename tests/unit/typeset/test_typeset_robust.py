"""`fanout typeset` and `fanout audit` take any Markdown: property-based tests (hypothesis) generate books of
headings and blocks (levels skipped and repeated, empty parts, text before the first heading, only a title,
parts written as `# ` headings, deep nesting, headings in lists and quotes, raw HTML, huge code lines,
unclosed fences, unicode and control characters) and check that each command either writes complete editions
(the PDF's bookmarks are the book's headings at part, chapter and section level as docs/book.md's rule reads
them, nested by level, with one contents entry each; the HTML and every EPUB document parse; raw HTML stays
escaped) or ends with one `fanout: error:` line and a documented
exit code. Never a traceback.

The typeset property runs for both PDF engines (Typst and WeasyPrint). A WeasyPrint PDF costs about a second,
so it runs a small, derandomized set of examples (the same ones on every run, so CI is stable); the whole file
takes about 40 s on one core.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
import tempfile
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import pypdf
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from pipeline.cli import main

TYPESET_EXAMPLES = 40
AUDIT_EXAMPLES = 100
EXIT_CODES = {1, 2}  # docs/commands.md, "Exit codes": a failed run, a usage or input error
BOOKMARKED = {2: 0, 3: 1, 4: 2}  # levels as typeset (book.css): parts, chapters, sections
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")  # XML 1.0 cannot hold them: the typesetter drops them
ROBUST = {"deadline": None, "derandomize": True, "database": None, "suppress_health_check": [HealthCheck.too_slow]}

WORDS = [
    "Sourdough",
    "starter",
    "Über",
    "naïve",
    "café",
    "中文",
    "日本語の本",
    "🙂🍞",
    "עברית",
    "مرحبا",
    "e\u0301",
    "1.2",
    "Part",
    "a&b",
    "<b>bold</b>",
    "<script>alert(1)</script>",
    '"quoted"',
    "it's",
    "x" * 120,
    "zero\u200bwidth",
    "tab\there",
    "bell\x07",
    "form\x0cfeed",
    "line\u2028sep",
    "nul\x00",
]
HOSTILE = [
    "<script>alert(1)</script>",
    '<img src="file:///etc/passwd">',
    "![x](file:///etc/passwd)",
    '<iframe src="http://127.0.0.1:9/"></iframe>',
    "<div>\n<p>open",
    "</body></html>",
    "<!-- open comment",
    '<link rel="stylesheet" href="http://127.0.0.1:9/evil.css">',
    "]]>",
    "&nbsp;&#0;&#x110000;",
]
LONG_LINE = "    return {" + ", ".join(f"'key{i}': {i}" for i in range(300)) + "}"

INLINE = ["*em*", "`code`", "![alt](file:///etc/passwd)", "[a link](http://127.0.0.1:9/)", "\\#", "<i>x</i>"]
LEVELS = [2, 2, 2, 3, 3, 3, 4, 4, 4, 1, 5, 6]  # mostly parts, chapters and sections; skipped and stray levels

words = st.lists(st.sampled_from(WORDS + INLINE), min_size=0, max_size=5).map(" ".join)
heading = st.builds(
    lambda level, text, indent, close: f"{' ' * indent}{'#' * level} {text}{close}".rstrip(),
    st.sampled_from(LEVELS),
    words,
    st.integers(0, 3),
    st.sampled_from(["", " ##", " #######"]),
)
setext = st.builds(lambda text, rule: f"{text or 'Setext'}\n{rule * 3}", words, st.sampled_from("=-"))
paragraph = st.lists(st.sampled_from(WORDS + INLINE), min_size=1, max_size=12).map(" ".join)
fence = st.builds(
    lambda lang, body, closed: f"```{lang}\n{body}\n" + ("```" if closed else ""),
    st.sampled_from(["", "python", "html", "no-such-language"]),
    st.sampled_from([LONG_LINE, "x" * 5000, "## not a heading", "<script>x</script>", ""]),
    st.booleans(),
)
nested = st.builds(
    lambda kind, depth, text: kind * depth + text,
    st.sampled_from(["- ", "> ", "1. ", "* > "]),
    st.integers(1, 40),
    heading | paragraph,
)
block = st.one_of(
    paragraph,
    paragraph,
    setext,
    fence,
    nested,
    st.sampled_from(HOSTILE),
    st.just("| a | b |\n|---|---|\n| 1 | 2 |"),
    st.just("[ref]: http://127.0.0.1:9/ref.png"),
    st.just("    indented code ## x"),
    st.just(""),
    st.just("---"),
)
section = st.builds(lambda head, body: [head, *body], heading, st.lists(block, max_size=3))
books = st.builds(
    lambda title, preamble, sections, joint: (
        title + joint + joint.join([*preamble, *(b for blocks in sections for b in blocks)])
    ),
    st.sampled_from(["# Title\n", "", "#\n", "Setext Title\n===\n", "intro before the title\n# T\n"]),
    st.lists(block, max_size=2),
    st.lists(section, max_size=8),
    st.sampled_from(["\n\n", "\n", "\r\n\r\n"]),
)

_commonmark = MarkdownIt("commonmark", {"html": False}).enable("table")  # raw HTML is text, as typeset shows it


def _plain(children) -> str:
    """What a heading's inline tokens show as text (a line break shows as a space)."""
    return "".join(
        " " if c.type in ("softbreak", "hardbreak") else _plain(c.children) if c.children else c.content
        for c in children or []
    )


def expected_headings(markdown: str) -> list[tuple[int, str]]:
    """(level as typeset, text) of every heading CommonMark finds, by docs/book.md's rule written out here
    apart from the code: the first top-level `# ` is the title (left out) when it is the only one or no
    heading stands between it and the next; the other top-level headings move together so the shallowest is
    level 2 (a part); headings inside lists and quotes keep their level; HTML comment blocks are dropped."""
    tokens = _commonmark.parse(CONTROL.sub("", markdown))
    heads = [(i, t) for i, t in enumerate(tokens) if t.type == "heading_open"]
    top = [(i, t) for i, t in heads if t.level == 0]
    ones = [i for i, t in top if t.tag == "h1"]
    title = ones[0] if ones and not (len(ones) > 1 and any(ones[0] < i < ones[1] for i, _ in top)) else None
    shift = 2 - min((int(t.tag[1]) for i, t in top if i != title), default=2)
    return [
        (max(1, min(6, int(t.tag[1]) + shift)) if t.level == 0 else int(t.tag[1]), _heading_text(tokens, i))
        for i, t in heads
        if i != title
    ]


def _heading_text(tokens, index: int) -> str:
    return " ".join(_plain(tokens[index + 1].children).split())


def expected_bookmarks(markdown: str) -> list[tuple[int, str]]:
    """(depth, text) of every level 2-4 heading with text, nested under the nearest higher-level one in its
    part (a part opens a new tree)."""
    found: list[tuple[int, str]] = []
    stack: list[int] = []
    for level, text in expected_headings(markdown):
        if level == 2:
            stack.clear()
        if text and level in BOOKMARKED:
            depth = BOOKMARKED[level]
            while stack and stack[-1] >= depth:
                stack.pop()
            found.append((len(stack), text))
            stack.append(depth)
    return found


def contents_links(reader: pypdf.PdfReader) -> int:
    """The places in the PDF itself that links lead to: one a contents entry (the books made here link
    nowhere else inside); an entry that wraps or breaks across pages is one place, however many boxes."""
    annotations = [a.get_object() for page in reader.pages for a in page.get("/Annots") or []]
    targets = {
        (a["/Dest"][0].idnum, *(round(float(v), 1) for v in a["/Dest"][2:4] if v is not None))
        for a in annotations
        if a.get("/Subtype") == "/Link" and "/Dest" in a
    }
    return len(targets)


def pdf_bookmarks(outline, depth: int = 0) -> list[tuple[int, str]]:
    out = []
    for item in outline:
        out += pdf_bookmarks(item, depth + 1) if isinstance(item, list) else [(depth, " ".join(item.title.split()))]
    return out


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """`fanout ARGV` in this process: (exit code, stdout, stderr). Any exception escaping `main` is a
    traceback a user would see, so it fails the test as it is."""
    logger = logging.getLogger("fanout")
    handlers = list(logger.handlers)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        logger.handlers[:] = handlers
    return code, out.getvalue(), err.getvalue()


def assert_one_error_line(code: int, err: str) -> None:
    assert code in EXIT_CODES, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fanout: error: "), err


def check_editions(folder: Path, markdown: str) -> None:
    reader = pypdf.PdfReader(folder / "book.pdf")
    assert len(reader.pages) >= 2
    bookmarks = expected_bookmarks(markdown)
    assert pdf_bookmarks(reader.outline) == bookmarks
    assert contents_links(reader) == len(bookmarks), "one contents entry a bookmarked heading"
    page = (folder / "book.html").read_text(encoding="utf-8")
    assert page.rstrip().endswith("</html>") and "<script" not in page.lower() and "<iframe" not in page.lower()
    package = zipfile.ZipFile(folder / "book.epub")
    assert package.read("mimetype") == b"application/epub+zip"
    for name in package.namelist():
        if name.endswith((".xhtml", ".opf", ".ncx")):
            document = ElementTree.fromstring(package.read(name))  # well-formed XML, or this raises
            assert not {e.tag.rsplit("}", 1)[-1] for e in document.iter()} & {"script", "iframe", "img"}, name


@pytest.mark.parametrize("engine", ["typst", "weasyprint"])
@settings(max_examples=TYPESET_EXAMPLES, **ROBUST)
@given(markdown=books)
@example(markdown="# T\n# Part I\n## Chapter 1\nText.\n")  # the title and a part both level-1 headings
@example(markdown="# Only a title\n")
@example(markdown="")
@example(markdown="[ref]: http://127.0.0.1:9/x\n\n## Part\n")
@example(markdown="intro\n\n#### Deep\n\n## Part\n\n#### Skipped a level\n\n## Part\n\n## Part\n")
@example(markdown="Version 2\n===\nLanguage\n---\n- a\n\nVersion 1\n===\nLibraries\n---\n- b\n")  # no title
def test_typeset_writes_complete_editions_or_one_error_line(engine, markdown):
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "book.md"
        source.write_text(markdown, encoding="utf-8", newline="")
        out = str(Path(scratch) / "out")
        code, _, err = run_cli(["typeset", str(source), "--out", out, "--workers", "0", "--pdf-engine", engine])
        if code == 0:
            check_editions(Path(scratch) / "out", markdown)
        else:
            assert_one_error_line(code, err)


@settings(max_examples=AUDIT_EXAMPLES, **ROBUST)
@given(books, st.booleans())
@example("# T\n# Part I\n## Chapter 1\nText.\n", True)
@example("no headings at all\n", False)
def test_audit_reports_or_gives_one_error_line(markdown, as_json):
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "book.md"
        source.write_text(markdown, encoding="utf-8", newline="")
        code, out, err = run_cli(["audit", str(source), *(["--json"] if as_json else [])])
        if code == 0:
            report = json.loads((Path(scratch) / "book.audit.json").read_text())
            assert report["sections"] >= 1 and (json.loads(out) == report if as_json else "audit" in out)
        else:
            assert_one_error_line(code, err)
            assert not [t for t in _commonmark.parse(markdown) if t.type == "heading_open"], err


def test_undecodable_bytes_are_replaced_or_refused_in_one_line(tmp_path):
    """Typesetting shows bytes that are not UTF-8 as U+FFFD; the audit refuses the file in one line."""
    source = tmp_path / "book.md"
    source.write_bytes(b"# T\n## Part \xff\xfe\n### Chapter\nText \xc3.\n")
    code, _, err = run_cli(["typeset", str(source), "--workers", "0"])
    assert code == 0, err
    assert pdf_bookmarks(pypdf.PdfReader(tmp_path / "book.pdf").outline) == [(0, "Part \ufffd\ufffd"), (1, "Chapter")]
    code, _, err = run_cli(["audit", str(source)])
    assert_one_error_line(code, err)


def test_a_part_written_as_a_level_one_heading_keeps_its_text(tmp_path):
    """The title and a part both `# ` headings; the part used to be taken for a second
    title, leaving an empty document that EbookLib refused (`lxml.etree.ParserError: Document is empty`)."""
    source = tmp_path / "book.md"
    source.write_text("# T\n# Part I\n## Chapter 1\nText.\n")
    code, _, err = run_cli(["typeset", str(source), "--workers", "0"])
    assert code == 0, err
    text = "\n".join(page.extract_text() or "" for page in pypdf.PdfReader(tmp_path / "book.pdf").pages)
    assert "Part I" in text and "Text." in text
    epub = zipfile.ZipFile(tmp_path / "book.epub")
    bodies = "".join(epub.read(n).decode() for n in epub.namelist() if n.startswith("EPUB/part-"))
    assert "Part I" in bodies and "Chapter 1" in bodies
    assert "Part I" in (tmp_path / "book.html").read_text()
