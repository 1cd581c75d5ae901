"""outline.md, the outline a person edits (pipeline/book/outlinefile.py): the round trip outline -> outline.md ->
outline is exact for titles and points of any shape, levels a file leaves out are left to the planner, and a
file that breaks the shape ends in one line naming its line."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.book.outlinefile import outline_markdown, read_outline_file, read_outline_markdown
from pipeline.errors import UsageError
from pipeline.records import Chapter, Outline, Part, Section

REQUEST = "Write a field guide to the lichens of one coastal forest, for walkers"


def outline_of(parts: int, chapters: int, sections: int, point: str = "What it covers.") -> Outline:
    return Outline(
        title="Lichens of the Coast",
        parts=[
            Part(
                id=f"p{p:02d}",
                title=f"Part {p}",
                point=point,
                chapters=[
                    Chapter(
                        id=f"p{p:02d}.c{c:02d}",
                        title=f"Chapter {p}.{c}",
                        point=point,
                        sections=[
                            Section(id=f"p{p:02d}.c{c:02d}.s{s:02d}", title=f"Section {p}.{c}.{s}", point=point)
                            for s in range(1, sections + 1)
                        ],
                    )
                    for c in range(1, chapters + 1)
                ],
            )
            for p in range(1, parts + 1)
        ],
    )


def test_a_planned_outline_round_trips_through_outline_md():
    outline = outline_of(2, 3, 4)
    text = outline_markdown(outline, REQUEST)
    assert text.startswith(f"---\nrequest: {REQUEST}\n---\n# Lichens of the Coast\n\n## Part 1\nWhat it covers.\n")
    given = read_outline_markdown(text)
    assert given.request == REQUEST and given.counts == (2, 3, 4) and given.outline.complete
    assert given.outline.model_dump() == outline.model_dump()


def test_the_places_a_node_is_written_from_round_trip_and_a_point_like_them_is_escaped():
    outline = outline_of(1, 1, 2)
    outline.parts[0].places = ["notes/flour.md, Rye > Hydration", "manual.pdf, Safety, p. 12"]
    outline.parts[0].chapters[0].sections[1].point = "Sources: a point that reads like the line"
    text = outline_markdown(outline, REQUEST)
    assert "## Part 1\nWhat it covers.\nSources: notes/flour.md, Rye > Hydration | manual.pdf, Safety, p. 12\n" in text
    assert "\\Sources: a point" in text
    assert read_outline_markdown(text).outline.model_dump() == outline.model_dump()
    edited = read_outline_markdown(text.replace("Sources: notes/flour.md, Rye > Hydration | ", "Sources: "))
    assert edited.outline.parts[0].places == ["manual.pdf, Safety, p. 12"]


def test_outline_json_keeps_a_nodes_places_under_sources_and_reads_either_name():
    outline = outline_of(1, 1, 1)
    outline.parts[0].places = ["notes/flour.md, Rye > Hydration"]
    written = json.loads(outline.model_dump_json())["parts"][0]
    assert written["sources"] == ["notes/flour.md, Rye > Hydration"] and "places" not in written
    assert Outline.model_validate_json(outline.model_dump_json()).parts[0].places == outline.parts[0].places
    renamed = {**written, "places": written.pop("sources")}
    assert Outline.model_validate({"title": "B", "parts": [renamed]}).parts[0].places == outline.parts[0].places


line_text = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=40).map(
    str.strip
)


@settings(max_examples=60, deadline=None)
@given(
    titles=st.lists(line_text.filter(bool), min_size=3, max_size=3),
    points=st.lists(line_text, min_size=3, max_size=3),
    request=st.text(min_size=1, max_size=80).filter(lambda text: text.strip()),
)
def test_any_single_line_titles_and_points_round_trip(titles, points, request):
    # Points that open like a heading, front matter or an escape are written after a backslash and read back.
    outline = Outline(
        title=titles[0],
        parts=[
            Part(
                id="p01",
                title=titles[1],
                point=points[0],
                chapters=[
                    Chapter(
                        id="p01.c01",
                        title=titles[2],
                        point=points[1],
                        sections=[Section(id="p01.c01.s01", title=titles[2], point=points[2])],
                    )
                ],
            )
        ],
    )
    given = read_outline_markdown(outline_markdown(outline, request))
    assert given.outline.model_dump() == outline.model_dump() and given.request == request


def test_a_file_that_stops_at_chapters_leaves_the_sections_to_the_planner_and_takes_their_count_from_the_shape():
    text = "# A Book\n## One\n### One a\n### One b\n## Two\nThe second part.\n### Two a\n### Two b\n"
    given = read_outline_markdown(text)
    assert given.request is None and given.counts == (2, 2) and not given.outline.complete
    assert given.shape((8, 12, 5)) == (2, 2, 5)
    assert [c.id for p in given.outline.parts for c in p.chapters] == ["p01.c01", "p01.c02", "p02.c01", "p02.c02"]
    assert given.outline.parts[1].point == "The second part." and given.outline.parts[0].point == ""
    assert read_outline_markdown("# A Book\n## One\n## Two\n").shape((8, 3, 4)) == (2, 3, 4)


def test_outline_json_is_read_as_a_run_folder_holds_it(tmp_path):
    outline = outline_of(1, 2, 2)
    path = tmp_path / "outline.json"
    path.write_text(outline.model_dump_json())
    given = read_outline_file(path)
    assert given.outline.model_dump() == outline.model_dump() and given.counts == (1, 2, 2)
    path.write_text(json.dumps({"title": "No parts"}))
    with pytest.raises(UsageError, match=r"outline.json: not an outline.json \(Field required\)"):
        read_outline_file(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# Book\n## Part\n#### Section\n", "line 3: a section outside a chapter (a heading level skipped)"),
        ("# Book\n### Chapter\n", "line 2: a chapter outside a part (a heading level skipped)"),
        ("# Book\n## \n", "line 2: an empty part title"),
        ("# Book\n## Part\n# Another\n", "line 3: a second book title"),
        ("# Book\nAbout it.\n## Part\n", "line 2: text under the book title"),
        ("# Book\n## Part\nOne point.\nAnother.\n", "line 4: a second line of text under one heading (line 3"),
        ("Intro\n# Book\n", "line 1: text before the book title"),
        ("# Book\n## P\n##### Deep\n", "line 3: a level-5 heading"),
        ("# Book\n", "no parts"),
        ("# Book\nSources: a.md\n## Part\n", "line 2: a Sources line under the book title"),
        ("## Part\n", "line 1: a part before the book title"),
        ("---\nrequest: x\n# Book\n", "line 3: a heading inside the front matter (no closing `---` above it)"),
        ("---\nrequest: x\n", "the front matter opened on line 1 has no closing `---`"),
        ("---\ntitle: x\n---\n# Book\n## P\n", "line 2: front matter takes `request: ...` only, not 'title'"),
        ('---\nrequest: "unclosed\n---\n# Book\n## P\n', "line 2: the request opens with a quote but is no JSON"),
    ],
)
def test_a_bad_file_ends_in_one_line_naming_its_line(text, message):
    with pytest.raises(UsageError) as raised:
        read_outline_markdown(text, "my.md")
    assert str(raised.value).startswith("my.md") and message in str(raised.value), str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_part_or_chapter_with_fewer_children_is_short_and_the_most_any_has_is_the_shape():
    given = read_outline_markdown(
        "# Book\n## One\n### a\n#### x\n#### y\n### b\n#### z\n## Two\n### c\n#### w\n#### v\n", "my.md"
    )
    parts = given.outline.parts
    assert given.counts == (2, 2, 2) and given.outline.complete
    assert [p.short for p in parts] == [False, True], "part Two has one chapter where the shape has two"
    assert [c.short for c in parts[0].chapters] == [False, True] and not parts[1].chapters[0].short
    again = read_outline_markdown(outline_markdown(given.outline, None), "again.md")
    assert again.outline == given.outline, "a planned book with a short chapter round-trips (short comes back)"
