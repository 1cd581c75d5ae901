"""Writing from sources (pipeline/book/cite.py, pipeline/sources/markers.py): the passages a section is given fit
the room its prompt has; markers naming no passage are taken out and counted. How they are printed:
tests/unit/typeset/test_cited.py."""

from __future__ import annotations

from pipeline.book.cite import (
    Citing,
    checked_markers,
    fitting,
    prompt_tokens,
    sources_block,
    sources_tokens,
    with_citations,
)
from pipeline.meaning.embed import open_embedder
from pipeline.records import Section, SectionResult
from pipeline.records.sources import Passage
from pipeline.sources.index import SourceIndex
from pipeline.sources.markers import cited_numbers

GIVEN = [
    Passage(0, "guide.md", ("Knives", "Sharpening"), "Hold the blade at fifteen degrees to the stone."),
    Passage(1, "care_notes.md", ("Care",), "Dry carbon steel at once; water rusts it.", page=None),
    Passage(2, "manual.pdf", ("Safety [v2]",), "Curl your fingers into a claw.", page=12),
]


def test_markers_naming_no_passage_go_and_are_counted_code_is_left_alone():
    text = "Hold it at fifteen degrees [1]. Dry it [2, 9]. Claws [3][4]. In code `a[7]` and\n\n```\nb[8]\n```\nEnd [5]."
    checked, removed = checked_markers(text, 3)
    assert (
        checked == "Hold it at fifteen degrees [1]. Dry it [2]. Claws [3]. In code `a[7]` and\n\n```\nb[8]\n```\nEnd."
    )
    assert removed == 3
    assert cited_numbers("a [2] b [1, 2] c [link](x) d [3]: e `[4]`") == [2, 1]


def test_with_citations_keeps_what_was_given_even_when_the_answer_failed():
    ok = with_citations(SectionResult(id="s", title="t", text="Angle [1]. Wrong [7]."), GIVEN)
    assert (ok.text, ok.citations_removed, ok.passages) == ("Angle [1]. Wrong.", 1, GIVEN)
    failed = with_citations(SectionResult(id="s", title="t", error="every backend failed"), GIVEN)
    assert failed.passages == GIVEN and failed.citations_removed == 0


def test_the_passages_given_fit_the_room_the_prompt_has():
    block_of_two = sources_tokens(GIVEN[:2])
    assert block_of_two >= prompt_tokens(sources_block(GIVEN[:2]))  # counted piece by piece, never short
    assert fitting(GIVEN, block_of_two) == GIVEN[:2] and fitting(GIVEN, 5) == []
    assert sources_block([]) == "" and sources_block(GIVEN[:1]).startswith("Write from these sources.")
    index = SourceIndex.build(GIVEN, open_embedder())
    section = Section(id="p01.c01.s01", title="Sharpening a knife")
    roomy = Citing(index, "knives", context=32768, max_tokens=600)
    assert roomy.passages("Knives", section, prompt="x")[0] == GIVEN[0] and len(roomy.chosen["p01.c01.s01"]) == 3
    tight = Citing(index, "knives", context=800, max_tokens=600)
    assert len(tight.passages("Knives", section, prompt="word " * 100)) < 3
