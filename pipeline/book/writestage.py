"""The write stage: sections handed on by the plan stage -> this run's written sections (Written).

Each section handed to `take` is written in a task of its own (SectionWriter, pipeline/book/write.py) unless the
journal already has it under this very title; the write stage owns the writer, its journal file and the task group.
`writing()` is open while the plan stage runs, so a chapter's sections are written as soon as their titles exist;
`outline_complete()` says no chapter gains another section, and `written()` hands back what this run wrote once the
last section landed. Parts typeset while the book is written hear of each section here (book/incremental.py), and
the audit's per-section work starts on each as it lands (pipeline/audit/ahead.py).
"""

from __future__ import annotations

import logging
from collections import ChainMap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

from pipeline.audit.ahead import AuditAhead
from pipeline.audit.rules import judges
from pipeline.backends.fleet import Fleet
from pipeline.backends.pool import BackendPool
from pipeline.book.cite import UNKNOWN_CONTEXT, Citing
from pipeline.book.context import RunContext, writing_context
from pipeline.book.folder import save_outline
from pipeline.book.incremental import IncrementalTypesetter
from pipeline.book.plan.levels import OnSection
from pipeline.book.write import SectionWriter, WritePolicy
from pipeline.journal import Journal
from pipeline.meaning.offrequest import open_judge
from pipeline.records import Author, Chapter, Outline, Part, Section, SectionResult
from pipeline.watch.events import OutlineReady, WritingStarted

log = logging.getLogger("fanout")
MAX_BEST_OF = 4  # candidates a section at most when the fleet has slots to spare


def spare_best_of(pool: BackendPool, sections: int) -> int:
    """Candidates a section from the fleet's spare capacity: as many as its slots hold for every section of
    the book at once (at most MAX_BEST_OF); 1 where the slots cannot even hold each section once (the
    embedded engine's 16 slots and a 24-section book)."""
    slots = sum(state.cap for state in pool.states)
    return max(1, min(MAX_BEST_OF, slots // max(1, sections)))


def already_written(journal: dict[str, SectionResult], section: Section) -> bool:
    """Journaled under this very title: an id whose title changed (re-planned after a kill) is asked again."""
    result = journal.get(section.id)
    return result is not None and result.ok and result.title == section.title


@dataclass(frozen=True)
class Written:
    """This run's sections by id, the section requests asked again later (failed on every backend), and the
    retry tail (SectionWriter.retry_tail_seconds)."""

    results: dict[str, SectionResult]
    asked_later: int
    retry_tail_s: float | None
    hedges: tuple[int, int] = (0, 0)  # hedges sent, and those that needed no retry (SectionWriter.hedge_counts)


def citing_for(run: RunContext, fleet: Fleet) -> Citing | None:
    """What gives each section its source passages, sized to the writing engines' context; None without sources."""
    if run.sources is None:
        return None
    context = writing_context(fleet)
    if context is None:
        log.info("no writing engine reports its context: source passages fit %d tokens", UNKNOWN_CONTEXT)
    room = context or UNKNOWN_CONTEXT
    return Citing(run.sources.index, run.spec.prompt, context=room, max_tokens=run.spec.max_tokens)


class WriteStage:
    def __init__(
        self,
        run: RunContext,
        fleet: Fleet,
        journal: dict[str, SectionResult],
        typesetter: IncrementalTypesetter | None,
    ):
        self.run = run
        self.pool = fleet.pool
        self.journal = journal
        self.typesetter = typesetter
        self.done = sum(1 for result in journal.values() if result.ok)
        settings = run.settings
        author = run.writing.profile.author
        # candidates are chosen by their on-point margin: where off_point is only a figure, one a section unless asked
        chooses = judges("off_point", author)
        best_of = settings.best_of or (spare_best_of(fleet.pool, run.spec.section_count) if chooses else 1)
        retries = settings.off_point_retries if chooses else 0
        log.info("best of %d a section (%d more while off point, a %s author's book)", best_of, retries, author)
        judge = open_judge(settings.judge) if run.spec.prompt else None
        self.ahead = AuditAhead(judge, author=author)
        policy = WritePolicy(
            best_of=best_of,
            off_point_retries=retries,
            warm=settings.warm,
            ready_after=fleet.prefix_ready,
            judge=judge if author is Author.SMALL else None,
            hedge=settings.hedge,
            author=author,
        )
        journal_file = Journal(run.folder.journal)
        self.writer = SectionWriter(
            fleet.pool, run.spec, journal_file, run.writing, run.listener, run.embedder, policy, citing_for(run, fleet)
        )
        self.results = ChainMap(self.writer.results, journal)

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[OnSection]:
        """`take`, open until every section handed to it has landed; the journal file is closed after."""
        self.run.listener.hear(WritingStarted(self.run.spec.section_count, self.done, self.pool))
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self.writer.hedging)

                def take(book: Outline, part: Part, chapter: Chapter, section: Section) -> None:
                    self.writer.planned(chapter)
                    if not already_written(self.journal, section):
                        group.start_soon(self._write, book, part, chapter, section)

                yield take
        finally:
            self.writer.journal.close()

    async def _write(self, book: Outline, part: Part, chapter: Chapter, section: Section) -> None:
        await self.writer.write(book, part, chapter, section)
        if self.typesetter is not None:
            self.typesetter.section_done(book, self.results, section.id)
        if section.id in self.results:
            await self.ahead.landed(self.results[section.id], title=section.title, point=section.point)

    def outline_complete(self) -> None:
        self.writer.outline_complete()

    def written(self, outline: Outline) -> Written:
        """What this run wrote, once `writing()` has closed on the whole `outline`."""
        if self.run.sources is not None:  # each section's places, kept as it was written
            save_outline(self.run.folder, outline, self.run.spec.prompt)
        self.run.listener.hear(OutlineReady(outline))
        log.info("wrote %d sections (%d were already in the journal)", len(self.writer.results), self.done)
        writer = self.writer
        return Written(dict(writer.results), writer.asked_later, writer.retry_tail_seconds, writer.hedge_counts)
