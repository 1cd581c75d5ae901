"""A capable author's book, end to end: `fanout book` on the author FAKE (tests/fakes/fake_author.py, a book of the
good-writing corpus, its own lines and texts) writes every section it planned with no extra request, the audit judges
it as a capable author's book and flags nothing, `fanout repair` would touch nothing, and the run's last line says
so. The audit made as the sections landed (pipeline/audit/ahead.py) is the one `fanout audit` makes of the folder
afterwards in a process of its own. examples/capable_end_to_end.py runs every book of the corpus the same way.
`fanout` runs as a process; the FAKE serves from a thread."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pipeline.bench.studies.corpus import book_shape, load_corpus
from pipeline.book.repair import plan_actions
from pipeline.records.audit import AuditReport
from tests.environ import isolated_env
from tests.fakes.fake_author import author_engine
from tests.fakes.fake_engine import FakeEngineThread

BOOKS = {book.slug: book for book in load_corpus()}


# a held-out book and a tuned one, on requests whose asks every title already carries: the planner asks the author
# to phrase no unit, which the FAKE could only answer with a line its book has elsewhere (examples/
# capable_end_to_end.py measures those runs too; docs/measurements.md)
@pytest.mark.parametrize(("slug", "form"), [("cybersecurity-for-beginners", "plain"), ("learn-react", "plain")])
def test_a_capable_authors_book_is_written_whole_and_passes_its_audit(tmp_path, slug, form):
    book = BOOKS[slug]
    out = tmp_path / "run"
    with FakeEngineThread(author_engine(book)) as fakes:
        command = [
            sys.executable, "-m", "pipeline", "book", getattr(book.requests, form), "--shape", book_shape(book),
            "--backend", f"{fakes.engines[0].url},cap=64", "--max-tokens", "2048", "--out", str(out), "--quiet",
        ]  # fmt: skip
        environ = isolated_env(FANOUT_JUDGE="minilm")  # the judge a user runs with, as the audit judges the book
        done = subprocess.run(command, capture_output=True, text=True, env=environ, timeout=600)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stderr}"
    stats = json.loads((out / "stats.json").read_text())
    report = AuditReport.model_validate_json((out / "audit.json").read_text())
    assert report.author == "capable" and "off_point" in report.figure_rules
    assert stats["sections_ok"] == stats["sections"] and stats["extra_candidates"] == 0 and stats["asked_later"] == 0
    assert stats["phrased_units"] == 0, "every line is the author's own"
    defects = [(d.rule, d.title) for d in report.defects if d.rule not in report.figure_rules]
    assert defects == [], "a human book's own text has no defect"
    assert plan_actions(report, {d.section_id for d in report.defects}) == {}
    assert report.meaning is not None and report.meaning.off_request_ids == []
    assert "the audit flags" not in done.stderr and "fanout repair" not in done.stderr
    assert list(stats["after_last_section"]) == ["book.md", "audit.json", "book.pdf"]
    assert stats["finished_seconds"] >= stats["generate_seconds"]
    landed = (out / "audit.json").read_text()
    again = [sys.executable, "-m", "pipeline", "audit", str(out), "--judge", "minilm", "--json"]
    done = subprocess.run(again, capture_output=True, text=True, env=isolated_env(), timeout=600)
    assert done.returncode == 0, f"{' '.join(again)}\n{done.stderr}"
    assert json.loads(landed) == json.loads(done.stdout), "the audit as sections land is the whole-book audit"
