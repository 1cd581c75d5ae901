"""Repair: fix what the audit found, through the same pool, and keep every version in the journal.

Takes an open Fleet, the run's spec, outline and journal, and an AuditReport; returns a RepairOutcome
with the repaired SectionResults and the action taken for each. Per section, one action:
- failed or empty: asked again;
- duplicate or repeated title: re-titled (siblings and taken titles shown), then written again under the new title;
- truncated or looping: the text is cut where it starts repeating itself, then the model is asked to
  continue from where the text stopped (the text so far sent back as its own answer), sampling with
  penalties so that it does not loop again; the continuation is appended. If the cut leaves a near-empty
  section, it is asked again from the start with the same sampling;
- off its point (nearer a sibling's title and point than its own) or off the book: REFOCUS_CANDIDATES new
  candidates with seeds of their own, and the one nearest its point is kept, the old text included (a
  repair never leaves a section further from its point);
- headings inside its body: taken out, with no request;
- in a chapter the audit found off the request (its title and point not about what was asked): the chapter is
  planned again, title, point and sections, carrying what the book still lacks (replan_off_request, with the
  planner's own checks and judge), and each of its sections written anew.
A repaired section is appended to the journal as version + 1; the old line stays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from pipeline.audit.rules import word_floor
from pipeline.backends.pool import BackendPool, RequestFailed
from pipeline.book.cite import with_citations
from pipeline.book.later import asked_until_answered
from pipeline.book.plan.planner import Planner
from pipeline.book.plan.prompts import parse_book_title
from pipeline.book.profiles import Sampler
from pipeline.book.trim import cut_repeats, without_headings
from pipeline.book.write import WallClock, best_candidate, failed, finished, section_request, with_margin
from pipeline.journal import Journal
from pipeline.meaning.embed import Embedder
from pipeline.records import BookSpec, Chapter, ChatRequest, Completion, Outline, Part, Section, SectionResult
from pipeline.records.audit import AuditReport
from pipeline.records.sources import Passage
from pipeline.templating import render
from pipeline.text import FENCE
from pipeline.titles import plausible_title, title_key

RETITLE_ATTEMPTS = 3
# Text that looped at temperature 0 loops again when asked the same way: repairs of truncated or looping
# sections sample instead (measured on SmolLM2-135M: 4 of 4 sections looped at temperature 0, even with
# frequency_penalty 0.5; none did at these settings).
LOOP_ESCAPE_TEMPERATURE = 0.7
LOOP_ESCAPE_PENALTIES = {"frequency_penalty": 0.6, "presence_penalty": 0.3}
ACTIONS = {
    "failed": "rewrite",
    "empty": "rewrite",
    "repeated_section": "rewrite",
    "duplicate": "retitle",
    "repeated_title": "retitle",
    "truncated": "continue",
    "repetition_loop": "continue",
    "unclosed_fence": "continue",
    "off_point": "refocus",
    "off_book": "refocus",
    "stray_headings": "tidy",
    "offensive": "rewrite",
}
PRIORITY = ["replan", "retitle", "rewrite", "continue", "refocus", "tidy"]  # a retitle writes the section anew too
REFOCUS_CANDIDATES = 2
REFOCUS_FIRST = 100  # candidate numbers of a refocus start here, so their seeds differ from the writer's


@dataclass
class RepairOutcome:
    actions: dict[str, str] = field(default_factory=dict)  # section id -> action
    results: dict[str, SectionResult] = field(default_factory=dict)
    retitled: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (old, new)
    replanned: dict[str, tuple[str, str]] = field(default_factory=dict)  # chapter id -> (old title, new title)
    asked_later: int = 0  # requests that failed on every backend and were asked again later


async def replan_off_request(planner: Planner, outline: Outline, report: AuditReport) -> dict[str, tuple[str, str]]:
    """Plan the chapters the audit found off the request again (a part off it: each of its chapters), carrying
    the request's asks no title carries; returns chapter id -> (old title, new title)."""
    meaning = report.meaning
    off = set(meaning.off_request_ids) if meaning is not None else set()
    chapters = {c.id: c.title for p in outline.parts for c in p.chapters if c.id in off or p.id in off}
    if meaning is None or not chapters:
        return {}
    new = await planner.replan_chapters(outline, set(chapters), meaning.missing_asks)
    return {chapter.id: (chapters[chapter.id], chapter.title) for chapter in new}


