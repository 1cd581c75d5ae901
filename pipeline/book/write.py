"""The writer: every section in its own request, through the pool, journaled as it lands.

A SectionWriter is handed sections (as soon as their chapter is planned) and keeps a SectionResult per
section. Each request carries its neighbourhood from the plan (templates/section.md): the user's request,
the book, part and chapter titles, the chapter's and its own key point, and its siblings' titles and key
points as covered elsewhere; it asks for a number of paragraphs that fits the word budget and for a last
full sentence. Requests stay independent, so every section of a book can be in flight at once. An answer
loses the chatter or echoed title before its first paragraph; a loop is cut where it starts, and an answer
that stops at the token cap is cut back to its last full sentence and marked `trimmed` (the raw answer is
journaled beside it). A section whose every attempt failed comes back with `error` set, never as a
finished section; it is journaled too, so a resume asks it again.
"""

from __future__ import annotations

import time

from pipeline.backends.pool import BackendPool, RequestFailed
from pipeline.book.profiles import Sampler
from pipeline.book.trim import end_well, paragraphs_for, tidy_closing, tidy_opening
from pipeline.journal import Journal
from pipeline.progress import BookListener
from pipeline.records import BookSpec, Chapter, ChatRequest, Completion, Outline, Part, Section, SectionResult
from pipeline.templating import render

MAX_REQUEST_CHARS = 400  # of the user's request, in each section prompt: 1,536 prefills of a long one add up


def shortened(text: str, limit: int = MAX_REQUEST_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"


def neighbours(chapter: Chapter, section: Section) -> str:
    others = [s for s in chapter.sections if s.id != section.id]
    if not others:
        return "nothing (this is the chapter's only section)."
    return "; ".join(f'"{s.title}"' + (f" ({s.point.rstrip('.')})" if s.point else "") for s in others) + "."


def section_prompt(spec: BookSpec, outline: Outline, part: Part, chapter: Chapter, section: Section) -> str:
    return render(
        "section.md",
        request=shortened(spec.prompt),
        book_title=outline.title,
        part_title=part.title,
        chapter_title=chapter.title,
        chapter_about=f" ({chapter.point.rstrip('.')})" if chapter.point else "",
        siblings=neighbours(chapter, section),
        section_title=section.title,
        section_point=section.point or section.title,
        paragraphs=paragraphs_for(spec.words),
        words=spec.words,
    )


def section_request(
    spec: BookSpec, outline: Outline, part: Part, chapter: Chapter, section: Section, sampler: Sampler
) -> ChatRequest:
    prompt = section_prompt(spec, outline, part, chapter, section)
    return sampler.request([{"role": "user", "content": prompt}], spec.max_tokens, section.id)


class WallClock:
    """Turns the client's monotonic timestamps into wall-clock seconds, so journaled times survive a resume."""

    def __init__(self) -> None:
        self.offset = time.time() - time.monotonic()

    def __call__(self, monotonic: float | None) -> float | None:
        return None if monotonic is None else monotonic + self.offset


def finished(section: Section, completion: Completion, wall: WallClock) -> SectionResult:
    """The journaled result: the opening tidied, and an answer cut at the cap ending on its last full
    sentence; when that changed the text, the raw answer is kept beside it."""
    opened = tidy_opening(completion.text)
    text = tidy_closing(end_well(opened, capped=completion.finish_reason == "length"))
    raw = completion.text if text != completion.text else None
    return SectionResult(
        id=section.id,
        title=section.title,
        text=text,
        trimmed=text != opened,
        raw_text=raw,
        finish_reason=completion.finish_reason,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
        backend=completion.backend,
        t_sent=wall(completion.t_sent),
        t_first_token=wall(completion.t_first_token),
        t_done=wall(completion.t_done),
        attempts=completion.attempts,
    )


def failed(section: Section, failure: RequestFailed) -> SectionResult:
    return SectionResult(id=section.id, title=section.title, error=str(failure), attempts=failure.attempts)


class SectionWriter:
    """Writes sections one request each, as they are handed to it, and journals each as it lands."""

    def __init__(self, pool: BackendPool, spec: BookSpec, journal: Journal, sampler: Sampler, listener: BookListener):
        self.pool = pool
        self.spec = spec
        self.journal = journal
        self.sampler = sampler
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
        request = section_request(self.spec, outline, part, chapter, section, self.sampler)
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
