"""One planner for every level of an open plan (LevelPlanner), driven by the table of levels: the book's question
asks for its parts (and its title), a part's for its chapters, a chapter's for its sections. Each node's question is
built from the table and what is above the node, its children are chosen (asking.py) and added to the outline as
they are taken, and a node that cannot be filled has fewer children and is marked short. The asks the request makes
travel down on each node's question (`owed`: what its children must carry). The Starter starts each node as soon as
its parent's title is known (the streamed and pipelined schedules).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from anyio.abc import TaskGroup

from pipeline.book.plan.asking import NodeAsker
from pipeline.book.plan.choose import BookTitle, ChildLevel, Question
from pipeline.book.plan.prompts import PlanItem, about, must_note
from pipeline.book.plan.rounds import PlanStats
from pipeline.meaning.nearness import unit
from pipeline.records import BookSpec, Chapter, Node, Outline, Part, Section, wants_children

OnSection = Callable[[Outline, Part, Chapter, Section], None]  # told of each section the plan hands to the writer
OnChange = Callable[[Outline], None]  # told of the outline after each planned node, to save it
Path = tuple[Part, ...] | tuple[Part, Chapter]  # the nodes above the one planned, from its part down (the book: ())


class OnChild(Protocol):
    """Told of each child a node adds to the outline."""

    def __call__(self, outline: Outline, child: Node, /) -> None: ...


@dataclass(frozen=True)
class Level:
    """A node's kind in the table: what its children are (the level's name), one of them, its planning prompt,
    the letter of its children's ids, and what they are made as."""

    kind: str
    children: ChildLevel
    noun: str
    template: str
    letter: str
    make: type[Part] | type[Chapter] | type[Section]


SourcesNote = Callable[[str, str], str]  # (a node's title, the title above it) -> what the sources hold near it

LEVELS: tuple[Level, ...] = (
    Level("book", "parts", "part", "plan_book.md", "p", Part),
    Level("part", "chapters", "chapter", "plan_part.md", "c", Chapter),
    Level("chapter", "sections", "section", "plan_chapter.md", "s", Section),
)


def next_id(prefix: str, letter: str, taken: Sequence[Node]) -> str:
    """The lowest free child id: a resumed chapter may hold journaled sections with gaps between them."""
    used = {node.id for node in taken}
    number = 1
    while f"{prefix}{letter}{number:02d}" in used:
        number += 1
    return f"{prefix}{letter}{number:02d}"


def id_number(node_id: str) -> int:
    return int(re.sub(r"\D", "", node_id.rsplit(".", 1)[-1]))


def children(node: Outline | Part | Chapter) -> list[Node]:
    return node.parts if isinstance(node, Outline) else node.chapters if isinstance(node, Part) else node.sections  # type: ignore[return-value]


class LevelPlanner:
    """Plans the children of any node of an open plan (module docstring). `early`: a node's first line is taken while
    its samples stream (worth it only to a writer waiting for it: not in the barrier schedule)."""

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
        ancestors = {f"the {LEVELS[at + 1].kind} title": node.title for at, node in reversed(list(enumerate(path)))}
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
            ancestors["the book title"] = outline.title
        ancestors["the request"] = prompt
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
    ) -> tuple[Outline, bool]:
        """Plan the node's missing children, telling `on_child` of each as it is added; the outline (the book's is
        made once its title is known), and whether the node is short. `changed` sees the outline after."""
        level = LEVELS[len(path)]
        adding = _Adding(self, outline, path, on_child)
        await self.asker.titles(self.question(outline, path), adding)
        book = adding.flush(final=True)
        assert book is not None, "flush(final=True) makes the outline"
        node = path[-1] if path else book
        short = len(children(node)) < self.count(level)
        if short:
            node.short = True
            self.stats.short += 1
        self.on_node(level.children)
        if changed is not None:
            changed(book)
        return book, short

    def add(self, node: Outline | Part | Chapter, item: PlanItem, owed: list[str]) -> Node:
        """The taken item as the node's next child (the lowest free id), its asks kept for its own children."""
        level = LEVELS[0 if isinstance(node, Outline) else 1 if isinstance(node, Part) else 2]
        taken = children(node)
        prefix = "" if isinstance(node, Outline) else node.id + "."
        child = level.make(id=next_id(prefix, level.letter, taken), title=item.title, point=item.point)
        if level.children != "sections":
            self.owed[child.id] = owed
        taken.append(child)
        if level.children == "sections":
            taken.sort(key=lambda section: id_number(section.id))
        return child


@dataclass
class _Adding:
    """Where a node's children go as they are taken: the node, told to `on_child`; the book's parts wait until the
    book title, which their own prompts need, is known (the outline is made then)."""

    planner: LevelPlanner
    outline: Outline | None
    path: Path
    on_child: OnChild | None
    waiting: list[tuple[PlanItem, list[str]]] = field(default_factory=list)

    def __call__(self, item: PlanItem, *, owed: list[str]) -> None:
        self.waiting.append((item, owed))
        self.flush()

    def flush(self, *, final: bool = False) -> Outline | None:
        title = self.planner.book_title
        if self.outline is None:
            if not (title.text or final):
                return None
            self.outline = Outline(title=title.text or title.made(), parts=[], complete=False)
        node = self.path[-1] if self.path else self.outline
        for item, owed in self.waiting:
            child = self.planner.add(node, item, owed)
            if self.on_child is not None:
                self.on_child(self.outline, child)
        self.waiting.clear()
        return self.outline


@dataclass
class Starter:
    """Starts each node's planning as soon as its parent's title is known (the pipelined schedule): a chapter
    whose sections are all planned is announced at once, others are planned in `group`."""

    levels: LevelPlanner
    group: TaskGroup
    announce: OnSection
    changed: OnChange
    streamed: bool = False  # each section announced as it is chosen, not once its chapter is whole

    def chapter(self, book: Outline, part: Part, chapter: Chapter) -> None:
        if not wants_children(chapter, self.levels.spec.sections):
            self.announce_all(book, part, chapter)
            return
        if self.streamed:
            self.announce_all(book, part, chapter)  # those an interrupted run already planned
        self.group.start_soon(self._chapter, book, part, chapter)

    async def _chapter(self, book: Outline, part: Part, chapter: Chapter) -> None:
        """A streamed chapter announces each section as it is chosen; a pipelined one its sections once it has every
        one of them (a short chapter is whole with what it has)."""
        whole = self.levels.spec.sections

        def each(outline: Outline, section: Node) -> None:
            if self.streamed:
                self.announce(outline, part, chapter, section)  # type: ignore[arg-type]
            elif len(chapter.sections) == whole:
                self.announce_all(outline, part, chapter)

        _, short = await self.levels.plan(book, (part, chapter), each, changed=self.changed)
        if short and not self.streamed:
            self.announce_all(book, part, chapter)

    def part(self, book: Outline, part: Part) -> None:
        for chapter in list(part.chapters):
            self.chapter(book, part, chapter)
        if wants_children(part, self.levels.spec.chapters):
            on_chapter = partial(self._new_chapter, part)
            self.group.start_soon(partial(self.levels.plan, book, (part,), on_chapter, changed=self.changed))

    def new_part(self, book: Outline, part: Node) -> None:
        self.part(book, part)  # type: ignore[arg-type]

    def _new_chapter(self, part: Part, book: Outline, chapter: Node) -> None:
        self.chapter(book, part, chapter)  # type: ignore[arg-type]

    def announce_all(self, book: Outline, part: Part, chapter: Chapter) -> None:
        for section in list(chapter.sections):
            self.announce(book, part, chapter, section)
