"""Planning a book from what is given: every given node phrased at once, then taken in the outline's order.

Takes the open planner of every level (levels.py: a level the plan does not give is planned open), the GivenBook
(given.py) and the phraser (phrasing.py); returns the Outline, telling the writer of each section as the schedule
says. The first round of every chapter and section goes out at the start with the book's title, so planning is one
wave of short requests rather than a chain of levels. A part's chapters are taken in order as their samples come in
(each apart from those before it); the part is then titled from its chapters' titles (the model phrases a part far
better from three concrete titles than from three facets), and its chapters' sections are taken and handed over. A
node that cannot be phrased is replaced by a spare (the book's spare chapters, a chapter's spare sections) asked
then; when the spares are spent, the node has fewer children and is marked short, never filled with a made-up title.
A part takes, as its last resort, the best line of its samples that has no defect whatever its fit; a part no line
of which can be taken is left out with its chapters. A resumed plan keeps what it has and phrases what it lacks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from pipeline.book.plan.choose import Choosing, ancestors_of, marked_short
from pipeline.book.plan.levels import LevelPlanner, OnChange, OnSection
from pipeline.book.plan.phrasing import Given, GivenBook, Phraser, Samples, ToPhrase
from pipeline.book.plan.prompts import PlanItem
from pipeline.records import BookSpec, Chapter, Outline, Part, Section, node_id
from pipeline.text import joined

log = logging.getLogger("fanout")


Ahead = dict[str, tuple[ToPhrase, Samples]]  # a given node's id -> its ToPhrase and its first round, asked ahead


def given_nodes(given: GivenBook, phraser: Phraser, spec: BookSpec, outline: Outline | None) -> Iterator[ToPhrase]:
    """Every given chapter and section the outline lacks, in the outline's order (and the book's title)."""
    book = phraser.book
    if outline is None:
        yield ToPhrase("title", phraser.reading.subject, {"book": book}, "book")
    if not given.gives("chapters"):
        return
    for p, part in enumerate(given.parts[: spec.parts]):
        have = next((pt for pt in outline.parts if pt.about == part.about), None) if outline else None
        for c, chapter in enumerate(part.children[: spec.chapters]):
            had = have.chapters[c] if have and c < len(have.chapters) else None
            if had is None:
                yield ToPhrase("chapters", chapter.about, {"book": book, "about": chapter.about}, node_id(p, c))
            if not given.gives("sections") or (had is not None and had.short):
                continue
            for s, section in enumerate(chapter.children[: spec.sections]):
                if had is None or s >= len(had.sections):
                    values = {"book": book, "chapter": chapter.about, "about": section.about}
                    yield ToPhrase("sections", section.about, values, node_id(p, c, s))


def chapter_given(book: GivenBook, part: Given, chapter: Chapter) -> Given:
    """The given node a resumed chapter was phrased from, found by its `about` (it phrases the rest of its
    sections)."""
    found = [given for given in (*part.children, *book.all_chapters()) if given.about == chapter.about]
    return found[0] if found else Given(chapter.about)


class Opens(Protocol):
    """Plans a level the plan does not give, open, each node as soon as its parent's title is known (planner.py's
    Starter)."""

    def part(self, book: Outline, part: Part) -> None: ...

    def chapter(self, book: Outline, part: Part, chapter: Chapter) -> None: ...


@dataclass
class GivenPlan:
    """One book planned from what is given (module docstring)."""

    levels: LevelPlanner
    given: GivenBook
    phraser: Phraser
    announce: OnSection
    changed: OnChange
    streamed: bool  # each section handed over as it is taken (else once its chapter is whole)
    opens: Callable[[TaskGroup], Opens]  # what plans a level not given, in a task group
    phrased: int = 0  # given nodes asked to be phrased
    chapter_givens: dict[str, Given] = field(default_factory=dict)  # a chapter taken this run -> its given node

    async def plan(self, partial: Outline | None) -> Outline:
        spec = self.levels.spec
        async with anyio.create_task_group() as group:
            ahead = self.ask_ahead(group, partial)
            outline = partial or Outline(title=await self.book_title(ahead), parts=[], complete=False)
            self.levels.book_title.settle(outline.title)
            self.changed(outline)
            for p, given in enumerate(self.given.parts[: spec.parts]):
                have = next((part for part in outline.parts if part.about == given.about), None)
                group.start_soon(self.part, group, outline, p, given, have, ahead)
        if len(outline.parts) < spec.parts:
            outline.short = True
        outline.parts.sort(key=lambda part: part.id)
        self.levels.on_node("parts")
        return outline

    # ------------------------------------------------------------------ the first round of every given node, at once

    def ask_ahead(self, group: TaskGroup, outline: Outline | None) -> Ahead:
        return {
            phrase.node_id: (phrase, self.phraser.ahead(group, phrase))
            for phrase in given_nodes(self.given, self.phraser, self.levels.spec, outline)
        }

    async def take(
        self, phrase: ToPhrase, choosing: Choosing, ahead: Ahead, *, last_resort: bool = False
    ) -> PlanItem | None:
        """The given node's line, taken: its first round as asked ahead (if it was), a second if needed."""
        self.phrased += 1
        prefetched = ahead.pop(phrase.node_id, None)
        first = prefetched[1].wait() if prefetched is not None and prefetched[0] == phrase else None
        return await self.phraser.phrase(phrase, choosing, first, last_resort=last_resort)

    async def book_title(self, ahead: Ahead) -> str:
        """The usable title of the book's phrased samples nearest the request (choose.BookTitle), else the subject
        as a title."""
        _, samples = ahead.pop("book")
        title = self.levels.book_title
        items = await samples.wait()
        title.from_samples([item.title for item in items], forbidden=self.phraser.forbidden, or_made=True)
        return title.text

    # ------------------------------------------------------------------ a part: its chapters, then its title

    async def part(
        self, group: TaskGroup, outline: Outline, p: int, given: Given, have: Part | None, ahead: Ahead
    ) -> None:
        """The part's chapters (those it lacks, phrased), then its title phrased from theirs, then its chapters'
        sections; a part none of whose chapters or title could be phrased is left out."""
        spec = self.levels.spec
        chapters = list(have.chapters) if have else []
        short = bool(have and have.short)
        if self.given.gives("chapters") and (have is None or (len(chapters) < spec.chapters and not short)):
            short = await self.chapters(outline, p, given, chapters, ahead)
        part = have or await self.titled(outline, p, given, chapters, ahead)
        if part is None:
            return
        part.chapters, part.short = chapters, part.short or short
        self.levels.stats.short += short and not (have and have.short)
        if have is None:
            outline.parts.append(part)
        self.changed(outline)
        if not self.given.gives("chapters"):
            self.opens(group).part(outline, part)
            return
        for chapter in part.chapters:
            self.start_chapter(
                group,
                outline,
                part,
                chapter,
                self.chapter_givens.get(chapter.id) or chapter_given(self.given, given, chapter),
                ahead,
            )
        self.levels.on_node("chapters")

    async def chapters(self, outline: Outline, p: int, given: Given, chapters: list[Chapter], ahead: Ahead) -> bool:
        """Take the part's missing chapters into `chapters`; True when it ends short."""
        spec = self.levels.spec
        ancestors = ancestors_of((), outline.title, spec.prompt)
        choosing = Choosing(node_id(p), "chapters", spec.chapters, ancestors, [c.title for c in chapters])
        wanted = list(given.children[len(chapters) : spec.chapters])
        while len(chapters) < spec.chapters:
            chapter_given = wanted.pop(0) if wanted else self.given.spare_chapter()
            if chapter_given is None:
                log.info("part %d has %d chapters: no more could be phrased", p + 1, len(chapters))
                return True
            key = node_id(p, len(chapters))
            values = {"book": self.phraser.book, "about": chapter_given.about}
            item = await self.take(ToPhrase("chapters", chapter_given.about, values, key), choosing, ahead)
            if item is not None:
                chapters.append(Chapter(id=key, title=item.title, point=item.point, about=chapter_given.about))
                self.chapter_givens[key] = chapter_given
        return False

    async def titled(
        self, outline: Outline, p: int, given: Given, chapters: list[Chapter], ahead: Ahead
    ) -> Part | None:
        """The part, titled from its chapters' titles (its facets' words when it has no chapter yet)."""
        if not chapters and self.given.gives("chapters"):
            log.info("part %d (%s) has no chapter: it is left out", p + 1, given.about)
            return None
        key = node_id(p)
        ancestors = ancestors_of((), outline.title, self.levels.spec.prompt)
        ancestors |= {f"the title of chapter {c.id}": c.title for c in chapters}  # a part is no chapter again
        choosing = Choosing("book", "parts", self.levels.spec.parts, ancestors, [part.title for part in outline.parts])
        if chapters:  # 'its part made of the chapters "X", "Y" and "Z"'
            about = joined([f'"{c.title}"' for c in chapters])
            phrase = ToPhrase("parts", about, {"book": self.phraser.book, "about": about}, key)
        else:  # a facet as a part, its chapters planned open: 'its part about getting started'
            phrase = ToPhrase("parts", given.about, {"book": self.phraser.book, "about": given.about}, key, "chapters")
        item = await self.take(phrase, choosing, ahead, last_resort=True)
        if item is None:
            log.info("part %d (%s) could not be titled: it is left out with its chapters", p + 1, given.about)
            return None
        return Part(id=key, title=item.title, point=item.point, about=given.about)

    # ------------------------------------------------------------------ a chapter's sections

    def start_chapter(
        self, group: TaskGroup, outline: Outline, part: Part, chapter: Chapter, given: Given, ahead: Ahead
    ) -> None:
        spec = self.levels.spec
        if len(chapter.sections) >= spec.sections or chapter.short:
            for section in list(chapter.sections):
                self.announce(outline, part, chapter, section)
            return
        if not self.given.gives("sections") or not given.children:
            self.opens(group).chapter(outline, part, chapter)
            return
        group.start_soon(self.chapter, outline, part, chapter, given, ahead)

    async def chapter(self, outline: Outline, part: Part, chapter: Chapter, given: Given, ahead: Ahead) -> None:
        spec = self.levels.spec
        numbers = [int(piece[1:]) - 1 for piece in chapter.id.split(".")]
        ancestors = ancestors_of((part, chapter), outline.title, spec.prompt)
        choosing = Choosing(chapter.id, "sections", spec.sections, ancestors, [s.title for s in chapter.sections])
        for section in list(chapter.sections):
            self.announce(outline, part, chapter, section)
        wanted = list(given.children[len(chapter.sections) :])
        while len(chapter.sections) < spec.sections and wanted:
            section_given = wanted.pop(0)
            key = node_id(*numbers, len(chapter.sections))
            values = {"book": self.phraser.book, "chapter": given.about, "about": section_given.about}
            item = await self.take(ToPhrase("sections", section_given.about, values, key), choosing, ahead)
            if item is None:
                continue
            section = Section(id=key, title=item.title, point=item.point, about=section_given.about)
            chapter.sections.append(section)
            if self.streamed:
                self.announce(outline, part, chapter, section)
        if marked_short(chapter, spec.sections, self.levels.stats):
            log.info("%s has %d sections: no more could be phrased", chapter.id, len(chapter.sections))
        if not self.streamed:
            for section in chapter.sections:
                self.announce(outline, part, chapter, section)
        self.levels.on_node("sections")
        self.changed(outline)
