"""Asking the model for one node's titles: a round samples the node's question at once (schedule.SampleNeed), the
lines of every sample are pooled, and choose.py takes the best; a second round only when the pool could not
fill the node (showing the titles chosen, never why others were not); then the asks the node still owes, each
phrased by the model (the planner's `fill`), and the lines held back; past those, fewer children. In the streamed
and pipelined schedules a node's first title is taken while the first round's samples still stream (_Early), so
the next level is asked at once.

The samples of a round are one request with `n` where every engine of the fleet samples in parallel
(engines.py's `parallel_sampling`: the prompt is read once and each sample has its own seed), else one request
each. Each sample is asked for SPARE_ITEMS lines more than the node needs and stops at the line number after
them. An ask whose request failed on every backend is asked again later in the run (pipeline/book/later.py)
while the rest of the book goes on; one that never gets an answer counts as a failed ask, and the node goes on
with what it has (fewer children): no node ends the job. Model output is untrusted: nothing in an answer raises.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial

import anyio

from pipeline.backends.engines import honours_choices
from pipeline.backends.pool import BackendPool, RequestFailed
from pipeline.backends.sse import EveryChoice, OnDelta
from pipeline.book.later import asked_until_answered
from pipeline.book.plan.answers import PlanItem, StreamingSamples, interleaved, parse_book_title, parse_items
from pipeline.book.plan.checks import TitleChecks
from pipeline.book.plan.choose import Choice, choose, take_early, take_held
from pipeline.book.plan.coverage import Coverage
from pipeline.book.plan.fallbacks import fallback_book_title
from pipeline.book.plan.prompts import chosen_note, example_words, how_many, rare_example_words
from pipeline.book.plan.schedule import (
    EMPTY_ROUNDS,
    FIRST_ROUND_TEMPERATURE,
    PLAN_ROUNDS,
    SECOND_ROUND_TEMPERATURE,
    SPARE_ITEMS,
    TOKENS_PER_ITEM,
    NodeAsk,
    PlanStats,
    SampleNeed,
)
from pipeline.book.profiles import Sampler, is_small
from pipeline.meaning.embed import EmbedAhead
from pipeline.meaning.nearness import unit
from pipeline.meaning.onsubject import unit_fits
from pipeline.records import BookSpec, ChatRequest, Completion
from pipeline.templating import book_context, render_chat
from pipeline.titles import content_words, title_key

log = logging.getLogger("fanout")
BOOK_TITLE_TOKENS = 32
Fill = Callable[[NodeAsk, Choice], Awaitable[None]]  # phrases a node's owed asks as its children (planner.py)


class NodeAsker:
    """Fills nodes' titles for one book: the checks and counts it shares across the book, and the book title
    as the first round gives it."""

    def __init__(self, pool: BackendPool, spec: BookSpec, sampler: Sampler, checks: TitleChecks, stats: PlanStats):
        self.early = False  # take lines while the first round's samples stream (the streamed and pipelined schedules)
        self.pool = pool
        self.spec = spec
        self.sampler = sampler
        self.checks = checks
        self.embedder = checks.embedder
        self.stats = stats
        self.book_title = ""
        self.fill: Fill | None = None  # asks the model to phrase the asks a node still owes (planner.py)
        self.need = SampleNeed(many=is_small(sampler.profile))
        self.ahead = EmbedAhead(checks.judge or checks.embedder)  # streamed lines' units, off the event loop

    async def titles(self, ask: NodeAsk) -> None:
        """Choose `ask.count` items, telling `ask.on_item` of each as it is taken."""
        coverage = Coverage(self.embedder, list(ask.musts), leaf=ask.level == "sections")
        choice = Choice(ask, list(ask.have), {title: title for title in ask.have}, coverage, lambda item, **_: None)
        # a word of the example that the request or a title above this node uses is the book's word too
        # ('cloud' in the sections of a chapter "Building a Cloud Platform"); a point above it is not: a part
        # on "how old sailors measured their sails" in a history of maps had drifted to the example already
        own_words = " ".join([self.spec.prompt, *ask.ancestors.values(), *ask.musts])
        copied = (example_words(ask.template) | rare_example_words()) - content_words(own_words)

        def take(item: PlanItem) -> None:
            choice.chosen.append(item.title)
            choice.units[item.title] = unit(item.title, item.point)
            musts = choice.coverage.take(item, ask.count - len(choice.chosen))
            ask.on_item(item, musts=musts)

        choice.take = take
        rounds = empty = asked = 0
        while choice.missing() > 0 and rounds < PLAN_ROUNDS:
            if rounds > 0 and empty == 0:
                self.stats.reasked += 1
                self.stats.asked_again(ask.node_id)
            early = _Early(self, choice, copied) if self.early and rounds == 0 else None
            samples = self.need.samples(ask.level, rounds)
            pool = await self._round(ask, choice.chosen, rounds, asked=asked, samples=samples, early=early)
            asked += 1
            if not pool and empty < EMPTY_ROUNDS:  # no line at all: the backend's bad answer, not a round
                empty += 1
                continue
            rounds, empty = rounds + 1, 0
            self.stats.pooled += len(pool)
            choose(pool, choice, checks=self.checks, stats=self.stats, copied=copied)
            take_held(choice, checks=self.checks, stats=self.stats)
            if rounds == 1:
                self.need.heard(samples=samples, filled=choice.missing() <= 0)
        await self._last_resorts(choice)

    async def _last_resorts(self, choice: Choice) -> None:
        """What the rounds left: the asks of the request this node still owes, each phrased by the model as a
        given unit (`fill`); lines held for carrying none of the asks a last slot owed; lines held as off the
        request. Past those the node has fewer children (the planner marks it short): nothing is made up."""
        ask = choice.ask
        if not self.checks.small:  # a capable model's own lines come before any phrased for it
            take_held(choice, checks=self.checks, stats=self.stats, owed=True)
        if choice.missing() > 0 and self.fill is not None and choice.coverage.open:
            await self.fill(ask, choice)
        take_held(choice, checks=self.checks, stats=self.stats, owed=True)
        take_held(choice, checks=self.checks, stats=self.stats, off_request=True)
        if choice.coverage.open:
            self.stats.asks_dropped += len(choice.coverage.open)
            log.info("under %s no %s carries %s", ask.node_id, ask.level[:-1], "; ".join(choice.coverage.open))

    async def _round(
        self, ask: NodeAsk, chosen: list[str], number: int, *, asked: int, samples: int, early: _Early | None = None
    ) -> list[PlanItem]:
        """One round's samples, their lines pooled in turn (every sample's first line, then every second ...),
        so the lines a model gives first, its surest, come first; the book title from the first sample that
        gives a usable one. With `early`, lines are taken while the samples stream (_Early)."""
        lines = ask.count - len(chosen) + SPARE_ITEMS
        messages = book_context(self.spec.prompt) + render_chat(
            ask.template, **ask.values, how_many=how_many(lines, ask.level[:-1]), avoid=chosen_note(chosen)
        )
        floor = FIRST_ROUND_TEMPERATURE if number == 0 else SECOND_ROUND_TEMPERATURE
        temperature = max(self.sampler.profile.planning_temperature, floor)
        max_tokens = TOKENS_PER_ITEM * lines + (BOOK_TITLE_TOKENS if ask.with_title else 0)
        request = self.sampler.request(messages, max_tokens, f"plan:{ask.node_id}:{asked}", temperature)
        stop = [*(request.extra.get("stop") or []), f"\n{lines + 1}."]
        request = request.model_copy(update={"extra": {**request.extra, "stop": stop}})
        if early is None:
            texts = await self.sample_texts(request, ask.node_id, samples)
        else:
            async with early.draining():
                texts = await self.sample_texts(request, ask.node_id, samples, early)
        if ask.with_title and not self.book_title:
            self.book_title = self._best_book_title([parse_book_title(text) for text in texts])
        return interleaved([parse_items(text)[:lines] for text in texts])

    async def sample_texts(
        self, request: ChatRequest, node_id: str, choices: int, early: _Early | None = None
    ) -> list[str]:
        """`choices` answers to the request: one request with `n`, or one request a sample (each its own seed);
        `early` hears every sample's text as it streams."""
        streaming = None if early is None else early.listen(choices)
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
        streaming: _Listening | None = None,
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
            self.stats.failed_asks += 1
            log.warning("planning %s: %s", node_id, failure)
            return []
        texts = [answer.text, *answer.more_texts]
        self.stats.samples += len(texts)
        return texts

    def _later(self) -> None:
        """An ask that failed on every backend waits to be asked again: counted."""
        self.stats.asked_later += 1

    def _best_book_title(self, titles: list[str]) -> str:
        """Of the samples' book titles, the usable one nearest the request (the judge's fit), or ""."""
        usable = list(dict.fromkeys(title for title in map(self.usable_book_title, titles) if title))
        if len(usable) < 2:
            return usable[0] if usable else ""
        fits = unit_fits(self.checks.judge or self.embedder, self.spec.prompt, usable)
        return usable[int(fits.argmax())]

    def usable_book_title(self, title: str) -> str:
        """The model's book title, or "" (the planner then makes one from the request) when it is refused."""
        if not title:
            return ""
        if found := self.checks.book_title(title):
            self.stats.refuse("book", title, found)
            return ""
        return title


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

    def __init__(self, asker: NodeAsker, choice: Choice, copied: frozenset[str]) -> None:
        self.asker = asker
        self.choice = choice
        self.copied = copied
        self.taken = self.tries = 0
        self.every = False  # a one-sample round: every line is taken as it lands (listen sets it)
        self.looked: set[str] = set()  # the title keys of the lines `every` has queued, so each is checked once
        self.queued: list[PlanItem] = []
        self.arrived = anyio.Event()
        self.closed = False

    @property
    def done(self) -> bool:
        if self.choice.missing() <= 0:
            return True
        return not self.every and (self.taken >= EARLY_TAKES or self.tries >= EARLY_TRIES)

    def listen(self, choices: int) -> _Listening:
        self.every = choices == 1
        return _Listening(StreamingSamples(choices), self)

    def on_line(self, samples: StreamingSamples) -> None:
        ask, asker = self.choice.ask, self.asker
        if ask.with_title and not asker.book_title and samples.depth() > 0:
            # every sample's title line is in: none usable, none to come
            titles = [parse_book_title(text) for text in samples.texts]
            asker.book_title = asker._best_book_title(titles) or fallback_book_title(asker.spec.prompt)
        if self.every:
            self._queue_new(samples.items[0])
            return
        while not self.done and self.taken < samples.depth():
            self.tries += 1
            if not take_early(samples.pool(), self.choice, checks=asker.checks, copied=self.copied):
                return
            self._took()

    def _queue_new(self, items: list[PlanItem]) -> None:
        for item in items:
            key = title_key(item.title)
            if key not in self.looked:
                self.looked.add(key)
                self.queued.append(item)
                self.arrived.set()

    def void_queued(self) -> None:
        """The attempt the queued lines came from was cut: they are not taken, and its lines may come again."""
        self.looked -= {title_key(item.title) for item in self.queued}
        self.queued = []

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
        parent = self.choice.ask.parent_unit or self.asker.spec.prompt
        while True:
            await self.arrived.wait()
            self.arrived = anyio.Event()
            items, self.queued = self.queued, []
            if items and not self.done:
                await self.asker.ahead.embed([parent, *(unit(item.title, item.point) for item in items)])
            for item in items:
                if not self.done and take_early([item], self.choice, checks=self.asker.checks, copied=self.copied):
                    self._took()
            if self.closed and not self.queued:
                return

    def _took(self) -> None:
        self.taken += 1
        self.asker.stats.taken_early += 1


@dataclass
class _Listening:
    """One round's streaming samples and the _Early that takes from them."""

    samples: StreamingSamples
    early: _Early

    def piece_of(self, sample: int, text: str) -> None:
        if not self.early.done and self.samples.piece(sample, text):
            self.early.on_line(self.samples)

    def restart(self, sample: int | None) -> None:
        """A sample is asked again: what it streamed is void, lines queued from it too (those taken stay taken)."""
        self.samples.restart(sample)
        self.early.void_queued()
