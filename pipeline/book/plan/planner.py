"""The planner: BookSpec -> Outline, as the schedule says (streamed, pipelined or level by level).

One node for the book title and its parts; one per part for its chapters; one per chapter for its sections. Every
unit is planned with a title and a key point (one sentence on what it covers, so its siblings know what to leave to
it), asked as a numbered list of `Heading: sentence` lines after one worked example (templates/plan_*.md). That
format was measured on SmolLM2-135M (examples/planning_formats.py): of 40 headings asked, JSON with a schema gave 28
usable titles and no points, a described list 12, the worked example 33, each with its point.

Two ways to get a node's titles (records.PlanMode; `auto` picks `given` for a small model, whose invented plans
drift off the request, and `open` for the rest):
- given (meaning/given.py, phrasing.py, levels.py's GivenPlan): the plan gives what each node is about (the
  request's concerns and the facets a book of its kind covers), and the model phrases a title and a point for each,
  all at once; a part's chapters and a chapter's sections are taken through LevelPlanner.plan as an open node's are.
- open (levels.py, asking.py, choose.py): each node's question is sampled several times at once and its titles are
  chosen from the pooled lines by their fit to the request and their parent and by distinctness from what is chosen;
  only lines with a defect a reader would see are refused (checks.py). The request's asks (its subject and each
  concern it names, pipeline/meaning/reading.py) are carried down the plan (choose.Coverage): each node takes along
  an even share of those still open, and the last section slots are kept for them. A second round only when a node's
  pool cannot fill it; then the asks it still owes, each phrased as a given node.

Either way a node that cannot be filled has fewer children and is marked short; nothing is made up. Model output is
untrusted: nothing in an answer raises.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskGroup

from pipeline.backends.pool import BackendPool
from pipeline.book.plan.asking import NodeAsker
from pipeline.book.plan.checks import TitleChecks
from pipeline.book.plan.choose import BookTitle
from pipeline.book.plan.levels import GivenPlan, LevelPlanner, OnChange, OnSection, Source, SourcesNote
from pipeline.book.plan.phrasing import Phraser
from pipeline.book.plan.rounds import CHOICES, Asking, PlanStats, SampleNeed, Sampling
from pipeline.book.profiles import Sampler
from pipeline.errors import FanoutError
from pipeline.meaning.embed import Embedder, open_embedder
from pipeline.meaning.given import GivenBook, given_book
from pipeline.meaning.reading import read, request_asks
from pipeline.records import (
    BookSpec,
    Chapter,
    Node,
    Outline,
    Part,
    PlanMode,
    PlanSchedule,
    id_number,
    wants_children,
    without_empty,
)

log = logging.getLogger("fanout")
_T = TypeVar("_T")


@dataclass(frozen=True)
class PlanOptions:
    """`lane_writing`: while planning runs beside writing, the writing requests the planning lane's backend takes
    (BackendPool.planning_lane; 0: no lane). `mode`: given or open planning (module docstring). `sources_note`: what
    the user's sources hold near a node (its title, the title above it), for the book's and the parts' prompts."""

    lane_writing: int = 0
    mode: PlanMode = PlanMode.AUTO
    sources_note: SourcesNote | None = None


