"""The audit's per-section work done as sections land (pipeline/audit/ahead.py): what it embeds is what the audit's
on-subject judge asks for, so the audit finds each landed section's vectors in the judge's cache."""

from __future__ import annotations

import anyio
import pytest

from pipeline.audit.ahead import AuditAhead
from pipeline.audit.analysis import judge_subject, section_meanings
from pipeline.audit.book import AuditBook, AuditSection
from pipeline.meaning.embed import StaticEmbedder
from pipeline.meaning.reading import request_asks
from pipeline.records import Author, SectionResult

TEXTS = {
    "p01.c01.s01": "A starter is flour and water that wild yeast and bacteria have made their home.",
    "p01.c01.s02": "Feed it every day at room temperature, or once a week from the fridge.",
    "p01.c02.s01": "A starter that smells of acetone is hungry: feed it more often.",
}


def book_of(author: Author) -> AuditBook:
    sections = [AuditSection(id_, f"Title {n}", text) for n, (id_, text) in enumerate(TEXTS.items())]
    parents = {id_: id_.rsplit(".", 1)[0] for id_ in TEXTS}
    return AuditBook("book", [], sections, True, prompt="A handbook on keeping a sourdough starter.", author=author,
                     parents=parents, points={id_: "Why it matters." for id_ in TEXTS})  # fmt: skip


@pytest.mark.parametrize("author", list(Author))
def test_the_audit_finds_each_landed_sections_vectors_in_the_judges_cache(author):
    judge, book = StaticEmbedder(), book_of(author)
    ahead = AuditAhead(judge, author=author)

    async def land_all() -> None:
        for section in book.sections:
            result = SectionResult(id=section.id, title=section.title, text=section.text)
            await ahead.landed(result, title=section.title, point=book.points[section.id])

    anyio.run(land_all)
    kept, asked = set(judge.cache), []
    embed = judge.embed
    judge.embed = lambda texts: asked.extend(texts) or embed(texts)  # type: ignore[method-assign]
    judge_subject(book, section_meanings(book, StaticEmbedder()), judge)
    assert asked, "the judge was asked"
    assert {text for text in asked if text not in kept} <= {book.prompt, *request_asks(book.prompt or "")}
