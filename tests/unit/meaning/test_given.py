"""What a book's nodes are about before the model phrases them (pipeline/meaning/given.py's given_book): the
request's concerns and the facets a book of its kind covers, laid out on the book's shape."""

from __future__ import annotations

import pytest

from pipeline.meaning.framing import BOOK_KINDS
from pipeline.meaning.given import CONCERN, facets, given_book, groups
from pipeline.meaning.reading import read

SOURDOUGH = "Write a short handbook on keeping a sourdough starter alive. Practical, with examples."
STOVE = (
    "A manual for looking after a wood-burning stove: "
    "lighting it, choosing fuel, sweeping the chimney and staying safe."
)


@pytest.mark.parametrize("kind", [*BOOK_KINDS])
def test_every_kind_covers_eight_facets_each_with_four_sections_or_more(kind):
    table = facets(kind)
    assert len(table) >= 8 and all(len(subs) >= 4 for _, subs in table)
    assert len({facet for facet, _ in table}) == len(table), "no facet twice"
    assert len(facets(CONCERN)[0][1]) >= 4


def test_a_short_request_is_laid_out_as_its_kinds_facets_with_the_rest_kept_as_spares():
    book = given_book(read(SOURDOUGH), 2, 3, 4)
    assert book is not None and book.levels == ("parts", "chapters", "sections")
    chapters = [chapter.about for part in book.parts for chapter in part.children]
    assert chapters == [facet for facet, _ in facets("practice")[:6]]
    assert [spare.about for spare in book.spare_chapters] == [facet for facet, _ in facets("practice")[6:]]
    assert book.parts[0].about.startswith("the chapters on what it is and why it matters")
    assert all(len(chapter.children) >= 4 for part in book.parts for chapter in part.children)


def test_a_requests_concerns_are_chapters_after_the_first_facet_and_a_facet_they_carry_is_left_out():
    book = given_book(read(STOVE), 2, 3, 4)
    assert book is not None
    chapters = [chapter for part in book.parts for chapter in part.children]
    assert [c.about for c in chapters[:5]] == [
        "what it is and why it matters",
        "lighting",
        "choosing fuel",
        "sweeping the chimney",
        "staying safe",
    ]
    assert all(c.from_request for c in chapters[1:5]) and not chapters[0].from_request
    kept = [c.about for c in chapters] + [c.about for c in book.spare_chapters]
    assert kept.count("staying safe") == 1, "the kind's own 'staying safe' is the request's concern already"


def test_more_concerns_than_chapters_are_grouped_in_order_a_section_each():
    concerns = (
        "bookings, deposits, insurance, licensing, fire safety, first aid, cleaning, heating, complaints, pest control"
    )
    book = given_book(read(f"A handbook on running a village hall: {concerns}."), 1, 3, 4)
    assert book is not None
    chapters = book.parts[0].children
    own = [[s.about for s in chapter.children if s.from_request] for chapter in chapters]
    assert [len(group) for group in own] == [4, 3, 3] and sum(own, []) == concerns.split(", "), "in the request's order"
    assert all(len(chapter.children) >= 4 for chapter in chapters)


def test_a_shape_larger_than_the_facets_gives_the_parts_and_one_larger_still_gives_nothing():
    book = given_book(read(SOURDOUGH), 8, 12, 16)
    assert book is not None and book.levels == ("parts",) and len(book.parts) == 8
    assert given_book(read(SOURDOUGH), 9, 12, 16) is None, "more parts than facets: planned open"


def test_groups_keep_the_order_and_differ_by_one_at_most():
    assert groups(list("abcdefg"), 3) == [["a", "b", "c"], ["d", "e"], ["f", "g"]]
