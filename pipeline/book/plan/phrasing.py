"""The model phrasing what the plan gives (pipeline/meaning/given.py): one title and point for each given node.

A small model invents a book's plan poorly and phrases a heading for something given far better
(SmolLM2-135M: docs/planning.md). Each given node is asked on its own (templates/phrase_*.md: a few worked answers from
other subjects, then "A book on <subject>. Its chapter about <facet> is titled:"), sampled as rounds.GIVEN says (two
samples, then four), and answered on one line, a title, a colon, one sentence. Of the samples, a line with a defect is
refused (the policy's `phrase` chain: it repeats what it was asked, no key point, a prompt's or a worked example's
words, a fragment of the request, a word a handbook would not print ...); the rest are ranked by their fit to the
request and to the node they were asked for, less DIVERSITY × their likeness to the siblings already taken
(choose.scores, the open planner's ranker too), and the best that no hold finds and the book can claim is taken
(choose.held_or_claimed, choose.decide). When none can be, the node is asked once more (rounds.Rounds) with more
samples at a higher temperature; when that fails too, None: the planner asks a spare, or the node has fewer children.
Nothing in an answer raises; nothing the pipeline writes itself reaches the plan.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Literal

import anyio
import numpy as np
from anyio.abc import TaskGroup

from pipeline.book.plan.choose import Choosing, decide, held_or_claimed, scores
from pipeline.book.plan.policy import Chain
from pipeline.book.plan.prompts import PHRASE_TEMPLATES, PlanItem, example_words, parse_item, rare_example_words
from pipeline.book.plan.rounds import GIVEN, TOKENS_PER_ITEM, Asking, Rounds, temperature
from pipeline.meaning.nearness import unit
from pipeline.meaning.reading import Reading
from pipeline.templating import book_context, render_chat
from pipeline.titles import content_words, title_key

log = logging.getLogger("fanout")
Level = Literal["title", "parts", "chapters", "sections"]
TEMPLATES: dict[Level, str] = dict(zip(("title", "parts", "chapters", "sections"), PHRASE_TEMPLATES))


def book_phrase(reading: Reading) -> str:
    """How a phrasing prompt names the book: 'A book on <subject>', or for a role 'A handbook for <its people>'."""
    if reading.kind == "role" and reading.audience:
        return f"A handbook for {reading.audience[0]}"
    return f"A book on {reading.subject}" if reading.subject else "A book"


@dataclass
class ToPhrase:
    """One given node to phrase: its level, what it is about, the prompt's values, the node it becomes, and the level
    whose prompt asks it (its own unless given: a part made of a facet is asked as a chapter is)."""

    level: Level
    about: str
    values: dict[str, str]
    node_id: str
    asked_as: Level | None = None

    @classmethod
    def of(
        cls, level: Level, about: str, node_id: str, *, book: str, chapter: str | None = None,
        asked_as: Level | None = None,
    ) -> ToPhrase:  # fmt: skip
        """A node of `book` (book_phrase) about `about`; `chapter`: what the chapter it is in is about (a section's)."""
        values = {"book": book, "about": about} | ({"chapter": chapter} if chapter is not None else {})
        return cls(level, about, values, node_id, asked_as)

    @property
    def template(self) -> str:
        return TEMPLATES[self.asked_as or self.level]


@dataclass
class Samples:
    """A given node's first round, asked ahead (all of a book's nodes go out at once) and awaited when it is chosen."""

    done: anyio.Event = field(default_factory=anyio.Event)
    items: list[PlanItem] = field(default_factory=list)

    async def wait(self) -> list[PlanItem]:
        await self.done.wait()
        return self.items


class Phraser:
    """Phrases a book's given nodes: asks their rounds (rounds.Sampling) and picks each one's line (module docstring).
    The line `phrase` returns is taken into the caller's Choosing."""

    def __init__(self, asking: Asking, reading: Reading, *, request: str) -> None:
        self.sampling, self.checks, self.stats, self.need = asking.sampling, asking.checks, asking.stats, asking.need
        self.reading = reading
        self.request = request
        self.book = book_phrase(reading)
        own = content_words(" ".join([request, *reading.asks]))
        self.forbidden = frozenset(
            (rare_example_words() | {w for name in PHRASE_TEMPLATES for w in example_words(name)}) - own
        )

    def ahead(self, group: TaskGroup, phrase: ToPhrase) -> Samples:
        """Start the given node's first round in `group`; its samples, when they are in."""
        samples = Samples()

        async def fetch() -> None:
            try:
                samples.items = await self.samples(phrase, 0, 0)
            finally:
                samples.done.set()

        group.start_soon(fetch)
        return samples

    async def samples(self, phrase: ToPhrase, number: int, asked: int) -> list[PlanItem]:
        """Round `number` of the given node's samples (`asked`: its requests before), each answer's first line read
        as a title and its point."""
        sampler = self.sampling.sampler
        messages = book_context(self.request) + render_chat(phrase.template, **phrase.values)
        heat = temperature(GIVEN, sampler, number)
        request = sampler.request(messages, TOKENS_PER_ITEM, f"plan:phrase:{phrase.node_id}:{asked}", heat)
        request = request.model_copy(update={"extra": {**request.extra, "stop": ["\n"]}})
        count = self.need.samples(GIVEN, phrase.level, number)
        texts = await self.sampling.texts(request, phrase.node_id, count)
        items = [parse_item(text.strip().split("\n", 1)[0]) for text in texts]
        return [item for item in items if len(item.title) >= 2]

    async def phrase(
        self,
        phrase: ToPhrase,
        choosing: Choosing,
        first: Awaitable[list[PlanItem]] | None = None,
        *,
        last_resort: bool = False,
    ) -> PlanItem | None:
        """The given node's line, claimed for the book and taken into `choosing`, in its rounds (rounds.Rounds;
        `first`: its first, asked ahead); None when no round gave one that could be taken. With `last_resort`, past
        the rounds the best line of any that has no defect is taken whatever its fit or faults (a part's title:
        leaving a part out would drop its chapters)."""
        seen: list[PlanItem] = []
        rounds = Rounds(phrase.node_id, self.stats)
        for number, asked in rounds:
            items = await first if asked == 0 and first is not None else await self.samples(phrase, number, asked)
            seen += items
            if rounds.heard(items) and (item := self.pick(items, phrase, choosing)) is not None:
                return item
        if last_resort:
            return self.pick(seen, phrase, choosing, strict=False)
        return None

    def pick(
        self, items: list[PlanItem], phrase: ToPhrase, choosing: Choosing, *, strict: bool = True
    ) -> PlanItem | None:
        """Take the best of the samples that has no defect and no fault, is on the subject and can be claimed (not
        `strict`: the best with no defect that can be claimed); None when none can."""
        lines = self.without_defects(items, phrase, choosing)
        if not lines:
            return None
        checks = self.checks
        to_request, ranked = checks.subject_fit(lines, f"{phrase.about}: {self.reading.subject}")
        title_fit, _ = checks.subject_fit([PlanItem(item.title) for item in lines], self.reading.subject)
        ranked_now = scores(lines, (ranked + title_fit) / 2, choosing, checks, owed=False)
        for at in np.argsort(-ranked_now):
            item, score = lines[int(at)], float(ranked_now[int(at)])
            log.debug(
                "phrase %s: %.2f to the request, its title %.2f, %.2f ranked: %s",
                phrase.node_id,
                to_request[at],
                title_fit[at],
                score,
                unit(item.title, item.point),
            )
            fit, alone = float(to_request[at]), float(title_fit[at])
            found = held_or_claimed(item, choosing, checks=checks, fit=fit, hold=strict, title_fit=alone)
            if decide(item, found, choosing, stats=self.stats, score=score, keep=False):
                return item
        return None

    def without_defects(self, items: list[PlanItem], phrase: ToPhrase, choosing: Choosing) -> list[PlanItem]:
        """The samples, one a title, without those that repeat what was asked or have a defect (each refused is
        counted)."""
        lines: list[PlanItem] = []
        known = {"ancestors": choosing.ancestors, "taken": choosing.taken, "forbidden": self.forbidden}
        for item in dict((title_key(i.title), i) for i in items).values():
            if found := self.checks.first(Chain.PHRASE, item, about=phrase.about, **known):
                self.stats.refuse(phrase.node_id, item.title, found)
            else:
                lines.append(item)
        return lines
