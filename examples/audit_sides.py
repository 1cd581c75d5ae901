"""The audit's word rules and the writer's loop cut on both sides: what they do to good writing (the sections of
the good-writing corpus, tests/fixtures/corpus/) beside what they catch in a small model's junk (the embedded
engine's raw answers, tests/fixtures/audit/raw_answers_135m.json, and the planted defects of
tests/fixtures/audit/*.md).

    PYTHONPATH=. .venv/bin/python examples/audit_sides.py

Prints one Markdown table, a row a rule: the human sections it flags (or the writer cuts by more than a tenth of
their words), tuned and held-out books apart, beside the raw answers it finds and the planted defects it finds
of those expected. No model is loaded; it runs in seconds.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.audit.book import AuditBook, AuditSection, load_book  # noqa: E402
from pipeline.audit.rules import rule_repeated_passages, rule_repetition_loop, rule_truncated  # noqa: E402
from pipeline.bench.studies.corpus import Book, load_corpus  # noqa: E402
from pipeline.book.trim import end_well  # noqa: E402
from pipeline.records.audit import Defect  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "audit"
EXPECT = re.compile(r"<!-- expect ([^>]*) -->")
WordRule = Callable[[AuditBook], list[Defect]]
RULES: dict[str, WordRule] = {
    "truncated": rule_truncated,
    "repetition_loop": rule_repetition_loop,
    "repeated_passages": rule_repeated_passages,
}


def corpus_book(book: Book) -> AuditBook:
    """The book as the audit reads a Markdown file of it: every section a unit, under its chapter."""
    sections = [
        AuditSection(id=f"{p}.{c}.{s}", title=section.title, text=section.text)
        for p, part in enumerate(book.parts)
        for c, chapter in enumerate(part.chapters)
        for s, section in enumerate(chapter.sections)
    ]
    parents = {section.id: section.id.rsplit(".", 1)[0] for section in sections}
    return AuditBook(source=book.slug, nodes=[], sections=sections, from_journal=False, parents=parents)


def answers_book(answers: list[dict[str, str]]) -> AuditBook:
    """The raw answers as one Markdown book's sections (each its own chapter: none shares a passage by design)."""
    sections = [
        AuditSection(id=str(i), title=a["title"], text=a["text"], finish_reason=a["finish_reason"])
        for i, a in enumerate(answers)
    ]
    return AuditBook(source="raw answers", nodes=[], sections=sections, from_journal=False)


def planted(rule: str) -> tuple[int, int]:
    """(found, expected) of the rule's planted defects over tests/fixtures/audit/*.md."""
    found = expected = 0
    for path in sorted(FIXTURES.glob("*.md")):
        marks = dict(item.split("=") for match in EXPECT.finditer(path.read_text()) for item in match.group(1).split())
        if rule in marks:
            expected += int(marks[rule])
            found += len(RULES[rule](load_book(path)))
    return found, expected


def main() -> None:
    books = load_corpus()
    answers = json.loads((FIXTURES / "raw_answers_135m.json").read_text())["answers"]
    print("| rule | human sections flagged, tuned | held out | raw 135M answers found | planted found / expected |")
    print("|---|---|---|---|---|")
    for name, rule in RULES.items():
        side = {held: [0, 0] for held in (False, True)}
        for book in books:
            audited = corpus_book(book)
            side[book.held_out][0] += len({d.section_id for d in rule(audited)})
            side[book.held_out][1] += len(audited.sections)
        raw = len(rule(answers_book(answers)))
        found, expected = planted(name)
        (tf, tn), (hf, hn) = side[False], side[True]
        print(f"| {name} | {tf} of {tn} ({tf / tn:.1%}) | {hf} of {hn} ({hf / hn:.1%}) | {raw} of {len(answers)} | "
              f"{found} / {expected} |")  # fmt: skip
    for capped in (False, True):
        side = {held: [0, 0] for held in (False, True)}
        for book in books:
            for part in book.parts:
                for chapter in part.chapters:
                    for section in chapter.sections:
                        kept = end_well(section.text, capped=capped)
                        side[book.held_out][0] += len(kept.split()) < 0.9 * len(section.text.split())
                        side[book.held_out][1] += 1
        cut = sum(len(end_well(a["text"], capped=capped).split()) < 0.9 * len(a["text"].split()) for a in answers)
        (tf, tn), (hf, hn) = side[False], side[True]
        name = f"the writer's cut (end_well, {'capped' if capped else 'stopped'}): over a tenth of the words gone"
        print(f"| {name} | {tf} of {tn} ({tf / tn:.1%}) | {hf} of {hn} ({hf / hn:.1%}) | {cut} of {len(answers)} | – |")


if __name__ == "__main__":
    main()
