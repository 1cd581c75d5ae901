"""Asking the model for one node's children in open planning: a round samples the node's question at once
(rounds.py), the lines of every sample are pooled, and choose.py takes the best; a second round only when the pool
could not fill the node (showing the titles chosen, never why others were not); then the asks the node still owes,
each phrased by the model as a given node (phrasing.py), and the lines held back; past those, fewer children. In
the streamed and pipelined schedules a node's first title is taken while the first round's samples still stream
(_Early), so the next level is asked at once. Each sample is asked for SPARE_ITEMS lines more than the node needs
and stops at the line number after them. The book's title comes with the book's first round (BookTitle). Model
output is untrusted: nothing in an answer raises.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from pipeline.book.plan.choose import (
    BookTitle,
    Choosing,
    Coverage,
    OnItem,
    Question,
    choose,
    take_early,
    take_held,
)
from pipeline.book.plan.phrasing import Phraser, ToPhrase
from pipeline.book.plan.policy import Group
from pipeline.book.plan.prompts import (
    PlanItem,
    StreamingSamples,
    chosen_note,
    example_words,
    how_many,
    interleaved,
    parse_book_title,
    parse_items,
    rare_example_words,
)
from pipeline.book.plan.rounds import (
    BOOK_TITLE_TOKENS,
    OPEN,
    SPARE_ITEMS,
    TOKENS_PER_ITEM,
    Asking,
    Rounds,
    temperature,
)
from pipeline.meaning.embed import EmbedAhead
from pipeline.meaning.nearness import unit
from pipeline.templating import book_context, render_chat
from pipeline.titles import content_words, title_key

log = logging.getLogger("fanout")


class NodeAsker:
    """Fills open nodes' children for one book, with the sampling, checks, counts and phraser it is given."""

    def __init__(self, asking: Asking, phraser: Phraser, book_title: BookTitle) -> None:
        self.sampling, self.checks, self.stats, self.need = asking.sampling, asking.checks, asking.stats, asking.need
        self.phraser = phraser
        self.book_title = book_title
        self.request = book_title.request
        self.ahead = EmbedAhead(self.checks.judge or self.checks.embedder)  # streamed lines' units, off the event loop

    def forbidden(self, question: Question) -> frozenset[str]:
        """The worked example's words a line may not borrow: not those the request, a title above the node or an
        ask it carries uses ('cloud' in the sections of a chapter "Building a Cloud Platform"); a point above it is
        no reason: a part on "how old sailors measured their sails" in a history of maps had drifted already."""
        own_words = " ".join([self.request, *question.ancestors.values(), *question.owed])
        return (example_words(question.template) | rare_example_words()) - content_words(own_words)

    async def titles(self, question: Question, on_item: OnItem) -> None:
        """Choose `question.count` children, telling `on_item` of each as it is taken."""
        coverage = Coverage(self.checks.embedder, list(question.owed), leaf=question.level == "sections")
        choosing = Choosing.of(question, coverage, on_item)
        forbidden = self.forbidden(question)
        if choosing.missing() > 0:
            await self._rounds(question, choosing, forbidden)
        await self._last_resorts(question, choosing)

    async def _rounds(self, question: Question, choosing: Choosing, forbidden: frozenset[str]) -> None:
        """The node's rounds (rounds.Rounds): each pooled and chosen from, the lines held for a fault taken after,
        until the node is filled."""
        rounds = Rounds(question.node_id, self.stats)
        for number, asked in rounds:
            early = _Early(self, question, choosing, forbidden) if question.early and number == 0 else None
            samples = self.need.samples(OPEN, question.level, number)
            pool = await self._round(
                question, choosing, number, asked=asked, samples=samples, early=early, forbidden=forbidden
            )
            if not rounds.heard(pool):
                continue
            choose(pool, choosing, checks=self.checks, stats=self.stats, forbidden=forbidden)
            take_held(choosing, checks=self.checks, stats=self.stats)
            if number == 0:
                self.need.heard(samples=samples, filled=choosing.missing() <= 0)
            if choosing.missing() <= 0:
                return

    async def _last_resorts(self, question: Question, choosing: Choosing) -> None:
        """What the rounds left: the asks of the request this node still owes, each phrased by the model as a
        given node; lines held for carrying none of the asks a last slot owed; lines held as off the subject. Past
        those the node has fewer children (the planner marks it short): nothing is made up."""
        assert choosing.coverage is not None, "an open node's choosing carries its asks"
        if not self.checks.small:  # a capable model's own lines come before any phrased for it
            take_held(choosing, checks=self.checks, stats=self.stats, group=Group.OWED)
        if choosing.missing() > 0 and choosing.coverage.owed:
            await self._phrase_owed(question, choosing)
        take_held(choosing, checks=self.checks, stats=self.stats, group=Group.OWED)
        take_held(choosing, checks=self.checks, stats=self.stats, group=Group.OFF)
        if choosing.coverage.owed:
            self.stats.asks_dropped += len(choosing.coverage.owed)
            log.info(
                "under %s no %s carries %s", question.node_id, question.level[:-1], "; ".join(choosing.coverage.owed)
            )

    async def _phrase_owed(self, question: Question, choosing: Choosing) -> None:
        """The node's rounds are spent and children still missing: the asks it still owes, each phrased by the model
        as a given node ('its section about <ask>'); what cannot be phrased stays missing."""
        assert choosing.coverage is not None
        parent = next(iter(question.ancestors.values()), "")
        for owed in list(choosing.coverage.owed):
            if choosing.missing() <= 0:
                return
            phrase = ToPhrase.of(question.level, owed, f"{question.node_id}+", book=self.phraser.book, chapter=parent)
            item = await self.phraser.phrase(phrase, choosing)
            self.stats.phrased += 1
            self.stats.filled_from_asks += item is not None

    async def _round(
        self,
        question: Question,
        choosing: Choosing,
        number: int,
        *,
        asked: int,
        samples: int,
        early: _Early | None,
        forbidden: frozenset[str],
    ) -> list[PlanItem]:
        """One round's samples, their lines pooled in turn (every sample's first line, then every second ...),
        so the lines a model gives first, its surest, come first; the book title from the first sample that
        gives a usable one. With `early`, lines are taken while the samples stream (_Early)."""
        lines = question.count - len(choosing.taken) + SPARE_ITEMS
        avoid = chosen_note(choosing.taken)
        messages = book_context(self.request) + render_chat(
            question.template, **question.values, how_many=how_many(lines, question.level[:-1]), avoid=avoid
        )
        sampler = self.sampling.sampler
        max_tokens = TOKENS_PER_ITEM * lines + (BOOK_TITLE_TOKENS if question.with_title else 0)
        heat = temperature(OPEN, sampler, number)
        request = sampler.request(messages, max_tokens, f"plan:{question.node_id}:{asked}", heat)
        stop = [*(request.extra.get("stop") or []), f"\n{lines + 1}."]
        request = request.model_copy(update={"extra": {**request.extra, "stop": stop}})
        if early is None:
            texts = await self.sampling.texts(request, question.node_id, samples)
        else:
            async with early.draining():
                texts = await self.sampling.texts(request, question.node_id, samples, early.listen(samples))
        if question.with_title:
            titles = [parse_book_title(text) for text in texts]
            self.book_title.from_samples(titles, forbidden=forbidden)
        return interleaved([parse_items(text)[:lines] for text in texts])


