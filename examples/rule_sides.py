"""Every rule of the title policy (pipeline/book/plan/policy.py) on both sides, in one table: the good lines it
refuses or holds (the good-writing corpus, tests/fixtures/corpus/: every part, chapter and section line of every
book in its place, on both of the book's requests) beside the junk it catches (the planted defects of
tests/unit/book/test_policy.py, one row or more a rule, and the headings of SmolLM2-135M's books that readers
labelled off the subject, tests/fixtures/meaning/on_subject_forms.json).

    PYTHONPATH=. .venv/bin/python examples/rule_sides.py

A rule is asked of a line as the planner asks it: a capable model's line in the form it is asked of one (rules
that are `small_only` are not asked), a small model's in the strict form; each line is counted once a rule, by
every rule that fires on it (not only the first). Good lines are counted for the tuned books and the held-out ones
apart. The claims (taken_elsewhere, near_elsewhere) take the book's titles in order, as the planner does.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.bench.studies.corpus import Book, load_corpus  # noqa: E402
from pipeline.book.plan import policy  # noqa: E402
from pipeline.book.plan.checks import TitleChecks  # noqa: E402
from pipeline.book.plan.prompts import (  # noqa: E402
    PLAN_TEMPLATES,
    PlanItem,  # noqa: E402
    example_words,
    rare_example_words,
)
from pipeline.meaning.embed import open_embedder  # noqa: E402
from pipeline.meaning.nearness import unit  # noqa: E402
from pipeline.meaning.offrequest import open_judge  # noqa: E402
from pipeline.meaning.onsubject import unit_fits  # noqa: E402
from pipeline.titles import content_words  # noqa: E402
from tests.unit.book.test_policy import LINE_ROWS, REQUEST, TITLE_ROWS  # noqa: E402

LEVELS = (("parts", "the book title"), ("chapters", "the part title"), ("sections", "the chapter title"))


def book_lines(book: Book) -> list[tuple[str, PlanItem, dict[str, str], list[PlanItem], int]]:
    """(level, item, its ancestors, the siblings before it, the template's index) of every line of the book."""
    found = []
    parts = [PlanItem(p.title, p.point) for p in book.parts]
    for at, part in enumerate(book.parts):
        found.append(("parts", parts[at], {"the book title": book.title}, parts[:at], 0))
        chapters = [PlanItem(c.title, c.point) for c in part.chapters]
        for ct, chapter in enumerate(part.chapters):
            above = {"the part title": part.title, "the book title": book.title}
            found.append(("chapters", chapters[ct], above, chapters[:ct], 1))
            sections = [PlanItem(s.title, s.point) for s in chapter.sections]
            for st in range(len(sections)):
                above = {"the chapter title": chapter.title, "the part title": part.title, "the book title": book.title}
                found.append(("sections", sections[st], above, sections[:st], 2))
    return found


def fired(checks: TitleChecks, level: str, item: PlanItem, above: dict[str, str], before: list[PlanItem],
          template: int, request: str, fit: float) -> set[str]:  # fmt: skip
    """Every rule that refuses or holds the line, as the planner asks them of this model."""
    ancestors = {**above, "the request": request}
    own = " ".join([request, *ancestors.values()])
    copied = (example_words(PLAN_TEMPLATES[template]) | rare_example_words()) - content_words(own)
    taken = [b.title for b in before]
    units = [unit(b.title, b.point) for b in before]
    line = checks.line(item, ancestors=ancestors, taken=taken, forbidden=copied, sibling_units=units, fit=fit, owed=[])
    chains = (policy.Chain.DEFECT, policy.Chain.HOLD)
    rules = {v.rule for chain in chains for v in policy.verdicts(chain, line, checks.context)}
    if (claim := checks.claim(level, item)) is not None:
        rules.add(claim.rule)
    return rules


def good_side(books: list[Book], *, small: bool) -> Counter[str]:
    embedder, judge = open_embedder(), open_judge("minilm")
    counted: Counter[str] = Counter()
    for book in books:
        lines = book_lines(book)
        for request in (book.requests.topics, book.requests.plain):
            checks = TitleChecks(embedder, request, judge, small=small)
            fits = unit_fits(judge or embedder, request, [unit(i.title, i.point) for _, i, *_ in lines])
            for (level, item, above, before, template), fit in zip(lines, fits):
                counted.update(fired(checks, level, item, above, before, template, request, float(fit)))
            counted["lines"] += len(lines)
    return counted


def junk_side() -> tuple[Counter[str], Counter[str], Counter[str]]:
    """The planted rows each rule catches (of its own rows), and the rules that catch 135M headings labelled off."""
    caught: Counter[str] = Counter()
    planted: Counter[str] = Counter()
    for rule, title, given, _ in TITLE_ROWS:
        planted[rule] += 1
        line = policy.Line.of(PlanItem(title, "A point of its own about flour."), **{**DEFAULTS, **given})
        caught[rule] += rule in {v.rule for v in policy.verdicts(policy.Chain.DEFECT, line, CONTEXT, strict=True)}
    for rule, title, point, given, _ in LINE_ROWS:
        planted[rule] += 1
        line = policy.Line.of(PlanItem(title, point), **{**DEFAULTS, **given})
        caught[rule] += rule in {v.rule for v in policy.verdicts(policy.Chain.DEFECT, line, CONTEXT, strict=True)}
    off: Counter[str] = Counter()
    embedder, judge = open_embedder(), open_judge("minilm")
    books = json.loads((ROOT / "tests/fixtures/meaning/on_subject_forms.json").read_text())["books"]
    for labelled in books:
        checks = TitleChecks(embedder, labelled["request"], judge, small=True)
        headings = [h for h in labelled["headings"] if not h["on_subject"]]
        fits = unit_fits(judge or embedder, labelled["request"], [h["title"] for h in headings])
        for heading, fit in zip(headings, fits):
            item = PlanItem(heading["title"], heading.get("point", "") or "A point.")
            level = heading["level"] + "s"
            above = {"the book title": labelled["title"]}
            rules = fired(checks, level, item, above, [], ["parts", "chapters", "sections"].index(level),
                          labelled["request"], float(fit))  # fmt: skip
            off.update(rules)
            off["headings"] += 1
            off["caught"] += bool(rules)
    return caught, planted, off


DEFAULTS: dict[str, object] = {"ancestors": {}, "taken": [], "forbidden": frozenset(), "request": REQUEST, "asks": []}
CONTEXT = policy.Context(open_embedder())


def main() -> None:
    corpus = load_corpus()
    tuned, held = [b for b in corpus if not b.held_out], [b for b in corpus if b.held_out]
    capable_tuned, capable_held = good_side(tuned, small=False), good_side(held, small=False)
    strict_tuned = good_side(tuned, small=True)
    caught, planted, off = junk_side()
    print(f"Good lines: {capable_tuned['lines']:,} tuned, {capable_held['lines']:,} held out (two requests a book). "
          f"Junk: {sum(planted.values())} planted rows; {off['headings']} 135M headings labelled off, "
          f"{off['caught']} caught by some rule.\n")  # fmt: skip
    print("| rule | action | asked of | good lines refused or held, capable (tuned / held out) | "
          "… if asked as of a small model (tuned) | planted junk caught | 135M off headings caught |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for rule in policy.RULES.values():
        who = "small model" if rule.small_only else "every model"
        share = capable_tuned[rule.id] / capable_tuned["lines"]
        junk = f"{caught[rule.id]} / {planted[rule.id]}" if planted[rule.id] else "–"
        print(f"| {rule.id} | {rule.action} | {who} | {capable_tuned[rule.id]} ({share:.1%}) / "
              f"{capable_held[rule.id]} | {strict_tuned[rule.id]} | {junk} | {off[rule.id]} |")  # fmt: skip


if __name__ == "__main__":
    main()
