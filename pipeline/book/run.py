"""The book orchestrator: the one place that wires plan, write, assemble, stats and typeset together.

Takes Settings, a BookSpec and a run folder (new, or one to resume); leaves in the folder spec.json,
outline.json, sections.jsonl (the journal), requests.jsonl (every request as sent, what a bench replay
reads), book.md, book.pdf, run.log and, last of all, stats.json.
A resume plans nothing again and asks no finished section again. Interrupted, it leaves the journal
consistent and writes no stats.json, so the folder never looks like a finished run.
"""

from __future__ import annotations

import logging
import time
from collections import ChainMap, Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from pipeline.audit.report import audit
from pipeline.audit.rules import TITLE_RULES
from pipeline.audit.source import load_run
from pipeline.backends.engines import engine
from pipeline.backends.fleet import Fleet, open_fleet
from pipeline.backends.pool import BackendPool
from pipeline.book.assemble import assemble
from pipeline.book.folder import (
    RunFolder,
    kept_when_stopped,
    load_outline,
    load_run_folder,
    new_run_folder,
    save_outline,
    working_in,
)
from pipeline.book.incremental import IncrementalTypesetter
from pipeline.book.plan.planner import Planner, id_number
from pipeline.book.plan.schedule import OnSection, PlanStats
from pipeline.book.profiles import Sampler, choose_profile
from pipeline.book.repair import Repairer, replan_off_request
from pipeline.book.requestlog import RequestLog
from pipeline.book.stats import JobTally
from pipeline.book.timing import RunClock
from pipeline.book.write import SectionWriter, WritePolicy
from pipeline.config import Settings
from pipeline.cpu import Stage, charged, stage
from pipeline.errors import UsageError
from pipeline.files import write_atomic
from pipeline.journal import Journal, read_journal
from pipeline.meaning.embed import open_embedder
from pipeline.meaning.offrequest import open_judge
from pipeline.records import (
    BOOK_SCHEDULE,
    BookSpec,
    Chapter,
    EngineInfo,
    Outline,
    Part,
    PlanSchedule,
    SamplingProfile,
    Section,
    SectionResult,
)
from pipeline.records.audit import AuditReport
from pipeline.records.book import BookOutcome, BookStats, PlanOutcome, RepairSummary
from pipeline.typeset.appendix import appendix_html
from pipeline.typeset.book import typeset_html
from pipeline.typeset.epub import typeset_epub
from pipeline.watch.events import (
    BookFinished,
    FleetOpened,
    LevelPlanned,
    OutlineReady,
    PlanningStarted,
    TypesettingStarted,
    WritingStarted,
)
from pipeline.watch.listeners import BookListener, Listeners

log = logging.getLogger("fanout")
MAX_BEST_OF = 4  # candidates a section at most when the fleet has slots to spare


