"""Is a cited sentence supported by the passage it cites? The `unsupported` audit rule's test, measured on labelled
pairs from the good-writing corpus (tests/fixtures/corpus/), for the meaning model and the judge side by side.

    PYTHONPATH=. .venv/bin/python examples/citation_support.py [--books SLUG,...] [--per-book N] [--no-minilm]

Each book's sections are cut into passages as `fanout sources` cuts them (pipeline/sources/). A labelled pair is a
sentence of a passage and the passages a section would be given beside it: the section's query (its title, its
chapter's, the request) found the passages; the sentence's own passage (the sentence taken out of it, so that it
is supported by what the rest of its passage says, as a writer's paraphrase is) is among them. Supported: the
sentence cites its own passage. Unsupported: it cites the nearest of those given that comes from another section
(a wrong citation among near passages, what a model that mixes its sources up writes; a passage of the sentence's
own section may well say it too, so none is taken as wrong). Per book at most N passages (default 40), the second
sentence of each (its first is the heading's restatement often).

The test (pipeline/audit/citations.py): a sentence is unsupported when its support by the cited passage (cosine,
plus CITED_OVERLAP times the stems shared) is under CITED_FLOOR, or under another passage given's by more than
CITED_MARGIN. Printed: each judge's ROC AUC of the support and of the margin, and at the floors in
pipeline/meaning/floors.py the share of good citations flagged and of wrong ones caught, for the tuned books and
the held-out ones apart.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.source_retrieval import book_passages  # noqa: E402
from pipeline.audit.citations import support  # noqa: E402
from pipeline.bench.studies.corpus import Book, load_corpus  # noqa: E402
from pipeline.meaning.embed import Embedder, open_embedder  # noqa: E402
from pipeline.meaning.floors import CITED_FLOOR, CITED_MARGIN, CITED_OVERLAP  # noqa: E402
from pipeline.meaning.minilm import MiniLMEmbedder  # noqa: E402
from pipeline.records.sources import Query  # noqa: E402
from pipeline.sources.index import SourceIndex  # noqa: E402
from pipeline.text import sentences  # noqa: E402

GIVEN = 5


@dataclass
class Pair:
    sentence: str
    given: list[str]
    cited: int  # index into given
    good: bool
    held_out: bool


def pairs_of(book: Book, embedder: Embedder, per_book: int) -> list[Pair]:
    passages = book_passages(book)
    index = SourceIndex.build(passages, embedder)
    found: list[Pair] = []
    for passage in passages:
        said = sentences(passage.text, starts="capital")
        if len(said) < 3 or len(found) >= 2 * per_book or len(passage.headings) < 4:
            continue
        sentence = said[1]
        rest = " ".join(said[:1] + said[2:])
        query = Query(passage.headings[-1], passage.headings[-2], book.requests.topics)
        hits = [hit.passage for hit in index.search(query, GIVEN + 1) if hit.passage.number != passage.number]
        others = hits[: GIVEN - 1]
        elsewhere = [at for at, other in enumerate(others, 1) if other.headings != passage.headings]
        if not elsewhere:
            continue
        given = [rest, *(other.text for other in others)]
        found.append(Pair(sentence, given, 0, good=True, held_out=book.held_out))
        found.append(Pair(sentence, given, elsewhere[0], good=False, held_out=book.held_out))
    return found


def auc(scores: list[float], good: list[bool]) -> float:
    """The chance a good pair scores above a bad one (ties half)."""
    pos = np.array([s for s, g in zip(scores, good) if g])
    neg = np.array([s for s, g in zip(scores, good) if not g])
    if not len(pos) or not len(neg):
        return float("nan")
    wins = (pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean()
    return float(wins)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--books", help="comma-separated slugs (default: every book)")
    parser.add_argument("--per-book", type=int, default=40)
    parser.add_argument("--no-minilm", action="store_true", help="the meaning model only (MiniLM takes minutes)")
    args = parser.parse_args()
    books = [b for b in load_corpus() if not args.books or b.slug in args.books.split(",")]
    static = open_embedder()
    pairs = [pair for book in books for pair in pairs_of(book, static, args.per_book)]
    print("| judge | books | pairs | AUC support | AUC margin | good flagged | wrong caught |")
    print("|---|---|---|---|---|---|---|")
    judges: list[tuple[str, Embedder]] = [("wordllama (static)", static)]
    judges += [] if args.no_minilm else [("all-MiniLM-L6-v2", MiniLMEmbedder())]
    for name, judge in judges:
        for held in (False, True):
            chosen = [p for p in pairs if p.held_out == held]
            checks = [support(judge, p.sentence, p.given, p.cited) for p in chosen]
            good = [p.good for p in chosen]
            flagged = [not check.supported for check in checks]
            good_flagged = sum(f for f, g in zip(flagged, good) if g) / max(1, sum(good))
            caught = sum(f for f, g in zip(flagged, good) if not g) / max(1, len(good) - sum(good))
            cells = [
                name,
                "held out" if held else "tuned",
                str(len(chosen)),
                f"{auc([c.score for c in checks], good):.3f}",
                f"{auc([c.margin for c in checks], good):.3f}",
                f"{good_flagged:.3f}",
                f"{caught:.3f}",
            ]
            print("| " + " | ".join(cells) + " |")
    print(f"\nfloors: CITED_FLOOR {CITED_FLOOR}, CITED_MARGIN {CITED_MARGIN}, CITED_OVERLAP {CITED_OVERLAP}")


if __name__ == "__main__":
    main()
