"""Good writing through the planner: each book of the good-writing corpus (tests/fixtures/corpus/) planned by
`fanout plan` on its two requests, answered by the author FAKE (tests/fakes/fake_author.py), and what of the
book's own lines reached outline.json.

    PYTHONPATH=. .venv/bin/python examples/good_writing.py [--books SLUG,...] [--out DIR] [--jobs N] [--planning MODE]

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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.bench.studies.corpus import Book, Kept, book_shape, compare, load_corpus  # noqa: E402
from pipeline.records import Outline  # noqa: E402
from tests.fakes.fake_author import author_engine  # noqa: E402
from tests.fakes.fake_engine import FakeEngineThread  # noqa: E402

FORMS = ("topics", "plain")


SUMMARY = re.compile(r"INFO lines (?:refused|passed over): (\{.*\})$", re.M)


def refusals(folder: Path) -> Counter[str]:
    """The lines each rule refused or passed over, as run.log's summary lines count them."""
    found: Counter[str] = Counter()
    for counts in SUMMARY.findall((folder / "run.log").read_text()):
        found.update(ast.literal_eval(counts))
    return found


def plan(book: Book, form: str, out: Path, planning: str = "auto") -> Kept:
    folder = out / f"{book.slug}-{form}"
    shutil.rmtree(folder, ignore_errors=True)
    request = getattr(book.requests, form)
    engine = author_engine(book)
    with FakeEngineThread(engine):
        command = [
            sys.executable, "-m", "pipeline", "plan", request, "--shape", book_shape(book), "--out", str(folder),
            "--backend", f"{engine.url},cap=64", "--planning", planning, "--quiet",
        ]  # fmt: skip
        environ = {**os.environ, "FANOUT_THREADS": "1", "PYTHONPATH": str(ROOT)}
        done = subprocess.run(command, capture_output=True, text=True, env=environ, cwd=ROOT)
    if done.returncode != 0:  # a plan that failed keeps nothing of the book
        print(
            f"{book.slug} {form}: fanout plan exited {done.returncode}: {done.stderr.strip()[-300:]}", file=sys.stderr
        )
        kept = compare(book, Outline(title="", parts=[]))
        kept.rules = refusals(folder)
        return kept
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
    parser.add_argument("--planning", choices=("given", "open", "auto"), default="auto", help="as `fanout plan`")
    args = parser.parse_args()
    books = load_corpus()
    if args.books:
        books = [book for book in books if book.slug in args.books.split(",")]
    jobs = [(book, form) for book in books for form in args.forms.split(",")]
    with ThreadPoolExecutor(args.jobs) as pool:
        done = list(pool.map(lambda job: (*job, plan(*job, args.out, args.planning)), jobs))
    print("| book | request | lines kept | share | subtrees lost | out of order | title kept | refused or held by |")
    print("|---|---|---|---|---|---|---|---|")
    for book, form, kept in done:
        print(row(book, form, kept))
    results = done
    print(totals("tuned", [r for r in results if not r[0].held_out]))
    print(totals("held out", [r for r in results if r[0].held_out]))


if __name__ == "__main__":
    main()
