"""Planning rounds: one question sampled several times at once, for both planning modes; and the planner's counts
(PlanStats: requests, samples, rounds, what the title policy's rules refused and held back, keyed by the rule's id;
stats.json and run.log read them).

A round asks one question (a node's list of children in open planning, one given node's title in given planning)
as many times as the mode says, at once: one request with `n` where every engine of the fleet samples in parallel
(engines.py's `parallel_sampling`: the prompt is read once and each sample has its own seed), else one request a
sample. A node is asked in at most PLAN_ROUNDS rounds (Rounds, one loop for both modes); the second goes out only
when the first round's lines cannot fill it, farther from them (a higher temperature, more samples), and a round that
gave no line at all is asked again on top (EMPTY_ROUNDS). A mode is data (Mode): how many samples each round takes and
each round's temperature floor. An answer that failed on every backend is asked again later in the run
(pipeline/book/later.py) while the rest of the book goes on; one that never gets an answer counts as a failed request,
and the node goes on with what it has: no node ends the job.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Sized
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

import anyio

from pipeline.backends.engines import honours_choices
from pipeline.backends.pool import BackendPool, RequestFailed
from pipeline.backends.sse import EveryChoice, OnDelta
from pipeline.book.later import asked_until_answered
from pipeline.book.plan.checks import TitleChecks
from pipeline.book.plan.policy import Verdict
from pipeline.book.profiles import Sampler
from pipeline.records import ChatRequest, Completion

log = logging.getLogger("fanout")

PLAN_ROUNDS = 2  # a second round only when the first round's pool cannot fill the node; never a third
EMPTY_ROUNDS = 2  # rounds whose every sample gave no line (JSON chatter, an empty list) asked again on top: the
# backend's bad answer, which must not spend the node's rounds
TOKENS_PER_ITEM = 40  # a heading and its sentence (SmolLM2-135M's lines: 18-34 tokens)
SPARE_ITEMS = 3  # asked for beyond the need in every sample of an open round, so that the pool holds a choice
BOOK_TITLE_TOKENS = 32
CHOICES = 4  # samples of the book's and a part's question in each round, pooled: with three, most of the demo's
# nodes needed a second round (a small model's lines repeat one another, the book title or a title elsewhere)
SECTION_CHOICES = 2  # samples of a chapter's question: four at every level made the demo's planning 280 s on
# the embedded engine (48 samples, as many tokens as its sections), the chapters' rounds queueing for slots
USABLE_FIRST_SHARE = 0.8  # a fleet whose one-sample first rounds filled fewer of their nodes asks CHOICES again
NEED_SEEN = 3  # first rounds seen before the fleet's record can raise its samples


@dataclass(frozen=True)
class Mode:
    """A planning mode's rounds: samples of the first and second round (None: the level's choices_for, or for the
    first round of open planning the fleet's record, SampleNeed), and each round's temperature floor (a round samples
    at the profile's planning temperature, but at least this)."""

    name: str
    samples: tuple[int | None, int | None]
    temperatures: tuple[float, float]


# Open: three samples at 0.5 gave near-copies of one another (22 lines of the demo's pools refused as near repeats,
# 7 of 9 nodes asked again), so at least 0.7; a second round farther from the first round's lines, which the pool
# already holds.
OPEN = Mode("open", samples=(None, None), temperatures=(0.7, 0.9))
# Given: about half of SmolLM2-135M's phrased titles are on the subject (floors.TITLE_FLOOR), so two samples hold one
# for about 0.7 of the units and a second round of four finds most of the rest; four at first cost the demo 234
# samples of planning (as many tokens as its sections) and 53.6 s.
GIVEN = Mode("given", samples=(2, 4), temperatures=(0.0, 0.9))


def choices_for(level: str) -> int:
    """Samples of a node's question at this level ('parts', 'chapters', 'sections')."""
    return SECTION_CHOICES if level == "sections" else CHOICES


@dataclass
class SampleNeed:
    """How many samples an open node's first round asks, by the model's record: one where the model's first answer
    fills a node; choices_for(level) for a small model (the `small` profile), whose lines are mostly unusable, and for
    a fleet whose one-sample first rounds this run left more than 1 - USABLE_FIRST_SHARE of their nodes unfilled."""

    many: bool
    first_rounds: int = 0
    filled: int = 0

    def samples(self, mode: Mode, level: str, number: int) -> int:
        """Samples of round `number` (from 0) of a question at `level` in `mode`."""
        if (fixed := mode.samples[min(number, 1)]) is not None:
            return fixed
        return choices_for(level) if number > 0 or self.many or self.poor() else 1

    def poor(self) -> bool:
        return self.first_rounds >= NEED_SEEN and self.filled < USABLE_FIRST_SHARE * self.first_rounds

    def heard(self, *, samples: int, filled: bool) -> None:
        """A first round of `samples` ended; a one-sample round that left its node unfilled counts against it."""
        if samples == 1:
            self.first_rounds += 1
            self.filled += filled


class Rounds:
    """A node's rounds, in both modes, iterated as (round number, requests asked before): at most PLAN_ROUNDS, and a
    round that gave no line at all (the backend's bad answer, not the node's) asked again on top, up to EMPTY_ROUNDS
    times (`heard` says which); each second round counted, with the rules that acted since the first. The caller asks
    each round and stops when its node is filled."""

    def __init__(self, node_id: str, stats: PlanStats) -> None:
        self.node_id = node_id
        self.stats = stats
        self.number = self.empty = self.asked = 0

    def __iter__(self) -> Iterator[tuple[int, int]]:
        while self.number < PLAN_ROUNDS:
            if self.number > 0 and self.empty == 0:
                self.stats.reasked += 1
                self.stats.asked_again(self.node_id)
            yield self.number, self.asked
            self.asked += 1

    def heard(self, lines: Sized) -> bool:
        """The round's lines are in: False when there are none and the round is asked again."""
        if not lines and self.empty < EMPTY_ROUNDS:
            self.empty += 1
            return False
        self.number, self.empty = self.number + 1, 0
        self.stats.pooled += len(lines)
        return True


def temperature(mode: Mode, sampler: Sampler, number: int) -> float:
    """Round `number`'s temperature: the profile's planning temperature, at least the mode's floor for the round."""
    return max(sampler.profile.planning_temperature, mode.temperatures[min(number, 1)])


class Sampling:
    """Asks a round's samples through the pool and counts them (PlanStats): the requests, the samples, those asked
    later and those that failed."""

    def __init__(self, pool: BackendPool, sampler: Sampler, stats: PlanStats) -> None:
        self.pool = pool
        self.sampler = sampler
        self.stats = stats

    async def texts(
        self, request: ChatRequest, node_id: str, choices: int, streaming: Listener | None = None
    ) -> list[str]:
        """`choices` answers to the request: one request with `n`, or one request a sample (each its own seed);
        `streaming` hears every sample's text as it streams."""
        if honours_choices(set(self.sampler.kinds)):
            hear = None if streaming is None else EveryChoice(streaming.piece_of)
            return await self._texts(request.model_copy(update={"choices": choices}), node_id, hear, streaming)
        found: list[str] = []

        async def one(number: int) -> None:
            tag = request.tag if number == 0 else f"{request.tag}#{number}"
            seeded = self.sampler.request(request.messages, request.max_tokens, tag, request.temperature)
            seeded = seeded.model_copy(update={"extra": {**seeded.extra, "stop": request.extra["stop"]}})
            hear = None if streaming is None else partial(streaming.piece_of, number)
            found.extend(await self._texts(seeded, node_id, hear, streaming, sample=number))

        async with anyio.create_task_group() as group:
            for number in range(choices):
                group.start_soon(one, number)
        return found

    async def _texts(
        self,
        request: ChatRequest,
        node_id: str,
        on_delta: OnDelta | None = None,
        streaming: Listener | None = None,
        *,
        sample: int | None = None,
    ) -> list[str]:
        """The texts of one request's choices; none when it failed on every backend every time. `on_delta` hears
        them stream; what an attempt streamed is void when the request is asked again (`streaming` restarts)."""
        self.stats.requests += 1

        def restart() -> None:
            if streaming is not None:
                streaming.restart(sample)

        async def complete() -> Completion:
            restart()
            return await self.pool.complete(request, on_delta, first=True, on_retry=restart)

        try:
            answer = await asked_until_answered(self.pool, complete, on_later=self._later)
        except RequestFailed as failure:  # a node's planning never ends the job: it goes on with what it has
            self.stats.failed_requests += 1
            log.warning("planning %s: %s", node_id, failure)
            return []
        texts = [answer.text, *answer.more_texts]
        self.stats.samples += len(texts)
        return texts

    def _later(self) -> None:
        """A request that failed on every backend waits to be asked again: counted."""
        self.stats.asked_later += 1


@dataclass(frozen=True)
class Asking:
    """What both planning modes ask their rounds with: the sampling, the book's checks, the counts, and the fleet's
    record of how many samples a first round needs."""

    sampling: Sampling
    checks: TitleChecks
    stats: PlanStats
    need: SampleNeed


class Listener(Protocol):
    """What hears a round's samples as they stream (asking.py's early taking): each piece, and a sample asked again."""

    def piece_of(self, sample: int, text: str) -> None: ...

    def restart(self, sample: int | None) -> None: ...


@dataclass
class PlanStats:
    requests: int = 0
    samples: int = 0  # answers sampled (a request with `n` gives several)
    reasked: int = 0  # nodes asked a second round
    pooled: int = 0  # distinct lines the rounds' samples gave
    taken_early: int = 0  # titles taken while their samples still streamed (asking.py's _Early)
    short: int = 0  # parts and chapters planned with fewer children than the shape asks (no usable line)
    phrased: int = 0  # given nodes asked to be phrased (phrasing.py)
    seconds: float = 0.0
    levels: list[int] = field(default_factory=list)  # nodes per level: 1 -> P -> P*C
    filled_from_asks: int = 0  # children phrased from the asks a node still owed, when its rounds were spent
    off_subject_taken: int = 0  # titles taken although the judge found them off the request (nothing better)
    asks_dropped: int = 0  # asks of the request no section carries after every ask
    asked_later: int = 0  # requests that failed on every backend and were asked again later in the run
    failed_requests: int = 0  # requests that failed on every backend every time (the node went on with what it had)
    refused: list[tuple[str, str, Verdict]] = field(default_factory=list)  # (node id, title, verdict), for run.log
    held_back: Counter[str] = field(default_factory=Counter)  # rule id -> lines held back for it
    caused: Counter[str] = field(default_factory=Counter)  # rule id -> second rounds asked after it took a line
    _since_round: dict[str, set[str]] = field(default_factory=dict)  # node id -> rules that took its lines

    def refuse(self, node_id: str, title: str, verdict: Verdict) -> None:
        """A line refused by a rule of the title policy."""
        self.refused.append((node_id, title, verdict))
        self._since_round.setdefault(node_id, set()).add(verdict.rule)

    def hold(self, node_id: str, verdict: Verdict) -> None:
        """A line held back by a rule of the title policy."""
        self.held_back[verdict.rule] += 1
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
            rule: {"refused": refused[rule], "held": self.held_back[rule], "rounds": self.caused[rule]}
            for rule in sorted(set(refused) | set(self.held_back) | set(self.caused))
        }
