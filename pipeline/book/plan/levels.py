"""The planner of every level, in both modes.

Open (LevelPlanner), driven by the table of levels: the book's question asks for its parts (and its title), a part's
for its chapters, a chapter's for its sections. Each node's question is built from the table and what is above the
node, its children are chosen (asking.py) and added to the outline as they are taken, and a node that cannot be
filled has fewer children and is marked short. The asks the request makes travel down on each node's question
(`owed`: what its children must carry). A taken child is added where it is chosen (choose.Children); planner.py's
Starter starts each node as soon as its parent's title is known.

Given (GivenPlan): every given node phrased at once, then taken in the outline's order, from the GivenBook and the
phraser (phrasing.py); a level the plan does not give is planned open, by the Starter. The first round of every
chapter and section goes out at the start with the book's title, so planning is one wave of short requests rather
than a chain of levels. A part's chapters are taken in order as their samples come in (each apart from those before
it); the part is then titled from its chapters' titles (the model phrases a part far better from three concrete
titles than from three facets), and its chapters' sections are taken and handed over. A node that cannot be phrased
is replaced by a spare (the book's spare chapters, a chapter's spare sections) asked then; when the spares are spent,
the node has fewer children and is marked short, never filled with a made-up title. A part takes, as its last
resort, the best line of its samples that has no defect whatever its fit; a part no line of which can be taken is
left out with its chapters. A resumed plan keeps what it has and phrases what it lacks.

Ids, what is above a node and marking it short are choose.py's and records' (node_id, ancestors_of, marked_short),
one for both modes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from pipeline.book.plan.asking import NodeAsker
from pipeline.book.plan.choose import (
    BookTitle,
    ChildLevel,
    Children,
    Choosing,
    OnChild,
    Path,
    Question,
    ancestors_of,
    marked_short,
)
from pipeline.book.plan.phrasing import Given, GivenBook, Phraser, Samples, ToPhrase
from pipeline.book.plan.prompts import PlanItem, about, must_note
from pipeline.book.plan.rounds import PlanStats
from pipeline.meaning.nearness import unit
from pipeline.records import BookSpec, Chapter, Outline, Part, Section, children, node_id
from pipeline.text import joined

OnSection = Callable[[Outline, Part, Chapter, Section], None]  # told of each section the plan hands to the writer
OnChange = Callable[[Outline], None]  # told of the outline after each planned node, to save it
OnDone = Callable[[Outline], None]  # told of a node's end, with the outline
Source = Callable[[Question, Children], Awaitable[None]]  # fills a node's children: asking.py's rounds by default


@dataclass(frozen=True)
class Level:
    """A node's kind in the table: what its children are (the level's name), one of them, its planning prompt,
    and what its children are made as (their ids: records.node_id)."""

    kind: str
    children: ChildLevel
    noun: str
    template: str
    make: type[Part] | type[Chapter] | type[Section]


SourcesNote = Callable[[str, str], str]  # (a node's title, the title above it) -> what the sources hold near it

LEVELS: tuple[Level, ...] = (
    Level("book", "parts", "part", "plan_book.md", Part),
    Level("part", "chapters", "chapter", "plan_part.md", Chapter),
    Level("chapter", "sections", "section", "plan_chapter.md", Section),
)


class LevelPlanner:
    """Plans the children of any node (module docstring): by asking.py's rounds, or by the `source` it is given (a
    given chapter's sections, phrased). `early`: a node's first line is taken while its samples stream (worth it
    only to a writer waiting for it: not in the barrier schedule)."""

    def __init__(
        self,
        spec: BookSpec,
        asker: NodeAsker,
        book_title: BookTitle,
        on_node: Callable[[str], None],
        asks: list[str],
        *,
        sources_note: SourcesNote | None = None,
    ) -> None:
        self.spec = spec
        self.sources_note = sources_note  # the user's sources near a node, for the book's and parts' prompts
        self.asker = asker
        self.stats: PlanStats = asker.stats
        self.book_title = book_title
        self.on_node = on_node
        self.owed: dict[str, list[str]] = {"book": asks[1:]}  # node id -> the asks its children must carry
        self.early = False

    def count(self, level: Level) -> int:
        return {"parts": self.spec.parts, "chapters": self.spec.chapters, "sections": self.spec.sections}[
            level.children
        ]

    def question(self, outline: Outline | None, path: Path) -> Question:
        """The node's question, from the table and what is above it."""
        level, prompt = LEVELS[len(path)], self.spec.prompt
        node_id = path[-1].id if path else "book"
        owed = self.owed.get(node_id, [])
        must = must_note(owed, level.noun, self.count(level))
        if self.sources_note is not None and len(path) < 2:  # the book's prompt and the parts'
            above = outline.title if path and outline is not None else ""
            must += self.sources_note(path[-1].title if path else "", above)
        if not path or outline is None:
            values = {"prompt": prompt, "must": must}
            have = [part.title for part in outline.parts] if outline else []
            parent_unit = prompt
        else:
            node = path[-1]
            values = {"book_title": outline.title, f"{level.kind}_title": node.title, "must": must}
            values[f"{level.kind}_about"] = about(level.kind, node.point)
            have = [child.title for child in children(node)]
            parent_unit = unit(node.title, node.point)
        ancestors = ancestors_of(path, outline.title if path and outline is not None else None, prompt)
        return Question(
            level.template, values, level.children, self.count(level), have, ancestors, node_id, owed, parent_unit,
            with_title=not path, early=self.early,
        )  # fmt: skip

    async def plan(
        self,
        outline: Outline | None,
        path: Path = (),
        on_child: OnChild | None = None,
        *,
        changed: OnChange | None = None,
        on_done: OnDone | None = None,
        source: Source | None = None,
    ) -> tuple[Outline, bool]:
        """Plan the node's missing children, telling `on_child` of each as it is added (choose.Children); the outline
        (the book's is made once its title is known), and whether the node is short. `changed` sees the outline
        after, then `on_done` (a task of the schedule's is rooted here, and hears of its end so)."""
        level = LEVELS[len(path)]
        adding = Children(self.book_title, outline, path, self.owed, level.make, on_child)
        await (source or self.asker.titles)(self.question(outline, path), adding)
        book = adding.flush(final=True)
        assert book is not None, "flush(final=True) makes the outline"
        node = path[-1] if path else book
        short = marked_short(node, self.count(level), self.stats)
        self.on_node(level.children)
        if changed is not None:
            changed(book)
        if on_done is not None:
            on_done(book)
        return book, short


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

    def chapter(self, book: Outline, part: Part, chapter: Chapter, *, source: Source | None = None) -> None: ...


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
        self.opens(group).chapter(outline, part, chapter, source=partial(self.phrase_sections, given, ahead))

    async def phrase_sections(self, given: Given, ahead: Ahead, question: Question, adding: Children) -> None:
        """A chapter's sections from its given nodes (LevelPlanner.plan's source in given planning): each phrased in
        turn and taken into the chapter where it is chosen, the next asked while the chapter has room."""
        chapter = adding.path[-1]
        numbers = [int(piece[1:]) - 1 for piece in chapter.id.split(".")]
        choosing = Choosing.of(question, None, adding)
        wanted = list(given.children[len(children(chapter)) :])
        while choosing.missing() > 0 and wanted:
            section_given = wanted.pop(0)
            key = node_id(*numbers, len(children(chapter)))  # the id it is taken under
            values = {"book": self.phraser.book, "chapter": given.about, "about": section_given.about}
            adding.about = section_given.about
            await self.take(ToPhrase("sections", section_given.about, values, key), choosing, ahead)
        if choosing.missing() > 0:
            log.info("%s has %d sections: no more could be phrased", chapter.id, len(children(chapter)))
