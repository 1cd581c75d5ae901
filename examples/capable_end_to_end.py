"""A capable author's book, end to end: each book of the good-writing corpus planned and written by `fanout book` on
the author FAKE (tests/fakes/fake_author.py: the book's own lines and section texts), then what the run did and what
its audit and `fanout repair` would make of it.

    PYTHONPATH=. .venv/bin/python examples/capable_end_to_end.py [--books SLUG,...] [--forms topics] [--jobs N]

Prints a Markdown table, a row a book and request: the sections written of those the book has, the extra requests
(candidates beyond one a section, and requests asked again later), what the audit flags as defects by rule (the
figures apart), the sections and chapters `fanout repair` would act on, and the run's last line. A clean book's
goal: every section written, no extra request, no defect, nothing for the repair.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.bench.studies.corpus import Book, book_shape, counts, load_corpus  # noqa: E402
from pipeline.book.repair import plan_actions  # noqa: E402
from pipeline.records.audit import AuditReport  # noqa: E402
from tests.fakes.fake_author import author_engine  # noqa: E402
from tests.fakes.fake_engine import FakeEngineThread  # noqa: E402

MAX_TOKENS = 2048  # the corpus's sections run to about 450 words: none is cut at the cap


@dataclass
class EndToEnd:
    book: Book
    form: str
    written: int = 0
    planned: int = 0
    extra: int = 0
    defects: Counter[str] = field(default_factory=Counter)  # by rule
    figures: Counter[str] = field(default_factory=Counter)
    repairs: int = 0
    replans: int = 0
    last_line: str = ""
    error: str = ""


def run(book: Book, form: str, out: Path) -> EndToEnd:
    """`fanout book` on the author FAKE of `book`, with the request of this form; what it did and its audit."""
    folder = out / f"{book.slug}-{form}"
    shutil.rmtree(folder, ignore_errors=True)
    engine = author_engine(book)
    with FakeEngineThread(engine):
        command = [
            sys.executable, "-m", "pipeline", "book", getattr(book.requests, form), "--shape", book_shape(book),
            "--out", str(folder), "--backend", f"{engine.url},cap=64", "--max-tokens", str(MAX_TOKENS), "--quiet",
        ]  # fmt: skip
        environ = {**os.environ, "FANOUT_THREADS": "1", "PYTHONPATH": str(ROOT)}
        done = subprocess.run(command, capture_output=True, text=True, env=environ, cwd=ROOT)
    found = EndToEnd(book, form, last_line=last_audit_line(done.stderr))
    if done.returncode != 0:
        found.error = f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
        return found
    stats = json.loads((folder / "stats.json").read_text())
    report = AuditReport.model_validate_json((folder / "audit.json").read_text())
    found.written, found.planned = stats["sections_ok"], stats["sections"]
    found.extra = stats["extra_candidates"] + stats.get("asked_later", 0)
    found.defects = Counter(d.rule for d in report.defects if d.rule not in report.figure_rules)
    found.figures = Counter(d.rule for d in report.defects if d.rule in report.figure_rules)
    found.repairs = len(plan_actions(report, {d.section_id for d in report.defects}))
    found.replans = len(report.meaning.off_request_ids) if report.meaning is not None else 0
    return found


def last_audit_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("fanout: the audit flags")]
    return lines[-1].removeprefix("fanout: ") if lines else "(nothing flagged)"


def row(found: EndToEnd) -> str:
    own = counts(found.book)[2]
    if found.error:
        return f"| {found.book.slug} | {found.form} | {found.error} | | | | | |"
    defects = ", ".join(f"{rule} {n}" for rule, n in found.defects.most_common()) or "none"
    figures = ", ".join(f"{rule} {n}" for rule, n in found.figures.most_common()) or "none"
    mark = " (held out)" if found.book.held_out else ""
    written = f"{found.written} of {own} ({found.planned} planned)"
    return (
        f"| {found.book.slug}{mark} | {found.form} | {written} | {found.extra} | {defects} | {figures} | "
        f"{found.repairs} sections, {found.replans} chapters | {found.last_line} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--books", help="comma list of slugs (default: the whole corpus)")
    parser.add_argument("--forms", default="topics,plain", help="request forms: topics, plain")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "capable-end-to-end")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    books = [b for b in load_corpus() if not args.books or b.slug in args.books.split(",")]
    jobs = [(book, form) for book in books for form in args.forms.split(",")]
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda job: run(*job, args.out), jobs))
    print("| book | request | sections written | extra requests | defects | figures | repair would touch | last line |")
    print("|---|---|---|---|---|---|---|---|")
    for found in results:
        print(row(found))
    ok = [r for r in results if not r.error]
    written, own = sum(r.written for r in ok), sum(counts(r.book)[2] for r in ok)
    extra, repairs = sum(r.extra for r in ok), sum(r.repairs + r.replans for r in ok)
    flagged = sum(sum(r.defects.values()) for r in ok)
    print(f"\n{len(ok)} runs: {written} of {own} sections written, {extra} extra requests, {flagged} defects, "
          f"{repairs} sections or chapters repair would touch; {len(results) - len(ok)} runs failed")  # fmt: skip


if __name__ == "__main__":
    main()
