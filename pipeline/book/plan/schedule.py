"""The schedule of a node's asks: what one node's planning question holds, how many of its asks go out side
by side (asks_at_once, from the share of lines taken so far), the notes a re-ask carries (what was chosen
and refused, what the request asks of the node), and the planner's counts (PlanStats).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from pipeline.book.plan.answers import PlanItem

REASK_TEMPERATURES = (0.4, 0.7, 0.7)  # a re-ask at temperature 0 tends to repeat the refused answer
TOKENS_PER_ITEM = 48  # a heading and its sentence
SHOWN_REFUSALS = 30
SPARE_ITEMS = 4  # asked for beyond the need: a refused line costs no round, and the answer is cut once enough
MAX_ASKS_AT_ONCE = 3  # asks of one node sent side by side when its model's lines are being refused
ACCEPTANCE_PRIOR_ITEMS = 4  # a node's own items weigh against the book's share as if the book had this many


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
    titles_from_asks: int = 0  # missing titles made from what the request asks that the book still lacks
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


def how_many(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


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


def must_note(musts: list[str], noun: str, count: int) -> str:
    """What the request asks of this node's children, for its planning prompt: a child on each, or, when
    they outnumber the children (a brief's dozens of concerns), each child holding several."""
    if not musts:
        return ""
    if len(musts) <= count:
        return f"\nThe request asks for these, so include a {noun} on each: " + "; ".join(musts) + "."
    return f"\nThe request asks for all of these, so let each {noun} cover several of them: " + "; ".join(musts) + "."


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
