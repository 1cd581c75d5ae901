"""Choosing a node's titles from the lines its samples pooled: by fit to the request and the parent, and by
distinctness from what is already chosen (maximal marginal relevance, Carbonell and Goldstein 1998).

Takes the pool (PlanItems from every sample of a round), the node's question and the checks; takes the chosen
items through `take` and returns the lines it held back. A line with a defect is never taken (checks.defect).
The rest are ranked, one pick at a time, by fit − policy.DIVERSITY × (the nearest chosen sibling's similarity), with
OWED_BONUS for a line that carries an ask of the request the node still owes. The best line is taken unless it
has a fault (checks.faults), its title and point are off the subject (their fit to the request below
policy.PLAN_FLOOR, by pipeline/meaning/onsubject.py's unit fit), or, in a chapter's last section slots, it carries
none of the asks still owed; then it is held back, and the next is tried. Each pooled line and its fits go to run.log.
Held lines fill what the best left (asking.py): those with a fault at the end of each round, best first (so
a second round goes out only when the pool cannot fill the node even so); those off the request only after the
last round and the asks the node still owes, phrased by the model. A line whose title says what a chosen sibling's
says is never taken.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from pipeline.book.plan import policy
from pipeline.book.plan.answers import PlanItem
from pipeline.book.plan.checks import TitleChecks
from pipeline.book.plan.coverage import Coverage
from pipeline.book.plan.policy import DIVERSITY, LAST_RESORT_FIT, OWED_BONUS, Verdict
from pipeline.book.plan.schedule import NodeAsk, PlanStats, TakeItem
from pipeline.cpu import Stage, charged
from pipeline.meaning.nearness import unit
from pipeline.titles import title_key

log = logging.getLogger("fanout")


@dataclass
class Held:
    """A line held back, with its score when it was passed over, the policy's verdict, and its fit to the request."""

    item: PlanItem
    score: float
    why: Verdict
    off_request: bool = False
    fit: float = 1.0
    owed: bool = False  # held for carrying none of the asks a last slot owes


@dataclass
class Choice:
    """One node's choosing: what it has taken (titles, and title-and-point units) and what it held back."""

    ask: NodeAsk
    chosen: list[str]
    units: dict[str, str]
    coverage: Coverage
    take: TakeItem
    held: list[Held] = field(default_factory=list)

    def missing(self) -> int:
        return self.ask.count - len(self.chosen)

    def known(self, item: PlanItem) -> bool:
        key = title_key(item.title)
        return any(key == title_key(t) for t in self.chosen) or any(key == title_key(h.item.title) for h in self.held)


def fresh_lines(pool: list[PlanItem], choice: Choice) -> list[PlanItem]:
    """The pool without repeats of one another, of a chosen title, or of a line already held."""
    seen: set[str] = set()
    fresh = []
    for item in pool:
        key = title_key(item.title)
        if key not in seen and not choice.known(item):
            seen.add(key)
            fresh.append(item)
    return fresh


@charged(Stage.PLANNING_CHECKS)
def choose(
    pool: list[PlanItem], choice: Choice, *, checks: TitleChecks, stats: PlanStats, copied: frozenset[str]
) -> None:
    """Take the best lines of the pool into the node's free slots; hold back those with a fault. A full node (its
    lines all taken as they streamed) has nothing to choose: its spare lines are not checked."""
    if choice.missing() <= 0:
        return
    ask = choice.ask
    lines = []
    for item in fresh_lines(pool, choice):
        if found := checks.defect(item, ask.ancestors, choice.chosen, copied):
            stats.refuse(ask.node_id, item.title, found)
        else:
            lines.append(item)
    to_request, fit = checks.subject_fit(lines, ask.parent_unit)
    for item, request_fit, ranked in zip(lines, to_request, fit):
        log.debug(
            "pool %s: %.2f to the request, %.2f ranked: %s",
            ask.node_id,
            request_fit,
            ranked,
            unit(item.title, item.point),
        )
    if not checks.small:
        take_in_order(lines, to_request, choice, checks=checks, stats=stats)
        return
    while choice.missing() > 0 and lines:
        scores = mmr(lines, fit, choice, checks)
        best = int(np.argmax(scores))
        item, score, request_fit = lines.pop(best), float(scores[best]), float(to_request[best])
        fit, to_request = np.delete(fit, best), np.delete(to_request, best)
        consider(item, score, choice, checks=checks, stats=stats, request_fit=request_fit)


