"""The audit on good writing: each book of the good-writing corpus (tests/fixtures/corpus/) as a Markdown book,
audited as `fanout audit BOOK.md --prompt REQUEST` audits it, on each of its two requests: every rule's alarms and
the share of sections any rule flags (each one a false alarm unless a reader agrees: these are human books), and
the judge's on_subject figure.

    PYTHONPATH=. .venv/bin/python examples/good_writing_audit.py [--books SLUG,...] [--out DIR]

Prints a Markdown table, a row a book and request, then the tuned books' totals and the held-out ones' apart.
The rules that are figures rather than defects in a Markdown file (pipeline/audit/rules.py's FIGURE_RULES) are
counted apart, as `fanout audit` reports them.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.audit.report import audit  # noqa: E402
from pipeline.audit.rules import FIGURE_RULES  # noqa: E402
from pipeline.audit.source import load_book  # noqa: E402
from pipeline.bench.studies.corpus import Book, book_markdown, load_corpus  # noqa: E402
from pipeline.meaning.embed import open_embedder  # noqa: E402


def audited(book: Book, form: str, out: Path) -> tuple[Counter[str], int, int, int, float | None]:
    """(alarms by rule, sections flagged by a rule that is a defect, the same with off_subject aside, sections,
    on_subject) of one book and request."""
    path = out / f"{book.slug}.md"
    path.write_text(book_markdown(book), encoding="utf-8")
    source = load_book(path)
    source.prompt = getattr(book.requests, form)
    report = audit(source, embedder=open_embedder())
    alarms = Counter(defect.rule for defect in report.defects)
    sections = {section.id for section in source.sections}  # a rule may also name a heading above them
    flagged = {d.section_id for d in report.defects if d.rule not in FIGURE_RULES} & sections
    by_others = {d.section_id for d in report.defects if d.rule not in (*FIGURE_RULES, "off_subject")} & sections
    on_subject = report.meaning.on_subject if report.meaning is not None else None
    return alarms, len(flagged), len(by_others), report.sections, on_subject


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--books", help="comma list of slugs (default: the whole corpus)")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "good-writing-audit")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    books = [b for b in load_corpus() if not args.books or b.slug in args.books.split(",")]
    print("| book | request | sections flagged (share) | off_subject aside | on_subject | alarms by rule |")
    print("|---|---|---|---|---|---|")
    totals: dict[bool, Counter[str]] = {False: Counter(), True: Counter()}
    for book in books:
        for form in ("topics", "plain"):
            alarms, flagged, by_others, sections, on_subject = audited(book, form, args.out)
            total = totals[book.held_out]
            total.update(alarms)
            total["(flagged)"] += flagged
            total["(by others)"] += by_others
            total["(sections)"] += sections
            total["(on_subject x100)"] += round(100 * (on_subject or 0))
            total["(books)"] += 1
            rules = ", ".join(f"{rule} {n}" for rule, n in alarms.most_common())
            mark = " (held out)" if book.held_out else ""
            subject = f"{on_subject:.2f}" if on_subject is not None else "–"
            print(f"| {book.slug}{mark} | {form} | {flagged} / {sections} ({flagged / sections:.0%}) | "
                  f"{by_others} ({by_others / sections:.0%}) | {subject} | {rules} |")  # fmt: skip
    for held_out, total in totals.items():
        if not total["(books)"]:
            continue
        rules = ", ".join(f"{r} {n}" for r, n in total.most_common() if not r.startswith("("))
        share, others = (total[key] / total["(sections)"] for key in ("(flagged)", "(by others)"))
        mean = total["(on_subject x100)"] / total["(books)"] / 100
        name, flagged, by_others = "held out" if held_out else "tuned", total["(flagged)"], total["(by others)"]
        print(f"| **{name}** | both | {flagged} / {total['(sections)']} (**{share:.0%}**) | {by_others} "
              f"(**{others:.1%}**) | {mean:.2f} mean | {rules} |")  # fmt: skip


if __name__ == "__main__":
    main()
