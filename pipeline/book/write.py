"""The writer: every section in its own request, through the pool, journaled as it lands.

A SectionWriter is handed sections (as soon as their chapter is planned) and keeps a SectionResult per
section. Each request opens with the book's shared block, the request itself (pipeline/templating.py's
book_context: the same for every request of the book, so a prefix cache reads it once), then
(templates/section.md) asks for a number of paragraphs that fits the word budget and
for a last full sentence, names the book, the request's audience and what it asks every part to have ('with
code examples') and the chapter, and last the section's own title and key point: in that order every
request of the book shares its opening and every request of a chapter its prompt up to its own title, which
is what an engine's prefix cache reuses (the demo book: 0.37 of prompt tokens from the cache with the
instructions last, 0.45 and 0.47 with them first; docs/measurements.md "Prefix cache"). That form was chosen by
measurement (examples/section_prompts.py, SmolLM2-135M): the siblings' titles and points as "covered
elsewhere, so not here" led the model to write its siblings' sections (on point 11 of 36), leaving them
out gave 19 of 36, leaving out the whole request and the chapter's point as well 65 of 96 over three runs.
Requests stay independent, so every section of a book can be in flight at once.

Each candidate is scored by meaning (pipeline/meaning/nearness.py): its margin is how much nearer it is to its
own title and point than to the nearest sibling's. `best_of` candidates are asked at once (best of three:
11 of 12 on point in the same measurement), and while every candidate is off its point up to
`off_point_retries` more, one at a time; the widest margin is kept.

An answer loses the chatter or echoed title before its first paragraph and any heading inside it (they
would read as sections of their own); a loop is cut where it starts, and an answer that stops at the token
cap is cut back to its last full sentence and marked `trimmed` (the raw answer is journaled beside it). A
request that failed on every backend is asked again later in the run (pipeline/book/later.py); a section
whose every attempt still failed comes back with `error` set, never as a finished section; it is journaled
too, so a resume asks it again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from string import Template

import anyio
from anyio.abc import TaskGroup

from pipeline.audit.rules import judges
from pipeline.backends.pool import BackendPool, RequestFailed
from pipeline.backends.sse import OnDelta
from pipeline.book.cite import Citing, sources_block, with_citations
from pipeline.book.hedges import Hedges
from pipeline.book.later import asked_until_answered
from pipeline.book.profiles import Sampler
from pipeline.book.trim import end_well, paragraphs_for, tidy_closing, tidy_opening, unfenced, without_headings
from pipeline.book.warm import Leader, PrefixGroups, first_token_everywhere
from pipeline.cpu import Stage, charged
from pipeline.journal import Journal
from pipeline.meaning.asks import request_style
from pipeline.meaning.embed import Embedder, open_embedder
from pipeline.meaning.floors import ON_SUBJECT
from pipeline.meaning.nearness import point_margin, unit
from pipeline.meaning.offensive import offensive_words
from pipeline.meaning.onsubject import subject_fits
from pipeline.meaning.reading import read
from pipeline.records import (
    Author,
    BookSpec,
    Chapter,
    ChatRequest,
    Completion,
    Outline,
    Part,
    Section,
    SectionResult,
    WarmSchedule,
    wants_children,
)
from pipeline.records.sources import Passage
from pipeline.templating import book_context, render, render_text
from pipeline.watch.events import SectionDelta, SectionRestarted, SectionStarted, SectionWritten
from pipeline.watch.listeners import BookListener


def style_note(request: str) -> str:
    """The request's audience and what it asks every part to have, as one sentence for the section prompt."""
    style = request_style(request)
    return f" The book is written {', '.join(style)}." if style else ""


def section_prompt(spec: BookSpec, outline: Outline, chapter: Chapter, section: Section, *, sources: str = "") -> str:
    """templates/section.md filled, or the spec's own section template (`--section-template`); `sources`, the
    passages' block (pipeline/book/cite.py), goes where the template says `$sources`, else before it."""
    values = dict(
        subject=read(spec.prompt).subject or outline.title,
        book_title=outline.title,
        chapter_title=chapter.title,
        style=style_note(spec.prompt),
        section_title=section.title,
        section_point=section.point or section.title,
        paragraphs=paragraphs_for(spec.words),
        words=spec.words,
        sources=sources,
    )
    if not spec.section_template:
        return render("section.md", **values)
    own = render_text(spec.section_template, **values)
    says_where = "sources" in Template(spec.section_template).get_identifiers()
    return own if says_where or not sources else sources + own


