"""The plan stage: the saved outline and journal (Saved) -> the whole outline and the planning's counts (Planned).

Sections written before a kill that the saved outline.json does not list yet are taken from the journal; what the
outline still lacks is planned (Planner, pipeline/book/plan/), outline.json and outline.md saved after every planned
node, and each section is handed to `on_section` (the write stage) as the run's schedule says. A complete outline
(a resume, or an outline a person gave) is handed on section by section without a request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.backends.fleet import Fleet
from pipeline.book.context import RunContext
from pipeline.book.folder import Saved, save_outline
from pipeline.book.plan.levels import OnSection, SourcesNote
from pipeline.book.plan.planner import Planner, PlanOptions
from pipeline.book.plan.rounds import PlanStats
from pipeline.meaning.offrequest import open_judge
from pipeline.records import Node, Outline, PlanSchedule, Section, SectionResult, id_number
from pipeline.watch.events import LevelPlanned, OutlineReady, PlanningStarted

log = logging.getLogger("fanout")


@dataclass(frozen=True)
class Planned:
    """The whole outline and what planning it took (PlanStats() when it was loaded whole)."""

    outline: Outline
    stats: PlanStats


def adopt_journaled_sections(outline: Outline, journal: dict[str, SectionResult]) -> None:
    """Sections start as their titles stream in, so a kill can leave written sections that the last saved
    outline.json does not list yet; the journal has their titles, so they stay in the book."""
    chapters = {chapter.id: chapter for part in outline.parts for chapter in part.chapters}
    for result in journal.values():
        chapter = chapters.get(result.id.rsplit(".", 1)[0])
        if result.ok and chapter is not None and all(s.id != result.id for s in chapter.sections):
            chapter.sections.append(Section(id=result.id, title=result.title))
            chapter.sections.sort(key=lambda section: id_number(section.id))


def open_planner(run: RunContext, fleet: Fleet) -> Planner:
    judge = open_judge(run.settings.judge)
    # a lane only where planning shares the writers' pool (planner backends are planning's own already)
    lane = run.settings.planning_lane if fleet.planner_pool is None else 0
    return Planner(
        fleet.planners,
        run.spec,
        run.planning,
        on_node=lambda level: run.listener.hear(LevelPlanned(level)),
        embedder=run.embedder,
        judge=judge,
        options=PlanOptions(lane_writing=lane, mode=run.settings.planning, sources_note=sources_note(run)),
    )


def plan_places(run: RunContext, outline: Outline) -> None:
    """Every node of a plan nobody writes yet (`fanout plan`) given the places of its nearest passages."""
    if run.sources is not None:
        keep_places(outline, run.sources.planning.places)


def sources_note(run: RunContext) -> SourcesNote | None:
    """What the planning prompts are told of the user's sources; None without sources."""
    return None if run.sources is None else run.sources.planning.note


async def plan_outline(
    run: RunContext, fleet: Fleet, saved: Saved, *, schedule: PlanSchedule, on_section: OnSection
) -> Planned:
    """The whole outline, each of its sections handed to `on_section` as `schedule` says (all at once from a
    complete saved outline)."""
    outline = saved.outline
    places = None if run.sources is None else run.sources.planning.places
    if outline is not None and outline.complete:
        if places is not None and keep_places(outline, places, sections=False):
            save_outline(run.folder, outline, run.spec.prompt)
        for part, chapter, section in outline.sections():
            on_section(outline, part, chapter, section)
        return Planned(outline, PlanStats())
    if outline is not None:
        adopt_journaled_sections(outline, saved.journal)
    planner = open_planner(run, fleet)
    run.listener.hear(PlanningStarted(run.spec))

    def save(outline: Outline) -> None:
        if places is not None:  # a section's are its passages' when it is written (book/cite.py: Citing.passages)
            keep_places(outline, places, sections=False)
        save_outline(run.folder, outline, run.spec.prompt)
        run.listener.hear(OutlineReady(outline))

    outline = await planner.plan(outline, schedule=schedule, on_section=on_section, on_change=save)
    log_plan(outline, planner.stats)
    return Planned(outline, planner.stats)


def keep_places(outline: Outline, places: Callable[[str, str], list[str]], *, sections: bool = True) -> bool:
    """Each node without sources of its own (a person's edited ones are kept) is given the places its nearest
    passages are from (not the sections, unless `sections`); whether any node was."""
    given = False
    for part in outline.parts:
        nodes: list[tuple[Node, str]] = [(part, outline.title)]
        nodes += [(chapter, part.title) for chapter in part.chapters]
        if sections:
            nodes += [(section, chapter.title) for chapter in part.chapters for section in chapter.sections]
        for node, above in nodes:
            if not node.places:
                node.places = places(node.title, above)
                given = given or bool(node.places)
    return given


def log_plan(outline: Outline, stats: PlanStats) -> None:
    log.info(
        "planned %s: %d sections in %.1f s (%d requests, %d samples, %d lines pooled, %d asked a second round, "
        "%d given nodes phrased, %d nodes planned short, %d phrased from the request's owed asks, %d taken although "
        "off the request)",
        outline.title,
        len(outline.sections()),
        stats.seconds,
        stats.requests,
        stats.samples,
        stats.pooled,
        stats.reasked,
        stats.phrased,
        stats.short,
        stats.filled_from_asks,
        stats.off_subject_taken,
    )
    if stats.held_back:
        log.info("lines passed over: %s", dict(stats.held_back.most_common()))
    if stats.refusals:
        log.info("lines refused: %s", dict(stats.refusals.most_common()))
        for node_id, title, verdict in stats.refused:
            log.debug("refused under %s by %s: %r %s", node_id or "the book", verdict.rule, title, verdict)


async def plan_first_chain(run: RunContext, fleet: Fleet) -> float:
    """Seconds until a first section is taken, planning only the chain it waits for (the book, its first part,
    that part's first chapter, each asked once its parent's first line is taken), alone on the fleet; nothing is
    written."""
    planner = open_planner(run, fleet)
    await planner.plan_first_chain()
    return planner.stats.seconds
