"""A book run as its stages: sources -> plan -> write (-> repair) -> assemble -> audit -> typeset, and stats.json
last.

Takes Settings, a BookSpec and a run folder (new, or one to resume); leaves in the folder spec.json,
outline.json, sections.jsonl (the journal), requests.jsonl (every request as sent, what a bench replay
reads), book.md, book.pdf, run.log and, last of all, stats.json. Each stage is a module of its own
(sourcestage.py, planstage.py, writestage.py, repairstage.py, assemble.py, auditstage.py, typesetstage.py); the
watchers (the terminal, the live page, the run's clock in timing.py) hear the events the stages emit. The sources
stage runs first, before a new run folder is made (a book whose sources cannot be read leaves none behind); what it
hands on (BookSources) reaches the other stages in the RunContext. A new run and a resume are the same stages fed
from what the folder holds (folder.read_saved): a resume plans nothing again and asks no finished section again.
Interrupted, it leaves the journal consistent and writes no stats.json, so the folder never looks like a finished
run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from pipeline.audit.rules import TITLE_RULES
from pipeline.backends.fleet import Fleet, open_fleet
from pipeline.book.assemble import assemble_book
from pipeline.book.auditstage import audit_book
from pipeline.book.context import RunContext, log_requests, open_context
from pipeline.book.folder import (
    RunFolder,
    kept_when_stopped,
    load_run_folder,
    new_run_folder,
    read_saved,
    save_outline,
    working_in,
)
from pipeline.book.incremental import IncrementalTypesetter
from pipeline.book.planstage import Planned, plan_first_chain, plan_outline, plan_places
from pipeline.book.repairstage import repair_book
from pipeline.book.requestlog import RequestLog
from pipeline.book.sourcestage import BookSources, open_book_sources
from pipeline.book.stats import JobTally, after_last_section
from pipeline.book.timing import RunClock
from pipeline.book.typesetstage import typeset_book
from pipeline.book.writestage import WriteStage
from pipeline.config import Settings
from pipeline.errors import UsageError
from pipeline.files import write_atomic
from pipeline.meaning.embed import open_embedder
from pipeline.records import BOOK_SCHEDULE, BookSpec, Outline, PlanSchedule, SectionResult
from pipeline.records.book import BookOutcome, PlanOutcome, RepairSummary
from pipeline.watch.events import BookFinished, FileFinished, FleetOpened
from pipeline.watch.listeners import BookListener, Listeners

log = logging.getLogger("fanout")


@dataclass(frozen=True)
class RunOptions:
    """How a book run goes, beyond what it writes."""

    repair: bool = False  # repair what the audit found before typesetting (`fanout repair`)
    keep_stats: bool = False  # leave an earlier run's stats.json in place (a repair of a finished run)
    schedule: PlanSchedule = BOOK_SCHEDULE  # when a planned section is handed to the writer
    incremental: bool = True  # typeset parts while writing (off: all at the end)

    @property
    def typesets_while_writing(self) -> bool:
        """Parts are typeset while the book is written, unless a repair will change them afterwards."""
        return self.incremental and not self.repair


@dataclass(frozen=True)
class Draft:
    """What the stages that ask the fleet leave: the whole outline and the planning's counts, the journal with this
    run's sections (and repairs) in it, what the fleet did, and the repair's summary."""

    planned: Planned
    journal: dict[str, SectionResult]
    tally: JobTally
    repair: RepairSummary | None


async def run_book(
    settings: Settings,
    spec: BookSpec,
    folder: RunFolder,
    *,
    resumed: bool,
    listener: BookListener,
    options: RunOptions,
    sources: BookSources | None = None,
) -> BookOutcome:
    """The stages of one book run; the run's clock hears every event beside `listener`."""
    embedder = open_embedder(settings.embeddings)
    clock = RunClock()
    listeners = Listeners(clock, listener)
    typesetter = IncrementalTypesetter(spec, folder.pdf, engine=settings.pdf_engine)
    request_log = RequestLog(folder.path)
    try:
        if options.typesets_while_writing:
            typesetter.start()
        async with open_fleet(settings, engine_log=folder.engine_log) as fleet:
            listeners.hear(FleetOpened(fleet))
            log_requests(fleet, request_log)
            run = open_context(settings, spec, folder, fleet, listener=listeners, embedder=embedder, sources=sources)
            draft = await ask_fleet(run, fleet, clock, options, typesetter)
        draft.tally.prompt_cache = request_log.prompt_cache()
        return await finish(run, draft, clock, typesetter, resumed=resumed, keep_stats=options.keep_stats)
    finally:
        request_log.close()
        typesetter.close()


async def ask_fleet(
    run: RunContext, fleet: Fleet, clock: RunClock, options: RunOptions, typesetter: IncrementalTypesetter
) -> Draft:
    """plan -> write, each section written as soon as its title exists (or all at once, from a complete outline),
    then the repair where asked; what the fleet did is taken before it closes."""
    saved = read_saved(run.folder)
    stage = WriteStage(run, fleet, saved.journal, typesetter if options.typesets_while_writing else None)
    async with stage.writing() as take:
        planned = await plan_outline(run, fleet, saved, schedule=options.schedule, on_section=take)
        stage.outline_complete()
    written = stage.written(planned.outline)
    journal = {**saved.journal, **written.results}
    repaired = await repair_book(run, fleet, planned.outline, journal) if options.repair else None
    asked_later = written.asked_later + (repaired.summary.asked_later if repaired else 0)
    tally = clock.tally(
        fleet, written.results, asked_later=asked_later, retry_tail_s=written.retry_tail_s, hedges=written.hedges
    )
    if repaired is None:
        return Draft(planned, journal, tally, None)
    return Draft(planned, repaired.journal, tally, repaired.summary)


