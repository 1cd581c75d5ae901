"""The planner: BookSpec -> Outline, pipelined or level by level.

One request for the book title and its parts; one per part for its chapters; one per chapter for its
sections. Every unit is planned with a title and a key point (one sentence on what it covers, so its
siblings know what to leave to it), asked as a numbered list of `Heading: sentence` lines after one worked
example (templates/plan_*.md). That format was measured on SmolLM2-135M (examples/planning_formats.py):
of 40 headings asked, JSON with a schema gave 28 usable titles and no points, a described list 12, the
worked example 33, each with its point. Lines are read as they stream, so the level below (and the writing
of a chapter's sections) starts before an answer ends.

Each title is checked in code (titles.refusal): a title that echoes its parent, the book title or the
request, looks like an identifier or a JSON key, nearly repeats a sibling or a title of its level elsewhere
in the book (as the audit's near-duplicate rule would find), comes from the worked example, or is taken
elsewhere in the book is refused. Then by meaning (pipeline/audit/meaning.py, the audit's own judgements and
thresholds): a title that says what a sibling's or another title of its level says, a title and point a
writer could not tell from a sibling's, a title and point copied from a worked example, a point that says
nothing of its own. The request's asks (its subject's parts, list items, span ends) are carried down the
plan (Coverage): each node takes along those the nodes after it could not hold, and the last section slots
are kept for them. What is still missing is asked again with the refused titles and their reasons shown, up
to `plan_attempts` times; every ask requests SPARE_ITEMS more than it needs (the answer is cut once enough
are taken, so a spare costs nothing unless a line is refused). Where the model's lines are being refused
(the share taken so far, in the book and at the node), more than one ask of a node is kept in flight, so a
small model that repeats itself needs fewer answers one after another (asks_at_once); a model whose lines
pass gets one ask at a time. Then a refused item's own key point, short enough to read as a heading and
passing the same checks, becomes its title; then a title refused only for nearly repeating one elsewhere in
the book is kept (a lesser fault); only then is a numbered placeholder used, flagged in the outline and
counted. Model output is untrusted: nothing in an answer raises. An ask whose request failed on every backend
is asked again later in the run (pipeline/book/later.py) while the rest of the book goes on; one that never
gets an answer counts as a failed ask, and the node goes on with its other asks: no node ends the job.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, TypeVar

import anyio
import numpy as np
from anyio.abc import TaskGroup

from pipeline.audit.asks import request_asks
from pipeline.audit.embed import Embedder, open_embedder
from pipeline.audit.meaning import (
    SIMILAR_TITLE,
    carries,
    nearest_example,
    point_vagueness,
    title_near,
    unit,
    unit_near,
)
from pipeline.backends.pool import BackendPool, RequestFailed
from pipeline.book.later import asked_until_answered
from pipeline.book.profiles import Sampler
from pipeline.records import BookSpec, Chapter, Completion, Node, Outline, Part, Section
from pipeline.templating import example_answer, render_chat
from pipeline.titles import (
    MAX_HEADING_WORDS,
    TitleIndex,
    borrows_from,
    clean_title,
    content_words,
    refusal,
    title_key,
)

log = logging.getLogger("fanout")
REASK_TEMPERATURES = (0.4, 0.7, 0.7)  # a re-ask at temperature 0 tends to repeat the refused answer
TOKENS_PER_ITEM = 48  # a heading and its sentence
MAX_POINT_CHARS = 240
SHOWN_REFUSALS = 30
SPARE_ITEMS = 4  # asked for beyond the need: a refused line costs no round, and the answer is cut once enough
MAX_ASKS_AT_ONCE = 3  # asks of one node sent side by side when its model's lines are being refused
ACCEPTANCE_PRIOR_ITEMS = 4  # a node's own items weigh against the book's share as if the book had this many
ELSEWHERE_NEAR = ", a title elsewhere in the book"


@dataclass
class PlanStats:
    requests: int = 0
    reasked: int = 0  # asks beyond each node's first
    widened: int = 0  # asks sent while another ask of the same node was still answering
    placeholders: int = 0
    cut_short: int = 0  # answers cancelled once they had given every title needed
    cut_at_count: int = 0  # answers cancelled, short of titles, once they had given as many lines as asked
    seconds: float = 0.0
    levels: list[int] = field(default_factory=list)  # requests per level: 1 -> P -> P*C
    missing_points: int = 0  # titles taken without a key point
    headings_from_points: int = 0  # refused titles replaced by their own key point
    near_repeats_kept: int = 0  # titles nearly repeating one elsewhere, kept rather than a placeholder
    asks_dropped: int = 0  # asks of the request no section carries after every ask
    asked_later: int = 0  # asks that failed on every backend and were asked again later in the run
    failed_asks: int = 0  # asks that failed on every backend every time (the node took its last resorts)
    refused: list[tuple[str, str, str]] = field(default_factory=list)  # (node id, title, reason), for run.log

    @property
    def refusals(self) -> Counter[str]:
        """Reason (without the title it names) -> titles refused for it."""
        return Counter(reason.split(' "')[0] for _, _, reason in self.refused)


@dataclass
class Acceptance:
    """Of the plan items an answer gave (not counting repeats of titles already chosen), how many were taken."""

    considered: int = 0
    taken: int = 0

    def share(self, prior: float = 1.0) -> float:
        """The taken share, starting from `prior` and moving to what was seen as items come in."""
        return (self.taken + ACCEPTANCE_PRIOR_ITEMS * prior) / (self.considered + ACCEPTANCE_PRIOR_ITEMS)


def asks_at_once(need: int, share: float) -> int:
    """How many asks of one node to send side by side: enough that, at the taken share seen so far, their
    items together are expected to hold `need` (each asks for SPARE_ITEMS more). A model whose lines are
    rarely refused gets one ask; a small model that repeats itself gets up to MAX_ASKS_AT_ONCE, so a node
    needs fewer rounds, one after another, to fill its titles."""
    expected = (need + SPARE_ITEMS) * max(share, 0.05)
    return max(1, min(MAX_ASKS_AT_ONCE, math.ceil(need / expected)))


@dataclass(frozen=True)
class PlanItem:
    title: str
    point: str = ""


# ---------------------------------------------------------------- reading answers

ITEM_LINE = re.compile(r"^\s*(?:\d{1,3}\s*[.):]|[-*•])\s+(.+?)\s*$")
TITLE_LINE = re.compile(r"^\s*[*_#\s]*(?:book\s+)?title[*_]*\s*:\s*(.+?)\s*$", re.I)
SPLIT = re.compile(r"^(.+?)(?:\*\*|__)?\s*(?::|;|\s[-–—]\s)\s*(.+)$")
QUESTION = re.compile(r"^([^?]{3,}\?)\s+(\S.+)$")  # a question as the heading, the rest as its point


def parse_item(body: str) -> PlanItem:
    """`Heading: sentence` (or `**Heading** - sentence`, `"Heading" — sentence`, `Heading; sentence`,
    `Question? sentence`) -> PlanItem."""
    match = SPLIT.match(body) or QUESTION.match(body)
    if not match:
        return PlanItem(clean_title(body))
    return PlanItem(clean_title(match.group(1)), clean_point(match.group(2)))


NOTE_IN_POINT = re.compile(r"\s*\([^()]*\b(?:repeats?|refused|already|chosen|elsewhere|covers what)\b.*$", re.I)


def clean_point(text: str) -> str:
    """A key point as the model gave it, without Markdown marks, and without a re-ask's note it copied back
    ('… (nearly repeats "X", a title elsewhere in the book)')."""
    point = " ".join(re.sub(r"[#*_`>\[\]{}]", "", text).split()).strip(" \"'“”-–—:")
    point = NOTE_IN_POINT.sub("", point).strip(" ,;:-–—")
    if len(point) > MAX_POINT_CHARS:
        point = point[:MAX_POINT_CHARS].rsplit(" ", 1)[0] + "…"
    return point


def find_json(text: str) -> Any:
    """The first JSON object or array in the text (fences and chatter around it are ignored), or None."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, (dict, list)):
            return value
    return None


