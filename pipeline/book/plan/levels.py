"""One planner for every level of an open plan (LevelPlanner), driven by the table of levels: the book's question
asks for its parts (and its title), a part's for its chapters, a chapter's for its sections. Each node's question is
built from the table and what is above the node, its children are chosen (asking.py) and added to the outline as
they are taken, and a node that cannot be filled has fewer children and is marked short. The asks the request makes
travel down on each node's question (`owed`: what its children must carry). A taken child is added where it is
chosen (choose.Children); planner.py's Starter starts each node as soon as its parent's title is known.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pipeline.book.plan.asking import NodeAsker
from pipeline.book.plan.choose import (
    BookTitle,
    ChildLevel,
    Children,
    OnChild,
    Path,
    Question,
    ancestors_of,
    marked_short,
)
from pipeline.book.plan.prompts import about, must_note
from pipeline.book.plan.rounds import PlanStats
from pipeline.meaning.nearness import unit
from pipeline.records import BookSpec, Chapter, Outline, Part, Section, children

OnSection = Callable[[Outline, Part, Chapter, Section], None]  # told of each section the plan hands to the writer
OnChange = Callable[[Outline], None]  # told of the outline after each planned node, to save it
OnDone = Callable[[Outline], None]  # told of a node's end, with the outline


@dataclass(frozen=True)
class Level:
    """A node's kind in the table: what its children are (the level's name), one of them, its planning prompt,
    and what its children are made as (their ids: choose.node_id)."""

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
    ) -> tuple[Outline, bool]:
        """Plan the node's missing children, telling `on_child` of each as it is added (choose.Children); the outline
        (the book's is made once its title is known), and whether the node is short. `changed` sees the outline
        after, then `on_done` (a task of the schedule's is rooted here, and hears of its end so)."""
        level = LEVELS[len(path)]
        adding = Children(self.book_title, outline, path, self.owed, level.make, on_child)
        await self.asker.titles(self.question(outline, path), adding)
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
