"""What a node takes when its rounds are spent and titles are still missing (after the lines it held for a
fault, asking.py): a heading made from the asks of the request this node was to carry and none of its titles
does; a heading made from the asks no title in the book carries yet (each passing the same checks as the
model's lines). A made heading is led by one ask and its point names the asks nearest it in meaning, up to
MAX_ASKS_A_HEADING, so the missing slots carry all the asks they can (a brief's 45 asks for a book of 32 titles,
one ask a heading, left a third of them carried nowhere); a heading of one ask says where it belongs, never
the ask again ('Transmitter: Transmitter.'). Then numbered placeholders, flagged in the outline and counted.
And the book's title when the model never gave one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from pipeline.audit.asks import request_asks, verb_like
from pipeline.audit.embed import Embedder
from pipeline.book.plan.answers import PlanItem, heading_from_point
from pipeline.book.plan.checks import TitleChecks
from pipeline.book.plan.schedule import NodeAsk, PlanStats, TakeItem
from pipeline.cpu import Stage, charged
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
        """No defect, no title that says what a chosen sibling's says, and the book can claim the title (its
        point is made here, not judged as the model's are)."""
        if not item.title or checks.defect(item, self.ask, self.chosen, self.copied) is not None:
            return False
        return not checks.title_taken_near(self.ask, item, self.chosen) and checks.claim(self.ask.level, item) is None

    def missing(self) -> bool:
        return len(self.chosen) < self.ask.count


@charged(Stage.PLANNING_CHECKS)
def last_resorts(node: Unfilled, open_asks: list[str], *, checks: TitleChecks, stats: PlanStats) -> None:
    """Fill what the rounds left with headings made from an ask this node still owes (`open_asks`), then from
    an ask the book still lacks."""
    ask, take = node.ask, node.take
    parent = next(iter(ask.ancestors.values()), "")

    def from_asks(asks: list[str]) -> None:
        for group in ask_groups(checks.embedder, asks, slots=ask.count - len(node.chosen)):
            # the whole group's heading, else its lead's alone (the same heading when the group is one ask)
            for heading in dict.fromkeys([heading_from_asks(group, parent), heading_from_asks(group[:1], parent)]):
                if node.missing() and node.passes(heading, checks):
                    stats.titles_from_asks += 1
                    take(heading)
                    break

    from_asks(open_asks)
    from_asks(nearest_first(checks, [wanted for wanted in checks.book_asks.open if wanted not in open_asks], ask))


MAX_ASKS_A_HEADING = 4  # a made heading's point names at most this many of the request's asks
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


def ask_groups(embedder: Embedder, asks: list[str], *, slots: int) -> list[list[str]]:
    """The asks in at most `slots` groups, each led by an ask that can stand as a heading (the first ones, in
    the order given), every other ask joining the lead nearest it in meaning that has room."""
    leads = [wanted for wanted in asks if reads_as_heading(wanted)][: max(slots, 0)]
    groups = [[lead] for lead in leads]
    rest = [wanted for wanted in asks if wanted not in leads]
    if not groups or not rest:
        return groups
    for wanted, scores in zip(rest, embedder.embed(rest) @ embedder.embed(leads).T):
        room = [at for at in np.argsort(-scores) if len(groups[at]) < MAX_ASKS_A_HEADING]
        if room:
            groups[room[0]].append(wanted)
    return groups


def heading_from_asks(group: list[str], parent: str = "") -> PlanItem:
    """Asks of the request as a heading, made from its lead, and a key point naming them all ('feeding it over
    a holiday', 'storing it cold' -> 'Feeding It Over a Holiday': 'Feeding it over a holiday and storing it
    cold.'): the request's own words, the heading made as a refused title's point makes one. A heading of
    one ask says in its point where it belongs ('Transmitter': 'The transmitter, as it bears on Running the
    Station.'), so the point is not the heading again."""
    lead = group[0]
    if len(group) == 1:
        listed = f"the {lead}" if len(lead.split()) == 1 and lead.islower() else lead
        listed += f", as it bears on {parent}" if parent else ", as the request asks"
    else:
        listed = ", ".join(group[:-1]) + " and " + group[-1]
    return PlanItem(heading_from_point(lead + "."), listed[:1].upper() + listed[1:] + ".")


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