async def finish(
    run: RunContext, draft: Draft, clock: RunClock, typesetter: IncrementalTypesetter, *, resumed: bool,
    keep_stats: bool,
) -> BookOutcome:  # fmt: skip
    """assemble -> audit -> typeset (the stats and audit go in the appendix), and stats.json last."""
    folder, outline, journal = run.folder, draft.planned.outline, draft.journal
    assemble_book(folder.book, outline, journal)
    run.listener.hear(FileFinished(folder.book.name))
    report = audit_book(folder, embedder=run.embedder, judge=run.settings.judge)
    run.listener.hear(FileFinished(folder.audit.name))
    summary = None if draft.repair is None else draft.repair.model_copy(update={"after": report.counts})
    if summary is not None:
        write_atomic(folder.path / "repair.json", summary.model_dump_json(indent=2))
    stats = clock.stats(
        draft.planned.stats, draft.tally, journal, section_total=len(outline.sections()), resumed=resumed
    )
    stats.quality = report.quality
    stats = await typeset_book(folder, outline, journal, stats, report, typesetter=typesetter, listener=run.listener)
    stats = clock.finished_stats(stats, pdf=folder.pdf.name)
    stats.job_seconds = round(clock.job_seconds, 2)
    log.info("after the last section: %s", after_last_section(stats.after_last_section))
    if not (keep_stats and folder.stats.exists()):
        write_atomic(folder.stats, stats.model_dump_json(indent=2))
    outcome = BookOutcome(folder=folder.path, stats=stats, audit=report, repair=summary)
    run.listener.hear(BookFinished(outcome))
    return outcome


async def book(
    settings: Settings,
    spec: BookSpec | None,
    out: Path | None,
    resume: Path | None,
    progress: BookListener,
    *,
    options: RunOptions = RunOptions(),
    edited: Outline | None = None,
) -> BookOutcome:
    """Write a book: a new one from `spec` in `out` (from the outline a person `edited`, when there is one: its
    levels kept verbatim, the levels it lacks planned under them), or finish the run in `resume`."""
    if resume is not None:
        folder, spec = load_run_folder(resume)
        sources = open_book_sources(spec, open_embedder(settings.embeddings))
    elif spec is None:
        raise UsageError("a new book needs a spec (or a run folder to resume)")
    else:
        sources = open_book_sources(spec, open_embedder(settings.embeddings))  # none readable: refused before a folder
        folder = new_run_folder(spec, out)
        if edited is not None:
            save_outline(folder, edited, spec.prompt)
    with working_in(folder, new=resume is None), kept_when_stopped(folder, spec), progress:
        return await run_book(
            settings, spec, folder, resumed=resume is not None, listener=progress, options=options, sources=sources
        )


async def plan(settings: Settings, spec: BookSpec, out: Path | None, progress: BookListener) -> PlanOutcome:
    """`fanout plan`: the outline of a new book in `out`, for a person to read or edit before `fanout book
    --outline`."""
    sources = open_book_sources(spec, open_embedder(settings.embeddings))  # none readable: refused before a folder
    folder = new_run_folder(spec, out)
    with working_in(folder, new=True), progress:
        return await plan_run(settings, spec, folder, listener=progress, sources=sources)


async def plan_run(
    settings: Settings, spec: BookSpec, folder: RunFolder, *, listener: BookListener, sources: BookSources | None = None
) -> PlanOutcome:
    """plan (level by level: nothing is written meanwhile) -> audit by the title rules (TITLE_RULES and the
    outline's figures); outline.json and outline.md written (book/outlinefile.py)."""
    embedder = open_embedder(settings.embeddings)
    request_log = RequestLog(folder.path)
    try:
        async with open_fleet(settings, engine_log=folder.engine_log) as fleet:
            listener.hear(FleetOpened(fleet))
            log_requests(fleet, request_log)
            run = open_context(settings, spec, folder, fleet, listener=listener, embedder=embedder, sources=sources)
            saved = read_saved(folder)
            planned = await plan_outline(run, fleet, saved, schedule=PlanSchedule.BARRIER, on_section=lambda *_: None)
            plan_places(run, planned.outline)
    finally:
        request_log.close()
    save_outline(folder, planned.outline, spec.prompt)
    report = audit_book(folder, embedder=embedder, judge=settings.judge, only=TITLE_RULES)
    return PlanOutcome(
        folder=folder.path,
        outline=planned.outline,
        audit=report,
        requests=planned.stats.requests,
        seconds=round(planned.stats.seconds, 2),
    )


async def first_chain_seconds(settings: Settings, spec: BookSpec, out: Path) -> float:
    """The planning critical path of the pipelined and streamed schedules on an idle fleet: seconds to plan the
    book, its first part and that part's first chapter, one after another, in a run folder `out`."""
    folder = new_run_folder(spec, out)
    embedder = open_embedder(settings.embeddings)
    request_log = RequestLog(folder.path)  # its timestamps show the chain
    try:
        async with open_fleet(settings, engine_log=folder.engine_log) as fleet:
            fleet.planners.on_finished = request_log.record
            run = open_context(settings, spec, folder, fleet, listener=BookListener(), embedder=embedder)
            return await plan_first_chain(run, fleet)
    finally:
        request_log.close()