def plan_actions(report: AuditReport, section_ids: set[str]) -> dict[str, str]:
    """One action per section: the strongest its defects call for (a figure calls for none)."""
    wanted: dict[str, str] = {}
    for defect in report.defects:
        action = ACTIONS.get(defect.rule)
        if action is None or defect.section_id not in section_ids or defect.rule in report.figure_rules:
            continue
        current = wanted.get(defect.section_id)
        if current is None or PRIORITY.index(action) < PRIORITY.index(current):
            wanted[defect.section_id] = action
    return wanted


class Repairer:
    def __init__(
        self,
        pool: BackendPool,
        spec: BookSpec,
        outline: Outline,
        journal: dict[str, SectionResult],
        sampler: Sampler,
        embedder: Embedder,
    ):
        self.embedder = embedder
        self.pool = pool
        self.spec = spec
        self.outline = outline
        self.journal = journal
        self.sampler = sampler
        self.wall = WallClock()
        self.taken = {title_key(s.title) for _, _, s in outline.sections()}
        self.asked_later = 0  # requests that failed on every backend and were asked again later

    async def repair(
        self, report: AuditReport, writer: Journal, replanned: dict[str, tuple[str, str]] | None = None
    ) -> RepairOutcome:
        """Fix each section the report's defects name; every section of a `replanned` chapter is written anew."""
        where = {s.id: (p, c, s) for p, c, s in self.outline.sections()}
        outcome = RepairOutcome(actions=plan_actions(report, set(where)), replanned=dict(replanned or {}))
        outcome.actions.update({s.id: "replan" for _, c, s in self.outline.sections() if c.id in outcome.replanned})

        async def fix(section_id: str, action: str) -> None:
            part, chapter, section = where[section_id]
            result = await self._fix(action, part, chapter, section, outcome)
            result = result.model_copy(
                update={"version": self.journal.get(section_id, result).version + 1, "repair": action}
            )
            writer.append(result)
            outcome.results[section_id] = result

        async with anyio.create_task_group() as group:
            for section_id, action in outcome.actions.items():
                group.start_soon(fix, section_id, action)
        outcome.asked_later = self.asked_later
        return outcome

    async def _fix(
        self, action: str, part: Part, chapter: Chapter, section: Section, outcome: RepairOutcome
    ) -> SectionResult:
        if action == "retitle":
            old = section.title
            section.title = await self._new_title(chapter, section)
            if section.title != old:
                outcome.retitled[section.id] = (old, section.title)
            return await self._rewrite(part, chapter, section)
        previous = self.journal.get(section.id)
        if action == "tidy" and previous is not None and previous.ok:
            text, removed = without_headings(previous.text)
            return previous.model_copy(update={"text": text, "headings_removed": previous.headings_removed + removed})
        if action == "refocus" and previous is not None and previous.ok:
            return await self._refocus(part, chapter, section, previous)
        if action == "continue" and previous is not None and previous.ok:
            so_far = cut_repeats(previous.text)
            if len(so_far.split()) >= word_floor(self.spec.words):
                return await self._continue(part, chapter, section, so_far)
            return await self._rewrite(part, chapter, section, escape_loops=True)
        return await self._rewrite(part, chapter, section)

    async def _send(self, request: ChatRequest) -> Completion | RequestFailed:
        """The answer, asked again later in the run while it fails on every backend (pipeline/book/later.py)."""
        try:
            return await asked_until_answered(self.pool, lambda: self.pool.complete(request), on_later=self._later)
        except RequestFailed as failure:
            return failure

    def _later(self) -> None:
        self.asked_later += 1

    async def _rewrite(
        self, part: Part, chapter: Chapter, section: Section, *, escape_loops: bool = False
    ) -> SectionResult:
        """Ask again; a section whose loop left too little to continue is asked with loop-escaping sampling."""
        request = self._section_request(part, chapter, section, escape_loops=escape_loops)
        answer = await self._send(request)
        return failed(section, answer) if isinstance(answer, RequestFailed) else self._finished(section, answer)

    async def _refocus(self, part: Part, chapter: Chapter, section: Section, previous: SectionResult) -> SectionResult:
        """New candidates with seeds of their own; the one nearest its point, the old text included, stays."""
        numbers = range(REFOCUS_FIRST + previous.version, REFOCUS_FIRST + previous.version + REFOCUS_CANDIDATES)
        where, passages = (self.outline, chapter, section), self._passages(section)
        requests = [section_request(self.spec, where, self.sampler, n, passages=passages) for n in numbers]
        answers: list[SectionResult] = []

        async def one(request: ChatRequest) -> None:
            answer = await self._send(request)
            answers.append(
                failed(section, answer) if isinstance(answer, RequestFailed) else self._finished(section, answer)
            )

        async with anyio.create_task_group() as group:
            for request in requests:
                group.start_soon(one, request)
        scored = await anyio.to_thread.run_sync(with_margin, self.embedder, chapter, section, [previous, *answers])
        return best_candidate(scored)

    async def _continue(self, part: Part, chapter: Chapter, section: Section, so_far: str) -> SectionResult:
        request = self._section_request(part, chapter, section, escape_loops=True)
        request.messages += [
            {"role": "assistant", "content": so_far},
            {"role": "user", "content": render("continue.md")},
        ]
        request.max_tokens = max(128, self.spec.max_tokens // 2)
        answer = await self._send(request)
        if isinstance(answer, RequestFailed):
            return self.journal[section.id].model_copy(update={"attempts": answer.attempts})
        joiner = "\n\n" if ends_block(so_far) else " "
        result = finished(section, answer, self.wall)
        previous = self.journal[section.id]
        whole = result.model_copy(
            update={
                "text": so_far + joiner + answer.text.strip(),
                "completion_tokens": (previous.completion_tokens or 0) + (answer.completion_tokens or 0),
            }
        )
        return with_citations(whole, self._passages(section))

    def _passages(self, section: Section) -> list[Passage]:
        """The source passages the section was first given: a repair asks with the same ones."""
        written = self.journal.get(section.id)
        return written.passages if written is not None else []

    def _finished(self, section: Section, answer: Completion) -> SectionResult:
        return with_citations(finished(section, answer, self.wall), self._passages(section))

    def _section_request(self, part: Part, chapter: Chapter, section: Section, *, escape_loops: bool) -> ChatRequest:
        where = (self.outline, chapter, section)
        request = section_request(self.spec, where, self.sampler, passages=self._passages(section))
        if escape_loops:
            request.extra.update(LOOP_ESCAPE_PENALTIES)
            request.temperature = max(request.temperature, LOOP_ESCAPE_TEMPERATURE)
        return request

    async def _new_title(self, chapter: Chapter, section: Section) -> str:
        siblings = "; ".join(f'"{s.title}"' for s in chapter.sections)
        for _ in range(RETITLE_ATTEMPTS):
            prompt = render(
                "retitle.md",
                book_title=self.outline.title,
                chapter_title=chapter.title,
                siblings=siblings,
                section_title=section.title,
                taken=siblings,
            )
            request = self.sampler.request(
                [{"role": "user", "content": prompt}],
                128,
                f"retitle {section.id}",
                temperature=max(0.7, self.sampler.profile.temperature),
            )
            answer = await self._send(request)
            title = "" if isinstance(answer, RequestFailed) else parse_book_title(answer.text)
            if title and plausible_title(title) and title_key(title) not in self.taken:
                self.taken.add(title_key(title))
                return title
        return section.title


def ends_block(text: str) -> bool:
    """A continuation starts a paragraph of its own after a sentence's end or a fence line (``` or ~~~), and goes
    on the same line after a cut sentence."""
    return text.endswith((".", "!", "?")) or bool(FENCE.match(text.rsplit("\n", 1)[-1]))