def section_request(
    spec: BookSpec,
    where: tuple[Outline, Chapter, Section],
    sampler: Sampler,
    candidate: int = 0,
    *,
    passages: list[Passage] | None = None,
) -> ChatRequest:
    """The section's request; candidate n > 0 (best of k) is sampled with its own seed; `passages` the source passages
    its prompt shows."""
    outline, chapter, section = where
    prompt = section_prompt(spec, outline, chapter, section, sources=sources_block(passages or []))
    tag = section.id if candidate == 0 else f"{section.id}#{candidate}"
    messages = [*book_context(spec.prompt), {"role": "user", "content": prompt}]
    request = sampler.request(messages, spec.max_tokens, tag)
    return request.model_copy(update={"passages": passages}) if passages else request


class WallClock:
    """Turns the client's monotonic timestamps into wall-clock seconds, so journaled times survive a resume."""

    def __init__(self) -> None:
        self.offset = time.time() - time.monotonic()

    def __call__(self, monotonic: float | None) -> float | None:
        return None if monotonic is None else monotonic + self.offset


def finished(section: Section, completion: Completion, wall: WallClock) -> SectionResult:
    """The journaled result: the opening tidied, a fence around the whole answer taken off (and the opening
    inside it tidied in turn, once its headings are out), headings inside the body taken out, and an answer
    cut at the cap ending on its last full sentence; when that changed the text, the raw answer is kept beside
    it."""
    tidied = tidy_opening(completion.text)
    inside = unfenced(tidied)
    opened, headings = without_headings(inside)
    if inside != tidied:
        opened = tidy_opening(opened)
    text = tidy_closing(end_well(opened, capped=completion.finish_reason == "length"))
    raw = completion.text if text != completion.text else None
    return SectionResult(
        id=section.id,
        title=section.title,
        text=text,
        trimmed=text != opened,
        raw_text=raw,
        headings_removed=headings,
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


def chapter_units(chapter: Chapter) -> list[str]:
    return [unit(s.title, s.point) for s in chapter.sections]


@charged(Stage.SECTION_SCORING)
def with_margin(
    embedder: Embedder, chapter: Chapter, section: Section, results: list[SectionResult]
) -> list[SectionResult]:
    """Each written result with its on-point margin (pipeline/meaning/nearness.py) against the chapter's units."""
    units = chapter_units(chapter)
    own = next(i for i, s in enumerate(chapter.sections) if s.id == section.id)
    return [
        r.model_copy(update={"margin": round(point_margin(embedder, r.text, units, own), 4)}) if r.ok else r
        for r in results
    ]


@charged(Stage.SECTION_SCORING)
def with_subject_fit(
    judge: Embedder, request: str, section: Section, results: list[SectionResult]
) -> list[SectionResult]:
    """Each written result with its fit to the request (pipeline/meaning/onsubject.py: the lower of its heading's and
    its opening's), as the audit's on_subject judges it."""
    written = [r for r in results if r.ok]
    fits = subject_fits(judge, request, [unit(section.title, section.point)] * len(written), [r.text for r in written])
    scores = {id(r): fit.score for r, fit in zip(written, fits)}
    return [r.model_copy(update={"subject_fit": round(scores[id(r)], 4)}) if id(r) in scores else r for r in results]


def offensive(result: SectionResult) -> bool:
    """A written candidate that uses a word a handbook would not print (pipeline/meaning/offensive.py)."""
    return result.ok and bool(offensive_words(result.text))


def on_subject(result: SectionResult) -> bool:
    """A written candidate the on-subject judge passes (or none judged it)."""
    return result.subject_fit is None or result.subject_fit >= ON_SUBJECT


def best_candidate(results: list[SectionResult]) -> SectionResult:
    """The written candidate with the widest on-point margin (the first on a tie) among those with no word a
    handbook would not print, and of those the ones on the subject (each set: all of them when none is); its record
    counts how many were written, the tokens of the others and every candidate's attempts. A section whose every
    candidate failed is the first failure."""
    written = [r for r in results if r.ok]
    if not written:
        return results[0]
    printable = [r for r in written if not offensive(r)] or written
    kept = [r for r in printable if on_subject(r)] or printable
    best = max(kept, key=lambda r: r.margin if r.margin is not None else -1.0)
    others = sum(r.completion_tokens or 0 for r in written if r is not best)
    attempts = [attempt for r in results for attempt in r.attempts]  # every attempt made for the section
    return best.model_copy(update={"candidates": len(results), "discarded_tokens": others, "attempts": attempts})


def off_point(results: list[SectionResult]) -> bool:
    """No written candidate is nearer its own point than a sibling's (with siblings to compare)."""
    margins = [r.margin for r in results if r.ok and r.margin is not None]
    return bool(margins) and max(margins) <= 0


def asked_again(results: list[SectionResult], author: Author) -> bool:
    """The section is worth another candidate: every written candidate has a defect the audit would flag in this
    kind of author's book (pipeline/audit/rules.py's `judges`): it is off its point (a small model's), or it has a
    word a handbook would not print. Off the subject alone is no reason: on the embedded engine a retry of each
    section the on-subject judge failed cost the demo 19 more answers and 40 s (job 141 s against 100 s), and the
    judge still passed 0.14 of it (SmolLM2-135M's texts drift whatever the prompt: docs/planning.md); where
    candidates are several, the judge chooses among them (best_candidate)."""
    written = [r for r in results if r.ok]
    if judges("off_point", author) and off_point(results):
        return True
    return judges("offensive", author) and bool(written) and all(offensive(r) for r in written)


@dataclass(frozen=True)
class WritePolicy:
    """How each section is asked: candidates at once, more while they have a defect of the author's kind (asked_again),
    the warm-up schedule; `judge` chooses among several candidates by their fit to the request (a small model's
    on-subject judge; None: not judged, as in a capable author's book, whose judge weighs a chapter against the whole
    book)."""

    best_of: int = 1
    off_point_retries: int = 0
    warm: WarmSchedule = WarmSchedule.OFF
    ready_after: Callable[[str], WarmSchedule] = first_token_everywhere  # a backend -> its engine's schedule
    judge: Embedder | None = None
    hedge: bool = False  # a second copy of a late section while the fleet has spare slots (Hedges)
    author: Author = Author.CAPABLE  # whose book it is: another candidate is asked only for a defect of its kind


@dataclass(frozen=True)
class Route:
    """Where a section's requests go: as its chapter's leader (warm.py), or to the backend to prefer."""

    leader: Leader | None = None
    prefer: str | None = None


def first_token_then(leader: Leader, on_delta: OnDelta) -> OnDelta:
    def both(text: str) -> None:
        leader.first_token(text)
        on_delta(text)

    return both


class SectionWriter:
    """Writes sections as they are handed to it and journals each as it lands: `best_of` candidates a
    section at once, then, while every candidate is nearer a sibling's point than its own, up to
    `off_point_retries` more, one at a time; the candidate with the widest on-point margin is kept. It tells
    its listener each section sent and landed (the run's clock, pipeline/book/timing.py, times them)."""

    def __init__(
        self,
        pool: BackendPool,
        spec: BookSpec,
        journal: Journal,
        sampler: Sampler,
        listener: BookListener,
        embedder: Embedder | None = None,
        policy: WritePolicy | None = None,
        citing: Citing | None = None,
    ):
        self.pool = pool
        self.citing = citing  # the user's sources: each section's passages (pipeline/book/cite.py)
        self.spec = spec
        self.journal = journal
        self.sampler = sampler
        self.listener = listener
        self.embedder = embedder or open_embedder()
        policy = policy or WritePolicy()
        self.best_of = policy.best_of
        self.off_point_retries = policy.off_point_retries
        self.judge = policy.judge
        self.author = policy.author
        self.hedges = Hedges(pool) if policy.hedge else None
        # a chapter's sections share their prompt up to their own title: its first leads (warm.py)
        self.groups = PrefixGroups(policy.warm, policy.ready_after)
        self.wall = WallClock()
        self.results: dict[str, SectionResult] = {}
        # the last section's first candidates in, and the last off-point retry's: the retry tail between them
        self.first_answers_done: float | None = None
        self.last_retry_done: float | None = None
        self.asked_later = 0  # section requests that failed on every backend and were asked again later
        self._whole: dict[str, anyio.Event] = {}  # chapter id -> set once every one of its sections is planned
        self._outline_complete = False

    def planned(self, chapter: Chapter) -> None:
        """Told of each section handed over (written or already journaled): once the chapter has all its
        sections, its candidates may be scored against every sibling."""
        if not wants_children(chapter, self.spec.sections):
            self._whole.setdefault(chapter.id, anyio.Event()).set()

    def outline_complete(self) -> None:
        """No chapter gains another section (planning ended, or the outline was loaded whole): a chapter
        short of the shape's count (an outline edited by hand) is not waited for."""
        self._outline_complete = True
        for event in self._whole.values():
            event.set()
        if self.hedges is not None:
            self.hedges.complete = True

    async def hedging(self) -> None:
        """Hand out hedges until the outline is complete and every section has landed (none without the `hedge`
        policy); started with the writing."""
        if self.hedges is not None:
            await self.hedges.run()

    async def _chapter_whole(self, chapter: Chapter) -> None:
        """A section sent as its line was planned is scored once its chapter is whole: its on-point margin
        and its retry see every sibling, as when the chapter is handed over whole."""
        if wants_children(chapter, self.spec.sections) and not self._outline_complete:
            await self._whole.setdefault(chapter.id, anyio.Event()).wait()

    @property
    def hedge_counts(self) -> tuple[int, int]:
        """Hedges sent, and those whose answer landed and needed no retry (Hedges)."""
        return (self.hedges.sent, self.hedges.kept) if self.hedges is not None else (0, 0)

    @property
    def retry_tail_seconds(self) -> float | None:
        """From the moment every section had its first answers to the last off-point retry's answer: what the
        retries, each asked once its first answer was scored, added to the job's end (0: none ended later;
        None: nothing written)."""
        if self.first_answers_done is None:
            return None
        return max(0.0, (self.last_retry_done or 0.0) - self.first_answers_done)

    async def write(self, outline: Outline, part: Part, chapter: Chapter, section: Section) -> None:
        """Write one section: its chapter's first leads, the others follow it (warm.py)."""
        leader = self.groups.lead(chapter.id)
        route = Route(leader=leader, prefer=None if leader else await self.groups.follow(chapter.id))
        self.listener.hear(SectionStarted(section.id, section.title))
        where = (outline, part, chapter, section)
        if self.hedges is not None:
            self.hedges.writing += 1
        try:
            await self._write(where, route, leader)
        finally:
            if self.hedges is not None:
                self.hedges.writing -= 1

    async def _write(self, where: tuple[Outline, Part, Chapter, Section], route: Route, leader: Leader | None) -> None:
        section = where[3]
        try:
            results, streamed, hedged = await self._first_answers(where, route)
        finally:
            if leader is not None:
                leader.finished()
        self.first_answers_done = time.monotonic()
        asked = self.best_of + hedged  # a hedge that went was the first retry's candidate
        for extra in range(asked, self.best_of + self.off_point_retries):
            if not asked_again(results, self.author):
                break
            retry = Route(prefer=leader.backend if leader is not None else route.prefer)
            results += await self._candidates(where, [extra], retry)
            self.last_retry_done = time.monotonic()
        result = best_candidate(await self._judged(section, results))
        if result.text != streamed and self.listener.wants_deltas:
            self.listener.hear(SectionRestarted(section.id))
            self.listener.hear(SectionDelta(section.id, result.text))
        self.journal.append(result)
        self.results[section.id] = result
        self.listener.hear(SectionWritten(result))

    async def _first_answers(
        self, where: tuple[Outline, Part, Chapter, Section], route: Route
    ) -> tuple[list[SectionResult], str | None, bool]:
        """The section's first candidates, and with the `hedge` policy its hedge once Hedges lets it go (as the first
        retry's candidate, to any backend): the first copy to land that needs no retry is kept and the other
        cancelled; one that needs a retry waits for the other if it went. Returns every landed candidate, the first
        candidates first, the text the listener heard stream (the first candidate's; None when cancelled), and whether
        a hedge went."""
        if self.hedges is None:
            results = await self._candidates(where, range(self.best_of), route)
            return results, results[0].text, False
        hedges, section_id, retries = self.hedges, where[3].id, self.off_point_retries > 0
        go = hedges.wait(section_id)
        landed: dict[str, list[SectionResult]] = {}

        async def copy(name: str, numbers: Iterable[int], copy_route: Route, group: TaskGroup) -> None:
            if name == "hedge":
                await go.wait()
            landed[name] = await self._candidates(where, numbers, copy_route)
            if not asked_again(landed[name], self.author) or not go.is_set():
                group.cancel_scope.cancel()  # kept; or the first candidates need a retry and no hedge went

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(copy, "first", range(self.best_of), route, group)
                group.start_soon(copy, "hedge", [self.best_of], Route(), group)
        finally:
            first = landed.get("first", [])
            retry = retries and asked_again(first, self.author)
            hedges.landed(section_id, backend=first[0].backend if first else None, retry=retry)
        hedges.kept += "hedge" in landed and not asked_again(landed["hedge"], self.author)
        return first + landed.get("hedge", []), first[0].text if first else None, go.is_set()

    async def _candidates(
        self, where: tuple[Outline, Part, Chapter, Section], numbers: Iterable[int], route: Route
    ) -> list[SectionResult]:
        """These candidates of one section, asked at once, each finished and scored by its on-point margin."""
        outline, part, chapter, section = where
        passages = await self._passages(outline, chapter, section)
        asked = (outline, chapter, section)
        requests = {n: section_request(self.spec, asked, self.sampler, n, passages=passages) for n in numbers}
        answers: dict[int, SectionResult] = {}

        async def one(number: int) -> None:
            answer = await self._candidate(section, requests[number], route, streamed=number == 0)
            answers[number] = with_citations(answer, passages)

        async with anyio.create_task_group() as group:
            for number in requests:
                group.start_soon(one, number)
        ordered = [answers[number] for number in requests]
        await self._chapter_whole(chapter)
        return await anyio.to_thread.run_sync(with_margin, self.embedder, chapter, section, ordered)

    async def _passages(self, outline: Outline, chapter: Chapter, section: Section) -> list[Passage]:
        """The section's source passages, as many as fit its prompt (found on a worker thread: numpy and the
        tokenizers leave the event loop free); none without sources."""
        if self.citing is None:
            return []
        prompt = "\n".join(m["content"] for m in book_context(self.spec.prompt))
        prompt += section_prompt(self.spec, outline, chapter, section)
        found = partial(self.citing.passages, chapter.title, section, prompt=prompt)
        return await anyio.to_thread.run_sync(found)

    async def _judged(self, section: Section, results: list[SectionResult]) -> list[SectionResult]:
        """The candidates with their fit to the request when the judge has a choice to make (two written or more);
        one alone is kept whatever its fit, and the audit judges the book (at 8x12x16 on two cores the judge on
        every lone section cost about 66 CPU-s)."""
        if self.judge is None or sum(r.ok for r in results) < 2:
            return results
        return await anyio.to_thread.run_sync(with_subject_fit, self.judge, self.spec.prompt, section, results)

    async def _candidate(
        self, section: Section, request: ChatRequest, route: Route, *, streamed: bool
    ) -> SectionResult:
        """One answer, finished; only the first candidate's text streams to a listener that wants it. A
        leader's first token is its siblings' sign under the `first-token` schedule."""
        listener, leader = self.listener, route.leader
        on_delta = on_retry = None
        if streamed and listener.wants_deltas:
            on_delta = lambda text: listener.hear(SectionDelta(section.id, text))  # noqa: E731
            on_retry = lambda: listener.hear(SectionRestarted(section.id))  # noqa: E731
        if leader is not None:  # its schedule is known once it is sent: its first token may be the sign
            on_delta = leader.first_token if on_delta is None else first_token_then(leader, on_delta)
        on_sent: Callable[[str], None] | None = leader.sent if leader is not None else None
        if streamed and self.hedges is not None:  # its pace says whether it is late (Hedges.late)
            on_delta, on_retry, on_sent = self.hedges.counted(section.id, on_delta, on_retry, on_sent)

        async def ask() -> Completion:
            return await self.pool.complete(request, on_delta, on_retry=on_retry, prefer=route.prefer, on_sent=on_sent)

        def later() -> None:
            self.asked_later += 1
            if on_retry is not None:
                on_retry()

        try:
            return finished(section, await asked_until_answered(self.pool, ask, on_later=later), self.wall)
        except RequestFailed as failure:
            return failed(section, failure)
