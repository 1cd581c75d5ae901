"""The schedule of a node's asks: what one node's planning question holds, how many samples its rounds take,
the one note a second round carries (the titles already chosen), and the planner's counts (PlanStats).

A node is asked in at most PLAN_ROUNDS rounds. Its first round samples the question CHOICES times at once
(one request with `n` where every engine of the fleet samples in parallel, else one request a sample), and
the titles are chosen from the pooled lines (asking.py); a second round goes out only when the pool could
not fill the node. No refusal reason is ever shown to the model: the words of a note it could copy into a
title are only those of CHOSEN_NOTE, and checks.py refuses a line that carries them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pipeline.book.plan.answers import PlanItem
from pipeline.records import Chapter, Outline, Part, Section

TOKENS_PER_ITEM = 40  # a heading and its sentence (SmolLM2-135M's lines: 18-34 tokens)
SPARE_ITEMS = 3  # asked for beyond the need in every sample, so that the pool holds a choice
CHOICES = 4  # samples of the book's and a part's question in each round, pooled: with three, most of the demo's
# nodes needed a second round (a small model's lines repeat one another, the book title or a title elsewhere)
SECTION_CHOICES = 2  # samples of a chapter's question: four at every level made the demo's planning 280 s on
# the embedded engine (48 samples, as many tokens as its sections), the chapters' rounds queueing for slots


def choices_for(level: str) -> int:
    """Samples of a node's question at this level ('parts', 'chapters', 'sections')."""
    return SECTION_CHOICES if level == "sections" else CHOICES


PLAN_ROUNDS = 2  # a second round only when the first round's pool cannot fill the node; never a third
EMPTY_ROUNDS = 2  # rounds whose every sample gave no line (JSON chatter, an empty list) asked again on top: the
# backend's bad answer, which must not spend the node's rounds
# A round's samples at the profile's planning temperature, but at least these: three samples at 0.5 gave
# near-copies of one another (22 lines of the demo's pools refused as near repeats, 7 of 9 nodes asked again)
FIRST_ROUND_TEMPERATURE = 0.7
SECOND_ROUND_TEMPERATURE = 0.9  # farther from the first round's lines, which the pool already holds
CHOSEN_NOTE = "Already chosen, so give others:"  # the only note a planning prompt carries
SHOWN_CHOSEN = 30
# The words of the notes a planning prompt carries (chosen_note, must_note), of the refusal reasons an earlier
# planner showed ("does not repeat the chapter title" came back as a section title) and of the points it joined from
# the request's phrases ("The scent, as it bears on The Dog."): a line that holds them copied a note, not a heading.
NOTE_WORDS = re.compile(
    r"\b(?:already chosen|give others|the request asks for|(?:include|with) an? (?:part|chapter|section) on each"
    r"|cover several of them|do(?:es)? not repeat|repeats? the (?:entire |whole )?(?:book|part|chapter|section)"
    r"|refused|the worked example|as it bears on|as the request asks)\b",
    re.I,
)


@dataclass
class PlanStats:
    requests: int = 0
    samples: int = 0  # answers sampled (a request with `n` gives several)
    reasked: int = 0  # nodes asked a second round
    pooled: int = 0  # distinct lines the rounds' samples gave
    taken_early: int = 0  # titles taken while their samples still streamed (asking.py's _Early)
    short: int = 0  # parts and chapters planned with fewer children than the shape asks (no usable line)
    phrased: int = 0  # given units asked to be phrased (phrasing.py)
    seconds: float = 0.0
    levels: list[int] = field(default_factory=list)  # nodes per level: 1 -> P -> P*C
    filled_from_asks: int = 0  # children phrased from the asks a node still owed, when its rounds were spent
    off_subject_taken: int = 0  # titles taken although the judge found them off the request (nothing better)
    asks_dropped: int = 0  # asks of the request no section carries after every ask
    asked_later: int = 0  # asks that failed on every backend and were asked again later in the run
    failed_asks: int = 0  # asks that failed on every backend every time (the node went on with what it had)
    refused: list[tuple[str, str, str]] = field(default_factory=list)  # (node id, title, defect), for run.log
    passed_over: Counter[str] = field(default_factory=Counter)  # fault -> lines left in the pool for it

    @property
    def refusals(self) -> Counter[str]:
        """Defect (without the title it names) -> lines refused for it."""
        return Counter(reason.split(' "')[0] for _, _, reason in self.refused)


def how_many(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def about(what: str, point: str) -> str:
    return f" The {what} covers: {point}" if point else ""


def chosen_note(chosen: list[str]) -> str:
    """What a second round must not give again: the titles already chosen (never why others were not)."""
    if not chosen:
        return ""
    return f"\n{CHOSEN_NOTE} " + "; ".join(f'"{t}"' for t in chosen[-SHOWN_CHOSEN:]) + "."


def carries_note(text: str) -> bool:
    """The text holds the words of a planning note (NOTE_WORDS)."""
    return NOTE_WORDS.search(text) is not None


def must_note(musts: list[str], noun: str, count: int) -> str:
    """What the request asks of this node's children, for its planning prompt: a child on each, or, when
    they outnumber the children (a brief's dozens of concerns), each child holding several."""
    if not musts:
        return ""
    if len(musts) <= count:
        return f"\nThe request asks for these, so include a {noun} on each: " + "; ".join(musts) + "."
    return f"\nThe request asks for all of these, so let each {noun} cover several of them: " + "; ".join(musts) + "."


OnSection = Callable[[Outline, Part, Chapter, Section], None]  # told of each section the plan hands to the writer
OnChange = Callable[[Outline], None]  # told of the outline after each planned node, to save it


class OnItem(Protocol):
    """Told of each item a node settles on, and the asks its children carry."""

    def __call__(self, item: PlanItem, *, musts: list[str]) -> None: ...


class TakeItem(Protocol):
    def __call__(self, item: PlanItem) -> None: ...


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
    parent_unit: str = ""  # the parent's title and key point (the request, for the book's parts)