@charged(Stage.PLANNING_CHECKS)
def take_early(pool: list[PlanItem], choice: Choice, *, checks: TitleChecks, copied: frozenset[str]) -> bool:
    """While the samples still stream: take the line `choose` would take first from the lines so far, when it
    has no defect, no fault, fits the request and leaves nothing owed; else take nothing (the whole pool decides
    once the samples end, and says why of each line). Nothing is held or counted here. True when one was taken."""
    ask = choice.ask
    lines = [
        item for item in fresh_lines(pool, choice) if checks.defect(item, ask.ancestors, choice.chosen, copied) is None
    ]
    if not lines or choice.missing() <= 0:
        return False
    to_request, fit = checks.subject_fit(lines, ask.parent_unit)
    scores = mmr(lines, fit, choice, checks)
    best = int(np.argmax(scores)) if checks.small else 0  # a capable model's first line, as take_in_order takes it
    item = lines[best]
    if held_back(item, float(scores[best]), choice, checks=checks, request_fit=float(to_request[best])):
        return False
    if checks.claim(ask.level, item) is not None:
        return False
    choice.take(item)
    return True


def take_in_order(
    lines: list[PlanItem], to_request: np.ndarray, choice: Choice, *, checks: TitleChecks, stats: PlanStats
) -> None:
    """A capable model's lines, in the order it gave them (its first are its surest, and a book's order is its
    author's): each is taken unless the book cannot claim it; a line that leaves out what a last slot owes is held
    back only while lines after it could take the slot instead."""
    for at, (item, request_fit) in enumerate(zip(lines, to_request)):
        if choice.missing() <= 0:
            return
        if len(lines) - at > choice.missing():
            consider(item, 0.0, choice, checks=checks, stats=stats, request_fit=float(request_fit))
        elif found := checks.claim(choice.ask.level, item):
            stats.refuse(choice.ask.node_id, item.title, found)
        else:
            choice.take(item)


def mmr(lines: list[PlanItem], fit: np.ndarray, choice: Choice, checks: TitleChecks) -> np.ndarray:
    """Each line's marginal relevance: its fit, less DIVERSITY × its similarity to the nearest chosen sibling,
    plus OWED_BONUS when it carries an ask the node still owes."""
    siblings = list(choice.units.values())
    nearest = checks.similarity(lines, siblings).max(axis=1) if siblings else np.zeros(len(lines))
    owed = np.array([bool(choice.coverage.carried(item)) for item in lines], dtype=np.float32)
    scores: np.ndarray = fit - DIVERSITY * nearest + OWED_BONUS * owed
    return scores


def held_back(item: PlanItem, score: float, choice: Choice, *, checks: TitleChecks, request_fit: float) -> Held | None:
    """Why the line may not be taken now, as the Held it would be: a fault, off the subject (its fit to the
    request under policy.PLAN_FLOOR), or leaving out what a last slot owes; None when it may be taken."""
    faults = checks.faults(item, choice.chosen, list(choice.units.values()))
    if faults:
        return Held(item, score, faults[0])
    if checks.small and (off := policy.off_subject(request_fit)) is not None:
        return Held(item, score, off, off_request=True, fit=request_fit)
    if (leaves := choice.coverage.refusal(item, choice.missing())) is not None:
        return Held(item, score, leaves, owed=True)
    return None


def consider(
    item: PlanItem, score: float, choice: Choice, *, checks: TitleChecks, stats: PlanStats, request_fit: float
) -> None:
    """Take the line, or hold it back with why (held_back)."""
    ask = choice.ask
    if held := held_back(item, score, choice, checks=checks, request_fit=request_fit):
        choice.held.append(held)
        stats.hold(ask.node_id, held.why)
        return
    if found := checks.claim(ask.level, item):
        stats.refuse(ask.node_id, item.title, found)
        return
    choice.take(item)


def take_held(
    choice: Choice, *, checks: TitleChecks, stats: PlanStats, off_request: bool = False, owed: bool = False
) -> None:
    """Fill free slots from the held lines, best score first: those with a fault, or (`owed`) those that carry
    none of the asks a last slot owes, or (`off_request`) those judged off the request. Each must still be free
    of what the chosen ones now make a defect."""
    for held in sorted(choice.held, key=lambda h: -h.score):
        if choice.missing() <= 0:
            return
        if (held.off_request, held.owed) != (off_request, owed):
            continue
        if any(title_key(held.item.title) == title_key(t) for t in choice.chosen):
            continue
        if held.fit < LAST_RESORT_FIT:
            continue
        if checks.title_taken_near(choice.ask.ancestors, held.item, choice.chosen):
            continue
        if checks.claim(choice.ask.level, held.item) is None:
            stats.off_subject_taken += off_request
            choice.take(held.item)