EARLY_TRIES = 3  # complete lines a node tries its first child at before it leaves it to the whole pool
EARLY_TAKES = 1  # lines a node of a pooled round (several samples) takes while they stream: its first child, the
# next link of the chain. Taking every line of pooled samples so (each once every sample had given as many) cost
# 30 s of planning checks against 6 on the 8x12x16 efficiency job (each line checked again at every line), planning
# took 42 s against 15, and the whole job 0.49 of the fleet's sustained rate against 0.67. A one-sample round has
# nothing to pool: each of its lines is checked once, as it lands, and taken when it passes (_Early.every).


class _Early:
    """Takes a node's lines while its first round's samples stream, so the chain of first lines is the critical
    path (a part's chapters are asked as soon as the part's line lands). Of a pooled round (several samples) it
    takes the first line only, once every sample has given a complete line, by choose.take_early from the lines
    so far; a line it cannot take cleanly waits for the next line, and the whole pool decides the rest. Of a
    one-sample round (`every`) it takes each line as it lands, when that line alone passes what choose would ask of
    it; one that does not is left to the whole answer. Its title and point are embedded first on a worker thread
    with other nodes' lines (EmbedAhead: `drain`), so the judge does not hold up the streams. The book title
    first, from the same samples' title lines (made from the request when none is usable, as at the end of the
    round)."""

    def __init__(self, asker: NodeAsker, question: Question, choosing: Choosing, forbidden: frozenset[str]) -> None:
        self.asker = asker
        self.question = question
        self.choosing = choosing
        self.forbidden = forbidden
        self.taken = self.tries = 0
        self.every = False  # a one-sample round: every line is taken as it lands (listen sets it)
        self.looked: set[str] = set()  # the title keys of the lines `every` has queued, so each is checked once
        self.queued: list[PlanItem] = []
        self.arrived = anyio.Event()
        self.closed = False
        self.samples = StreamingSamples(0)

    @property
    def done(self) -> bool:
        if self.choosing.missing() <= 0:
            return True
        return not self.every and (self.taken >= EARLY_TAKES or self.tries >= EARLY_TRIES)

    def listen(self, choices: int) -> _Early:
        """Hear a round of `choices` samples stream (rounds.Listener)."""
        self.every = choices == 1
        self.samples = StreamingSamples(choices)
        return self

    def piece_of(self, sample: int, text: str) -> None:
        if not self.done and self.samples.piece(sample, text):
            self.on_line(self.samples)

    def restart(self, sample: int | None) -> None:
        """A sample is asked again: what it streamed is void, lines queued from it too (those taken stay taken)."""
        self.samples.restart(sample)
        self.looked -= {title_key(item.title) for item in self.queued}
        self.queued = []

    def on_line(self, samples: StreamingSamples) -> None:
        if self.question.with_title and samples.depth() > 0:  # every sample's title line is in
            titles = [parse_book_title(text) for text in samples.texts]
            self.asker.book_title.from_samples(titles, forbidden=self.forbidden, or_made=True)
        if self.every:
            self._queue_new(samples.items[0])
            return
        checks = self.asker.checks
        while not self.done and self.taken < samples.depth():
            self.tries += 1
            if not take_early(samples.pool(), self.choosing, checks=checks, forbidden=self.forbidden):
                return
            self._took()

    def _queue_new(self, items: list[PlanItem]) -> None:
        for item in items:
            key = title_key(item.title)
            if key not in self.looked:
                self.looked.add(key)
                self.queued.append(item)
                self.arrived.set()

    @asynccontextmanager
    async def draining(self) -> AsyncIterator[None]:
        """`drain` runs while the block (the round's samples) does, and takes what is queued after it."""
        async with anyio.create_task_group() as group:
            group.start_soon(self.drain)
            yield
            self.closed = True
            self.arrived.set()

    async def drain(self) -> None:
        """Take the queued lines in the order they landed, each once its unit is embedded (EmbedAhead)."""
        parent = self.choosing.parent_unit or self.asker.request
        checks = self.asker.checks
        while True:
            await self.arrived.wait()
            self.arrived = anyio.Event()
            items, self.queued = self.queued, []
            if items and not self.done:
                await self.asker.ahead.embed([parent, *(unit(item.title, item.point) for item in items)])
            for item in items:
                if not self.done and take_early([item], self.choosing, checks=checks, forbidden=self.forbidden):
                    self._took()
            if self.closed and not self.queued:
                return

    def _took(self) -> None:
        self.taken += 1
        self.asker.stats.taken_early += 1
