"""Asking the model for one node's titles: as many asks in flight as the share of lines taken says the need
takes, each read as it streams and every item checked the moment its line arrives, a re-ask showing what
was chosen and refused with the reasons, and the last resorts when the asks are spent.

An ask whose request failed on every backend is asked again later in the run (pipeline/book/later.py)
while the rest of the book goes on; one that never gets an answer counts as a failed ask, and the node goes
on with its other asks: no node ends the job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

import anyio

from pipeline.audit.meaning import unit
from pipeline.backends.pool import BackendPool, RequestFailed
from pipeline.book.later import asked_until_answered
from pipeline.book.plan.answers import ItemStream, PlanItem, parse_book_title, parse_items
from pipeline.book.plan.checks import TitleChecks, example_words, rare_example_words
from pipeline.book.plan.coverage import Coverage
from pipeline.book.plan.fallbacks import Unfilled, last_resorts
from pipeline.book.plan.schedule import (
    REASK_TEMPERATURES,
    SPARE_ITEMS,
    TOKENS_PER_ITEM,
    Acceptance,
    NodeAsk,
    PlanStats,
    asks_at_once,
    avoid_note,
    how_many,
)
from pipeline.book.profiles import Sampler
from pipeline.records import BookSpec, Completion
from pipeline.templating import render_chat
from pipeline.titles import content_words, title_key

log = logging.getLogger("fanout")


class NodeAsker:
    """Fills nodes' titles for one book: the checks and counts it shares across the book, and the book title
    as the first answer gives it."""

    def __init__(self, pool: BackendPool, spec: BookSpec, sampler: Sampler, checks: TitleChecks, stats: PlanStats):
        self.pool = pool
        self.spec = spec
        self.sampler = sampler
        self.checks = checks
        self.embedder = checks.embedder
        self.stats = stats
        self.acceptance = Acceptance()  # over the whole book: how many asks of a node go out at once
        self.book_title = ""

    async def titles(self, ask: NodeAsk) -> None:
        """Ask until `ask.count` items are in hand, telling `ask.on_item` of each new one as soon as it has
        streamed in; refused titles are shown, with their reasons, to the next ask."""
        chosen = list(ask.have)
        units = {title: title for title in ask.have}  # a chosen title -> its title and point
        refused: list[tuple[str, str]] = []
        spare: list[tuple[PlanItem, str]] = []  # refused items and why: the last resorts before placeholders
        # a word of the example that the request or a title above this node uses is the book's word too
        # ('cloud' in the sections of a chapter "Building a Cloud Platform"); a point above it is not: a part
        # on "how old sailors measured their sails" in a history of maps had drifted to the example already
        own_words = " ".join([self.spec.prompt, *ask.ancestors.values(), *ask.musts])
        copied = (example_words(ask.template) | rare_example_words()) - content_words(own_words)
        coverage = Coverage(self.embedder, list(ask.musts), leaf=ask.level == "sections")

        def take(item: PlanItem, *, placeholder: bool = False) -> None:
            chosen.append(item.title)
            units[item.title] = unit(item.title, item.point)
            ask.on_item(item, placeholder=placeholder, musts=coverage.take(item, ask.count - len(chosen)))

        seen = Acceptance()  # this node's own items

        def consider(item: PlanItem) -> None:
            if len(chosen) == ask.count or any(title_key(item.title) == title_key(t) for t in chosen):
                return  # a retried attempt repeating its streamed part, or an ask beside it giving the same
            reason = self.checks.why_refused(item, ask, chosen, copied, coverage, list(units.values()))
            for counts in (seen, self.acceptance):
                counts.considered += 1
                counts.taken += reason is None
            if reason is not None:
                refused.append((item.title, reason))
                spare.append((item, reason))
                self.stats.refused.append((ask.node_id, item.title, reason))
                return
            self.stats.missing_points += not item.point
            take(item)

        await self._fill(ask, chosen, refused, consider, seen)
        unfilled = Unfilled(ask, chosen, units, copied, take)
        last_resorts(unfilled, spare, list(coverage.open), checks=self.checks, stats=self.stats)
        if coverage.open:
            self.stats.asks_dropped += len(coverage.open)
            log.info("under %s no %s carries %s", ask.node_id, ask.level[:-1], "; ".join(coverage.open))

    async def _fill(
        self,
        ask: NodeAsk,
        chosen: list[str],
        refused: list[tuple[str, str]],
        consider: Callable[[PlanItem], None],
        seen: Acceptance,
    ) -> None:
        """Ask until `ask.count` titles are chosen or `plan_attempts` asks were made. As many asks stay in
        flight as the taken share so far says the need takes (asks_at_once): when one ends short, the next
        goes out at once, showing what was chosen and refused until then, without waiting for the others.
        Asks beside another count against `plan_attempts` too: letting them come on top doubled the demo's
        planning (37 -> 63 requests, 101 -> 200 s) for no better titles (`fanout quality`, sourdough)."""
        asked = running = beside = 0
        ended = anyio.Event()

        def full() -> bool:
            return len(chosen) == ask.count

        async def one(number: int, messages: list[dict[str, str]], items: int) -> None:
            nonlocal running
            try:
                tag = f"plan:{ask.node_id}:{number}"
                temperature = self._temperature(number)
                await self._ask(
                    messages, items, tag, temperature, with_title=ask.with_title, consider=consider, enough=full
                )
            except RequestFailed as failure:  # a node's planning never ends the job: its other asks go on
                self.stats.failed_asks += 1
                log.warning("planning %s: %s", ask.node_id, failure)
            finally:
                running -= 1
                ended.set()

        async with anyio.create_task_group() as group:
            while not full() and (asked < self.spec.plan_attempts or running):
                need = ask.count - len(chosen)
                width = asks_at_once(need, seen.share(self.acceptance.share()))
                while running < width and asked < self.spec.plan_attempts:
                    messages = render_chat(
                        ask.template,
                        **ask.values,
                        how_many=how_many(need + SPARE_ITEMS, ask.level[:-1]),
                        avoid=avoid_note(chosen, refused),
                    )
                    group.start_soon(one, asked, messages, need + SPARE_ITEMS)
                    beside += running > 0
                    asked += 1
                    running += 1
                await ended.wait()
                ended = anyio.Event()
            group.cancel_scope.cancel()  # full: an ask beside the last one would only hold a slot
        self.stats.reasked += asked - 1
        self.stats.widened += beside

    def _temperature(self, attempt: int) -> float:
        first = self.sampler.profile.planning_temperature
        if attempt == 0:
            return first
        return max(first, REASK_TEMPERATURES[min(attempt, len(REASK_TEMPERATURES)) - 1])

    def _later(self, restart: Callable[[], None]) -> None:
        """An ask that failed on every backend waits to be asked again: counted, and its stream starts anew."""
        self.stats.asked_later += 1
        restart()

    async def _ask(
        self,
        messages: list[dict[str, str]],
        need: int,
        tag: str,
        temperature: float,
        *,
        with_title: bool,
        consider: Callable[[PlanItem], None],
        enough: Callable[[], bool],
    ) -> None:
        """One planning request; `consider` sees each item as its line streams in, then those only the whole
        answer yields (JSON, say). Once `enough` items are in hand the request is cancelled: more lines
        would only hold a slot. So it is once the answer has given the `need` lines it was asked for: a
        small model that goes on past them repeats itself to the token cap (288 tokens, 47 s under load on
        the demo's critical path), and the next ask, showing what was refused, is the better use of the
        time. A retried attempt starts a fresh stream; items the cut one gave stay."""
        max_tokens = TOKENS_PER_ITEM * (need + 1) + (32 if with_title else 0)
        request = self.sampler.request(messages, max_tokens, tag, temperature)
        stream = ItemStream()
        scope = anyio.CancelScope()

        def on_delta(text: str) -> None:
            items = stream.feed(text)
            self.book_title = self.book_title or self._usable_book_title(stream.title)
            for item in items:
                consider(item)
            if (enough() or len(stream.taken) >= need) and (self.book_title or not with_title):
                scope.cancel()

        def on_retry() -> None:
            nonlocal stream
            stream = ItemStream()

        async def complete() -> Completion:
            return await self.pool.complete(request, on_delta, first=True, on_retry=on_retry)

        self.stats.requests += 1
        with scope:
            answer = (await asked_until_answered(self.pool, complete, on_later=partial(self._later, on_retry))).text
        if scope.cancelled_caught:
            if enough():
                self.stats.cut_short += 1
            else:
                self.stats.cut_at_count += 1
            return
        if with_title:
            self.book_title = self.book_title or self._usable_book_title(parse_book_title(answer))
        for item in stream.untaken(parse_items(answer)):
            consider(item)

    def _usable_book_title(self, title: str) -> str:
        """The model's book title, or "" (the planner then makes one from the request) when it is refused."""
        if not title:
            return ""
        if reason := self.checks.book_title_refusal(title):
            self.stats.refused.append(("book", title, reason))
            return ""
        return title
