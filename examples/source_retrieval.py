"""Retrieval on the good-writing corpus (tests/fixtures/corpus/): each book's section texts are the sources, and each
section is looked for with what the planner knows before the section is written: the request, the chapter's title
and the section's title (not its key point, which is the text's own first sentence).

    PYTHONPATH=. .venv/bin/python examples/source_retrieval.py [--books SLUG,...]

Each book is read as a Markdown file (pipeline/corpus's book_markdown, through pipeline/sources/read.py and
passages.py, as `fanout sources` reads one), and indexed (pipeline/sources/index.py) twice: as fanout indexes
(each passage's heading path with its text), and with the headings hidden (text only), since the query's section
title is the passage's own heading in the first case and a planner's own words are not. A hit is a passage of the
section's own text among the first k. Each section is asked twice, once with each of the book's requests. Printed:
recall@1, recall@5 and MRR (of the section's first passage found, over the first 100; 0 past them) for BM25, the
meaning model and their reciprocal-rank fusion, for the tuned books and the held-out ones apart, and the query time.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.bench.studies.corpus import Book, book_markdown, load_corpus  # noqa: E402
from pipeline.meaning.embed import open_embedder  # noqa: E402
from pipeline.records.sources import Passage, Query  # noqa: E402
from pipeline.sources.index import FUSED, LEXICAL, MEANING, SourceIndex  # noqa: E402
from pipeline.sources.passages import passages_of  # noqa: E402
from pipeline.sources.read import markdown_blocks  # noqa: E402

RETRIEVERS = (LEXICAL, MEANING, FUSED)
DEPTH = 100


@dataclasses.dataclass
class Tally:
    queries: int = 0
    at1: int = 0
    at5: int = 0
    reciprocal: float = 0.0
    seconds: float = 0.0

    def add(self, rank: int | None, seconds: float) -> None:
        self.queries += 1
        self.at1 += rank == 1
        self.at5 += rank is not None and rank <= 5
        self.reciprocal += 1 / rank if rank else 0.0
        self.seconds += seconds

    def row(self) -> str:
        n = max(self.queries, 1)
        ms = 1000 * self.seconds / n
        return f"{self.at1 / n:.3f} | {self.at5 / n:.3f} | {self.reciprocal / n:.3f} | {ms:.1f} | {self.queries}"


def book_passages(book: Book) -> list[Passage]:
    text = book_markdown(book)
    return passages_of(f"{book.slug}.md", markdown_blocks(text))


def queries(book: Book) -> list[tuple[Query, tuple[str, ...]]]:
    """(query, the section's heading path) for every section and request."""
    found = []
    for part in book.parts:
        for chapter in part.chapters:
            for section in chapter.sections:
                path = (book.title, part.title, chapter.title, section.title)
                for request in (book.requests.topics, book.requests.plain):
                    found.append((Query(section.title, chapter.title, request), path))
    return found


def first_rank(index: SourceIndex, query: Query, by: str, own: set[int]) -> int | None:
    for rank, hit in enumerate(index.search(query, DEPTH, by=by), 1):
        if hit.passage.number in own:
            return rank
    return None


def measure(books: list[Book]) -> dict[tuple[str, str, bool], Tally]:
    embedder = open_embedder()
    tallies: dict[tuple[str, str, bool], Tally] = {}
    for book in books:
        passages = book_passages(book)
        hidden = [dataclasses.replace(p, headings=()) for p in passages]
        for shown, rows in (("headings indexed", passages), ("headings hidden", hidden)):
            index = SourceIndex.build(rows, embedder)
            for query, path in queries(book):
                own = {p.number for p in passages if p.headings == path}
                for by in RETRIEVERS:
                    start = time.perf_counter()
                    rank = first_rank(index, query, by, own)
                    tally = tallies.setdefault((shown, by, book.held_out), Tally())
                    tally.add(rank, time.perf_counter() - start)
        print(f"{book.slug}: {len(passages)} passages", file=sys.stderr)
    return tallies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--books", help="comma-separated slugs (default: every book)")
    args = parser.parse_args()
    books = load_corpus()
    if args.books:
        books = [book for book in books if book.slug in args.books.split(",")]
    tallies = measure(books)
    print("| index | retriever | books | recall@1 | recall@5 | MRR | ms a query | queries |")
    print("|---|---|---|---|---|---|---|---|")
    for (shown, by, held), tally in sorted(tallies.items(), key=lambda item: (item[0][0], item[0][2], item[0][1])):
        print(f"| {shown} | {by} | {'held out' if held else 'tuned'} | {tally.row()} |")


if __name__ == "__main__":
    main()
