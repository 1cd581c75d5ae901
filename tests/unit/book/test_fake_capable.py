"""The capable FAKE engine (tests/fakes/fake_capable.py, `python -m tests.fakes.fake_steplaw N --capable`): its plans
are what the planner's own prompts ask for, parse into distinct titles that the title policy
(pipeline/book/plan/policy.py) takes across a whole 8x12x16 book, sit over the judge's floor, and its sections
are on their own point, `max_tokens` words long; the default FAKE answers as before."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.book.plan import policy
from pipeline.book.plan.checks import TitleChecks
from pipeline.book.plan.policy import Chain
from pipeline.book.plan.prompts import (
    PlanItem,
    chosen_note,
    example_words,
    how_many,
    must_note,
    parse_book_title,
    parse_items,
    rare_example_words,
)
from pipeline.book.write import section_prompt
from pipeline.errors import UsageError
from pipeline.meaning.embed import open_embedder
from pipeline.meaning.floors import PLAN_FLOOR
from pipeline.meaning.nearness import point_margin, unit
from pipeline.meaning.onsubject import unit_fits
from pipeline.records import BookSpec, Chapter, Outline, Part, Section
from pipeline.templating import book_context, render_chat
from pipeline.titles import content_words, title_key
from tests.fakes.fake_capable import capable_pieces, capable_plan_answer, capable_section_text
from tests.fakes.fake_steplaw import StepLawEngine, answer_pieces

REQUEST = "Write a complete software engineering handbook. Every topic, with examples."
PARTS, CHAPTERS, SECTIONS = 8, 12, 16
SPARE = 3  # lines asked beyond the need (pipeline/book/plan/schedule.py's SPARE_ITEMS)


def plan_messages(template: str, count: int, *, chosen: tuple[str, ...] = (), **values: str) -> list[dict]:
    """A planning request's messages as the planner sends them (pipeline/book/plan/asking.py)."""
    values.setdefault("must", "")
    noun = {"plan_book.md": "part", "plan_part.md": "chapter", "plan_chapter.md": "section"}[template]
    turns = render_chat(template, **values, how_many=how_many(count, noun), avoid=chosen_note(list(chosen)))
    return book_context(REQUEST) + turns


def book_messages() -> list[dict]:
    return plan_messages("plan_book.md", PARTS + SPARE, prompt=REQUEST)


def part_messages(book_title: str, part: str) -> list[dict]:
    return plan_messages("plan_part.md", CHAPTERS + SPARE, book_title=book_title, part_title=part, part_about="")


def chapter_messages(book_title: str, chapter: str) -> list[dict]:
    values = {"book_title": book_title, "chapter_title": chapter, "chapter_about": ""}
    return plan_messages("plan_chapter.md", SECTIONS + SPARE, **values)


def lines_of(messages: list[dict], sample: int = 0) -> list[PlanItem]:
    return parse_items(capable_plan_answer(messages, sample))


class Book:
    """A whole book planned from the capable fake's first samples through the planner's own checks: each line's
    defects by words, its faults beside the siblings taken, then the book's claim on its title."""

    def __init__(self) -> None:
        self.checks = TitleChecks(open_embedder(), REQUEST)
        self.refused: dict[str, int] = {}
        self.title = parse_book_title(capable_plan_answer(book_messages()))

    def take(self, template: str, level: str, items: list[PlanItem], count: int, ancestors: dict) -> list[PlanItem]:
        copied = (example_words(template) | rare_example_words()) - content_words(" ".join(ancestors.values()))
        taken: list[PlanItem] = []
        for item in items:
            chosen, units = [i.title for i in taken], [unit(i.title, i.point) for i in taken]
            found = self.checks.first(Chain.DEFECT, item, ancestors=ancestors, taken=chosen, forbidden=copied)
            hold = {"taken": chosen, "sibling_units": units, "fit": 1.0, "owed": []}
            found = found or self.checks.first(Chain.HOLD, item, **hold)
            found = found or self.checks.claim(level, item)
            if found is not None:
                self.refused[found.rule] = self.refused.get(found.rule, 0) + 1
            elif len(taken) < count:
                taken.append(item)
        return taken

    def plan(self) -> list[list[list[PlanItem]]]:
        """parts -> chapters -> sections taken."""
        above = {"the book title": self.title, "the request": REQUEST}
        parts = self.take("plan_book.md", "parts", lines_of(book_messages()), PARTS, {"the request": REQUEST})
        book = []
        for part in parts:
            lines = lines_of(part_messages(self.title, part.title))
            chapters = self.take("plan_part.md", "chapters", lines, CHAPTERS, {"the part title": part.title, **above})
            book.append([self.sections(chapter) for chapter in chapters])
        return book

    def sections(self, chapter: PlanItem) -> list[PlanItem]:
        lines = lines_of(chapter_messages(self.title, chapter.title))
        ancestors = {"the chapter title": chapter.title, "the book title": self.title, "the request": REQUEST}
        return self.take("plan_chapter.md", "sections", lines, SECTIONS, ancestors)


@pytest.fixture(scope="module")
def book() -> tuple[Book, list[list[list[PlanItem]]]]:
    planned = Book()
    return planned, planned.plan()


