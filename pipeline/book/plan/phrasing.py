"""Phrasing what the plan gives: the model titles one given unit (a facet, a concern) for this book, and the best
of its samples is taken.

A small model invents a book's plan poorly and phrases a heading for something given far better (SmolLM2-135M:
docs/planning.md). Each given unit is asked on its own (templates/phrase_*.md: a few worked answers from other
subjects, then "A book on <subject>. Its chapter about <facet> is titled:"), sampled PHRASE_SAMPLES times at once,
and answered on one line, a title, a colon, one sentence. Of the samples, a line with a defect is refused
(checks.py: no key point, a prompt's or a worked example's words, a fragment of the request, a word a handbook would
not print ...); the rest are ranked by their fit to the request and to the unit they were asked for, less
DIVERSITY × their likeness to the siblings already taken (choose.py's measure), and the best without a fault and
on the subject (choose.held_back) is taken if the book can claim its title. When none can be, the unit is asked
once more with more samples at a higher temperature; when that fails too, None: the planner asks a spare unit, or
the node has fewer children. Nothing in an answer raises; nothing the pipeline writes itself reaches the plan.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Literal

import anyio
import numpy as np
from anyio.abc import TaskGroup

from pipeline.book.plan import policy
from pipeline.book.plan.answers import PlanItem, parse_item
from pipeline.book.plan.asking import NodeAsker
from pipeline.book.plan.choose import Choice, held_back
from pipeline.book.plan.coverage import Coverage
from pipeline.book.plan.policy import DIVERSITY
from pipeline.book.plan.prompts import PHRASE_TEMPLATES, example_words, rare_example_words
from pipeline.book.plan.schedule import NodeAsk
from pipeline.meaning.nearness import unit
from pipeline.meaning.reading import Reading
from pipeline.templating import book_context, render_chat
from pipeline.titles import content_words, title_key

log = logging.getLogger("fanout")
Level = Literal["title", "parts", "chapters", "sections"]
TEMPLATES: dict[Level, str] = dict(zip(("title", "parts", "chapters", "sections"), PHRASE_TEMPLATES))
PHRASE_SAMPLES = 2  # samples of a unit's first round: about half of SmolLM2-135M's phrased titles are on the
# subject (policy.TITLE_FLOOR), so two samples hold one for about 0.7 of the units and a second round finds most of the
# rest; four at first cost the demo 234 samples of planning (as many tokens as its sections) and 53.6 s
MORE_SAMPLES = 4  # samples of its second round, when no sample of the first could be taken
PHRASE_TOKENS = 40  # one line: a title and its sentence (SmolLM2-135M's: 20-40 tokens)
SECOND_TEMPERATURE = 0.9  # farther from the first round's lines, none of which could be taken


def book_phrase(reading: Reading) -> str:
    """How a phrasing prompt names the book: 'A book on <subject>', or for a role 'A handbook for <its people>'."""
    if reading.kind == "role" and reading.audience:
        return f"A handbook for {reading.audience[0]}"
    return f"A book on {reading.subject}" if reading.subject else "A book"


@dataclass
class Unit:
    """One unit to phrase: its level, what it is about, the prompt's values, the node it belongs to, and the
    level whose prompt asks it (its own unless given: a part made of a facet is asked as a chapter is)."""

    level: Level
    about: str
    values: dict[str, str]
    node_id: str
    asked_as: Level | None = None

    @property
    def template(self) -> str:
        return TEMPLATES[self.asked_as or self.level]


@dataclass
class Samples:
    """A unit's first round, asked ahead (all of a book's units go out at once) and awaited when it is chosen."""

    done: anyio.Event = field(default_factory=anyio.Event)
    items: list[PlanItem] = field(default_factory=list)

    async def wait(self) -> list[PlanItem]:
        await self.done.wait()
        return self.items


@dataclass
class Taking:
    """Where a node's children are taken: its ancestors' titles (echo checks), the siblings taken so far."""

    ancestors: dict[str, str]
    chosen: list[str] = field(default_factory=list)
    units: list[str] = field(default_factory=list)

    def took(self, item: PlanItem) -> None:
        self.chosen.append(item.title)
        self.units.append(unit(item.title, item.point))


class Phraser:
    """Phrases a book's given units through the node asker's pool, samples and checks (asking.py)."""

    def __init__(self, asker: NodeAsker, reading: Reading) -> None:
        self.asker = asker
        self.reading = reading
        self.book = book_phrase(reading)
        own = content_words(" ".join([asker.spec.prompt, *reading.asks]))
        self.copied = frozenset(
            (rare_example_words() | {w for name in PHRASE_TEMPLATES for w in example_words(name)}) - own
        )

    def ahead(self, group: TaskGroup, phrase: Unit) -> Samples:
        """Start the unit's first round in `group`; its samples, when they are in."""
        samples = Samples()

        async def fetch() -> None:
            try:
                samples.items = await self.samples(phrase, 0)
            finally:
                samples.done.set()

        group.start_soon(fetch)
        return samples

    async def samples(self, phrase: Unit, number: int) -> list[PlanItem]:
        """One round of the unit's samples, each answer's first line read as a title and its point."""
        spec, sampler = self.asker.spec, self.asker.sampler
        messages = book_context(spec.prompt) + render_chat(phrase.template, **phrase.values)
        temperature = sampler.profile.planning_temperature if number == 0 else SECOND_TEMPERATURE
        request = sampler.request(messages, PHRASE_TOKENS, f"plan:phrase:{phrase.node_id}:{number}", temperature)
        request = request.model_copy(update={"extra": {**request.extra, "stop": ["\n"]}})
        count = PHRASE_SAMPLES if number == 0 else MORE_SAMPLES
        texts = await self.asker.sample_texts(request, phrase.node_id, count)
        items = [parse_item(text.strip().split("\n", 1)[0]) for text in texts]
        return [item for item in items if len(item.title) >= 2]

    async def phrase(
        self,
        phrase: Unit,
        taking: Taking,
        first: Awaitable[list[PlanItem]] | None = None,
        *,
        last_resort: bool = False,
    ) -> PlanItem | None:
        """The unit's line, taken for the book (claimed); None when neither round gave one that could be taken.
        With `last_resort`, past both rounds the best line of either that has no defect is taken whatever its fit
        or faults (a part's title: leaving a part out would drop its chapters)."""
        seen: list[PlanItem] = []
        for number in range(2):
            if number > 0:
                self.asker.stats.asked_again(phrase.node_id)
            items = await first if number == 0 and first is not None else await self.samples(phrase, number)
            self.asker.stats.pooled += len(items)
            seen += items
            if (item := self.pick(items, phrase, taking)) is not None:
                self.asker.stats.reasked += number
                taking.took(item)
                return item
        if last_resort and (item := self.pick(seen, phrase, taking, strict=False)) is not None:
            taking.took(item)
            return item
        return None

    def pick(self, items: list[PlanItem], phrase: Unit, taking: Taking, *, strict: bool = True) -> PlanItem | None:
        """The best of the samples that has no defect and no fault, is on the subject and can be claimed (not
        `strict`: the best with no defect that can be claimed)."""
        checks, stats = self.asker.checks, self.asker.stats
        lines: list[PlanItem] = []
        for item in dict((title_key(i.title), i) for i in items).values():
            found = policy.repeats_given(item.title, phrase.about, taking.chosen) or checks.defect(
                item, taking.ancestors, taking.chosen, self.copied
            )
            if found:
                stats.refuse(phrase.node_id, item.title, found)
            else:
                lines.append(item)
        if not lines:
            return None
        to_request, ranked = checks.subject_fit(lines, f"{phrase.about}: {self.reading.subject}")
        title_fit, _ = checks.subject_fit([PlanItem(item.title) for item in lines], self.reading.subject)
        nearest = checks.similarity(lines, taking.units).max(axis=1) if taking.units else np.zeros(len(lines))
        scores = (ranked + title_fit) / 2 - DIVERSITY * nearest
        choice = self.choice(taking)
        for at in np.argsort(-scores):
            item, score = lines[int(at)], float(scores[int(at)])
            log.debug(
                "phrase %s: %.2f to the request, its title %.2f, %.2f ranked: %s",
                phrase.node_id,
                to_request[at],
                title_fit[at],
                score,
                unit(item.title, item.point),
            )
            if strict and (off := policy.title_off_subject(float(title_fit[at]))):  # a title is read alone
                stats.hold(phrase.node_id, off)
                continue
            held = held_back(item, score, choice, checks=checks, request_fit=float(to_request[at]))
            if strict and held is not None:
                stats.hold(phrase.node_id, held.why)
                continue
            if (claimed := checks.claim(phrase.level, item, strict=True)) is not None:
                stats.refuse(phrase.node_id, item.title, claimed)
                continue
            return item
        return None

    def choice(self, taking: Taking) -> Choice:
        """A Choice for choose.held_back's checks: the siblings taken, no asks owed (a given unit carries its own)."""
        ask = NodeAsk("", {}, "sections", len(taking.chosen) + 1, [], taking.ancestors, _ignore, "")
        return Choice(ask, taking.chosen, dict(zip(taking.chosen, taking.units)), _NO_ASKS, _ignore_take)


def _ignore(item: PlanItem, *, musts: list[str]) -> None:
    return None


def _ignore_take(item: PlanItem) -> None:
    return None


class _NoAsks(Coverage):
    """Coverage with nothing owed."""

    def __init__(self) -> None:
        self.open: list[str] = []
        self.leaf = True


_NO_ASKS = _NoAsks()