def json_items(text: str) -> list[PlanItem]:
    """Items from an answer that came as JSON after all: a list, or the first list in an object."""
    value = find_json(text)
    if isinstance(value, dict):
        value = next((v for v in value.values() if isinstance(v, list)), [])
    if not isinstance(value, list):
        return []
    items = []
    for entry in value:
        if isinstance(entry, dict):
            items.append(PlanItem(clean_title(entry), clean_point(str(entry.get("point") or ""))))
        elif isinstance(entry, str):
            items.append(parse_item(entry))
    return items


def parse_items(text: str) -> list[PlanItem]:
    """Every numbered (or bulleted) `Heading: sentence` line of a whole answer; failing that, JSON."""
    items = [parse_item(match.group(1)) for line in text.splitlines() if (match := ITEM_LINE.match(line))]
    return [item for item in items or json_items(text) if len(item.title) >= 2]


def parse_book_title(text: str) -> str:
    for line in text.splitlines():
        if match := TITLE_LINE.match(line):
            return clean_title(match.group(1))
    value = find_json(text)
    return clean_title(value.get("title", "")) if isinstance(value, dict) else ""


class ItemStream:
    """Plan items read from an answer while it streams: each line the moment its newline arrives, so the
    level below can be asked before the answer ends. The last line is read when the answer ends."""

    def __init__(self) -> None:
        self.text = ""
        self.position = 0  # where the next unread line starts
        self.title = ""
        self.taken: list[PlanItem] = []  # every item handed out, to be skipped in the final parse

    def feed(self, delta: str) -> list[PlanItem]:
        self.text += delta
        items = []
        while (end := self.text.find("\n", self.position)) >= 0:
            items += self._line(self.text[self.position : end])
            self.position = end + 1
        self.taken += items
        return items

    def _line(self, line: str) -> list[PlanItem]:
        if not self.title and (match := TITLE_LINE.match(line)):
            self.title = clean_title(match.group(1))
            return []
        match = ITEM_LINE.match(line)
        item = parse_item(match.group(1)) if match else None
        return [item] if item is not None and len(item.title) >= 2 else []

    def untaken(self, items: list[PlanItem]) -> list[PlanItem]:
        """The items of the whole answer that the stream did not already hand out."""
        left = list(self.taken)
        fresh = []
        for item in items:
            if item in left:
                left.remove(item)
            else:
                fresh.append(item)
        return fresh


