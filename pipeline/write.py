"""The writer: every section in its own request, through the pool, journaled as it lands.

A SectionWriter is handed sections (as soon as their chapter is planned) and keeps a SectionResult per
section.
Each request carries only the book title, its part, chapter and section title and the length asked
for (templates/section.md). A section whose every attempt failed comes back with `error` set, never as
a finished section; it is journaled too, so a resume asks it again.
"""

from __future__ import annotations

import time
from typing import Any

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


class SectionWriter:
    """Writes sections one request each, as they are handed to it, and journals each as it lands."""

    def __init__(self, pool: BackendPool, spec: BookSpec, journal: Journal, extra: dict[str, Any],
                 listener: BookListener):
        self.pool = pool
        self.spec = spec
        self.journal = journal
        self.extra = extra
        self.listener = listener
        self.wall = WallClock()
        self.results: dict[str, SectionResult] = {}
        self.first_sent: float | None = None
        self.last_done: float | None = None

    @property
    def seconds(self) -> float:
        return 0.0 if self.first_sent is None else (self.last_done or self.first_sent) - self.first_sent

    async def write(self, outline: Outline, part: Part, chapter: Chapter, section: Section) -> None:
        listener = self.listener
        request = section_request(self.spec, outline, part, chapter, section, self.extra)
        on_delta = on_retry = None
        if listener.wants_deltas:
            on_delta = lambda text: listener.section_delta(section.id, text)  # noqa: E731
            on_retry = lambda: listener.section_restarted(section.id)  # noqa: E731
        self.first_sent = self.first_sent or time.monotonic()
        listener.section_started(section.id, section.title)
        try:
            result = finished(section, await self.pool.complete(request, on_delta, on_retry=on_retry), self.wall)
        except RequestFailed as failure:
            result = failed(section, failure)
        self.last_done = time.monotonic()
        self.journal.append(result)
        self.results[section.id] = result
        listener.written(result)
