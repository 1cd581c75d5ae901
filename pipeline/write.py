"""The writer: every section in its own request, through the pool, journaled as it lands.

Takes the Outline, the BookSpec and the sections still to write; returns a SectionResult per section.
Each request carries only the book title, its part, chapter and section title and the length asked
for (templates/section.md). A section whose every attempt failed comes back with `error` set, never as
a finished section; it is journaled too, so a resume asks it again.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from pipeline.backends.pool import BackendPool, RequestFailed
from pipeline.journal import Journal
from pipeline.progress import BookListener
from pipeline.prompts import render
from pipeline.records import BookSpec, Chapter, ChatRequest, Completion, Outline, Part, Section, SectionResult

def section_request(spec: BookSpec, outline: Outline, part: Part, chapter: Chapter, section: Section,
                    extra: dict[str, Any]) -> ChatRequest:
    prompt = render("section.md", book_title=outline.title, part_title=part.title, chapter_title=chapter.title,
                    section_title=section.title, words=spec.words)
    return ChatRequest(messages=[{"role": "user", "content": prompt}], max_tokens=spec.max_tokens,
                       temperature=spec.temperature, extra=extra, tag=section.id)


class WallClock:
    """Turns the client's monotonic timestamps into wall-clock seconds, so journaled times survive a resume."""

    def __init__(self) -> None:
        self.offset = time.time() - time.monotonic()

    def __call__(self, monotonic: float | None) -> float | None:
        return None if monotonic is None else monotonic + self.offset


def finished(section: Section, completion: Completion, wall: WallClock) -> SectionResult:
    return SectionResult(id=section.id, title=section.title, text=completion.text,
                         finish_reason=completion.finish_reason, prompt_tokens=completion.prompt_tokens,
                         completion_tokens=completion.completion_tokens, backend=completion.backend,
                         t_sent=wall(completion.t_sent), t_first_token=wall(completion.t_first_token),
                         t_done=wall(completion.t_done), attempts=completion.attempts)


def failed(section: Section, failure: RequestFailed) -> SectionResult:
    return SectionResult(id=section.id, title=section.title, error=str(failure), attempts=failure.attempts)


async def write_sections(pool: BackendPool, spec: BookSpec, outline: Outline,
                         todo: list[tuple[Part, Chapter, Section]], journal: Journal, extra: dict[str, Any],
                         listener: BookListener) -> dict[str, SectionResult]:
    wall = WallClock()
    results: dict[str, SectionResult] = {}

    async def write_one(part: Part, chapter: Chapter, section: Section) -> None:
        request = section_request(spec, outline, part, chapter, section, extra)
        on_delta = (lambda text: listener.section_delta(section.id, text)) if listener.wants_deltas else None
        listener.section_started(section.id, section.title)
        try:
            result = finished(section, await pool.complete(request, on_delta), wall)
        except RequestFailed as failure:
            result = failed(section, failure)
        journal.append(result)
        results[section.id] = result
        listener.written(result)

    async with anyio.create_task_group() as group:
        for part, chapter, section in todo:
            group.start_soon(write_one, part, chapter, section)
    return results