# ---------------------------------------------------------------- asking


def how_many(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def heading_from_point(point: str) -> str:
    """A refused title's key point as its heading ('How vaccines protect against disease.' -> 'How Vaccines
    Protect Against Disease'): the model's own words, so better than a numbered placeholder. Empty when the
    point is too long to read as a heading."""
    text = clean_title(point.rstrip("…"))
    words = text.split()
    if not words or len(words) > MAX_HEADING_WORDS:
        return ""
    small = {"a", "an", "the", "of", "and", "or", "to", "in", "on", "for", "with", "by", "at", "as"}
    return " ".join(
        w if (i and w.casefold() in small) or not w[:1].islower() else w[:1].upper() + w[1:]
        for i, w in enumerate(words)
    )


def about(what: str, point: str) -> str:
    return f" The {what} covers: {point}" if point else ""


def avoid_note(chosen: list[str], refused: list[tuple[str, str]]) -> str:
    """What a re-ask must not give again: the headings already chosen, and the refused ones with the reason."""
    lines = []
    if chosen:
        lines.append("Already chosen, do not repeat: " + "; ".join(f'"{t}"' for t in chosen[-SHOWN_REFUSALS:]) + ".")
    if refused:
        lines.append(
            "Refused, do not use again: " + "; ".join(f'"{t}" ({why})' for t, why in refused[-SHOWN_REFUSALS:]) + "."
        )
    return ("\n" + "\n".join(lines)) if lines else ""


PLAN_TEMPLATES = ("plan_book.md", "plan_part.md", "plan_chapter.md")


def example_words(template: str) -> frozenset[str]:
    """The content words of a worked example's headings: a heading built from them was copied."""
    items = parse_items(example_answer(template))
    return frozenset(word for item in items for word in content_words(item.title))


def example_units() -> list[str]:
    """Every worked example's items as `title: point`: a planned item near one of them was copied."""
    return [unit(item.title, item.point) for name in PLAN_TEMPLATES for item in parse_items(example_answer(name))]


def must_note(musts: list[str], noun: str) -> str:
    """What the request asks of this node's children, for its planning prompt."""
    if not musts:
        return ""
    return f"\nThe request asks for these, so include a {noun} on each: " + "; ".join(musts) + "."


class MeaningIndex:
    """The titles of one level across the book, embedded as they are taken: a new title that says what one
    of them says (pipeline/audit/meaning.py's SIMILAR_TITLE, the audit's own) is refused."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.titles: list[str] = []
        self.vectors = np.zeros((0, 0), dtype=np.float32)

    def add(self, title: str) -> None:
        row = self.embedder.embed([title])
        self.vectors = row if not self.titles else np.vstack([self.vectors, row])
        self.titles.append(title)

    def near(self, title: str) -> str | None:
        """The first title of the book at this level that says what `title` says, or None."""
        if not self.titles:
            return None
        scores = self.vectors @ self.embedder.embed([title])[0]
        best = int(np.argmax(scores))
        return self.titles[best] if scores[best] >= SIMILAR_TITLE else None


OnSection = Callable[[Outline, Part, Chapter, Section], None]
OnChange = Callable[[Outline], None]
_T = TypeVar("_T")


def next_id(prefix: str, letter: str, taken: Sequence[Node]) -> str:
    """The lowest free child id: a resumed chapter may hold journaled sections with gaps between them."""
    used = {node.id for node in taken}
    number = 1
    while f"{prefix}{letter}{number:02d}" in used:
        number += 1
    return f"{prefix}{letter}{number:02d}"


def id_number(node_id: str) -> int:
    return int(re.sub(r"\D", "", node_id.rsplit(".", 1)[-1]))


class Coverage:
    """The asks of the request that one node's children must carry. Above the sections, nothing is refused
    for them: each child takes along, for its own children, as many of the open asks (the nearest it) as
    the slots left after it could no longer hold. Among sections, the last slots are kept for them: once
    as few slots are left as asks are open, an item that carries none is refused."""

    def __init__(self, embedder: Embedder, musts: list[str], *, leaf: bool) -> None:
        self.embedder = embedder
        self.open = musts
        self.leaf = leaf

    def carried(self, item: PlanItem) -> list[str]:
        text = unit(item.title, item.point)
        return [ask for ask in self.open if carries(self.embedder, ask, [text])]

    def refusal(self, item: PlanItem, slots_left: int) -> str | None:
        if not self.leaf or not self.open or slots_left > len(self.open) or self.carried(item):
            return None
        return "leaves out what the request asks for: " + "; ".join(self.open)

    def take(self, item: PlanItem, slots_after: int) -> list[str]:
        """Mark what the taken item carries; return the asks it takes along for its children."""
        for ask in self.carried(item):
            self.open.remove(ask)
        surplus = len(self.open) - slots_after
        if self.leaf or surplus <= 0:
            return []
        text = self.embedder.embed([unit(item.title, item.point)])[0]
        nearest = sorted(self.open, key=lambda ask: -float(self.embedder.embed([ask])[0] @ text))[:surplus]
        self.open = [ask for ask in self.open if ask not in nearest]
        return nearest


class OnItem(Protocol):
    """Told of each item a node's ask settles on: whether it is a placeholder, and the asks its children carry."""

    def __call__(self, item: PlanItem, *, placeholder: bool, musts: list[str]) -> None: ...


class TakeItem(Protocol):
    def __call__(self, item: PlanItem, *, placeholder: bool = False) -> None: ...


@dataclass
class NodeAsk:
    """One node's planning question: its template and values, what its titles must not echo, and where
    its chosen items go."""

    template: str
    values: dict[str, Any]
    level: str  # parts, chapters, sections
    count: int
    have: list[str]  # titles the node already has (a resumed run)
    ancestors: dict[str, str]  # 'the chapter title' -> its text
    on_item: OnItem
    node_id: str
    fallback_prefix: str = ""
    with_title: bool = False
    musts: list[str] = field(default_factory=list)  # asks of the request this node's children must carry


class Planner:
    def __init__(
        self,
        pool: BackendPool,
        spec: BookSpec,
        sampler: Sampler,
        on_node: Callable[[str], None] | None = None,
        embedder: Embedder | None = None,
    ):
        self.pool = pool
        self.on_node = on_node or (lambda level: None)
        self.spec = spec
        self.sampler = sampler
        self.embedder = embedder or open_embedder()
        self.stats = PlanStats()
        self.acceptance = Acceptance()  # over the whole book: how many asks of a node go out at once
        self.book_keys: dict[str, set[str]] = {"parts": set(), "chapters": set(), "sections": set()}
        self.book_titles: dict[str, TitleIndex] = {level: TitleIndex() for level in ("parts", "chapters", "sections")}
        self.meanings: dict[str, MeaningIndex] = {level: MeaningIndex(self.embedder) for level in self.book_keys}
        self.book_title = ""
        self.examples = example_units()
        self.asks = request_asks(spec.prompt)
        self.musts: dict[str, list[str]] = {"book": self.asks[1:]}  # node id -> asks its children must carry

    async def plan(
        self,
        outline: Outline | None = None,
        *,
        barrier: bool = False,
        on_section: OnSection | None = None,
        on_change: Callable[[Outline], None] | None = None,
    ) -> Outline:
        """Plan what `outline` (a partial one from an interrupted run, or None) still lacks.

        Pipelined (the default): items are read from each answer as it streams, so a part's chapters are
        asked the moment the part has arrived, and a chapter's sections are announced to `on_section` the
        moment the chapter has every one of them, so writing starts while the rest is still being planned.
        Sections wait for their chapter's last title (a section's request needs only its own, but its
        on-point score needs its siblings), and the wait also keeps planning quicker on a loaded fleet:
        announced one by one, sections filled six FAKE step-law engines while the titles still to come
        streamed at the full batch's step time (8x12x16: whole job 0.841 of sustained against 0.852 with the
        wait; `fanout efficiency`). `barrier=True` waits for each whole level (seed 003's schedule) and
        announces every section at the end. `on_change` sees the outline after every planned node, to save
        it."""
        started = time.monotonic()
        changed = on_change or (lambda _: None)
        announce = on_section or (lambda outline, part, chapter, section: None)
        if outline is not None:
            self._claim_existing(outline)
            self.book_title = outline.title
        self.stats.levels = [1, self.spec.parts, self.spec.parts * self.spec.chapters]
        if barrier:
            outline = await self._plan_levels(outline, changed)
            for part, chapter, section in outline.sections():
                announce(outline, part, chapter, section)
        else:  # writing fills the slots meanwhile: keep one a backend for planning answers
            with self.pool.reserve_for_first():
                async with anyio.create_task_group() as group:
                    outline = await self._plan_pipelined(outline, group, announce, changed)
        assert outline is not None, "both schedules return the outline (a failed task raises out of the group)"
        outline.complete = True
        changed(outline)
        self.stats.seconds = time.monotonic() - started
        return outline

    async def _plan_levels(self, outline: Outline | None, changed: OnChange) -> Outline:
        if outline is None or len(outline.parts) < self.spec.parts:
            outline = await self._plan_book(outline)
            changed(outline)
        await self._each(
            [pt for pt in outline.parts if len(pt.chapters) < self.spec.chapters],
            lambda pt: self._plan_part(outline, pt, changed=changed),
        )
        await self._each(
            [(pt, ch) for pt in outline.parts for ch in pt.chapters if len(ch.sections) < self.spec.sections],
            lambda pair: self._plan_chapter(outline, *pair, changed=changed),
        )
        return outline

    async def _plan_pipelined(
        self, outline: Outline | None, group: TaskGroup, announce: OnSection, changed: OnChange
    ) -> Outline:
        starter = _Starter(self, group, announce, changed)
        if outline is not None:
            for part in list(outline.parts):
                starter.part(outline, part)
        if outline is None or len(outline.parts) < self.spec.parts:
            outline = await self._plan_book(outline, starter.part)
            changed(outline)
        return outline

    def _claim_existing(self, outline: Outline) -> None:
        """Titles an interrupted run already planned stay taken."""
        for pt in outline.parts:
            self._claim("parts", PlanItem(pt.title, pt.point), near=False)
            for ch in pt.chapters:
                self._claim("chapters", PlanItem(ch.title, ch.point), near=False)
                for section in ch.sections:
                    self._claim("sections", PlanItem(section.title, section.point), near=False)

    @staticmethod
    async def _each(items: list[_T], plan_one: Callable[[_T], Coroutine[Any, Any, None]]) -> None:
        async with anyio.create_task_group() as group:
            for item in items:
                group.start_soon(plan_one, item)

    async def _plan_book(
        self, outline: Outline | None, on_part: Callable[[Outline, Part], None] | None = None
    ) -> Outline:
        """The book title and the parts still missing. Parts are added (and `on_part` told) as they stream
        in, once the book title, which their own prompts need, is known."""
        waiting: list[tuple[PlanItem, bool, list[str]]] = []

        def add_waiting(*, final: bool = False) -> None:
            nonlocal outline
            if outline is None:
                if not (self.book_title or final):
                    return
                outline = Outline(
                    title=self.book_title or fallback_book_title(self.spec.prompt), parts=[], complete=False
                )
            for item, placeholder, musts in waiting:
                part = Part(
                    id=next_id("", "p", outline.parts), title=item.title, point=item.point, placeholder=placeholder
                )
                self.musts[part.id] = musts
                outline.parts.append(part)
                if on_part is not None:
                    on_part(outline, part)
            waiting.clear()

        def add(item: PlanItem, *, placeholder: bool, musts: list[str]) -> None:
            waiting.append((item, placeholder, musts))
            add_waiting()

        await self._titles(
            NodeAsk(
                "plan_book.md",
                {"prompt": self.spec.prompt, "must": must_note(self.musts["book"], "part")},
                "parts",
                self.spec.parts,
                have=[part.title for part in outline.parts] if outline else [],
                ancestors={"the request": self.spec.prompt},
                on_item=add,
                node_id="book",
                with_title=True,
                musts=self.musts["book"],
            )
        )
        add_waiting(final=True)
        assert outline is not None, "add_waiting(final=True) makes the outline"
        self.on_node("parts")
        return outline

    async def _plan_part(
        self,
        outline: Outline,
        part: Part,
        on_chapter: Callable[[Chapter], None] | None = None,
        changed: OnChange | None = None,
    ) -> None:
        def add(item: PlanItem, *, placeholder: bool, musts: list[str]) -> None:
            chapter = Chapter(
                id=next_id(part.id + ".", "c", part.chapters),
                title=item.title,
                point=item.point,
                placeholder=placeholder,
            )
            self.musts[chapter.id] = musts
            part.chapters.append(chapter)
            if on_chapter is not None:
                on_chapter(chapter)

        musts = self.musts.get(part.id, [])
        values = {
            "book_title": outline.title,
            "part_title": part.title,
            "part_about": about("part", part.point),
            "must": must_note(musts, "chapter"),
        }
        ancestors = {"the part title": part.title, "the book title": outline.title, "the request": self.spec.prompt}
        await self._titles(
            NodeAsk(
                "plan_part.md",
                values,
                "chapters",
                self.spec.chapters,
                [chapter.title for chapter in part.chapters],
                ancestors,
                add,
                part.id,
                fallback_prefix=part.title,
                musts=musts,
            )
        )
        self.on_node("chapters")
        if changed is not None:
            changed(outline)

    async def _plan_chapter(
        self,
        outline: Outline,
        part: Part,
        chapter: Chapter,
        on_complete: Callable[[], None] | None = None,
        changed: OnChange | None = None,
    ) -> None:
        def add(item: PlanItem, *, placeholder: bool, musts: list[str]) -> None:
            section = Section(
                id=next_id(chapter.id + ".", "s", chapter.sections),
                title=item.title,
                point=item.point,
                placeholder=placeholder,
            )
            chapter.sections.append(section)
            chapter.sections.sort(key=lambda s: id_number(s.id))
            if on_complete is not None and len(chapter.sections) == self.spec.sections:
                on_complete()

        musts = self.musts.get(chapter.id, [])
        values = {
            "book_title": outline.title,
            "chapter_title": chapter.title,
            "chapter_about": about("chapter", chapter.point),
            "must": must_note(musts, "section"),
        }
        ancestors = {
            "the chapter title": chapter.title,
            "the part title": part.title,
            "the book title": outline.title,
            "the request": self.spec.prompt,
        }
        await self._titles(
            NodeAsk(
                "plan_chapter.md",
                values,
                "sections",
                self.spec.sections,
                [section.title for section in chapter.sections],
                ancestors,
                add,
                chapter.id,
                fallback_prefix=chapter.title,
                musts=musts,
            )
        )
        self.on_node("sections")
        if changed is not None:
            changed(outline)

    async def _titles(self, ask: NodeAsk) -> None:
        """Ask until `ask.count` items are in hand, telling `ask.on_item` of each new one as soon as it has
        streamed in; refused titles are shown, with their reasons, to the next ask."""
        chosen = list(ask.have)
        units = {title: title for title in ask.have}  # a chosen title -> its title and point
        refused: list[tuple[str, str]] = []
        spare: list[tuple[PlanItem, str]] = []  # refused items and why: the last resorts before placeholders
        # a word of the example that the request or this node's own question uses is the book's word too
        # ('cloud' in the sections of a chapter "Building a Cloud Platform")
        own_words = " ".join([self.spec.prompt, *map(str, ask.values.values()), *ask.ancestors.values()])
        copied = example_words(ask.template) - content_words(own_words)
        coverage = Coverage(self.embedder, list(ask.musts), leaf=ask.level == "sections")

        def take(item: PlanItem, *, placeholder: bool = False) -> None:
            chosen.append(item.title)
            units[item.title] = unit(item.title, item.point)
            ask.on_item(item, placeholder=placeholder, musts=coverage.take(item, ask.count - len(chosen)))

        seen = Acceptance()  # this node's own items

        def consider(item: PlanItem) -> None:
            if len(chosen) == ask.count or any(title_key(item.title) == title_key(t) for t in chosen):
                return  # a retried attempt repeating its streamed part, or an ask beside it giving the same
            reason = self._refusal(item, ask, chosen, copied, coverage, list(units.values()))
            for counts in (seen, self.acceptance):
                counts.considered += 1
                counts.taken += reason is None
            if reason is not None:
                refused.append((item.title, reason))
                spare.append((item, reason))
                self.stats.refused.append((ask.node_id, item.title, reason))
                return
            self.stats.missing_points += not item.point
            take(item)

        await self._fill(ask, chosen, refused, consider, seen)
        self._last_resorts(ask, chosen, spare, copied, take, units)
        if coverage.open:
            self.stats.asks_dropped += len(coverage.open)
            log.info("under %s no %s carries %s", ask.node_id, ask.level[:-1], "; ".join(coverage.open))

    async def _fill(
        self,
        ask: NodeAsk,
        chosen: list[str],
        refused: list[tuple[str, str]],
        consider: Callable[[PlanItem], None],
        seen: Acceptance,
    ) -> None:
        """Ask until `ask.count` titles are chosen or `plan_attempts` asks were made. As many asks stay in
        flight as the taken share so far says the need takes (asks_at_once): when one ends short, the next
        goes out at once, showing what was chosen and refused until then, without waiting for the others.
        Asks beside another count against `plan_attempts` too: letting them come on top doubled the demo's
        planning (37 -> 63 requests, 101 -> 200 s) for no better titles (`fanout quality`, sourdough)."""
        asked = running = beside = 0
        ended = anyio.Event()

        def full() -> bool:
            return len(chosen) == ask.count

        async def one(number: int, messages: list[dict[str, str]], items: int) -> None:
            nonlocal running
            try:
                tag = f"plan:{ask.node_id}:{number}"
                temperature = self._temperature(number)
                await self._ask(
                    messages, items, tag, temperature, with_title=ask.with_title, consider=consider, enough=full
                )
            except RequestFailed as failure:  # a node's planning never ends the job: its other asks go on
                self.stats.failed_asks += 1
                log.warning("planning %s: %s", ask.node_id, failure)
            finally:
                running -= 1
                ended.set()

        async with anyio.create_task_group() as group:
            while not full() and (asked < self.spec.plan_attempts or running):
                need = ask.count - len(chosen)
                width = asks_at_once(need, seen.share(self.acceptance.share()))
                while running < width and asked < self.spec.plan_attempts:
                    messages = render_chat(
                        ask.template,
                        **ask.values,
                        how_many=how_many(need + SPARE_ITEMS, ask.level[:-1]),
                        avoid=avoid_note(chosen, refused),
                    )
                    group.start_soon(one, asked, messages, need + SPARE_ITEMS)
                    beside += running > 0
                    asked += 1
                    running += 1
                await ended.wait()
                ended = anyio.Event()
            group.cancel_scope.cancel()  # full: an ask beside the last one would only hold a slot
        self.stats.reasked += asked - 1
        self.stats.widened += beside

    def _last_resorts(
        self,
        ask: NodeAsk,
        chosen: list[str],
        spare: list[tuple[PlanItem, str]],
        copied: frozenset[str],
        take: TakeItem,
        units: dict[str, str],
    ) -> None:
        """Fill what the asks left: a refused item's point as its heading; then a title refused only for
        nearly repeating one elsewhere in the book (a lesser fault than a placeholder); then placeholders."""
        for item, _ in spare:
            heading = PlanItem(heading_from_point(item.point), item.point)
            if (
                len(chosen) < ask.count
                and heading.title
                and self._refusal(heading, ask, chosen, copied, None, list(units.values())) is None
            ):
                self.stats.headings_from_points += 1
                take(heading)
        for item, reason in spare:
            if (
                len(chosen) < ask.count
                and reason.endswith(ELSEWHERE_NEAR)
                and refusal(item.title, ask.ancestors, chosen) is None
                and self._claim(ask.level, item, near=False) is None
            ):
                self.stats.near_repeats_kept += 1
                take(item)
        for title in self._placeholders(ask.level, ask.fallback_prefix, ask.count, len(chosen)):
            take(PlanItem(title), placeholder=True)

    def _refusal(
        self,
        item: PlanItem,
        ask: NodeAsk,
        chosen: list[str],
        copied: frozenset[str],
        coverage: Coverage | None = None,
        sibling_units: list[str] | None = None,
    ) -> str | None:
        """Why this item cannot be taken, or None (then its title is claimed for the book): the title checks
        of pipeline/titles.py, then by meaning: its title says what a sibling's says, or its title and point
        cannot be told apart from a sibling's, it was copied from a worked example, its point is vague, or it
        leaves out what the request asks for while slots run out."""
        title, embedder = item.title, self.embedder
        reason = refusal(title, ask.ancestors, chosen)
        if reason is None and borrows_from(title, copied):
            reason = "comes from the worked example, not from this book"
        if reason is None and (other := title_near(embedder, title, chosen)) is not None:
            reason = f'says the same as "{other}"'
        if reason is None and item.point and sibling_units:
            near = unit_near(embedder, unit(title, item.point), sibling_units)
            reason = None if near is None else f'covers what "{sibling_units[near].split(":")[0]}" covers'
        if reason is None and nearest_example(embedder, unit(title, item.point), self.examples) is not None:
            reason = "comes from the worked example, not from this book"
        made_from_point = title_key(title) == title_key(heading_from_point(item.point))
        if reason is None and not made_from_point and (why := point_vagueness(embedder, title, item.point)):
            reason = f"has a key point that {why}"
        if reason is None and coverage is not None:
            reason = coverage.refusal(item, ask.count - len(chosen))
        return reason or self._claim(ask.level, item)

    def _claim(self, level: str, item: PlanItem, *, near: bool = True) -> str | None:
        """Take a title for the book, or say why not: another node at any level has it, or (with `near`) one
        at this level nearly has it, by words or by meaning (a chapter: by its title and point too), as the
        audit's rules would find. The event loop makes this atomic."""
        title = item.title
        key = title_key(title)
        if any(key in keys for keys in self.book_keys.values()):  # a section named like a chapter reads as one
            return "is already a title elsewhere in the book"
        if near:
            other = self.book_titles[level].near(title) or self.meanings[level].near(title)
            if other is not None:
                return f'nearly repeats "{other}"{ELSEWHERE_NEAR}'
        self.book_keys[level].add(key)
        self.book_titles[level].add(title)
        self.meanings[level].add(title)
        return None

    def _placeholders(self, level: str, prefix: str, count: int, have: int) -> list[str]:
        noun = level[:-1].capitalize()
        titles = []
        for number in range(have + 1, count + 1):
            title = f"{prefix} ({noun.lower()} {number})" if prefix else f"{noun} {number}"
            while self._claim(level, PlanItem(title), near=False) is not None:
                title += "'"
            titles.append(title)
        self.stats.placeholders += len(titles)
        return titles

    def _temperature(self, attempt: int) -> float:
        first = self.sampler.profile.planning_temperature
        if attempt == 0:
            return first
        return max(first, REASK_TEMPERATURES[min(attempt, len(REASK_TEMPERATURES)) - 1])

    def _later(self, restart: Callable[[], None]) -> None:
        """An ask that failed on every backend waits to be asked again: counted, and its stream starts anew."""
        self.stats.asked_later += 1
        restart()

    async def _ask(
        self,
        messages: list[dict[str, str]],
        need: int,
        tag: str,
        temperature: float,
        *,
        with_title: bool,
        consider: Callable[[PlanItem], None],
        enough: Callable[[], bool],
    ) -> None:
        """One planning request; `consider` sees each item as its line streams in, then those only the whole
        answer yields (JSON, say). Once `enough` items are in hand the request is cancelled: more lines
        would only hold a slot. So it is once the answer has given the `need` lines it was asked for: a
        small model that goes on past them repeats itself to the token cap (288 tokens, 47 s under load on
        the demo's critical path), and the next ask, showing what was refused, is the better use of the
        time. A retried attempt starts a fresh stream; items the cut one gave stay."""
        max_tokens = TOKENS_PER_ITEM * (need + 1) + (32 if with_title else 0)
        request = self.sampler.request(messages, max_tokens, tag, temperature)
        stream = ItemStream()
        scope = anyio.CancelScope()

        def on_delta(text: str) -> None:
            items = stream.feed(text)
            self.book_title = self.book_title or stream.title
            for item in items:
                consider(item)
            if (enough() or len(stream.taken) >= need) and (self.book_title or not with_title):
                scope.cancel()

        def on_retry() -> None:
            nonlocal stream
            stream = ItemStream()

        async def complete() -> Completion:
            return await self.pool.complete(request, on_delta, first=True, on_retry=on_retry)

        self.stats.requests += 1
        with scope:
            answer = (await asked_until_answered(self.pool, complete, on_later=partial(self._later, on_retry))).text
        if scope.cancelled_caught:
            if enough():
                self.stats.cut_short += 1
            else:
                self.stats.cut_at_count += 1
            return
        if with_title:
            self.book_title = self.book_title or parse_book_title(answer)
        for item in stream.untaken(parse_items(answer)):
            consider(item)


def fallback_book_title(prompt: str) -> str:
    """A title when the model never gave one: the request's first clause, if it reads like a title."""
    first = re.split(r"[.:;!?\n]", prompt.strip(), maxsplit=1)[0]
    first = re.sub(r"(?i)^(?:please\s+)?(?:write|explain|create|make|give me|teach me)\s+(?:me\s+)?", "", first)
    title = clean_title(first)
    return title[:1].upper() + title[1:] if 2 <= len(title) <= 80 else "Handbook"


@dataclass
class _Starter:
    """Starts each node's planning as soon as its parent's title is known (the pipelined schedule): a chapter
    whose sections are all planned is announced at once, others are planned in `group`."""

    planner: Planner
    group: TaskGroup
    announce: OnSection
    changed: OnChange

    def chapter(self, book: Outline, part: Part, chapter: Chapter) -> None:
        if len(chapter.sections) >= self.planner.spec.sections:
            self.announce_all(book, part, chapter)
            return
        done = partial(self.announce_all, book, part, chapter)
        self.group.start_soon(partial(self.planner._plan_chapter, book, part, chapter, done, self.changed))

    def part(self, book: Outline, part: Part) -> None:
        for chapter in list(part.chapters):
            self.chapter(book, part, chapter)
        if len(part.chapters) < self.planner.spec.chapters:
            on_chapter = partial(self.chapter, book, part)
            self.group.start_soon(partial(self.planner._plan_part, book, part, on_chapter, self.changed))

    def announce_all(self, book: Outline, part: Part, chapter: Chapter) -> None:
        for section in list(chapter.sections):
            self.announce(book, part, chapter, section)
