"""The capable author's on-subject judge (pipeline/meaning/onsubject.py's book_fits) on the good-writing corpus: each
book on its two requests with a chapter of every other book on another subject planted in it, one at a time.

    PYTHONPATH=. .venv/bin/python examples/subject_judges.py [--books SLUG,...]

A planted chapter is one of the donor book's chapters of two sections or more, chosen by a generator seeded with the
book's slug (pipeline/bench/studies/planted.py's same_subject keeps the Rust books, and React and Vue, apart). For
each copy: the planted sections judged off (recall), the book's own sections judged off (false alarms); precision is
over every copy, each holding one planted chapter. Prints the tuned books and the held-out ones apart, and the book
whose own sections fare worst.
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.bench.studies.corpus import Book, CorpusChapter, load_corpus  # noqa: E402
from pipeline.bench.studies.planted import same_subject  # noqa: E402
from pipeline.meaning.nearness import body_text  # noqa: E402
from pipeline.meaning.offrequest import open_judge  # noqa: E402
from pipeline.meaning.onsubject import book_fits  # noqa: E402


@dataclass
class Tally:
    planted: int = 0
    caught: int = 0
    own: int = 0
    false_alarms: int = 0
    worst: tuple[float, str] = (2.0, "")  # the lowest share of its own sections a book kept, and the book


def donors(book: Book, books: list[Book]) -> list[CorpusChapter]:
    """A chapter of two sections or more from every other book on another subject."""
    rng = random.Random(book.slug)
    chosen = []
    for other in books:
        if other.slug == book.slug or same_subject(book.slug, other.slug):
            continue
        chapters = [c for part in other.parts for c in part.chapters if len(c.sections) > 1]
        chosen.append(rng.choice(chapters))
    return chosen


def judge_book(book: Book, books: list[Book], tally: Tally) -> None:
    judge = open_judge()
    assert judge is not None, "the judge's wheel: make installs it"
    names = [f"{p}.{c}" for p, part in enumerate(book.parts) for c, chapter in enumerate(part.chapters)]
    chapters = [chapter for part in book.parts for chapter in part.chapters]
    own = [(name, body_text(s.text)) for name, chapter in zip(names, chapters) for s in chapter.sections]
    for request in (book.requests.topics, book.requests.plain):
        for chapter in donors(book, books):
            planted = [("planted", body_text(s.text)) for s in chapter.sections]
            sections = own + planted
            verdicts = book_fits(judge, request, [name for name, _ in sections], [text for _, text in sections])
            off = [not verdict.on_subject for verdict in verdicts]
            tally.planted += len(planted)
            tally.caught += sum(off[len(own) :])
            tally.own += len(own)
            tally.false_alarms += sum(off[: len(own)])
            kept = 1 - sum(off[: len(own)]) / len(own)
            tally.worst = min(tally.worst, (kept, book.slug))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--books", help="comma list of slugs (default: the whole corpus)")
    args = parser.parse_args()
    books = load_corpus()
    tallies = {False: Tally(), True: Tally()}
    for book in books:
        if not args.books or book.slug in args.books.split(","):
            judge_book(book, books, tallies[book.held_out])
    print("| books | planted sections caught | own sections flagged | precision | worst book's own sections kept |")
    print("|---|---|---|---|---|")
    for held_out, tally in tallies.items():
        if not tally.own:
            continue
        recall = tally.caught / tally.planted
        precision = tally.caught / max(1, tally.caught + tally.false_alarms)
        print(
            f"| {'held out' if held_out else 'tuned'} | {tally.caught} / {tally.planted} ({recall:.3f}) | "
            f"{tally.false_alarms} / {tally.own} | {precision:.3f} | {tally.worst[0]:.3f} ({tally.worst[1]}) |"
        )


if __name__ == "__main__":
    main()
