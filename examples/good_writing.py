"""Good writing through the planner: each book of the good-writing corpus (tests/fixtures/corpus/) planned by
`fanout plan` on its two requests, answered by the author FAKE (tests/fakes/fake_author.py), and what of the
book's own lines reached outline.json.

    PYTHONPATH=. .venv/bin/python examples/good_writing.py [--books SLUG,...] [--out DIR] [--jobs N]

A line is a part, chapter or section title of the book. It reached the outline when the outline holds it word for
word under its own parent, itself kept (a section whose chapter was retitled is lost with it); a subtree is lost
when a part or chapter of the book is not in the outline at all. In order: the kept lines of each parent are in
the book's order. The book title is kept when the outline's is the book's. Prints a Markdown table, a row a book
and request, then the totals of the tuned books and of the held-out ones apart; each run folder is kept under
--out (run.log says what refused or held each line).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.bench.studies.corpus import Book, load_corpus  # noqa: E402
from pipeline.records import Outline  # noqa: E402
from pipeline.titles import clean_title, title_key  # noqa: E402
from tests.fakes.fake_author import author_engine  # noqa: E402
from tests.fakes.fake_engine import FakeEngineThread  # noqa: E402

FORMS = ("topics", "plain")


@dataclass
class Kept:
    """What of one book's lines one planned outline kept."""

    lines: int = 0
    kept: int = 0
    subtrees_lost: int = 0
    out_of_order: int = 0  # parents whose kept children are not in the book's order
    title_kept: bool = False
    rules: Counter[str] = field(default_factory=Counter)


def shape(book: Book) -> str:
    chapters = max(len(part.chapters) for part in book.parts)
    sections = max(len(chapter.sections) for part in book.parts for chapter in part.chapters)
    return f"{len(book.parts)}x{chapters}x{sections}"


def same(title: str) -> str:
    """A title as the planner keeps it, word for word: without Markdown's marks (clean_title) and case."""
    return title_key(clean_title(title))


def compare(book: Book, outline: Outline) -> Kept:
    kept = Kept(title_kept=same(outline.title) == same(book.title))
    parts = {same(part.title): part for part in outline.parts}
    kept.out_of_order += not in_order([same(p.title) for p in book.parts], list(parts))
    for part in book.parts:
        planned = parts.get(same(part.title))
        kept.lines += 1
        kept.kept += planned is not None
        kept.subtrees_lost += planned is None
        chapters = {same(c.title): c for c in planned.chapters} if planned else {}
        if planned:
            kept.out_of_order += not in_order([same(c.title) for c in part.chapters], list(chapters))
        for chapter in part.chapters:
            got = chapters.get(same(chapter.title))
            kept.lines += 1
            kept.kept += got is not None
            kept.subtrees_lost += planned is not None and got is None
            sections = [same(s.title) for s in got.sections] if got else []
            if got:
                kept.out_of_order += not in_order([same(s.title) for s in chapter.sections], sections)
            kept.lines += len(chapter.sections)
            kept.kept += sum(same(section.title) in sections for section in chapter.sections)
    return kept


def in_order(wanted: list[str], got: list[str]) -> bool:
    """The titles of `got` that `wanted` has come in `wanted`'s order."""
    common = [title for title in got if title in wanted]
    return common == [title for title in wanted if title in common]


SUMMARY = re.compile(r"INFO lines (?:refused|passed over): (\{.*\})$", re.M)


def refusals(folder: Path) -> Counter[str]:
    """The lines each rule refused or passed over, as run.log's summary lines count them."""
    found: Counter[str] = Counter()
    for counts in SUMMARY.findall((folder / "run.log").read_text()):
        found.update(ast.literal_eval(counts))
    return found


def plan(book: Book, form: str, out: Path) -> Kept:
    folder = out / f"{book.slug}-{form}"
    shutil.rmtree(folder, ignore_errors=True)
    request = getattr(book.requests, form)
    engine = author_engine(book)
    with FakeEngineThread(engine):
        command = [
            sys.executable, "-m", "pipeline", "plan", request, "--shape", shape(book), "--out", str(folder),
            "--backend", f"{engine.url},cap=64", "--quiet",
        ]  # fmt: skip
        environ = {**os.environ, "FANOUT_THREADS": "1", "PYTHONPATH": str(ROOT)}
        done = subprocess.run(command, capture_output=True, text=True, env=environ, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    outline = Outline.model_validate_json((folder / "outline.json").read_text())
    kept = compare(book, outline)
    kept.rules = refusals(folder)
    return kept


def row(book: Book, form: str, kept: Kept) -> str:
    share = kept.kept / kept.lines if kept.lines else 0.0
    rules = ", ".join(f"{rule} {n}" for rule, n in kept.rules.most_common(5))
    mark = " (held out)" if book.held_out else ""
    return (
        f"| {book.slug}{mark} | {form} | {kept.kept} / {kept.lines} | {share:.2f} | {kept.subtrees_lost} | "
        f"{kept.out_of_order} | {'yes' if kept.title_kept else 'no'} | {rules} |"
    )


def totals(name: str, results: list[tuple[Book, str, Kept]]) -> str:
    lines = sum(k.lines for _, _, k in results)
    kept = sum(k.kept for _, _, k in results)
    lost = sum(k.subtrees_lost for _, _, k in results)
    titles = sum(k.title_kept for _, _, k in results)
    order = sum(k.out_of_order for _, _, k in results)
    share = kept / lines if lines else 0.0
    return (
        f"| **{name}** | both | {kept} / {lines} | **{share:.3f}** | {lost} | {order} | {titles} of {len(results)} | |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--books", help="comma list of slugs (default: the whole corpus)")
    parser.add_argument("--forms", default=",".join(FORMS), help="request forms: topics, plain")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "good-writing")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    books = load_corpus()
    if args.books:
        books = [book for book in books if book.slug in args.books.split(",")]
    jobs = [(book, form) for book in books for form in args.forms.split(",")]
    with ThreadPoolExecutor(args.jobs) as pool:
        done = list(pool.map(lambda job: (*job, plan(*job, args.out)), jobs))
    print("| book | request | lines kept | share | subtrees lost | out of order | title kept | refused or held by |")
    print("|---|---|---|---|---|---|---|---|")
    for book, form, kept in done:
        print(row(book, form, kept))
    results = done
    print(totals("tuned", [r for r in results if not r[0].held_out]))
    print(totals("held out", [r for r in results if r[0].held_out]))


if __name__ == "__main__":
    main()
