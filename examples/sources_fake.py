"""The whole sources path measured with FAKE authors on the good-writing corpus: each book's own text as the sources,
the author FAKE (tests/fakes/fake_author.py) writing every section from the passages it is given, citing them
well or wrongly.

    PYTHONPATH=. .venv/bin/python examples/sources_fake.py --out DIR [--books SLUG,...]

For each book: its parts as Markdown files (DIR/SLUG/notes), then `fanout book REQUEST --sources notes` twice, on an
author that cites its passages well and on one that cites the next passage given, each as a process, the shape
the book's own. Printed for each book and in all:

- markers resolved: of the markers in book.md's sections, those whose number has its entry in the section's
  Sources list, and of those entries, the ones whose text is in each edition (HTML, EPUB, PDF: their text read
  back with lxml and pypdf);
- the good author's citations the audit judged, and those it flagged `unsupported` (goal 0);
- the wrong author's wrong citations the audit judged (each in a section given two passages or more: its [n]
  names the passage after the one its sentences come from) and the share flagged (goal at least 0.9).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import lxml.html
from pypdf import PdfReader

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.bench.studies.corpus import Book, book_shape, load_corpus, write_part_notes  # noqa: E402
from pipeline.sources.markers import cited_numbers, split_sources_list  # noqa: E402
from tests.environ import isolated_env  # noqa: E402
from tests.fakes.fake_author import author_engine  # noqa: E402
from tests.fakes.fake_engine import FakeEngineThread  # noqa: E402

DEFAULT_BOOKS = "the-sourdough-framework,statistics,rust-by-example,trail-sense-survival-guide"


def write_book(book: Book, notes: Path, out: Path, cites: str, cache: Path) -> Path:
    with FakeEngineThread(author_engine(book, cites=cites)) as fakes:
        args = ["book", book.requests.plain, "--sources", str(notes), "--backend", f"{fakes.engines[0].url},cap=16",
                "--shape", book_shape(book), "--out", str(out), "--quiet", "--json"]  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "pipeline", *args],
            capture_output=True,
            text=True,
            env=isolated_env(FANOUT_CACHE=str(cache), PYTHONPATH=str(ROOT)),
        )
    if done.returncode != 0:
        raise SystemExit(f"fanout {' '.join(args)}: exit {done.returncode}: {done.stderr[-2000:]}")
    return out


def squeezed(text: str) -> str:
    """Text without its spaces and hyphens: a PDF breaks a line at a hyphen of its own or of the text."""
    return re.sub(r"[\s\-\u00ad\u2010]+", "", text)


def editions(run: Path) -> dict[str, str]:
    html = lxml.html.parse(str(run / "book.html")).getroot().text_content()
    with zipfile.ZipFile(run / "book.epub") as epub:
        pages = [epub.read(name) for name in epub.namelist() if name.endswith(".xhtml")]
    epub_text = " ".join(lxml.html.fromstring(page).text_content() for page in pages)
    pdf = " ".join(page.extract_text() or "" for page in PdfReader(run / "book.pdf").pages)
    return {"html": squeezed(html), "epub": squeezed(epub_text), "pdf": squeezed(pdf)}


def resolved(run: Path) -> dict[str, tuple[int, int]]:
    """(resolved, all) markers in book.md, and entries found in each edition."""
    found = {"book.md": [0, 0], "html": [0, 0], "epub": [0, 0], "pdf": [0, 0]}
    texts = editions(run)
    for block in re.split(r"^#### ", (run / "book.md").read_text(), flags=re.M)[1:]:
        body = re.split(r"^#{1,3} ", block.partition("\n")[2], flags=re.M)[0].strip()
        text, wheres = split_sources_list(body)
        numbers = cited_numbers(text)
        found["book.md"][0] += sum(1 <= n <= len(wheres) for n in numbers)
        found["book.md"][1] += len(numbers)
        for edition, printed in texts.items():
            found[edition][0] += sum(squeezed(where) in printed for where in wheres)
            found[edition][1] += len(wheres)
    return {name: (a, b) for name, (a, b) in found.items()}


def wrong_citations(run: Path) -> tuple[int, int]:
    """(flagged, wrong): the wrong author's citations the audit judged in sections given two passages or more
    (every one names the wrong passage), and those it flagged."""
    audit = {m["id"]: m for m in json.loads((run / "audit.json").read_text())["meaning"]["sections"]}
    wrong = caught = 0
    for line in (run / "sections.jsonl").read_text().splitlines():
        result = json.loads(line)
        if len(result.get("passages", [])) >= 2 and result["id"] in audit:
            wrong += audit[result["id"]]["citations"]
            caught += len(audit[result["id"]]["unsupported"])
    return caught, wrong


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--books", default=DEFAULT_BOOKS)
    args = parser.parse_args()
    books = [book for book in load_corpus() if book.slug in args.books.split(",")]
    print(
        "| book | held out | markers resolved | entries in HTML / EPUB / PDF | good: judged, flagged | wrong flagged |"
    )
    print("|---|---|---|---|---|---|")
    for book in books:
        notes = write_part_notes(book, args.out / book.slug / "notes")
        good = write_book(book, notes, args.out / book.slug / "well", "well", args.out / "cache")
        bad = write_book(book, notes, args.out / book.slug / "wrongly", "wrongly", args.out / "cache")
        marks = resolved(good)
        audit = json.loads((good / "audit.json").read_text())["meaning"]
        caught, wrong = wrong_citations(bad)
        entries = " / ".join(f"{marks[e][0]}/{marks[e][1]}" for e in ("html", "epub", "pdf"))
        markers = f"{marks['book.md'][0]}/{marks['book.md'][1]}"
        flagged = f"{caught}/{wrong} ({caught / max(wrong, 1):.2f})"
        judged = f"{audit['citations']}, {audit['unsupported']}"
        cells = [book.slug, "yes" if book.held_out else "no", markers, entries, judged, flagged]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