class Planner:
    def __init__(
        self,
        pool: BackendPool,
        spec: BookSpec,
        sampler: Sampler,
        on_node: Callable[[str], None] | None = None,
        embedder: Embedder | None = None,
        judge: Embedder | None = None,
        options: PlanOptions = PlanOptions(),
    ):
        """`judge`: the off-request judge (pipeline/meaning/offrequest.py); None: no title is judged on the request."""
        self.pool = pool
        self.lane_writing = options.lane_writing
        self.spec = spec
        self.mode = options.mode
        self.small = sampler.profile.small
        self.embedder = embedder or open_embedder()
        self.stats = PlanStats()
        self.checks = TitleChecks(self.embedder, spec.prompt, judge, small=self.small)
        self.reading = read(spec.prompt)
        asking = Asking(Sampling(pool, sampler, self.stats), self.checks, self.stats, SampleNeed(many=self.small))
        self.phraser = Phraser(asking, self.reading, request=spec.prompt)
        self.book_title = BookTitle(self.checks, self.stats, spec.prompt)
        self.asker = NodeAsker(asking, self.phraser, self.book_title)
        on_node = on_node or (lambda level: None)
        asks = request_asks(spec.prompt)
        self.levels = LevelPlanner(spec, self.asker, self.book_title, on_node, asks, sources_note=options.sources_note)

    async def plan(
        self,
        outline: Outline | None = None,
        *,
        schedule: PlanSchedule = PlanSchedule.PIPELINED,
        on_section: OnSection | None = None,
        on_change: OnChange | None = None,
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
            self.book_title.settle(outline.title)
        self.stats.levels = [1, self.spec.parts, self.spec.parts * self.spec.chapters]
        barrier = schedule is PlanSchedule.BARRIER
        self.levels.early = not barrier  # a line taken early is worth it only to a writer
        hand_over = (lambda outline, part, chapter, section: None) if barrier else announce
        if (given := self.given(outline)) is not None:
            with self._beside_writing():
                outline = await self._plan_given(given, outline, hand_over, changed, schedule)
        elif barrier:
            outline = await self._plan_levels(outline, changed)
        else:
            with self._beside_writing():
                outline = await self._plan_pipelined(outline, hand_over, changed, schedule)
        if barrier:
            for part, chapter, section in outline.sections():
                announce(outline, part, chapter, section)
        self._finish(outline)
        changed(outline)
        self.stats.seconds = time.monotonic() - started
        return outline

    @contextmanager
    def _beside_writing(self) -> Iterator[None]:
        """Writing fills the slots meanwhile: a round's samples' slots of each backend are kept for planning, and the
        planning lane's backend takes at most `lane_writing` writing requests."""
        with self.pool.reserve_for_first(CHOICES), self.pool.planning_lane(self.lane_writing):
            yield

    def _finish(self, outline: Outline) -> None:
        if dropped := without_empty(outline):
            log.info("%d chapters or parts had no section that could be planned: taken out", dropped)
        if not outline.sections():
            raise FanoutError(
                "planning gave no section a reader could use: every line the model gave was refused (run.log "
                "lists each line and why); try again, or give the outline with --outline"
            )
        outline.complete = True

    def given(self, outline: Outline | None) -> GivenBook | None:
        """The book as given, when it is planned so (the mode; a small model's profile for `auto`) and the shape
        fits what can be given; not for an outline planned otherwise (a person's, or an open plan's), whose units
        have no `about` to phrase the rest from."""
        if self.mode is PlanMode.OPEN or (self.mode is PlanMode.AUTO and not self.small):
            return None
        if outline is not None and not all(part.about for part in outline.parts):
            return None
        return given_book(self.reading, self.spec.parts, self.spec.chapters, self.spec.sections)

    async def _plan_given(
        self, given: GivenBook, outline: Outline | None, hand_over: OnSection, changed: OnChange, schedule: PlanSchedule
    ) -> Outline:
        streamed = schedule is PlanSchedule.STREAMED
        opens = partial(Starter, self.levels, announce=hand_over, changed=changed, streamed=streamed)
        plan = GivenPlan(self.levels, given, self.phraser, changed, opens)
        outline = await plan.plan(outline)
        self.stats.phrased = plan.phrased
        return outline

    async def _plan_levels(self, outline: Outline | None, changed: OnChange) -> Outline:
        """Each whole level before the next (the barrier schedule)."""
        if outline is None or (len(outline.parts) < self.spec.parts and not outline.short):
            outline, _ = await self.levels.plan(outline, changed=changed)
        book = outline
        parts = [(pt,) for pt in book.parts if wants_children(pt, self.spec.chapters)]
        await each(parts, lambda path: self.levels.plan(book, path, changed=changed))
        chapters = [(pt, ch) for pt in book.parts for ch in pt.chapters if wants_children(ch, self.spec.sections)]
        await each(chapters, lambda path: self.levels.plan(book, path, changed=changed))
        return book

    async def _plan_pipelined(
        self, outline: Outline | None, announce: OnSection, changed: OnChange, schedule: PlanSchedule
    ) -> Outline:
        """Each node as soon as its parent's title is known (the pipelined and streamed schedules)."""
        async with anyio.create_task_group() as group:
            starter = Starter(self.levels, group, announce, changed, schedule is PlanSchedule.STREAMED)
            if outline is not None:
                for part in list(outline.parts):
                    starter.part(outline, part)
            if outline is None or (len(outline.parts) < self.spec.parts and not outline.short):
                outline, _ = await self.levels.plan(outline, (), starter.new_part, changed=changed)
        assert outline is not None, "a resumed outline, or the one the book's node made"
        return outline

    async def plan_first_chain(self) -> Outline:
        """Only what must be planned before a first section can be sent, as the pipelined and streamed schedules
        plan it: the book, its first part, that part's first chapter, each asked as soon as its line is taken (the
        critical path, timed alone by `fanout efficiency`). `stats.seconds` is the time to the first section
        taken; the chain's nodes are planned whole before it returns."""
        started = time.monotonic()
        self.levels.early = True

        def on_section(book: Outline, section: Node) -> None:
            if not self.stats.seconds:
                self.stats.seconds = time.monotonic() - started

        async with anyio.create_task_group() as group:

            def on_chapter(part: Part, book: Outline, chapter: Node) -> None:
                if chapter is part.chapters[0]:
                    group.start_soon(partial(self.levels.plan, book, (part, chapter), on_section))

            def on_part(book: Outline, part: Node) -> None:
                if part is book.parts[0]:
                    group.start_soon(partial(self.levels.plan, book, (part,), partial(on_chapter, part)))

            outline, _ = await self.levels.plan(None, (), on_part)
        self.stats.seconds = self.stats.seconds or time.monotonic() - started
        return outline

    async def replan_chapters(self, outline: Outline, chapter_ids: set[str], owed: list[str]) -> list[Chapter]:
        """Plan the chapters `chapter_ids` names again, title, point and sections, under their parts (the
        audit found them off the request): every other title of the book stays taken, the old ones too, and
        each part's new chapters carry `owed` (what the book still lacks). A new chapter takes the id (and
        the place) of the one it replaces. Returns the new chapters."""
        self.checks.small = True  # every rule and hold, whatever the model: the audit found its first answer off
        self.checks.claim_existing(outline)
        self.book_title.settle(outline.title)
        parts = [part for part in outline.parts if any(c.id in chapter_ids for c in part.chapters)]
        for part in parts:
            self.levels.owed[part.id] = list(owed)
            part.chapters = [chapter for chapter in part.chapters if chapter.id not in chapter_ids]
        await each([(part,) for part in parts], lambda path: self.levels.plan(outline, path))
        new = [(part, chapter) for part in parts for chapter in part.chapters if chapter.id in chapter_ids]
        for part in parts:
            part.chapters.sort(key=lambda chapter: id_number(chapter.id))
        await each(new, lambda path: self.levels.plan(outline, path))
        return [chapter for _, chapter in new]


@dataclass
class Starter:
    """Starts each node's planning as soon as its parent's title is known (the pipelined and streamed schedules), each
    in a task of `group` rooted at LevelPlanner.plan, which tells this of each child it adds and of its end: a chapter
    whose sections are all planned is announced at once."""

    levels: LevelPlanner
    group: TaskGroup
    announce: OnSection
    changed: OnChange
    streamed: bool = False  # each section announced as it is chosen, not once its chapter is whole

    def chapter(self, book: Outline, part: Part, chapter: Chapter, *, source: Source | None = None) -> None:
        """A streamed chapter announces each section as it is chosen; a pipelined one its sections once it has every
        one of them (a short chapter is whole with what it has). `source`: what fills it (LevelPlanner.plan's)."""
        if not wants_children(chapter, self.levels.spec.sections):
            self.announce_all(book, part, chapter)
            return
        if self.streamed:
            self.announce_all(book, part, chapter)  # those an interrupted run already planned
        path = (part, chapter)
        each, done = partial(self._section, part, chapter), partial(self._chapter_done, part, chapter)
        plan = partial(self.levels.plan, book, path, each, changed=self.changed, on_done=done, source=source)
        self.group.start_soon(plan)

    def _section(self, part: Part, chapter: Chapter, outline: Outline, section: Node) -> None:
        if self.streamed:
            self.announce(outline, part, chapter, section)  # type: ignore[arg-type]
        elif len(chapter.sections) == self.levels.spec.sections:
            self.announce_all(outline, part, chapter)

    def _chapter_done(self, part: Part, chapter: Chapter, book: Outline) -> None:
        if len(chapter.sections) < self.levels.spec.sections and not self.streamed:  # short: whole with what it has
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


async def each(items: Sequence[_T], plan_one: Callable[[_T], Coroutine[Any, Any, object]]) -> None:
    """Plan every item at once."""
    async with anyio.create_task_group() as group:
        for item in items:
            group.start_soon(plan_one, item)
