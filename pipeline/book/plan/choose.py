"""Choosing a node's titles from the lines its samples pooled: by fit to the request and the parent, and by
distinctness from what is already chosen (maximal marginal relevance, Carbonell and Goldstein 1998).

A Choosing is one node's choosing, in either planning mode: what it has taken (titles, and title-and-point units),
what it held back, and for open planning the asks of the request its children owe (Coverage: each child takes along
a share of them for its own children, and a chapter's last section slots are kept for them) and who hears of each
child taken. A line with a defect is never taken (the policy's `defect` chain). The rest are ranked (`scores`, the
one ranker), one pick at a time, by fit − DIVERSITY × (the nearest chosen sibling's similarity), with OWED_BONUS for
a line that carries an ask of the request the node still owes. The best line is taken unless the policy's `hold`
chain or the book's claim on its title finds it (`held_or_claimed`): a fault, off the subject, or in a chapter's last
section slots carrying none of the asks still owed; `decide` acts on the verdict's action (held back, and the next
is tried; or refused). Each pooled line and its fits go to run.log. Held lines fill what the best left (asking.py):
those with a fault at the end of each round, best first (so a second round goes out only when the pool cannot fill
the node even so); those off the subject only after the last round and the asks the node still owes, phrased by the
model. A line whose title says what a chosen sibling's says is never taken.

A taken child is added to the outline where it is chosen (Children: the lowest free id, the asks it takes along),
then told to whoever starts the next level (planner.py's Starter). The book's title has one owner (BookTitle): the
outline's, or the usable title of the book's first samples nearest the request, in either mode; when the model gave
none the book can use, the request's subject as a title ('keeping a sourdough starter alive' -> 'Keeping a Sourdough
Starter Alive'). Nothing else of a plan is ever made by fanout: a node the model's lines cannot fill has fewer
children.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from pipeline.book.plan.checks import TitleChecks
from pipeline.book.plan.policy import REQUEST, Action, Chain, Group, Verdict
from pipeline.book.plan.prompts import PlanItem
from pipeline.book.plan.rounds import PlanStats
from pipeline.cpu import Stage, charged
from pipeline.meaning.embed import Embedder
from pipeline.meaning.nearness import carries, unit
from pipeline.meaning.onsubject import unit_fits
from pipeline.meaning.reading import read
from pipeline.records import Chapter, Node, Outline, Part, Section, children, id_number, next_id
from pipeline.text import as_title
from pipeline.titles import clean_title, title_key

log = logging.getLogger("fanout")
DIVERSITY = 0.2  # MMR's weight on the similarity to the nearest chosen sibling: at 0.5, a line off the subject
# (fit 0.35, 0.2 to the chosen) outranked one on it (fit 0.55, 0.7 to a sibling) in the demo's chapters
OWED_BONUS = 0.15  # added to the score of a line that carries an ask of the request the node still owes
ChildLevel = Literal["parts", "chapters", "sections"]  # the level of a node's children
Path = tuple[Part, ...] | tuple[Part, Chapter]  # the nodes above the one planned, from its part down (the book: ())


class Coverage:
    """The asks of the request that one node's children must carry. Above the sections, nothing is refused
    for them: each child takes along, for its own children, an even share of the asks still open (the
    nearest it), the last child all that are left. Among sections, the last slots are kept for them: once
    as few slots are left as asks are open, an item that carries none is refused. (Taking along only what
    the children after it could not hold, one per child, sent 14 of a brief's 19 asks to its first chapter
    of four sections, and 16 of them were carried nowhere.)"""

    def __init__(self, embedder: Embedder, owed: list[str], *, leaf: bool) -> None:
        self.embedder = embedder
        self.owed = owed
        self.leaf = leaf

    def carried(self, item: PlanItem) -> list[str]:
        text = unit(item.title, item.point)
        return [ask for ask in self.owed if carries(self.embedder, ask, [text])]

    def owed_by(self, slots_left: int) -> list[str]:
        """The asks the next slot must carry one of: once as few section slots are left as asks are owed."""
        return list(self.owed) if self.leaf and self.owed and slots_left <= len(self.owed) else []

    def take(self, item: PlanItem, slots_after: int) -> list[str]:
        """Mark what the taken item carries; return the asks it takes along for its children."""
        for ask in self.carried(item):
            self.owed.remove(ask)
        if self.leaf or not self.owed:
            return []
        share = math.ceil(len(self.owed) / (slots_after + 1))
        text = self.embedder.embed([unit(item.title, item.point)])[0]
        nearest = sorted(self.owed, key=lambda ask: -float(self.embedder.embed([ask])[0] @ text))[:share]
        self.owed = [ask for ask in self.owed if ask not in nearest]
        return nearest


class OnItem(Protocol):
    """Told of each item a node takes, and the asks it takes along for its own children."""

    def __call__(self, item: PlanItem, *, owed: list[str]) -> None: ...


@dataclass
class Question:
    """One node's planning question (open planning): its template and values, its level and how many children it
    wants, the titles it already has (a resumed run), what is above it (what each is -> its text), its id, the asks
    its children owe, its parent's title and point (the request, for the book's parts), whether it asks the book's
    title too, and whether its first line is taken while its samples stream (`early`)."""

    template: str
    values: dict[str, Any]
    level: ChildLevel
    count: int
    have: list[str]
    ancestors: dict[str, str]
    node_id: str
    owed: list[str] = field(default_factory=list)
    parent_unit: str = ""
    with_title: bool = False
    early: bool = False


@dataclass
class Held:
    """A line held back: its score when it was passed over, the policy's verdict (its group says which hold found
    it: a fault, off the subject, or carrying none of the asks a last slot owes), its fit to the request."""

    item: PlanItem
    score: float
    why: Verdict
    fit: float = 1.0


@dataclass
class Choosing:
    """One node's choosing: its id, level and wanted count, its ancestors, what it has taken (titles, and the
    title-and-point units of those taken this run), what it held back, and in open planning the asks its children
    owe (`coverage`) and who hears of each child taken (`on_item`)."""

    node_id: str
    level: str
    count: int
    ancestors: dict[str, str]
    taken: list[str] = field(default_factory=list)
    units: dict[str, str] = field(default_factory=dict)
    coverage: Coverage | None = None
    on_item: OnItem | None = None
    parent_unit: str = ""
    held: list[Held] = field(default_factory=list)

    @classmethod
    def of(cls, question: Question, coverage: Coverage | None, on_item: OnItem) -> Choosing:
        have = list(question.have)
        return cls(
            question.node_id,
            question.level,
            question.count,
            question.ancestors,
            have,
            {title: title for title in have},
            coverage,
            on_item,
            question.parent_unit,
        )

    def missing(self) -> int:
        return self.count - len(self.taken)

    def known(self, item: PlanItem) -> bool:
        key = title_key(item.title)
        return any(key == title_key(t) for t in self.taken) or any(key == title_key(h.item.title) for h in self.held)

    def take(self, item: PlanItem) -> None:
        """The item is a child of the node: told to `on_item` with the asks it takes along for its children."""
        self.taken.append(item.title)
        self.units[item.title] = unit(item.title, item.point)
        owed = self.coverage.take(item, self.missing()) if self.coverage is not None else []
        if self.on_item is not None:
            self.on_item(item, owed=owed)

    def owed_now(self) -> list[str]:
        """The asks a line for the next slot must carry one of (a chapter's last section slots), else []."""
        return [] if self.coverage is None else self.coverage.owed_by(self.missing())

    def sibling_units(self) -> list[str]:
        return list(self.units.values())


def fresh_lines(pool: list[PlanItem], choosing: Choosing) -> list[PlanItem]:
    """The pool without repeats of one another, of a chosen title, or of a line already held."""
    seen: set[str] = set()
    fresh = []
    for item in pool:
        key = title_key(item.title)
        if key not in seen and not choosing.known(item):
            seen.add(key)
            fresh.append(item)
    return fresh


def without_defects(
    lines: list[PlanItem],
    choosing: Choosing,
    *,
    checks: TitleChecks,
    forbidden: frozenset[str],
    stats: PlanStats | None,
) -> list[PlanItem]:
    """The lines with no defect; each refused is counted (`stats`) and said in run.log."""
    kept = []
    for item in lines:
        if found := checks.first(
            Chain.DEFECT, item, ancestors=choosing.ancestors, taken=choosing.taken, forbidden=forbidden
        ):
            if stats is not None:
                stats.refuse(choosing.node_id, item.title, found)
        else:
            kept.append(item)
    return kept


@charged(Stage.PLANNING_CHECKS)
def choose(
    pool: list[PlanItem], choosing: Choosing, *, checks: TitleChecks, stats: PlanStats, forbidden: frozenset[str]
) -> None:
    """Take the best lines of the pool into the node's free slots; hold back those with a fault. A full node (its
    lines all taken as they streamed) has nothing to choose: its spare lines are not checked."""
    if choosing.missing() <= 0:
        return
    lines = without_defects(fresh_lines(pool, choosing), choosing, checks=checks, forbidden=forbidden, stats=stats)
    to_request, fit = checks.subject_fit(lines, choosing.parent_unit)
    for item, request_fit, ranked in zip(lines, to_request, fit):
        log.debug(
            "pool %s: %.2f to the request, %.2f ranked: %s",
            choosing.node_id,
            request_fit,
            ranked,
            unit(item.title, item.point),
        )
    if not checks.small:
        take_in_order(lines, to_request, choosing, checks=checks, stats=stats)
        return
    while choosing.missing() > 0 and lines:
        ranked_now = scores(lines, fit, choosing, checks)
        best = int(np.argmax(ranked_now))
        item, score, request_fit = lines.pop(best), float(ranked_now[best]), float(to_request[best])
        fit, to_request = np.delete(fit, best), np.delete(to_request, best)
        found = held_or_claimed(item, choosing, checks=checks, fit=request_fit)
        decide(item, found, choosing, stats=stats, score=score)


@charged(Stage.PLANNING_CHECKS)
def take_early(pool: list[PlanItem], choosing: Choosing, *, checks: TitleChecks, forbidden: frozenset[str]) -> bool:
    """While the samples still stream: take the line `choose` would take first from the lines so far, when it
    has no defect, no fault, fits the request and leaves nothing owed; else take nothing (the whole pool decides
    once the samples end, and says why of each line). Nothing is held or counted here. True when one was taken."""
    lines = without_defects(fresh_lines(pool, choosing), choosing, checks=checks, forbidden=forbidden, stats=None)
    if not lines or choosing.missing() <= 0:
        return False
    to_request, fit = checks.subject_fit(lines, choosing.parent_unit)
    # a small model's best-ranked line; a capable model's first, as take_in_order takes it (no ranking needed)
    best = int(np.argmax(scores(lines, fit, choosing, checks))) if checks.small else 0
    found = held_or_claimed(lines[best], choosing, checks=checks, fit=float(to_request[best]))
    return decide(lines[best], found, choosing)


def take_in_order(
    lines: list[PlanItem], to_request: np.ndarray, choosing: Choosing, *, checks: TitleChecks, stats: PlanStats
) -> None:
    """A capable model's lines, in the order it gave them (its first are its surest, and a book's order is its
    author's): each is taken unless the book cannot claim it; a line that leaves out what a last slot owes is held
    back only while lines after it could take the slot instead."""
    for at, (item, request_fit) in enumerate(zip(lines, to_request)):
        if choosing.missing() <= 0:
            return
        hold = len(lines) - at > choosing.missing()
        found = held_or_claimed(item, choosing, checks=checks, fit=float(request_fit), hold=hold)
        decide(item, found, choosing, stats=stats)


def scores(
    lines: list[PlanItem], fit: np.ndarray, choosing: Choosing, checks: TitleChecks, *, owed: bool = True
) -> np.ndarray:
    """Each line's marginal relevance: its fit, less DIVERSITY × its similarity to the nearest chosen sibling,
    plus (`owed`) OWED_BONUS when it carries an ask the node still owes."""
    siblings = choosing.sibling_units()
    nearest = checks.similarity(lines, siblings).max(axis=1) if siblings else np.zeros(len(lines))
    ranked: np.ndarray = fit - DIVERSITY * nearest
    if owed and choosing.coverage is not None:
        coverage = choosing.coverage
        ranked = ranked + OWED_BONUS * np.array([bool(coverage.carried(i)) for i in lines], dtype=np.float32)
    return ranked


def held_or_claimed(
    item: PlanItem,
    choosing: Choosing,
    *,
    checks: TitleChecks,
    fit: float,
    hold: bool = True,
    title_fit: float | None = None,
) -> Verdict | None:
    """Why the line may not be taken now: the first verdict of a hold chain (with `hold`: an open node's, or with
    `title_fit` a phrased unit's, which is read by its title too and owes nothing more), else of the book's claim on
    its title (claimed now when nothing refuses it); None when it may be taken."""
    if hold:
        known = {"taken": choosing.taken, "sibling_units": choosing.sibling_units(), "fit": fit}
        if title_fit is not None:
            found = checks.first(Chain.HOLD_PHRASED, item, title_fit=title_fit, **known)
        else:
            found = checks.first(Chain.HOLD, item, owed=choosing.owed_now(), **known)
        if found is not None:
            return found
    return checks.claim(choosing.level, item, strict=title_fit is not None)


def decide(
    item: PlanItem,
    found: Verdict | None,
    choosing: Choosing,
    *,
    stats: PlanStats | None = None,
    score: float = 0.0,
    keep: bool = True,
) -> bool:
    """Act on the verdict's action: none, the line is taken; a hold, it is held back (kept for later with `keep`, with
    its fit to the request when that is what held it); a refusal, it is refused. Each is counted in `stats` (None:
    nothing is counted or kept). True when taken."""
    if found is None:
        choosing.take(item)
        return True
    if stats is None:
        return False
    if found.action is Action.HOLD_BACK:
        if keep:
            fit = found.figure if found.group is Group.OFF and found.figure is not None else 1.0
            choosing.held.append(Held(item, score, found, fit))
        stats.hold(choosing.node_id, found)
    else:
        stats.refuse(choosing.node_id, item.title, found)
    return False


def take_held(choosing: Choosing, *, checks: TitleChecks, stats: PlanStats, group: Group = Group.FAULT) -> None:
    """Fill free slots from the lines held by a group of holds, best score first: those with a fault, those that
    carry none of the asks a last slot owes, or those judged off the subject. Each must still pass the rules asked
    again of a line taken last (its form and place beside the chosen ones, the last resort's floor) and be claimed;
    what is not taken is not counted again."""
    for held in sorted(choosing.held, key=lambda h: -h.score):
        if choosing.missing() <= 0:
            return
        if held.why.group is not group or any(title_key(held.item.title) == title_key(t) for t in choosing.taken):
            continue
        found = checks.first(Chain.AGAIN, held.item, ancestors=choosing.ancestors, taken=choosing.taken, fit=held.fit)
        if decide(held.item, found or checks.claim(choosing.level, held.item), choosing):
            stats.off_subject_taken += group is Group.OFF


def fallback_book_title(prompt: str) -> str:
    """The request's subject as the book's title (a brief's too: its first clause may be the asker's story)."""
    title = as_title(clean_title(read(prompt).subject))
    return title if 2 <= len(title) <= 80 else "Handbook"


class BookTitle:
    """The book's title, its one owner: the outline's (a resumed or replanned book, `settle`), or in either planning
    mode the usable title of the book's first round nearest the request (`from_samples`: the titles an open book's
    samples give, or the lines phrased for a given book's title); made from the request when none is usable."""

    def __init__(self, checks: TitleChecks, stats: PlanStats, request: str) -> None:
        self.checks = checks
        self.stats = stats
        self.request = request
        self.text = ""

    def settle(self, title: str) -> None:
        self.text = title

    def from_samples(self, titles: list[str], *, forbidden: frozenset[str], or_made: bool = False) -> None:
        """The samples' usable title nearest the request, when none is settled yet (`or_made`: else the request's);
        `forbidden`: the worked examples' words the title may not borrow."""
        if not self.text:
            self.text = self.best(titles, forbidden)
        if not self.text and or_made:
            self.text = self.made()

    def made(self) -> str:
        return fallback_book_title(self.request)

    def best(self, titles: list[str], forbidden: frozenset[str]) -> str:
        """Of the samples' book titles, the usable one nearest the request (the judge's fit), or ""."""
        usable = list(dict.fromkeys(title for title in titles if self.usable(title, forbidden)))
        if len(usable) < 2:
            return usable[0] if usable else ""
        fits = unit_fits(self.checks.judge or self.checks.embedder, self.request, usable)
        return usable[int(fits.argmax())]

    def usable(self, title: str, forbidden: frozenset[str]) -> bool:
        """The model's book title can be the book's: the policy's `book_title` chain refuses it not (each refused
        is counted)."""
        if not title:
            return False
        if found := self.checks.book_title(title, forbidden=forbidden):
            self.stats.refuse("book", title, found)
            return False
        return True


PATH_KINDS = ("part", "chapter")  # what the nodes of a Path are, from the top


def ancestors_of(path: Path, book_title: str | None, request: str) -> dict[str, str]:
    """What is above a node, nearest first, as the rules read it (what each is -> its text), in either mode: the
    titles of its path (a given part is titled after its chapters: none yet), the book title (None: not known yet),
    the request."""
    above = {f"the {PATH_KINDS[at]} title": node.title for at, node in reversed(list(enumerate(path))) if node.title}
    if book_title is not None:
        above["the book title"] = book_title
    above[REQUEST] = request
    return above


def marked_short(node: Outline | Part | Chapter, wanted: int, stats: PlanStats) -> bool:
    """Whether the node has fewer children than `wanted`; if so it is marked short and counted, in either mode."""
    if len(children(node)) >= wanted:
        return False
    node.short = True
    stats.short += 1
    return True


class OnChild(Protocol):
    """Told of each child a node adds to the outline."""

    def __call__(self, outline: Outline, child: Node, /) -> None: ...


@dataclass
class Children:
    """Where a node's children go as they are taken (Choosing.take tells it): each the node's next child (the lowest
    free id), its asks kept in `owed` for its own children, then told to `on_child`. The book's parts wait until the
    book title, which their own prompts need, is known (the outline is made then)."""

    book_title: BookTitle
    outline: Outline | None
    path: Path
    owed: dict[str, list[str]]  # node id -> the asks its children must carry
    make: type[Part] | type[Chapter] | type[Section]
    on_child: OnChild | None = None
    about: str = ""  # what the next child is about: the given node being phrased (kept on the child)
    waiting: list[tuple[PlanItem, list[str]]] = field(default_factory=list)

    def __call__(self, item: PlanItem, *, owed: list[str]) -> None:
        self.waiting.append((item, owed))
        self.flush()

    def flush(self, *, final: bool = False) -> Outline | None:
        title = self.book_title
        if self.outline is None:
            if not (title.text or final):
                return None
            self.outline = Outline(title=title.text or title.made(), parts=[], complete=False)
        node = self.path[-1] if self.path else self.outline
        for item, owed in self.waiting:
            child = self.add(node, item, owed)
            if self.on_child is not None:
                self.on_child(self.outline, child)
        self.waiting.clear()
        return self.outline

    def add(self, node: Outline | Part | Chapter, item: PlanItem, owed: list[str]) -> Node:
        """The taken item as the node's next child (the lowest free id), its asks kept for its own children."""
        taken = children(node)
        above = None if isinstance(node, Outline) else node
        child = self.make(id=next_id(above, taken), title=item.title, point=item.point, about=self.about)
        if self.make is not Section:
            self.owed[child.id] = owed
        taken.append(child)
        if self.make is Section:
            taken.sort(key=lambda section: id_number(section.id))
        return child
