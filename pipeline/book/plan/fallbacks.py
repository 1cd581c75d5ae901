"""What a node takes when its asks are spent and titles are still missing, best first: a heading made from an
ask of the request this node was to carry and none of its titles does; a refused item's own key point, short
enough to read as a heading; a heading made from an ask no title in the book carries yet (each passing the
same checks as the model's titles); only then a numbered placeholder, flagged in the outline and counted. A
title refused for nearly repeating one elsewhere in the book is never kept: the audit would count the pair
among its similar titles (kept as a lesser fault, they were all the similar pairs left in ten books of the
embedded engine). And the book's title when the model never gave one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.audit.asks import request_asks, verb_like
from pipeline.book.plan.answers import PlanItem, heading_from_point
from pipeline.book.plan.checks import TitleChecks
from pipeline.book.plan.schedule import NodeAsk, PlanStats, TakeItem
from pipeline.titles import clean_title, is_common


@dataclass
class Unfilled:
    """A node whose asks are spent: its question, the titles it chose (and their title-and-point units), the
    worked example's words it must not borrow, and how it takes an item."""

    ask: NodeAsk
    chosen: list[str]
    units: dict[str, str]
    copied: frozenset[str]
    take: TakeItem

    def passes(self, item: PlanItem, checks: TitleChecks) -> bool:
        return bool(item.title) and (
            checks.why_refused(item, self.ask, self.chosen, self.copied, None, list(self.units.values())) is None
        )

    def missing(self) -> bool:
        return len(self.chosen) < self.ask.count


def last_resorts(
    node: Unfilled, spare: list[tuple[PlanItem, str]], open_asks: list[str], *, checks: TitleChecks, stats: PlanStats
) -> None:
    """Fill what the asks left: a heading made from an ask this node still owes (`open_asks`); a refused item's
    point as its heading; a heading made from an ask the book still lacks; then placeholders."""
    ask, take = node.ask, node.take

    def from_asks(asks: list[str]) -> None:
        for wanted in filter(reads_as_heading, asks):
            heading = heading_from_ask(wanted)
            if node.missing() and node.passes(heading, checks):
                stats.titles_from_asks += 1
                take(heading)

    from_asks(open_asks)
    for item, _ in spare:
        heading = PlanItem(heading_from_point(item.point), item.point)
        if node.missing() and node.passes(heading, checks):
            stats.headings_from_points += 1
            take(heading)
    from_asks(nearest_first(checks, [wanted for wanted in checks.book_asks.open if wanted not in open_asks], ask))
    for title in placeholders(ask.level, ask.fallback_prefix, ask.count, len(node.chosen), checks=checks, stats=stats):
        take(PlanItem(title), placeholder=True)


GERUND_LETTERS = 7  # 'failing', 'dressing' on their own are a clause's verb; 'spring' and 'eating' are not


def nearest_first(checks: TitleChecks, asks: list[str], ask: NodeAsk) -> list[str]:
    """The asks, nearest first to what the node is under (its nearest ancestor's title): the book's seasons
    go to a chapter on the seasons before one on keeping animals."""
    parent = next(iter(ask.ancestors.values()), "")
    if len(asks) < 2 or not parent:
        return asks
    scores = checks.embedder.embed(asks) @ checks.embedder.embed([parent])[0]
    return [wanted for _, wanted in sorted(zip(-scores, asks), key=lambda pair: float(pair[0]))]


def reads_as_heading(wanted: str) -> bool:
    """An ask that can stand as a heading: not one bare verb, participle, adverb or everyday word that the
    reader cut from its clause ('Failing', 'Work', 'Usually Changes')."""
    words = wanted.lower().split()
    if not words:
        return False
    if len(words) > 1:
        return not verb_like(words[0])
    word = words[0]
    gerund = word.endswith("ing") and len(word) >= GERUND_LETTERS
    return not (verb_like(word) or gerund or is_common(word))


def heading_from_ask(wanted: str) -> PlanItem:
    """An ask of the request as a heading and its key point ('feeding it over a holiday' -> 'Feeding It Over a
    Holiday': 'Feeding it over a holiday.'): the request's own words, made from the point as a refused
    title's point is."""
    point = wanted[:1].upper() + wanted[1:] + "."
    return PlanItem(heading_from_point(point), point)


def placeholders(level: str, prefix: str, count: int, have: int, *, checks: TitleChecks, stats: PlanStats) -> list[str]:
    """Numbered titles for the slots `have + 1 .. count`, each claimed for the book."""
    noun = level[:-1].capitalize()
    titles = []
    for number in range(have + 1, count + 1):
        title = f"{prefix} ({noun.lower()} {number})" if prefix else f"{noun} {number}"
        while checks.claim(level, PlanItem(title), near=False) is not None:
            title += "'"
        titles.append(title)
    stats.placeholders += len(titles)
    return titles


def fallback_book_title(prompt: str) -> str:
    """A title when the model never gave a usable one: the request's first clause, if it reads like a title,
    else the request's subject (a paragraph brief's first clause is a sentence)."""
    first = re.split(r"[.:;!?\n]", prompt.strip(), maxsplit=1)[0]
    first = re.sub(r"(?i)^(?:please\s+)?(?:write|explain|create|make|give me|teach me)\s+(?:me\s+)?", "", first)
    title = clean_title(first)
    if not 2 <= len(title) <= 80:
        asks = request_asks(prompt)
        title = clean_title(asks[0]) if asks else ""
    return title[:1].upper() + title[1:] if 2 <= len(title) <= 80 else "Handbook"
