"""A section's citations as printed (pipeline/typeset/cited.py): its markers renumbered in the order first cited
and its Sources list naming each, read back as it was printed (pipeline/sources/markers.py)."""

from __future__ import annotations

from pipeline.records.sources import Passage
from pipeline.sources.markers import split_sources_list
from pipeline.typeset.cited import cited_body

GIVEN = [
    Passage(0, "guide.md", ("Knives", "Sharpening"), "Hold the blade at fifteen degrees to the stone."),
    Passage(1, "care_notes.md", ("Care",), "Dry carbon steel at once; water rusts it.", page=None),
    Passage(2, "manual.pdf", ("Safety [v2]",), "Curl your fingers into a claw.", page=12),
]


def test_a_section_prints_renumbered_with_its_sources_list_read_back_as_printed():
    body = cited_body("Claws keep fingers safe [3]. The angle [1] and the claw [3, 1].", GIVEN)
    text, wheres = split_sources_list(body)
    assert text == "Claws keep fingers safe [1]. The angle [2] and the claw [1][2]."
    assert wheres == ["manual.pdf, Safety [v2], p. 12", "guide.md, Knives > Sharpening"]
    assert "Safety \\[v2\\]" in body and "care\\_notes" not in body  # escaped; an uncited source is not listed
    assert cited_body("No citation at all.", GIVEN) == "No citation at all."
