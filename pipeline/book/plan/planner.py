"""The planner: BookSpec -> Outline, as the schedule says (streamed, pipelined or level by level).

One node for the book title and its parts; one per part for its chapters; one per chapter for its sections.
Every unit is planned with a title and a key point (one sentence on what it covers, so its siblings know
what to leave to it), asked as a numbered list of `Heading: sentence` lines after one worked example
(templates/plan_*.md). That format was measured on SmolLM2-135M (examples/planning_formats.py): of 40
headings asked, JSON with a schema gave 28 usable titles and no points, a described list 12, the worked
example 33, each with its point.

Two ways to get a node's titles (records.PlanMode; `auto` picks `given` for a small model, whose invented plans
drift off the request, and `open` for the rest):
- given (given.py, phrasing.py, fromgiven.py): the plan gives what each unit is about (the request's concerns and
  the facets a book of its kind covers), and the model phrases a title and a point for each, all at once.
- open: each node's question is sampled several times at once and its titles are chosen from the pooled lines
  (asking.py, choose.py) by their fit to the request and their parent and by distinctness from what is chosen;
  only lines with a defect a reader would see are refused (checks.py). The request's asks (its subject and each
  concern it names, pipeline/meaning/reading.py) are carried down the plan (coverage.py): each node takes along an
  even share of those still open, and the last section slots are kept for them. A second round only when a
  node's pool cannot fill it; then the asks it still owes, each phrased as a given unit.
Either way a node that cannot be filled has fewer children and is marked short; nothing is made up. Model
output is untrusted: nothing in an answer raises.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskGroup

from pipeline.backends.pool import BackendPool
from pipeline.book.plan.answers import PlanItem
from pipeline.book.plan.asking import NodeAsker
from pipeline.book.plan.checks import TitleChecks
from pipeline.book.plan.choose import Choice
from pipeline.book.plan.fallbacks import fallback_book_title
from pipeline.book.plan.fromgiven import GivenPlan
from pipeline.book.plan.given import GivenBook, given_book
from pipeline.book.plan.phrasing import Level, Phraser, Taking, Unit
from pipeline.book.plan.prompts import about, must_note
from pipeline.book.plan.schedule import CHOICES, NodeAsk, OnChange, OnSection, PlanStats
from pipeline.book.profiles import Sampler, is_small
from pipeline.errors import FanoutError
from pipeline.meaning.embed import Embedder, open_embedder
from pipeline.meaning.nearness import unit
from pipeline.meaning.reading import read, request_asks
from pipeline.records import (
    BookSpec,
    Chapter,
    Node,
    Outline,
    Part,
    PlanMode,
    PlanSchedule,
    Section,
    wants_children,
    without_empty,
)

log = logging.getLogger("fanout")
_T = TypeVar("_T")


def next_id(prefix: str, letter: str, taken: Sequence[Node]) -> str:
    """The lowest free child id: a resumed chapter may hold journaled sections with gaps between them."""
    used = {node.id for node in taken}
    number = 1
    while f"{prefix}{letter}{number:02d}" in used:
        number += 1
    return f"{prefix}{letter}{number:02d}"


def id_number(node_id: str) -> int:
    return int(re.sub(r"\D", "", node_id.rsplit(".", 1)[-1]))


class Planner:
    def __init__(
        self,
        pool: BackendPool,
        spec: BookSpec,
        sampler: Sampler,
        on_node: Callable[[str], None] | None = None,
        embedder: Embedder | None = None,
        judge: Embedder | None = None,
        lane_writing: int = 0,
        mode: PlanMode = PlanMode.AUTO,
    ):
        """`judge`: the off-request judge (pipeline/meaning/offrequest.py); None: no title is judged on the request.
        `lane_writing`: while planning runs beside writing, the writing requests the planning lane's backend
        takes (BackendPool.planning_lane; 0: no lane). `mode`: given or open planning (module docstring)."""
        self.pool = pool
        self.lane_writing = lane_writing
        self.on_node = on_node or (lambda level: None)
        self.spec = spec
        self.embedder = embedder or open_embedder()
        self.stats = PlanStats()
        self.checks = TitleChecks(self.embedder, spec.prompt, judge, small=is_small(sampler.profile))
        self.asker = NodeAsker(pool, spec, sampler, self.checks, self.stats)
        self.asks = request_asks(spec.prompt)
        self.musts: dict[str, list[str]] = {"book": self.asks[1:]}  # node id -> asks its children must carry
        self.reading = read(spec.prompt)
        self.phraser = Phraser(self.asker, self.reading)
        self.mode = mode
        self.asker.fill = self._fill

    async def plan(
        self,
        outline: Outline | None = None,
        *,
        schedule: PlanSchedule = PlanSchedule.PIPELINED,
        on_section: OnSection | None = None,
        on_change: Callable[[Outline], None] | None = None,
    ) -> Outline:
        """Plan what `outline` (a partial one from an interrupted run, or None) still lacks; `schedule` says
        when `on_section` hears of each section (the book's is records.BOOK_SCHEDULE).

        A part's chapters are asked the moment the part is chosen (asking.py). STREAMED announces each
        section the moment it is chosen (the writer scores it once its chapter is whole, book/write.py), so a
        chapter filled in a second round hands over its first round's choice at once; PIPELINED announces a chapter's
        sections once the chapter has every one of them; both write while the rest is still being planned.
        BARRIER waits for each whole level (seed 003's schedule) and announces every section at the end.
        `on_change` sees the outline after every planned node, to save it."""
        started = time.monotonic()
        changed = on_change or (lambda _: None)
        announce = on_section or (lambda outline, part, chapter, section: None)
        if outline is not None:
            self.checks.claim_existing(outline)
            self.asker.book_title = outline.title
        self.stats.levels = [1, self.spec.parts, self.spec.parts * self.spec.chapters]
        self.asker.early = schedule is not PlanSchedule.BARRIER  # a line taken early is worth it only to a writer
        if (given := self.given(outline)) is not None:
            outline = await self._plan_given(given, outline, schedule, announce, changed)
        elif schedule is PlanSchedule.BARRIER:
            outline = await self._plan_levels(outline, changed)
            for part, chapter, section in outline.sections():
                announce(outline, part, chapter, section)
        else:  # writing fills the slots meanwhile: keep a round's samples' slots of each backend for planning
            with self.pool.reserve_for_first(CHOICES), self.pool.planning_lane(self.lane_writing):
                async with anyio.create_task_group() as group:
                    streamed = schedule is PlanSchedule.STREAMED
                    outline = await self._plan_pipelined(outline, group, announce, changed, streamed=streamed)
        assert outline is not None, "both schedules return the outline (a failed task raises out of the group)"
        if dropped := without_empty(outline):
            log.info("%d chapters or parts had no section that could be planned: taken out", dropped)
        if not outline.sections():
            raise FanoutError(
                "planning gave no section a reader could use: every line the model gave was refused (run.log "
                "lists each line and why); try again, or give the outline with --outline"
            )
        outline.complete = True
        changed(outline)
        self.stats.seconds = time.monotonic() - started
        return outline

    def given(self, outline: Outline | None) -> GivenBook | None:
        """The book as given, when it is planned so (the mode; a small model's profile for `auto`) and the shape
        fits what can be given; not for an outline planned otherwise (a person's, or an open plan's), whose units
        have no `about` to phrase the rest from."""
        small = is_small(self.asker.sampler.profile)
        if self.mode is PlanMode.OPEN or (self.mode is PlanMode.AUTO and not small):
            return None
        if outline is not None and not all(part.about for part in outline.parts):
            return None
        return given_book(self.reading, self.spec.parts, self.spec.chapters, self.spec.sections)

    async def _plan_given(
        self,
        given: GivenBook,
        outline: Outline | None,
        schedule: PlanSchedule,
        announce: OnSection,
        changed: OnChange,
    ) -> Outline:
        barrier = schedule is PlanSchedule.BARRIER
        hand_over = (lambda outline, part, chapter, section: None) if barrier else announce
        streamed = schedule is PlanSchedule.STREAMED
        plan = GivenPlan(self, given, self.phraser, hand_over, changed, streamed)
        with self.pool.reserve_for_first(CHOICES), self.pool.planning_lane(self.lane_writing):
            outline = await plan.plan(outline)
        self.stats.phrased = plan.phrased
        if barrier:
            for part, chapter, section in outline.sections():
                announce(outline, part, chapter, section)
        return outline

    def plan_part_open(
        self, group: TaskGroup, outline: Outline, part: Part, announce: OnSection, changed: OnChange, *, streamed: bool
    ) -> None:
        """Plan a part's chapters (and theirs) open, in `group`, as the pipelined schedule does."""
        _Starter(self, group, announce, changed, streamed).part(outline, part)

    def plan_chapter_open(
        self,
        group: TaskGroup,
        outline: Outline,
        part: Part,
        chapter: Chapter,
        announce: OnSection,
        changed: OnChange,
        *,
        streamed: bool,
    ) -> None:
        """Plan a chapter's sections open, in `group`, as the pipelined schedule does."""
        _Starter(self, group, announce, changed, streamed).chapter(outline, part, chapter)

    async def _fill(self, ask: NodeAsk, choice: Choice) -> None:
        """A node's rounds are spent and titles still missing: the asks it still owes, each phrased by the model
        as a given unit ('its section about <ask>'); what cannot be phrased stays missing."""
        level: Level = "parts" if ask.level == "parts" else "chapters" if ask.level == "chapters" else "sections"
        parent = next(iter(ask.ancestors.values()), "")
        taking = Taking(ask.ancestors, list(choice.chosen), list(choice.units.values()))
        for owed in list(choice.coverage.open):
            if choice.missing() <= 0:
                return
            values = {"book": self.phraser.book, "about": owed, "chapter": parent}
            item = await self.phraser.phrase(Unit(level, owed, values, f"{ask.node_id}+"), taking)
            self.stats.phrased += 1
            if item is not None:
                self.stats.filled_from_asks += 1
                choice.take(item)

    async def plan_first_chain(self) -> Outline:
        """Only what must be planned before a first section can be sent, as the pipelined and streamed schedules
        plan it: the book, its first part, that part's first chapter, each asked as soon as its line is taken (the
        critical path, timed alone by `fanout efficiency`). `stats.seconds` is the time to the first section
        taken; the chain's nodes are planned whole before it returns."""
        started = time.monotonic()
        self.asker.early = True
        book: list[Outline] = []

        def on_section(section: Section) -> None:
            if not self.stats.seconds:
                self.stats.seconds = time.monotonic() - started

        async with anyio.create_task_group() as group:

            def on_chapter(part: Part, chapter: Chapter) -> None:
                if chapter is part.chapters[0]:
                    group.start_soon(partial(self._plan_chapter, book[0], part, chapter, on_each=on_section))

            def on_part(outline: Outline, part: Part) -> None:
                book[:] = [outline]
                if part is outline.parts[0]:
                    group.start_soon(partial(self._plan_part, outline, part, partial(on_chapter, part)))

            outline = await self._plan_book(None, on_part)
        self.stats.seconds = self.stats.seconds or time.monotonic() - started
        return outline

    async def replan_chapters(self, outline: Outline, chapter_ids: set[str], musts: list[str]) -> list[Chapter]:
        """Plan the chapters `chapter_ids` names again, title, point and sections, under their parts (the
        audit found them off the request): every other title of the book stays taken, the old ones too, and
        each part's new chapters carry `musts` (what the book still lacks). A new chapter takes the id (and
        the place) of the one it replaces. Returns the new chapters."""
        self.checks.small = True  # every rule and hold, whatever the model: the audit found its first answer off
        self.checks.claim_existing(outline)
        self.asker.book_title = outline.title
        parts = [part for part in outline.parts if any(c.id in chapter_ids for c in part.chapters)]
        for part in parts:
            self.musts[part.id] = list(musts)
            part.chapters = [chapter for chapter in part.chapters if chapter.id not in chapter_ids]
        await self._each(parts, lambda part: self._plan_part(outline, part))
        new = [(part, chapter) for part in parts for chapter in part.chapters if chapter.id in chapter_ids]
        for part in parts:
            part.chapters.sort(key=lambda chapter: id_number(chapter.id))
        await self._each(new, lambda pair: self._plan_chapter(outline, *pair))
        return [chapter for _, chapter in new]

    async def _plan_levels(self, outline: Outline | None, changed: OnChange) -> Outline:
        if outline is None or (len(outline.parts) < self.spec.parts and not outline.short):
            outline = await self._plan_book(outline)
            changed(outline)
        await self._each(
            [pt for pt in outline.parts if wants_children(pt, self.spec.chapters)],
            lambda pt: self._plan_part(outline, pt, changed=changed),
        )
        await self._each(
            [(pt, ch) for pt in outline.parts for ch in pt.chapters if wants_children(ch, self.spec.sections)],
            lambda pair: self._plan_chapter(outline, *pair, changed=changed),
        )
        return outline

    async def _plan_pipelined(
        self, outline: Outline | None, group: TaskGroup, announce: OnSection, changed: OnChange, *, streamed: bool
    ) -> Outline:
        starter = _Starter(self, group, announce, changed, streamed)
        if outline is not None:
            for part in list(outline.parts):
                starter.part(outline, part)
        if outline is None or (len(outline.parts) < self.spec.parts and not outline.short):
            outline = await self._plan_book(outline, starter.part)
            changed(outline)
        return outline

    @staticmethod
    async def _each(items: list[_T], plan_one: Callable[[_T], Coroutine[Any, Any, None]]) -> None:
        async with anyio.create_task_group() as group:
            for item in items:
                group.start_soon(plan_one, item)

    async def _plan_book(
        self, outline: Outline | None, on_part: Callable[[Outline, Part], None] | None = None
    ) -> Outline:
        """The book title and the parts still missing. Parts are added (and `on_part` told) as they stream
        in, once the book title, which their own prompts need, is known."""
        waiting: list[tuple[PlanItem, list[str]]] = []

        def add_waiting(*, final: bool = False) -> None:
            nonlocal outline
            if outline is None:
                if not (self.asker.book_title or final):
                    return
                outline = Outline(
                    title=self.asker.book_title or fallback_book_title(self.spec.prompt), parts=[], complete=False
                )
            for item, musts in waiting:
                part = Part(id=next_id("", "p", outline.parts), title=item.title, point=item.point)
                self.musts[part.id] = musts
                outline.parts.append(part)
                if on_part is not None:
                    on_part(outline, part)
            waiting.clear()

        def add(item: PlanItem, *, musts: list[str]) -> None:
            waiting.append((item, musts))
            add_waiting()

        await self.asker.titles(
            NodeAsk(
                "plan_book.md",
                {"prompt": self.spec.prompt, "must": must_note(self.musts["book"], "part", self.spec.parts)},
                "parts",
                self.spec.parts,
                have=[part.title for part in outline.parts] if outline else [],
                ancestors={"the request": self.spec.prompt},
                on_item=add,
                node_id="book",
                with_title=True,
                musts=self.musts["book"],
                parent_unit=self.spec.prompt,
            )
        )
        add_waiting(final=True)
        assert outline is not None, "add_waiting(final=True) makes the outline"
        if len(outline.parts) < self.spec.parts:
            outline.short = True
            self.stats.short += 1
        self.on_node("parts")
        return outline

    async def _plan_part(
        self,
        outline: Outline,
        part: Part,
        on_chapter: Callable[[Chapter], None] | None = None,
        changed: OnChange | None = None,
    ) -> None:
        def add(item: PlanItem, *, musts: list[str]) -> None:
            chapter = Chapter(
                id=next_id(part.id + ".", "c", part.chapters),
                title=item.title,
                point=item.point,
            )
            self.musts[chapter.id] = musts
            part.chapters.append(chapter)
            if on_chapter is not None:
                on_chapter(chapter)

        musts = self.musts.get(part.id, [])
        values = {
            "book_title": outline.title,
            "part_title": part.title,
            "part_about": about("part", part.point),
            "must": must_note(musts, "chapter", self.spec.chapters),
        }
        ancestors = {"the part title": part.title, "the book title": outline.title, "the request": self.spec.prompt}
        await self.asker.titles(
            NodeAsk(
                "plan_part.md",
                values,
                "chapters",
                self.spec.chapters,
                [chapter.title for chapter in part.chapters],
                ancestors,
                add,
                part.id,
                fallback_prefix=part.title,
                musts=musts,
                parent_unit=unit(part.title, part.point),
            )
        )
        if len(part.chapters) < self.spec.chapters:
            part.short = True
            self.stats.short += 1
        self.on_node("chapters")
        if changed is not None:
            changed(outline)

    async def _plan_chapter(
        self,
        outline: Outline,
        part: Part,
        chapter: Chapter,
        on_complete: Callable[[], None] | None = None,
        changed: OnChange | None = None,
        on_each: Callable[[Section], None] | None = None,
    ) -> None:
        def add(item: PlanItem, *, musts: list[str]) -> None:
            section = Section(
                id=next_id(chapter.id + ".", "s", chapter.sections),
                title=item.title,
                point=item.point,
            )
            chapter.sections.append(section)
            chapter.sections.sort(key=lambda s: id_number(s.id))
            if on_each is not None:
                on_each(section)
            if on_complete is not None and len(chapter.sections) == self.spec.sections:
                on_complete()

        musts = self.musts.get(chapter.id, [])
        values = {
            "book_title": outline.title,
            "chapter_title": chapter.title,
            "chapter_about": about("chapter", chapter.point),
            "must": must_note(musts, "section", self.spec.sections),
        }
        ancestors = {
            "the chapter title": chapter.title,
            "the part title": part.title,
            "the book title": outline.title,
            "the request": self.spec.prompt,
        }
        await self.asker.titles(
            NodeAsk(
                "plan_chapter.md",
                values,
                "sections",
                self.spec.sections,
                [section.title for section in chapter.sections],
                ancestors,
                add,
                chapter.id,
                fallback_prefix=chapter.title,
                musts=musts,
                parent_unit=unit(chapter.title, chapter.point),
            )
        )
        if len(chapter.sections) < self.spec.sections:
            chapter.short = True
            self.stats.short += 1
            if on_complete is not None:  # a short chapter is whole with what it has
                on_complete()
        self.on_node("sections")
        if changed is not None:
            changed(outline)


@dataclass
class _Starter:
    """Starts each node's planning as soon as its parent's title is known (the pipelined schedule): a chapter
    whose sections are all planned is announced at once, others are planned in `group`."""

    planner: Planner
    group: TaskGroup
    announce: OnSection
    changed: OnChange
    streamed: bool = False  # each section announced as it is chosen, not once its chapter is whole

    def chapter(self, book: Outline, part: Part, chapter: Chapter) -> None:
        if not wants_children(chapter, self.planner.spec.sections):
            self.announce_all(book, part, chapter)
            return
        if self.streamed:
            self.announce_all(book, part, chapter)  # those an interrupted run already planned
            each = partial(self.announce, book, part, chapter)
            plan = partial(self.planner._plan_chapter, book, part, chapter, None, self.changed, each)
        else:
            done = partial(self.announce_all, book, part, chapter)
            plan = partial(self.planner._plan_chapter, book, part, chapter, done, self.changed)
        self.group.start_soon(plan)

    def part(self, book: Outline, part: Part) -> None:
        for chapter in list(part.chapters):
            self.chapter(book, part, chapter)
        if wants_children(part, self.planner.spec.chapters):
            on_chapter = partial(self.chapter, book, part)
            self.group.start_soon(partial(self.planner._plan_part, book, part, on_chapter, self.changed))

    def announce_all(self, book: Outline, part: Part, chapter: Chapter) -> None:
        for section in list(chapter.sections):
            self.announce(book, part, chapter, section)
