"""The planner of every level, in both modes.

Open (LevelPlanner), driven by the table of levels: the book's question asks for its parts (and its title), a part's
for its chapters, a chapter's for its sections. Each node's question is built from the table and what is above the
node, its children are chosen (asking.py) and added to the outline as they are taken, and a node that cannot be
filled has fewer children and is marked short. The asks the request makes travel down on each node's question
(`owed`: what its children must carry). A taken child is added where it is chosen (choose.Children); planner.py's
Starter starts each node as soon as its parent's title is known.

Given (GivenPlan): every given node phrased at once, then taken in the outline's order, from the GivenBook
(meaning/given.py) and the phraser (phrasing.py); a level the plan does not give is planned open, by the Starter. The
first round of every chapter and section goes out at the start with the book's title, so planning is one wave of short
requests rather than a chain of levels. A part's chapters, then a chapter's sections, are planned by LevelPlanner.plan
as an open node's are, with phrase_children as their source: each taken in order as its samples come in (each apart from
those before it). A part is made before its chapters and titled from their titles after them (the model phrases a part
far better from three concrete titles than from three facets); then its chapters' sections are taken and handed over. A
node that cannot be phrased is replaced by a spare (the book's spare chapters, a chapter's spare sections) asked then;
when the spares are spent, the node has fewer children and is marked short, never filled with a made-up title. A part
takes, as its last resort, the best line of its samples that has no defect whatever its fit; a part no line of which can
be taken is left out with its chapters. A resumed plan keeps what it has and phrases what it lacks.

Ids, what is above a node, marking it short and the rounds are choose.py's, records' and rounds.py's (next_id,
ancestors_of, marked_short, Rounds), one for both modes.
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
from pipeline.book.plan.phrasing import Phraser, Samples, ToPhrase
from pipeline.book.plan.prompts import PlanItem, about, must_note
from pipeline.book.plan.rounds import PlanStats
from pipeline.meaning.given import Given, GivenBook
from pipeline.meaning.nearness import unit
from pipeline.records import BookSpec, Chapter, Outline, Part, Section, children, next_id, node_id, wants_children
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
        titled = not path or path[-1].title  # a given part's chapters are phrased before its title
        if self.sources_note is not None and len(path) < 2 and titled:  # the book's prompt and the parts'
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
                yield ToPhrase.of("chapters", chapter.about, node_id(p, c), book=book)
            if not given.gives("sections") or (had is not None and had.short):
                continue
            for s, section in enumerate(chapter.children[: spec.sections]):
                if had is None or s >= len(had.sections):
                    yield ToPhrase.of("sections", section.about, node_id(p, c, s), book=book, chapter=chapter.about)


def given_of(book: GivenBook, part: Given, chapter: Chapter) -> Given:
    """The given node a resumed chapter was phrased from, found by its `about` (it phrases the rest of its
    sections)."""
    found = [given for given in (*part.children, *book.all_chapters()) if given.about == chapter.about]
    return found[0] if found else Given(chapter.about)


class Opens(Protocol):
    """Plans a node's children as soon as its parent's title is known, open or from a `source` (LevelPlanner.plan's),
    and hands its sections over as the schedule says (planner.py's Starter)."""

    def part(self, book: Outline, part: Part) -> None: ...

    def chapter(self, book: Outline, part: Part, chapter: Chapter, *, source: Source | None = None) -> None: ...


@dataclass
class GivenPlan:
    """One book planned from what is given (module docstring)."""

    levels: LevelPlanner
    given: GivenBook
    phraser: Phraser
    changed: OnChange
    opens: Callable[[TaskGroup], Opens]  # what plans and hands over a level, in a task group (planner.py's Starter)
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
        marked_short(outline, spec.parts, self.levels.stats)
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
        """The part's chapters (those it lacks, phrased: LevelPlanner.plan with phrase_children as its source), then
        its title phrased from theirs, then its chapters' sections; a part none of whose chapters or title could be
        phrased is left out."""
        part = have or Part(id=node_id(p), title="", about=given.about)  # titled once its chapters are known
        if self.given.gives("chapters") and wants_children(part, self.levels.spec.chapters):
            await self.levels.plan(outline, (part,), source=partial(self.phrase_children, given, ahead))
        if have is None:
            if not await self.titled(outline, p, given, part, ahead):
                return
            outline.parts.append(part)
        self.changed(outline)
        if not self.given.gives("chapters"):
            self.opens(group).part(outline, part)
            return
        for chapter in part.chapters:
            chapter_given = self.chapter_givens.get(chapter.id) or given_of(self.given, given, chapter)
            self.start_chapter(group, outline, part, chapter, chapter_given, ahead)

    async def titled(self, outline: Outline, p: int, given: Given, part: Part, ahead: Ahead) -> bool:
        """Title the part from its chapters' titles (its facets' words when it has no chapter yet); False when it
        cannot be (it is left out)."""
        chapters = part.chapters
        if not chapters and self.given.gives("chapters"):
            log.info("part %d (%s) has no chapter: it is left out", p + 1, given.about)
            return False
        ancestors = ancestors_of((), outline.title, self.levels.spec.prompt)
        ancestors |= {f"the title of chapter {c.id}": c.title for c in chapters}  # a part is no chapter again
        choosing = Choosing("book", "parts", self.levels.spec.parts, ancestors, [part.title for part in outline.parts])
        book = self.phraser.book
        if chapters:  # 'its part made of the chapters "X", "Y" and "Z"'
            phrase = ToPhrase.of("parts", joined([f'"{c.title}"' for c in chapters]), part.id, book=book)
        else:  # a facet as a part, its chapters planned open: 'its part about getting started'
            phrase = ToPhrase.of("parts", given.about, part.id, book=book, asked_as="chapters")
        item = await self.take(phrase, choosing, ahead, last_resort=True)
        if item is None:
            log.info("part %d (%s) could not be titled: it is left out with its chapters", p + 1, given.about)
            return False
        part.title, part.point = item.title, item.point
        return True

    # ------------------------------------------------------------------ a node's children, phrased

    def start_chapter(
        self, group: TaskGroup, outline: Outline, part: Part, chapter: Chapter, given: Given, ahead: Ahead
    ) -> None:
        """The chapter handed to the Starter, which plans what it lacks (its given sections phrased, else open) and
        hands its sections over as the schedule says."""
        phrased = self.given.gives("sections") and bool(given.children)
        source = partial(self.phrase_children, given, ahead) if phrased else None
        self.opens(group).chapter(outline, part, chapter, source=source)

    async def phrase_children(self, given: Given, ahead: Ahead, question: Question, adding: Children) -> None:
        """A part's chapters or a chapter's sections from its given nodes (LevelPlanner.plan's source in given
        planning): each phrased in turn and taken into the node where it is chosen, the next asked while the node has
        room; past them, its spares (wanted)."""
        node = adding.path[-1]
        choosing = Choosing.of(question, None, adding)
        chapter = given.about if question.level == "sections" else None
        wanted = self.wanted(given, len(children(node)), question.level)
        while choosing.missing() > 0 and (child := next(wanted, None)) is not None:
            key = next_id(node, children(node))  # the id it is taken under
            adding.about = child.about
            phrase = ToPhrase.of(question.level, child.about, key, book=self.phraser.book, chapter=chapter)
            if await self.take(phrase, choosing, ahead) is not None and question.level == "chapters":
                self.chapter_givens[key] = child
        if choosing.missing() > 0:
            log.info("%s has %d %s: no more could be phrased", node.id, len(children(node)), question.level)

    def wanted(self, given: Given, have: int, level: ChildLevel) -> Iterator[Given]:
        """The given children a node lacks, then its spares: a chapter's own (those past the shape's count), a part's
        the book's spare chapters (each taken once, book-wide)."""
        if level != "chapters":
            yield from given.children[have:]
            return
        yield from given.children[have : self.levels.spec.chapters]
        while (spare := self.given.spare_chapter()) is not None:
            yield spare
