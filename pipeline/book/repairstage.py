"""The repair stage (`fanout repair`, `fanout book --repair`): the written book -> its repaired journal and what the
repair did (Repaired).

The book is assembled and audited, the chapters the audit finds off the request are planned again (outline.json
saved), and every section the audit flags or a re-planned chapter holds is fixed (Repairer, pipeline/book/repair.py),
each fix appended to the journal as a new version.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass

from pipeline.backends.fleet import Fleet
from pipeline.book.assemble import assemble_book
from pipeline.book.auditstage import audit_book
from pipeline.book.context import RunContext
from pipeline.book.planstage import open_planner
from pipeline.book.repair import Repairer, replan_off_request
from pipeline.files import write_atomic
from pipeline.journal import Journal
from pipeline.records import Outline, SectionResult
from pipeline.records.book import RepairSummary

log = logging.getLogger("fanout")


@dataclass(frozen=True)
class Repaired:
    """The journal with every fix in it (the latest version of each section), and the summary (repair.json)."""

    journal: dict[str, SectionResult]
    summary: RepairSummary


async def repair_book(run: RunContext, fleet: Fleet, outline: Outline, journal: dict[str, SectionResult]) -> Repaired:
    """Plan again the chapters off the request (in `outline`, in place), then fix every section the audit flags
    or re-planned."""
    started = time.monotonic()
    assemble_book(run.folder.book, outline, journal)
    before = audit_book(run.folder, embedder=run.embedder, judge=run.settings.judge)
    replanned = await replan_off_request(open_planner(run, fleet), outline, before)
    if replanned:
        write_atomic(run.folder.outline, outline.model_dump_json(indent=2))
        log.info("planned again, off the request: %s", replanned)
    repairer = Repairer(fleet.pool, run.spec, outline, journal, run.writing, run.embedder)
    writer = Journal(run.folder.journal)
    try:
        outcome = await repairer.repair(before, writer, replanned)
    finally:
        writer.close()
    if outcome.retitled:
        write_atomic(run.folder.outline, outline.model_dump_json(indent=2))
    actions = dict(Counter(outcome.actions.values()))
    log.info("repaired %d sections: %s", len(outcome.actions), actions)
    summary = RepairSummary(
        before=before.counts,
        actions=actions,
        retitled=outcome.retitled,
        replanned=replanned,
        tokens=sum(r.completion_tokens or 0 for r in outcome.results.values() if r.ok),
        seconds=round(time.monotonic() - started, 2),
        asked_later=outcome.asked_later,
    )
    return Repaired({**journal, **outcome.results}, summary)
