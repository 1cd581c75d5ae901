"""The audit on both classes: every rule's false alarms on the good-writing corpus's clean books beside what it catches
of the defects planted in copies of them (pipeline/bench/studies/planted.py) and of the small model's junk.

    PYTHONPATH=. .venv/bin/python examples/audit_both_sides.py [--books SLUG,...] [--forms topics,plain] [--out DIR]

Each book of tests/fixtures/corpus/ is audited as `fanout audit` audits it, on each of its two requests, as a
capable author's book: as a Markdown book (`fanout audit BOOK.md --prompt REQUEST`) and as the run folder a capable
author's `fanout book` leaves; then its planted copy the same ways. Prints Markdown tables:

1. a row a rule: the kinds of author it judges (on the others it is a figure), the clean sections it flags (any
   flag is a false alarm: these are human books), tuned and held-out books apart, Markdown and run folders apart;
   the planted defects of its kind it catches; and the small model's junk it catches (the embedded engine's raw
   answers, tests/fixtures/audit/raw_answers_135m.json; the planted defects of tests/fixtures/audit/*.md);
2. the goals: the share of clean sections flagged by any defect (a figure is none), on_subject by book, each planted
   kind's catches, the planted chapters' sections flagged off the subject and that flag's precision.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.audit.book import AuditBook, AuditSection, load_book  # noqa: E402
from pipeline.audit.report import audit  # noqa: E402
from pipeline.audit.rules import RULE_NAMES, RULES  # noqa: E402
from pipeline.bench.studies.corpus import Book, book_markdown, load_corpus  # noqa: E402
from pipeline.bench.studies.planted import (  # noqa: E402
    CAUGHT_BY,
    Kind,
    Place,
    Planted,
    donor_for,
    places_of,
    plant,
    planted_sentences,
    run_folder,
)
from pipeline.meaning.embed import open_embedder  # noqa: E402
from pipeline.records import Author  # noqa: E402
from pipeline.records.audit import AuditReport  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "audit"
EXPECT = re.compile(r"<!-- expect ([^>]*) -->")
SHAPES = ("md", "run")


@dataclass
class Tally:
    """What the audits found, by (held out, shape)."""

    sections: Counter[tuple[bool, str]] = field(default_factory=Counter)
    flagged: dict[tuple[bool, str], Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    any_defect: Counter[tuple[bool, str]] = field(default_factory=Counter)
    planted: dict[tuple[bool, str], Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    caught: dict[tuple[bool, str], Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    off_flags: Counter[tuple[bool, str]] = field(default_factory=Counter)  # flagged off_subject, planted copies
    on_subject: list[tuple[bool, str, str, str, float]] = field(default_factory=list)  # held out, book, form, shape


def audited(path: Path, request: str) -> tuple[AuditBook, AuditReport]:
    book = load_book(path)
    book.prompt = request
    book.author = Author.CAPABLE
    return book, audit(book, embedder=open_embedder())


def write(book: Book, request: str, shape: str, folder: Path, capped: frozenset[Place] = frozenset()) -> Path:
    if shape == "md":
        path = folder.with_suffix(".md")
        path.write_text(book_markdown(book), encoding="utf-8")
        return path
    shutil.rmtree(folder, ignore_errors=True)
    return run_folder(book, request, folder, capped=capped)


def ids_by_place(book: Book, audit_book: AuditBook) -> dict[Place, str]:
    """Each section's id in the audited book: its units, in the book's order (book_markdown gives the title heading
    no text of its own, so a Markdown book's units are its sections, as a run's are)."""
    return dict(zip(places_of(book), [section.id for section in audit_book.sections], strict=True))


def count_clean(tally: Tally, key: tuple[bool, str], book: AuditBook, report: AuditReport) -> None:
    units = {s.id for s in book.sections}
    tally.sections[key] += len(units)
    for rule in RULE_NAMES:
        tally.flagged[key][rule] += len({d.section_id for d in report.defects if d.rule == rule} & units)
    defects = {d.section_id for d in report.defects if d.rule not in report.figure_rules} & units
    tally.any_defect[key] += len(defects)


def count_planted(
    tally: Tally, key: tuple[bool, str], planted: Planted, ids: dict[Place, str], report: AuditReport
) -> None:
    defects = [d for d in report.defects if d.rule not in report.figure_rules]
    for kind, places in planted.places.items():
        tally.planted[key][kind.value] += len(places)
        for place in places:
            tally.caught[key][kind.value] += caught(kind, place, planted, ids, defects)
    off = {d.section_id for d in defects if d.rule == "off_subject"}
    tally.off_flags[key] += len(off)


def caught(kind: Kind, place: Place, planted: Planted, ids: dict[Place, str], defects: list) -> bool:  # type: ignore[type-arg]
    """A defect of the kind's rules on its section (a copied section: on it or on its source, naming the other)."""
    mine = [d for d in defects if d.rule in CAUGHT_BY[kind]]
    if kind is not Kind.COPIED or planted.copied_from is None:
        return any(d.section_id == ids[place] for d in mine)
    a, b = ids[place], ids[planted.copied_from]
    return any((d.section_id, other) in ((a, b), (b, a)) and other in d.detail for d in mine for other in (a, b))


