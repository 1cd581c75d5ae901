"""The schedule of a node's asks: what one node's planning question holds, how many samples its rounds take,
the one note a second round carries (the titles already chosen), and the planner's counts (PlanStats).

A node is asked in at most PLAN_ROUNDS rounds. Its first round samples the question as many times as the model's
record says it needs (SampleNeed: once for a capable model, CHOICES times for a small one; one request with `n`
where every engine of the fleet samples in parallel, else one request a sample), and
the titles are chosen from the pooled lines (asking.py); a second round goes out only when the pool could
not fill the node. No refusal reason is ever shown to the model: the words of a note it could copy into a
title are only those of prompts.CHOSEN_NOTE, and the policy refuses a line that carries them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pipeline.book.plan.answers import PlanItem
from pipeline.book.plan.policy import Verdict
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


USABLE_FIRST_SHARE = 0.8  # a fleet whose one-sample first rounds filled fewer of their nodes asks CHOICES again
NEED_SEEN = 3  # first rounds seen before the fleet's record can raise its samples


@dataclass
class SampleNeed:
    """How many samples a node's first round asks, by the model's record: one where the model's first answer fills
    a node; choices_for(level) for a small model (the `small` profile), whose lines are mostly unusable, and for a
    fleet whose one-sample first rounds this run left more than 1 - USABLE_FIRST_SHARE of their nodes unfilled. A
    second round, asked only when the pool cannot fill the node, always takes choices_for(level)."""

    many: bool
    first_rounds: int = 0
    filled: int = 0

    def samples(self, level: str, number: int) -> int:
        return choices_for(level) if number > 0 or self.many or self.poor() else 1

    def poor(self) -> bool:
        return self.first_rounds >= NEED_SEEN and self.filled < USABLE_FIRST_SHARE * self.first_rounds

    def heard(self, *, samples: int, filled: bool) -> None:
        """A first round of `samples` ended; a one-sample round that left its node unfilled counts against it."""
        if samples == 1:
            self.first_rounds += 1
            self.filled += filled


PLAN_ROUNDS = 2  # a second round only when the first round's pool cannot fill the node; never a third
EMPTY_ROUNDS = 2  # rounds whose every sample gave no line (JSON chatter, an empty list) asked again on top: the
# backend's bad answer, which must not spend the node's rounds
# A round's samples at the profile's planning temperature, but at least these: three samples at 0.5 gave
# near-copies of one another (22 lines of the demo's pools refused as near repeats, 7 of 9 nodes asked again)
FIRST_ROUND_TEMPERATURE = 0.7
SECOND_ROUND_TEMPERATURE = 0.9  # farther from the first round's lines, which the pool already holds


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
    refused: list[tuple[str, str, Verdict]] = field(default_factory=list)  # (node id, title, verdict), for run.log
    passed_over: Counter[str] = field(default_factory=Counter)  # rule id -> lines held back for it
    caused: Counter[str] = field(default_factory=Counter)  # rule id -> second rounds asked after it took a line
    _since_round: dict[str, set[str]] = field(default_factory=dict)  # node id -> rules that took its lines

    def refuse(self, node_id: str, title: str, verdict: Verdict) -> None:
        """A line refused by a rule of the title policy."""
        self.refused.append((node_id, title, verdict))
        self._since_round.setdefault(node_id, set()).add(verdict.rule)

    def hold(self, node_id: str, verdict: Verdict) -> None:
        """A line held back by a rule of the title policy."""
        self.passed_over[verdict.rule] += 1
        self._since_round.setdefault(node_id, set()).add(verdict.rule)

    def asked_again(self, node_id: str) -> None:
        """The node asks another round: each rule that refused or held back one of its lines since its last round
        had a share in the request."""
        self.caused.update(self._since_round.pop(node_id, set()))

    @property
    def refusals(self) -> Counter[str]:
        """Rule id -> lines refused by it."""
        return Counter(verdict.rule for _, _, verdict in self.refused)

    def rule_counts(self) -> dict[str, dict[str, int]]:
        """Each rule that acted: lines it refused, lines it held back, and second rounds asked after it acted."""
        refused = self.refusals
        return {
            rule: {"refused": refused[rule], "held": self.passed_over[rule], "rounds": self.caused[rule]}
            for rule in sorted(set(refused) | set(self.passed_over) | set(self.caused))
        }


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