def test_each_level_answers_as_many_distinct_lines_as_asked_with_a_usable_book_title():
    answer = capable_plan_answer(book_messages())
    book_title = parse_book_title(answer)
    assert book_title and TitleChecks(open_embedder(), REQUEST).book_title(book_title) is None
    for messages, count in [
        (book_messages(), PARTS + SPARE),
        (part_messages(book_title, "First Steps"), CHAPTERS + SPARE),
        (chapter_messages(book_title, "Quality, Planning and Art"), SECTIONS + SPARE),
    ]:
        items = lines_of(messages)
        assert len(items) == count and all(item.point for item in items)
        assert len({title_key(item.title) for item in items}) == count


def test_samples_overlap_and_a_second_round_gives_other_lines():
    first, second = lines_of(book_messages(), 0), lines_of(book_messages(), 1)
    assert first != second and {i.title for i in first} == {i.title for i in second}, "the same lines, reordered"
    chosen = tuple(item.title for item in first[:5])
    again = lines_of(plan_messages("plan_book.md", 6, chosen=chosen, prompt=REQUEST))
    assert len(again) == 6 and not {title_key(t) for t in chosen} & {title_key(i.title) for i in again}


def test_the_policy_takes_a_whole_8x12x16_book_from_the_first_samples(book):
    planned, parts = book
    assert len(parts) == PARTS and all(len(chapters) == CHAPTERS for chapters in parts)
    sections = [len(s) for chapters in parts for s in chapters]
    assert sum(sections) >= 0.99 * PARTS * CHAPTERS * SECTIONS and min(sections) >= SECTIONS - 1
    refused = sum(planned.refused.values())
    assert refused <= 0.02 * PARTS * CHAPTERS * SECTIONS, planned.refused  # a real model's lines are refused too
    assert set(planned.refused) <= {"near_elsewhere", "covers_sibling"}, planned.refused
    keys = [title_key(s.title) for chapters in parts for c in chapters for s in c]
    assert len(set(keys)) == len(keys)


def test_no_line_has_a_defect_by_words_at_any_level(book):
    """DEFECTS_BY_WORDS on every line the first samples give, beside nothing chosen: a capable model's lines are
    headings with a point, of this book's words."""
    planned, parts = book
    chapter = parts[0][0]
    ancestors = {"the book title": planned.title, "the request": REQUEST}
    for messages, template, above in [
        (book_messages(), "plan_book.md", {"the request": REQUEST}),
        (part_messages(planned.title, "First Steps"), "plan_part.md", {"the part title": "First Steps", **ancestors}),
    ]:
        copied = (example_words(template) | rare_example_words()) - content_words(" ".join(above.values()))
        for item in lines_of(messages):
            line = policy.Line.of(item, ancestors=above, taken=[], forbidden=copied, request=REQUEST, asks=[])
            assert policy.first(Chain.DEFECT, line, policy.Context(open_embedder())) is None, item
    assert chapter, "sections were taken"


def test_the_asks_a_prompt_names_are_carried_by_the_first_lines():
    musts = ["unit testing", "code review"]
    messages = plan_messages("plan_book.md", 11, prompt=REQUEST, must=must_note(musts, "part", 8))
    points = [item.point for item in lines_of(messages)]
    assert "unit testing" in points[0] and "code review" in points[1]


@pytest.fixture(scope="module")
def judge():
    from pipeline.meaning.minilm import MiniLMEmbedder

    try:
        return MiniLMEmbedder()
    except UsageError:
        return open_embedder()


def test_the_judge_puts_the_lines_over_the_plan_floor(book, judge):
    """pipeline/meaning/onsubject.py's unit fit, by MiniLM (the static table where it is not installed)."""
    _, parts = book
    units = [unit(section.title, section.point) for chapters in parts[:2] for c in chapters[:3] for section in c]
    fits = unit_fits(judge, REQUEST, units)
    assert float(np.mean(fits >= PLAN_FLOOR)) >= 0.95, sorted(fits)[:5]


def test_a_written_section_is_on_its_own_point_and_max_tokens_words_long(book):
    planned, parts = book
    spec = BookSpec(prompt=REQUEST, parts=PARTS, chapters=CHAPTERS, sections=SECTIONS)
    sections = [Section(id=f"s{n}", title=i.title, point=i.point) for n, i in enumerate(parts[1][2], 1)]
    chapter = Chapter(id="c1", title="Quality, Planning and Art", sections=sections)
    part = Part(id="p1", title="First Steps", chapters=[chapter])
    outline = Outline(title=planned.title, parts=[part])
    units = [unit(s.title, s.point) for s in sections]
    for own, section in enumerate(sections):
        words = capable_section_text(section_prompt(spec, outline, chapter, section), spec.max_tokens)
        assert len(words) == spec.max_tokens and words[-1].endswith(".")
        assert point_margin(open_embedder(), " ".join(words), units, own) > 0, section.title


SECTION_BODY = {
    "messages": [{"role": "user", "content": 'Write the section "Tools" of this book on bees. It explains: Hives.'}],
    "max_tokens": 40,
}


def test_the_default_fake_answers_as_before_and_the_capable_one_as_long():
    assert StepLawEngine().pieces(SECTION_BODY, 0) == answer_pieces(SECTION_BODY)
    capable = StepLawEngine(capable=True).pieces(SECTION_BODY, 0)
    assert capable == capable_pieces(SECTION_BODY) and len(capable) == 40 and capable[-1].endswith(". ")
