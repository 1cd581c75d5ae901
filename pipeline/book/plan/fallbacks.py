"""What a node takes when its asks are spent and titles are still missing, best first: a refused item's own
key point, short enough to read as a heading and passing the same checks; then a title refused only for
nearly repeating one elsewhere in the book (a lesser fault); only then a numbered placeholder, flagged in
the outline and counted. And the book's title when the model never gave one.
"""

from __future__ import annotations

import re

from pipeline.audit.asks import request_asks
from pipeline.book.plan.answers import PlanItem, heading_from_point
from pipeline.book.plan.checks import ELSEWHERE_NEAR, TitleChecks
from pipeline.book.plan.schedule import NodeAsk, PlanStats, TakeItem
from pipeline.titles import clean_title, refusal


def last_resorts(
    ask: NodeAsk,
    chosen: list[str],
    spare: list[tuple[PlanItem, str]],
    copied: frozenset[str],
    take: TakeItem,
    units: dict[str, str],
    *,
    checks: TitleChecks,
    stats: PlanStats,
) -> None:
    """Fill what the asks left: a refused item's point as its heading; then a title refused only for
    nearly repeating one elsewhere in the book (a lesser fault than a placeholder); then placeholders."""
    for item, _ in spare:
        heading = PlanItem(heading_from_point(item.point), item.point)
        if (
            len(chosen) < ask.count
            and heading.title
            and checks.why_refused(heading, ask, chosen, copied, None, list(units.values())) is None
        ):
            stats.headings_from_points += 1
            take(heading)
    for item, reason in spare:
        if (
            len(chosen) < ask.count
            and reason.endswith(ELSEWHERE_NEAR)
            and refusal(item.title, ask.ancestors, chosen) is None
            and checks.claim(ask.level, item, near=False) is None
        ):
            stats.near_repeats_kept += 1
            take(item)
    for title in placeholders(ask.level, ask.fallback_prefix, ask.count, len(chosen), checks=checks, stats=stats):
        take(PlanItem(title), placeholder=True)


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
