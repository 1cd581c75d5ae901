"""The good-writing corpus (tests/fixtures/corpus/, pipeline/bench/studies/corpus.py): its books load and keep the
corpus's promises (sixteen or more, at least five held out, at least half not about software, each with two
requests, licences that allow it), and the author FAKE (tests/fakes/fake_author.py) answers fanout's prompts with
a book's own lines, so the planner keeps them: planned on a capable profile, a corpus book's lines reach
outline.json word for word, in the book's order."""

from __future__ import annotations

import pytest

from pipeline.backends.pool import BackendPool, RetryPolicy
from pipeline.bench.studies.corpus import book_markdown, book_outline, compare, load_corpus
from pipeline.book.plan.planner import Planner
from pipeline.book.profiles import PROFILES, Sampler
from pipeline.meaning.offrequest import open_judge
from pipeline.records import Backend, BookSpec
from pipeline.templating import book_context, render_chat
from tests.fakes.fake_author import AuthorReplies, author_engine

BOOKS = load_corpus()
KEEPS = 0.95  # the share of a book's lines the planner keeps from the author FAKE, at the least


def test_the_corpus_keeps_its_promises():
    assert len(BOOKS) >= 16
    assert sum(book.held_out for book in BOOKS) >= 5
    assert sum(not book.software for book in BOOKS) * 2 >= len(BOOKS)
    assert len({book.slug for book in BOOKS}) == len(BOOKS)
    for book in BOOKS:
        assert book.requests.topics != book.requests.plain, book.slug
        assert book.source.startswith("github:") and "@" in book.source, book.slug


def test_a_book_reads_as_markdown_at_its_three_levels():
    book = BOOKS[0]
    text = book_markdown(book)
    outline = book_outline(book)
    assert text.count("\n## ") == len(book.parts) == len(outline.parts)
    assert text.count("\n#### ") == sum(len(c.sections) for p in book.parts for c in p.chapters)
    assert outline.parts[0].chapters[0].sections[0].id == "p01.c01.s01"


def test_the_author_answers_a_part_with_its_own_chapters_and_again_with_the_rest():
    book = next(book for book in BOOKS if book.slug == "the-sourdough-framework")
    author = AuthorReplies(book)
    part = next(part for part in book.parts if len(part.chapters) >= 3)
    values = {"book_title": book.title, "part_title": part.title, "part_about": "", "must": ""}
    ask = book_context("r") + render_chat("plan_part.md", **values, how_many="12 chapters", avoid="")
    answer = author({"messages": ask})
    assert answer.splitlines()[0] == f"1. {part.chapters[0].title}: {part.chapters[0].point}"
    chosen = f'\nAlready chosen, so give others: "{part.chapters[0].title}".'
    again = author(
        {"messages": book_context("r") + render_chat("plan_part.md", **values, how_many="2 chapters", avoid=chosen)}
    )
    assert part.chapters[0].title not in again and len(again.splitlines()) == min(2, len(part.chapters) - 1)


@pytest.mark.anyio
@pytest.mark.parametrize("slug", ["the-sourdough-framework", "statistics"])
async def test_a_capable_authors_outline_reaches_the_plan_word_for_word_in_its_order(slug):
    book = next(book for book in BOOKS if book.slug == slug)
    chapters = max(len(part.chapters) for part in book.parts)
    sections = max(len(chapter.sections) for part in book.parts for chapter in part.chapters)
    engine = await author_engine(book).start()
    try:
        pool = BackendPool([Backend(name="author", base_url=engine.url, cap=32)], RetryPolicy())
        spec = BookSpec(prompt=book.requests.plain, parts=len(book.parts), chapters=chapters, sections=sections)
        sampler = Sampler(profile=PROFILES["default"], kinds=frozenset())
        outline = await Planner(pool, spec, sampler, judge=open_judge("minilm")).plan()
    finally:
        await engine.stop()
    kept = compare(book, outline)
    assert kept.kept >= KEEPS * kept.lines, (kept.kept, kept.lines)
    assert kept.subtrees_lost == 0 and kept.out_of_order == 0 and kept.title_kept


@pytest.fixture
def anyio_backend():
    return "asyncio"