def junk_column(rule: str) -> str:
    """What the rule finds of the small model's junk: the raw answers, and the planted fixtures of its kind."""
    answers = json.loads((FIXTURES / "raw_answers_135m.json").read_text())["answers"]
    sections = [AuditSection(str(i), a["title"], a["text"], a["finish_reason"]) for i, a in enumerate(answers)]
    raw = AuditBook("raw answers", [], sections, from_journal=True, author=Author.SMALL)
    said = []
    if RULES[rule].check is not None and rule in ("truncated", "repetition_loop", "unclosed_fence", "empty"):
        said.append(f"{len({d.section_id for d in RULES[rule].check(raw)})} of {len(answers)} raw answers")
    found = expected = 0
    for path in sorted(FIXTURES.glob("*.md")):
        for match in EXPECT.finditer(path.read_text()):
            marks = dict(item.split("=") for item in match.group(1).split())
            if rule not in marks or marks.get("author", "small") != "small" or RULES[rule].check is None:
                continue
            book = load_book(path)
            book.author = Author.SMALL  # the fixtures plant what a small model gets wrong
            expected += int(marks[rule])
            found += len(RULES[rule].check(book))
    said += [f"{found} / {expected} planted"] if expected else []
    return "; ".join(said) or "–"


def share(n: int, of: int) -> str:
    return f"{n} ({n / of:.1%})" if of else "–"


RULE_HEADER = (
    "| rule | judges | clean sections flagged: tuned md | tuned run | held-out md | held-out run | planted caught | "
    "small model's junk |"
)
GOAL_HEADER = (
    "| books | shape | clean sections flagged by a defect | planted caught | each kind | "
    "off_subject on the planted chapter: recall, precision |"
)


def planted_cell(tally: Tally, rule: str) -> str:
    """'kind caught / planted' for each planted kind the rule catches, over every book and shape."""
    cells = []
    for kind in (k for k, rules in CAUGHT_BY.items() if rule in rules):
        caught = sum(counts[kind.value] for counts in tally.caught.values())
        planted = sum(counts[kind.value] for counts in tally.planted.values())
        cells.append(f"{kind.value} {caught} / {planted}")
    return ", ".join(cells) or "–"


def rule_table(tally: Tally) -> None:
    print(RULE_HEADER)
    print("|---|---|---|---|---|---|---|---|")
    for rule in RULE_NAMES:
        keys = [(held, shape) for held in (False, True) for shape in SHAPES]
        cells = " | ".join(share(tally.flagged[key][rule], tally.sections[key]) for key in keys)
        judges = ", ".join(sorted(RULES[rule].judges))
        print(f"| {rule} | {judges} | {cells} | {planted_cell(tally, rule)} | {junk_column(rule)} |")


def goal_row(tally: Tally, key: tuple[bool, str]) -> str:
    kinds = ", ".join(f"{k} {tally.caught[key][k]}/{n}" for k, n in sorted(tally.planted[key].items()))
    caught, planted = sum(tally.caught[key].values()), sum(tally.planted[key].values())
    found, foreign = tally.caught[key][Kind.FOREIGN.value], tally.planted[key][Kind.FOREIGN.value]
    precision = found / tally.off_flags[key] if tally.off_flags[key] else 1.0
    flagged = share(tally.any_defect[key], tally.sections[key])
    name = "held out" if key[0] else "tuned"
    return (
        f"| {name} | {key[1]} | {flagged} | {caught} / {planted} ({caught / max(1, planted):.2f}) | {kinds} | "
        f"{found / max(1, foreign):.2f}, {precision:.2f} |"
    )


def goals(tally: Tally) -> None:
    print("\n" + GOAL_HEADER)
    print("|---|---|---|---|---|---|")
    for key in [(held, shape) for held in (False, True) for shape in SHAPES]:
        print(goal_row(tally, key))
    for held in (False, True):
        rows = [row[1:] for row in tally.on_subject if row[0] is held]
        if rows:
            figures = [figure for *_, figure in rows]
            low = min(rows, key=lambda row: row[3])
            mean = sum(figures) / len(figures)
            print(
                f"\non_subject, clean books, {'held out' if held else 'tuned'}: mean {mean:.3f}, lowest {low[3]:.3f}",
                low[:3],
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--books", help="comma list of slugs (default: the whole corpus)")
    parser.add_argument("--forms", default="topics,plain", help="the requests to audit each book on")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "audit-both-sides")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    corpus = load_corpus()
    books = [b for b in corpus if not args.books or b.slug in args.books.split(",")]
    tally = Tally()
    for book in books:
        planted = plant(book, donor_for(book, corpus), planted_sentences(held_out=book.held_out))
        capped = frozenset(planted.places.get(Kind.CUT, []))
        for form in args.forms.split(","):
            request = getattr(book.requests, form)
            for shape in SHAPES:
                key = (book.held_out, shape)
                clean_book, report = audited(write(book, request, shape, args.out / f"{book.slug}-{form}"), request)
                count_clean(tally, key, clean_book, report)
                if report.meaning is not None and report.meaning.on_subject is not None:
                    tally.on_subject.append((book.held_out, book.slug, form, shape, report.meaning.on_subject))
                path = write(planted.book, request, shape, args.out / f"{book.slug}-{form}-planted", capped)
                planted_book, report = audited(path, request)
                count_planted(tally, key, planted, ids_by_place(planted.book, planted_book), report)
        print(f"{book.slug}: done", file=sys.stderr, flush=True)
    rule_table(tally)
    goals(tally)


if __name__ == "__main__":
    main()
