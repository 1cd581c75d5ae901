"""A book from the user's own documents, end to end: `fanout sources` reads them, `fanout book --sources` gives each
section its passages, the author FAKE writes from them and cites them [n], every marker resolves to its source in
book.md, the HTML, the EPUB and the PDF, and the audit finds no citation unsupported; an author that cites the
wrong passages is caught by `unsupported`, and `fanout audit BOOK.md --sources` judges a Markdown book alone.
`fanout` runs as a process; the FAKE authors (tests/fakes/fake_author.py) serve from a thread."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import lxml.html
import pytest
from pypdf import PdfReader

from pipeline.bench.studies.corpus import book_shape, load_corpus, write_part_notes
from pipeline.journal import read_journal
from pipeline.records import Outline
from pipeline.sources.markers import cited_numbers, split_sources_list
from tests.environ import isolated_env
from tests.fakes.fake_author import author_engine
from tests.fakes.fake_engine import FakeEngineThread, prompt_of
from tests.fakes.fake_prompts import plan_level

BOOK = next(book for book in load_corpus() if book.slug == "the-sourdough-framework")
SHAPE = book_shape(BOOK)


def fanout(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = isolated_env(FANOUT_CACHE=str(cache))
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", *args], capture_output=True, text=True, env=env, timeout=600
    )
    return done


def run_book(tmp_path: Path, cites: str) -> Path:
    sources = write_part_notes(BOOK, tmp_path / "notes")
    with FakeEngineThread(author_engine(BOOK, cites=cites)) as fakes:
        url = fakes.engines[0].url
        out = tmp_path / f"run-{cites}"
        done = fanout("book", BOOK.requests.plain, "--sources", str(sources), "--backend", f"{url},cap=16",
                      "--shape", SHAPE, "--out", str(out), "--quiet", "--json", cache=tmp_path / "cache")  # fmt: skip
        (out / "prompts.json").write_text(json.dumps([prompt_of(body) for body in fakes.engines[0].bodies]))
    assert done.returncode == 0, f"fanout book: {done.stderr}"
    return out


def sections_of(book_md: str) -> list[tuple[str, str, list[str]]]:
    """(title, body, sources list) of each `####` section of book.md."""
    found = []
    for block in re.split(r"^#### ", book_md, flags=re.M)[1:]:
        title, _, body = block.partition("\n")
        body = re.split(r"^#{1,3} ", body, flags=re.M)[0].strip()
        text, wheres = split_sources_list(body)
        found.append((title, text, wheres))
    return found


def words(text: str) -> str:
    """Text without its spaces and hyphens: a PDF breaks a line at a hyphen of its own or of the text."""
    return re.sub(r"[\s\-\u00ad\u2010]+", "", text)


@pytest.fixture(scope="module")
def cited_run(tmp_path_factory) -> Path:
    return run_book(tmp_path_factory.mktemp("sources"), "well")


def test_every_section_is_given_passages_and_cites_what_it_was_given(cited_run):
    journal = list(read_journal(cited_run / "sections.jsonl").values())  # passages put back from passages.jsonl
    assert journal and all(result.ok and result.passages for result in journal)
    assert sum(result.citations_removed for result in journal) == 0
    assert all(cited_numbers(result.text) for result in journal)
    spec = json.loads((cited_run / "spec.json").read_text())
    assert spec["sources"] and spec["sources"][0].endswith("notes")


def test_the_plan_sees_what_the_sources_hold_and_each_node_keeps_its_places(cited_run):
    prompts = json.loads((cited_run / "prompts.json").read_text())
    planning = [prompt for prompt in prompts if plan_level(prompt) in ("book", "part")]
    assert planning and all("The user's sources cover: " in prompt for prompt in planning)
    (book_prompt,) = [prompt for prompt in planning if plan_level(prompt) == "book"][:1]
    note = book_prompt.split("The user's sources cover: ")[1].splitlines()[0]
    titles = {s.title for p in BOOK.parts for c in p.chapters for s in c.sections}
    assert sum(title in note for title in titles) >= 5, note
    outline = Outline.model_validate_json((cited_run / "outline.json").read_text())
    nodes = [*outline.parts, *(c for p in outline.parts for c in p.chapters), *(s for _, _, s in outline.sections())]
    assert all(node.places for node in nodes)
    assert (cited_run / "outline.md").read_text().count("\nSources: ") == len(nodes)
    journal = read_journal(cited_run / "sections.jsonl")
    for _, _, section in outline.sections():
        assert {passage.place() for passage in journal[section.id].passages} <= set(section.places)


def test_every_marker_resolves_to_a_source_in_every_edition(cited_run):
    sections = sections_of((cited_run / "book.md").read_text())
    cited = [(title, text, wheres) for title, text, wheres in sections if wheres]
    assert len(cited) == len(sections)
    for title, text, wheres in cited:
        assert set(cited_numbers(text)) == set(range(1, len(wheres) + 1)), title
        assert all(where.startswith(str(cited_run.parent / "notes")) for where in wheres)
    html = words(lxml.html.parse(str(cited_run / "book.html")).getroot().text_content())
    with zipfile.ZipFile(cited_run / "book.epub") as epub:
        pages = [epub.read(name) for name in epub.namelist() if name.endswith(".xhtml")]
    epub_text = words(" ".join(lxml.html.fromstring(page).text_content() for page in pages))
    pdf = words(" ".join(page.extract_text() or "" for page in PdfReader(cited_run / "book.pdf").pages))
    for edition, text in (("html", html), ("epub", epub_text), ("pdf", pdf)):
        assert text.count("Sources:") >= len(cited), edition
        for _, body, wheres in cited:
            assert words(body.split("[")[0])[:40] in text, edition
            for where in wheres:
                assert words(where) in text, (edition, where)


def test_the_audit_finds_every_citation_supported(cited_run):
    audit = json.loads((cited_run / "audit.json").read_text())
    assert audit["counts"]["uncited"] == 0 and audit["counts"]["unsupported"] == 0
    assert audit["meaning"]["citations"] >= len(sections_of((cited_run / "book.md").read_text()))


def test_an_author_citing_the_wrong_passages_is_caught_and_so_is_its_markdown_book(tmp_path):
    run = run_book(tmp_path, "wrongly")
    audit = json.loads((run / "audit.json").read_text())
    assert audit["counts"]["unsupported"] > 0
    alone = fanout(
        "audit", str(run / "book.md"), "--sources", str(tmp_path / "notes"), "--json", cache=tmp_path / "cache"
    )
    assert alone.returncode == 0, alone.stderr
    markdown = json.loads(alone.stdout)
    assert markdown["meaning"]["citations"] > 0 and markdown["counts"]["unsupported"] > 0