def spare_best_of(pool: BackendPool, sections: int) -> int:
    """Candidates a section from the fleet's spare capacity: as many as its slots hold for every section of
    the book at once (at most MAX_BEST_OF); 1 where the slots cannot even hold each section once (the
    embedded engine's 16 slots and a 24-section book)."""
    slots = sum(state.cap for state in pool.states)
    return max(1, min(MAX_BEST_OF, slots // max(1, sections)))


def engine_switches(infos: list[EngineInfo]) -> dict[str, Any]:
    """The body fields that switch thinking off, where every answering engine has the switch."""
    kinds = {info.kind for info in infos if info.models}
    return (
        {"chat_template_kwargs": {"enable_thinking": False}}
        if kinds and all(engine(k).thinking_switch for k in kinds)
        else {}
    )


def sampler_for(profile: SamplingProfile, infos: list[EngineInfo]) -> Sampler:
    kinds = frozenset(info.kind for info in infos if info.models)
    return Sampler(profile=profile, kinds=kinds, switches=engine_switches(infos))


def settle_profiles(settings: Settings, spec: BookSpec, fleet: Fleet) -> BookSpec:
    """The spec with its sampling profiles chosen from what the engines report (a resumed spec keeps its own)."""

    def models(pool: BackendPool) -> list[str]:
        return [state.backend.model for state in pool.states if state.backend.model]

    update: dict[str, SamplingProfile] = {}
    if spec.profile is None:
        update["profile"] = choose_profile(settings.profile, settings.sampling, models(fleet.pool))
    if fleet.planner_pool is not None and spec.planner_profile is None:
        update["planner_profile"] = choose_profile(settings.profile, settings.sampling, models(fleet.planner_pool))
    return spec.model_copy(update=update) if update else spec


def already_written(journal: dict[str, SectionResult], section: Section) -> bool:
    """Journaled under this very title: an id whose title changed (re-planned after a kill) is asked again."""
    result = journal.get(section.id)
    return result is not None and result.ok and result.title == section.title


def adopt_journaled_sections(outline: Outline, journal: dict[str, SectionResult]) -> None:
    """Sections start as their titles stream in, so a kill can leave written sections that the last saved
    outline.json does not list yet; the journal has their titles, so they stay in the book."""
    chapters = {chapter.id: chapter for part in outline.parts for chapter in part.chapters}
    for result in journal.values():
        chapter = chapters.get(result.id.rsplit(".", 1)[0])
        if result.ok and chapter is not None and all(s.id != result.id for s in chapter.sections):
            chapter.sections.append(Section(id=result.id, title=result.title))
            chapter.sections.sort(key=lambda section: id_number(section.id))


@dataclass(frozen=True)
class RunOptions:
    """How a book run goes, beyond what it writes."""

    repair: bool = False  # repair what the audit found before typesetting (`fanout repair`)
    keep_stats: bool = False  # leave an earlier run's stats.json in place (a repair of a finished run)
    schedule: PlanSchedule = BOOK_SCHEDULE  # when a planned section is handed to the writer
    incremental: bool = True  # typeset parts while writing (off: all at the end)


class BookRun:
    def __init__(
        self, settings: Settings, spec: BookSpec, folder: RunFolder, *, resumed: bool, progress: BookListener,
        options: RunOptions,
    ):  # fmt: skip
        self.settings = settings
        self.spec = spec
        self.folder = folder
        self.resumed = resumed
        self.options = options
        self.plan_stats = PlanStats()
        self.embedder = open_embedder(settings.embeddings)
        self.clock = RunClock()  # hears every event beside the watchers: its times fill stats.json
        self.progress = Listeners(self.clock, progress)

    async def run(self) -> BookOutcome:
        """Plan (unless outline.json exists), write what the journal lacks, optionally repair, then
        assemble, audit and typeset."""
        summary = None
        # Parts are typeset while the book is written, unless a repair will change them afterwards.
        incremental = self.options.incremental and not self.options.repair
        typesetter = self._typesetter() if incremental else None
        request_log = RequestLog(self.folder.path)
        try:
            if typesetter is not None:
                typesetter.start()
            async with open_fleet(self.settings, engine_log=self.folder.engine_log) as fleet:
                self.progress.hear(FleetOpened(fleet))
                log_requests(fleet, request_log)
                writing, planning = self._samplers(fleet)
                journal = read_journal(self.folder.journal)
                outline, writer = await self._plan_and_write(fleet, journal, writing, planning, typesetter)
                journal.update(writer.results)
                asked_later = writer.asked_later
                if self.options.repair:
                    summary = await self._repair(fleet, outline, journal, writing, planning)
                    asked_later += summary.asked_later
                tally = self.clock.tally(
                    fleet, writer.results, asked_later=asked_later, retry_tail_s=writer.retry_tail_seconds
                )
            tally.prompt_cache = request_log.prompt_cache()
            typesetter = typesetter or self._typesetter()
            return await self._finish(outline, journal, tally, summary, typesetter)
        finally:
            request_log.close()
            if typesetter is not None:
                typesetter.close()

    def _typesetter(self) -> IncrementalTypesetter:
        return IncrementalTypesetter(self.spec, self.folder.pdf, engine=self.settings.pdf_engine)

    def _samplers(self, fleet: Fleet) -> tuple[Sampler, Sampler]:
        """Settle the sampling profiles (recorded in spec.json) and make the writers' and planners' samplers."""
        spec = settle_profiles(self.settings, self.spec, fleet)
        if spec != self.spec:
            self.spec = spec
            write_atomic(self.folder.spec, spec.model_dump_json(indent=2))
        assert spec.profile is not None
        writing = sampler_for(spec.profile, fleet.infos(fleet.pool))
        planning = (
            writing
            if fleet.planner_pool is None
            else sampler_for(spec.planner_profile or spec.profile, fleet.infos(fleet.planner_pool))
        )
        log.info(
            "sampling: %s for writing, %s for planning (%s)",
            writing.profile.name,
            planning.profile.name,
            ", ".join(sorted(kind.value for kind in writing.kinds | planning.kinds)),
        )
        return writing, planning

    async def _finish(
        self, outline: Outline, journal: dict[str, SectionResult], tally: JobTally, summary: RepairSummary | None,
        typesetter: IncrementalTypesetter,
    ) -> BookOutcome:  # fmt: skip
        """Assemble, audit, typeset (the stats and audit go in the appendix), and write stats.json last."""
        report = self._assemble_and_audit(outline, journal)
        if summary is not None:
            summary.after = report.counts
            write_atomic(self.folder.path / "repair.json", summary.model_dump_json(indent=2))
        stats = self.clock.stats(
            self.plan_stats, tally, journal, section_total=len(outline.sections()), resumed=self.resumed
        )
        stats.quality = report.quality
        stats = await self._typeset(outline, journal, stats, report, typesetter)
        stats.job_seconds = round(self.clock.job_seconds, 2)
        if not (self.options.keep_stats and self.folder.stats.exists()):
            write_atomic(self.folder.stats, stats.model_dump_json(indent=2))
        outcome = BookOutcome(folder=self.folder.path, stats=stats, audit=report, repair=summary)
        self.progress.hear(BookFinished(outcome))
        return outcome

    @charged(Stage.FINISHING)
    def _assemble_and_audit(self, outline: Outline, journal: dict[str, SectionResult]) -> AuditReport:
        write_atomic(self.folder.book, assemble(outline, journal))
        report = audit(load_run(self.folder.path), embedder=self.embedder, judge=self.settings.judge)
        write_atomic(self.folder.audit, report.model_dump_json(indent=2))
        return report

    async def _repair(
        self, fleet: Fleet, outline: Outline, journal: dict[str, SectionResult], writing: Sampler, planning: Sampler
    ) -> RepairSummary:
        """Plan again the chapters off the request, then fix every section the audit flags or re-planned."""
        started = time.monotonic()
        before = self._assemble_and_audit(outline, journal)
        planner = self._planner(fleet, planning)
        replanned = await replan_off_request(planner, outline, before)
        if replanned:
            write_atomic(self.folder.outline, outline.model_dump_json(indent=2))
            log.info("planned again, off the request: %s", replanned)
        repairer = Repairer(fleet.pool, self.spec, outline, journal, writing, self.embedder)
        writer = Journal(self.folder.journal)
        try:
            outcome = await repairer.repair(before, writer, replanned)
        finally:
            writer.close()
        journal.update(outcome.results)
        if outcome.retitled:
            write_atomic(self.folder.outline, outline.model_dump_json(indent=2))
        log.info("repaired %d sections: %s", len(outcome.actions), dict(Counter(outcome.actions.values())))
        return RepairSummary(
            before=before.counts,
            actions=dict(Counter(outcome.actions.values())),
            retitled=outcome.retitled,
            replanned=replanned,
            tokens=sum(r.completion_tokens or 0 for r in outcome.results.values() if r.ok),
            seconds=round(time.monotonic() - started, 2),
            asked_later=outcome.asked_later,
        )

    async def _plan_and_write(
        self,
        fleet: Fleet,
        journal: dict[str, SectionResult],
        writing: Sampler,
        planning: Sampler,
        typesetter: IncrementalTypesetter | None,
    ) -> tuple[Outline, SectionWriter]:
        """Each chapter's sections are written as soon as its titles exist (or all at once, from a
        finished outline.json); sections the journal already has are not asked again."""
        outline = load_outline(self.folder)
        done = sum(1 for r in journal.values() if r.ok)
        best_of = self.settings.best_of or spare_best_of(fleet.pool, self.spec.section_count)
        log.info("best of %d a section (%d more while off point)", best_of, self.settings.off_point_retries)
        writer = SectionWriter(
            fleet.pool,
            self.spec,
            Journal(self.folder.journal),
            writing,
            self.progress,
            self.embedder,
            WritePolicy(
                best_of=best_of,
                off_point_retries=self.settings.off_point_retries,
                warm=self.settings.warm,
                ready_after=fleet.prefix_ready,
                judge=open_judge(self.settings.judge),
            ),
        )
        self.progress.hear(WritingStarted(self.spec.section_count, done, fleet.pool))
        results = ChainMap(writer.results, journal)

        async def write(book: Outline, part: Part, chapter: Chapter, section: Section) -> None:
            await writer.write(book, part, chapter, section)
            if typesetter is not None:
                typesetter.section_done(book, results, section.id)

        try:
            async with anyio.create_task_group() as group:

                def start_section(book: Outline, part: Part, chapter: Chapter, section: Section) -> None:
                    writer.planned(chapter)
                    if not already_written(journal, section):
                        group.start_soon(write, book, part, chapter, section)

                if outline is None or not outline.complete:
                    if outline is not None:
                        adopt_journaled_sections(outline, journal)
                    outline = await self._plan(fleet, planning, outline, start_section)
                    writer.outline_complete()
                else:
                    writer.outline_complete()
                    for part, chapter, section in outline.sections():
                        start_section(outline, part, chapter, section)
        finally:
            writer.journal.close()
        assert outline is not None, "planned, or loaded complete (a failed task raises out of the group)"
        self.progress.hear(OutlineReady(outline))
        log.info("wrote %d sections (%d were already in the journal)", len(writer.results), done)
        return outline, writer

    def _planner(self, fleet: Fleet, sampler: Sampler) -> Planner:
        judge = open_judge(self.settings.judge)
        # a lane only where planning shares the writers' pool (planner backends are planning's own already)
        lane = self.settings.planning_lane if fleet.planner_pool is None else 0
        return Planner(
            fleet.planners,
            self.spec,
            sampler,
            on_node=lambda level: self.progress.hear(LevelPlanned(level)),
            embedder=self.embedder,
            judge=judge,
            lane_writing=lane,
            mode=self.settings.planning,
        )

    async def _plan(self, fleet: Fleet, sampler: Sampler, partial: Outline | None, on_section: OnSection) -> Outline:
        planner = self._planner(fleet, sampler)
        self.progress.hear(PlanningStarted(self.spec))

        def save(outline: Outline) -> None:
            self._save_outline(outline)
            self.progress.hear(OutlineReady(outline))

        outline = await planner.plan(partial, schedule=self.options.schedule, on_section=on_section, on_change=save)
        self.plan_stats = planner.stats
        log.info(
            "planned %s: %d sections in %.1f s (%d requests, %d samples, %d lines pooled, %d asked a second round, "
            "%d units phrased, %d nodes planned short, %d phrased from the request's owed asks, %d taken although "
            "off the request)",
            outline.title,
            len(outline.sections()),
            planner.stats.seconds,
            planner.stats.requests,
            planner.stats.samples,
            planner.stats.pooled,
            planner.stats.reasked,
            planner.stats.phrased,
            planner.stats.short,
            planner.stats.filled_from_asks,
            planner.stats.off_subject_taken,
        )
        if planner.stats.passed_over:
            log.info("lines passed over: %s", dict(planner.stats.passed_over.most_common()))
        if planner.stats.refusals:
            log.info("lines refused: %s", dict(planner.stats.refusals.most_common()))
            for node_id, title, reason in planner.stats.refused:
                log.debug("refused under %s: %r %s", node_id or "the book", title, reason)
        return outline

    def _save_outline(self, outline: Outline) -> None:
        save_outline(self.folder, outline, self.spec.prompt)

    async def plan_only(self) -> PlanOutcome:
        """Plan the outline (what outline.json lacks; by the run's schedule, the barrier's for `plan`), write
        outline.json and outline.md, audit the titles (TITLE_RULES and the outline's figures), and stop: no section
        is written."""
        request_log = RequestLog(self.folder.path)
        try:
            async with open_fleet(self.settings, engine_log=self.folder.engine_log) as fleet:
                self.progress.hear(FleetOpened(fleet))
                log_requests(fleet, request_log)
                _, planning = self._samplers(fleet)
                outline = load_outline(self.folder)
                if outline is None or not outline.complete:
                    outline = await self._plan(fleet, planning, outline, lambda *_: None)
        finally:
            request_log.close()
        self._save_outline(outline)
        report = audit(load_run(self.folder.path), only=TITLE_RULES, embedder=self.embedder, judge=self.settings.judge)
        write_atomic(self.folder.audit, report.model_dump_json(indent=2))
        return PlanOutcome(
            folder=self.folder.path,
            outline=outline,
            audit=report,
            requests=self.plan_stats.requests,
            seconds=round(self.plan_stats.seconds, 2),
        )

    async def first_chain_seconds(self) -> float:
        """Seconds until a first section is taken, planning only the chain it waits for (the book, its first
        part, that part's first chapter, each asked once its parent's first line is taken), alone on the fleet;
        nothing is written."""
        request_log = RequestLog(self.folder.path)  # its timestamps show the chain
        try:
            async with open_fleet(self.settings, engine_log=self.folder.engine_log) as fleet:
                fleet.planners.on_finished = request_log.record
                _, planning = self._samplers(fleet)
                planner = self._planner(fleet, planning)
                await planner.plan_first_chain()
        finally:
            request_log.close()
        return planner.stats.seconds

    async def _typeset(
        self,
        outline: Outline,
        journal: dict[str, SectionResult],
        stats: BookStats,
        report: AuditReport,
        typesetter: IncrementalTypesetter,
    ) -> BookStats:
        """book.pdf (the parts already rendered while writing are only merged now), book.html, book.epub."""
        self.progress.hear(TypesettingStarted())
        appendix = appendix_html(stats.model_dump(mode="json"), report.model_dump(mode="json"))
        finish = charged(Stage.FINISHING)(typesetter.finish)
        result = await anyio.to_thread.run_sync(finish, outline, journal, appendix)
        markdown = self.folder.book.read_text()
        with stage(Stage.FINISHING):
            typeset_html(markdown, outline.title, self.folder.html, appendix)
            typeset_epub(markdown, outline.title, self.folder.epub, appendix)
        log.info("PDF ready %.1f s after the last section (%d pages)", result.seconds, result.pages)
        return stats.model_copy(update={"typeset_seconds": round(result.seconds, 2), "pdf_pages": result.pages})


def log_requests(fleet: Fleet, request_log: RequestLog) -> None:
    """Every request of the fleet's pools, writing's and planning's (one pool when planning has no backends of
    its own), goes to the request log."""
    for pool in {id(fleet.pool): fleet.pool, id(fleet.planners): fleet.planners}.values():
        pool.on_finished = request_log.record


async def book(
    settings: Settings,
    spec: BookSpec | None,
    out: Path | None,
    resume: Path | None,
    progress: BookListener,
    *,
    options: RunOptions = RunOptions(),
    given: Outline | None = None,
) -> BookOutcome:
    """Write a book: a new one from `spec` in `out` (from the outline a person `given`, when there is one: its
    levels kept verbatim, the levels it lacks planned under them), or finish the run in `resume`."""
    if resume is not None:
        folder, spec = load_run_folder(resume)
    elif spec is None:
        raise UsageError("a new book needs a spec (or a run folder to resume)")
    else:
        folder = new_run_folder(spec, out)
        if given is not None:
            save_outline(folder, given, spec.prompt)
    with working_in(folder, new=resume is None), kept_when_stopped(folder, spec), progress:
        run = BookRun(settings, spec, folder, resumed=resume is not None, progress=progress, options=options)
        return await run.run()


async def plan(settings: Settings, spec: BookSpec, out: Path | None, progress: BookListener) -> PlanOutcome:
    """`fanout plan`: the outline of a new book in `out`, planned, audited and written as outline.json and
    outline.md (book/outlinefile.py), for a person to read or edit before `fanout book --outline`."""
    folder = new_run_folder(spec, out)
    with working_in(folder, new=True), progress:
        options = RunOptions(schedule=PlanSchedule.BARRIER)  # level by level: nothing is written meanwhile
        run = BookRun(settings, spec, folder, resumed=False, progress=progress, options=options)
        return await run.plan_only()


async def first_chain_seconds(settings: Settings, spec: BookSpec, out: Path) -> float:
    """The planning critical path of the pipelined and streamed schedules on an idle fleet: seconds to plan the
    book, its first part and that part's first chapter, one after another, in a run folder `out`."""
    folder = new_run_folder(spec, out)
    run = BookRun(settings, spec, folder, resumed=False, progress=BookListener(), options=RunOptions())
    return await run.first_chain_seconds()
