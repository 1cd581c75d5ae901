"""The citation rules (pipeline/audit/citations.py, rules.py): a run's section written from passages that cites
none is `uncited`; a cited sentence its passage does not say is `unsupported`, one it does is not; a Markdown
book's Sources lists are read back and found in its sources."""

from __future__ import annotations

from pipeline.audit.book import AuditBook, AuditSection, load_markdown
from pipeline.audit.citations import cited_sentences, resolve_sources, section_citations
from pipeline.audit.rules import rule_uncited
from pipeline.meaning.embed import open_embedder
from pipeline.records.sources import Passage

PASSAGES = (
    "Hold the blade at fifteen degrees against the whetstone and draw it across in long, even strokes.",
    "Store knives on a magnetic strip or in a wooden block so that their edges never touch other metal.",
    "A serrated bread knife saws through a crusty loaf without crushing the soft crumb inside.",
)


def section(text: str, *, given=PASSAGES) -> AuditSection:
    return AuditSection("p01.c01.s01", "Knives", text, passages=given, written_from_sources=bool(given))


def test_cited_sentences_take_the_markers_after_a_full_stop_too():
    text = "Angle matters [1]. Keep edges apart. [2]\n\nBread `a[3]` needs teeth [3][1]. No citation here."
    assert cited_sentences(text) == [
        ("Angle matters.", [1]),
        ("Keep edges apart.", [2]),
        ("Bread needs teeth.", [3, 1]),
    ]


def test_a_sentence_cited_to_its_own_passage_is_supported_and_to_another_is_not():
    embedder = open_embedder()
    right = "Hold the blade at fifteen degrees on the whetstone [1]. A serrated knife cuts crusty bread [3]."
    assert section_citations(section(right), embedder).unsupported == []
    wrong = "Hold the blade at fifteen degrees on the whetstone [2]. A serrated knife cuts crusty bread [1]."
    found = section_citations(section(wrong), embedder)
    assert found.checked == 2 and len(found.unsupported) == 2 and found.unsupported[0].endswith("[2]")
    assert section_citations(section("Nothing known [9]."), embedder).checked == 0


def test_uncited_is_a_section_given_passages_that_cites_none():
    book = AuditBook("run", [], [section("Knives are sharp."), section("Cited [1].")], from_journal=True)
    assert [d.rule for d in rule_uncited(book)] == ["uncited"]
    assert rule_uncited(AuditBook("run", [], [section("Knives.", given=())], from_journal=True)) == []


def test_a_markdown_books_sources_lists_are_found_in_its_sources(tmp_path):
    book_md = tmp_path / "book.md"
    book_md.write_text(
        "# Knives\n\n## Sharpening\n\nFifteen degrees [1].\n\nSources:\n\n1. notes\\_a\\.md, Sharpening\n\n"
        "## Storage\n\nA strip [1].\n\nSources:\n\n1. gone\\.md\n"
    )
    book = load_markdown(book_md)
    assert [s.cites_from for s in book.sections] == [("notes_a.md, Sharpening",), ("gone.md",)]
    assert book.sections[0].text == "Fifteen degrees [1]."
    missing = resolve_sources(book, [Passage(0, "notes_a.md", ("Sharpening",), PASSAGES[0])])
    assert missing == 1 and book.sections[0].passages == (PASSAGES[0],) and book.sections[1].passages == ("",)
