"""Audit rules on fixture books with exact expected counts, run-folder rules, and repair on a FAKE engine."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.audit.book import load_book, load_run
from pipeline.audit.report import audit, flagged
from pipeline.audit.rules import RULE_NAMES
from pipeline.book.profiles import PROFILES
from pipeline.book.trim import cut_repeats
from pipeline.errors import UsageError
from pipeline.records import Author, BookSpec, Chapter, Outline, Part, Section, SectionResult
from tests.fakes.fake_engine import fake_process as fake_engine_process

FIXTURES = Path(__file__).parents[2] / "fixtures" / "audit"


def expectations(path: Path) -> list[tuple[Author, dict[str, int]]]:
    """Each `<!-- expect [author=KIND] RULE=N ... -->` line of a fixture: the author it is audited as (a Markdown
    book's default, capable, where none is named) and each rule's count."""
    found = []
    for header in re.findall(r"<!-- expect (.*?) -->", path.read_text()):
        pairs = dict(pair.split("=") for pair in header.split())
        author = Author(pairs.pop("author", Author.CAPABLE))
        found.append((author, {rule: int(n) for rule, n in pairs.items()}))
    return found


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.md")), ids=lambda p: p.stem)
def test_each_rule_counts_exactly_on_its_fixture(fixture):
    for author, counts in expectations(fixture):
        book = load_book(fixture)
        book.author = author
        report = audit(book)
        for rule, count in counts.items():
            found = [d.detail for d in report.defects if d.rule == rule]
            assert report.counts[rule] == count, f"{rule}, a {author} author's book: {found}"


def test_every_rule_has_a_fixture_or_a_run_folder_test():
    run_folder_rules = {"failed", "heading_outranks", "off_point", "off_book", "repeated_content", "stray_headings"}
    run_folder_rules |= {"off_subject"}  # tests/unit/audit/test_meaning.py
    run_folder_rules |= {"uncited", "unsupported"}  # tests/unit/audit/test_citations.py, test_sources_book.py
    covered = {rule for f in FIXTURES.glob("*.md") for _, counts in expectations(f) for rule in counts}
    covered |= run_folder_rules
    assert covered == set(RULE_NAMES)


def test_summary_speaks_seed_003s_words():
    report = audit(load_book(FIXTURES / "truncated.md"))
    assert "2 of 5 heading-delimited blocks (40%) end without closing punctuation" in report.summary


def write_run(folder: Path, results: list[SectionResult], titles: list[str]) -> None:
    sections = [Section(id=f"p01.c01.s{i + 1:02d}", title=t) for i, t in enumerate(titles)]
    outline = Outline(
        title="Book",
        parts=[Part(id="p01", title="Part", chapters=[Chapter(id="p01.c01", title="Chapter", sections=sections)])],
    )
    folder.mkdir(parents=True, exist_ok=True)
    spec = BookSpec(prompt="p", parts=1, chapters=1, sections=len(titles), profile=PROFILES["small"])
    (folder / "spec.json").write_text(spec.model_dump_json())
    (folder / "outline.json").write_text(outline.model_dump_json())
    (folder / "sections.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in results))


GOOD = (
    "A complete section about one thing, with enough words to pass the floor: it explains the idea, "
    "gives a short example, and closes the point properly so that nothing looks cut or empty here at all. "
    "A second sentence adds a little more detail, so the word count sits well above the floor."
)


CUT = (
    "Another section, on a subject of its own: a cut answer runs to the token cap and stops where the cap falls, "
    "which is rarely at the end of a sentence, so the reader meets a thought that never finishes."
)


def planted_run(folder: Path) -> None:
    titles = ["Good one", "Cut off", "Failed", "Loud heading", "Good one", "Tiny"]
    results = [
        SectionResult(id="p01.c01.s01", title=titles[0], text=GOOD, finish_reason="stop"),
        SectionResult(
            id="p01.c01.s02", title=titles[1], text=CUT + " And then it stops in the", finish_reason="length"
        ),
        SectionResult(id="p01.c01.s03", title=titles[2], error="request failed after 4 attempts"),
        SectionResult(id="p01.c01.s04", title=titles[3], text="## Big heading\n\n" + GOOD, finish_reason="stop"),
        SectionResult(
            id="p01.c01.s05", title=titles[4], text=GOOD.replace("one thing", "another thing"), finish_reason="stop"
        ),
        SectionResult(id="p01.c01.s06", title=titles[5], text="Too short.", finish_reason="stop"),
    ]
    write_run(folder, results, titles)


def test_run_folder_rules_read_the_journal(tmp_path):
    planted_run(tmp_path)
    report = audit(load_run(tmp_path))
    assert report.ids("truncated") == ["p01.c01.s02"]
    assert report.ids("failed") == ["p01.c01.s03"]
    assert report.ids("heading_outranks") == ["p01.c01.s04"]
    assert report.ids("duplicate") == ["p01.c01.s05"]
    assert report.ids("empty") == ["p01.c01.s06"]


def test_a_repeated_passage_is_quoted_where_the_section_first_repeats(tmp_path):
    shared = [f"passage {n} " + " ".join(f"w{n}x{i}" for i in range(12)) + "." for n in range(30)]
    book = tmp_path / "book.md"
    book.write_text(
        "# B\n\n## One\n\n" + " ".join(shared) + "\n\n## Two\n\nOwn words first. " + " ".join(shared) + "\n"
    )
    (repeat,) = audit(load_book(book), only=["repeated_passages"]).defects
    assert repeat.detail.startswith("shares 'passage 0 w0x0"), (
        "the first shared run in the text, whatever the hash seed"
    )


def test_rule_selection_and_unknown_rules():
    report = audit(load_book(FIXTURES / "empty.md"), only=["empty", "truncated"])
    assert report.rules == ["truncated", "empty"]
    assert "duplicate" not in audit(load_book(FIXTURES / "empty.md"), skip=["duplicate"]).rules
    with pytest.raises(UsageError, match="unknown audit rule"):
        audit(load_book(FIXTURES / "empty.md"), only=["nonsense"])


def test_audit_command_gates_with_exit_3(tmp_path):
    book = tmp_path / "book.md"
    book.write_text((FIXTURES / "truncated.md").read_text())
    run = [sys.executable, "-m", "pipeline", "audit", str(book)]
    assert subprocess.run(run + ["--fail-on", "unclosed_fence"], capture_output=True).returncode == 0
    gated = subprocess.run(run + ["--fail-on", "truncated,unclosed_fence"], capture_output=True, text=True)
    assert gated.returncode == 3 and "truncated 2" in gated.stderr
    assert json.loads((tmp_path / "book.audit.json").read_text())["counts"]["truncated"] == 2
    assert subprocess.run(run + ["--fail-on", "bogus"], capture_output=True).returncode == 2


def test_cut_repeats_stops_where_the_loop_starts():
    loop = "The loop sentence is right here and it goes on."
    text = f"First idea. {loop} Another one. {loop}"
    assert cut_repeats(text) == "First idea. The loop sentence is right here and it goes on. Another one."
    phrase = "Sourdough Starter Care and Maintenance, Sourdough Starter Care and Maintenance, " * 3
    assert cut_repeats("Intro. " + phrase) == "Intro. Sourdough Starter Care and Maintenance"
    assert cut_repeats("No loop at all. Just words.") == "No loop at all. Just words."


def test_repair_on_a_fake_engine_fixes_planted_defects(tmp_path):
    planted_run(tmp_path)
    process, url = fake_engine_process(token_delay=0.0, jitter=0.0)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pipeline", "repair", str(tmp_path), "--backend", f"{url},cap=4", "--quiet"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        process.kill()
    assert done.returncode == 0, done.stderr
    repair = json.loads((tmp_path / "repair.json").read_text())
    for rule in ("truncated", "duplicate", "empty"):
        assert repair["before"][rule] == 1 and repair["after"][rule] == 0, (rule, repair)
    assert repair["after"]["failed"] == 0
    assert (
        repair["actions"]["retitle"] == 1 and repair["actions"]["rewrite"] >= 1 and repair["actions"]["continue"] >= 1
    )
    lines = [json.loads(line) for line in (tmp_path / "sections.jsonl").read_text().splitlines()]
    failed_then_written = [bool(line["error"]) for line in lines if line["id"] == "p01.c01.s03"]
    assert failed_then_written[:2] == [True, False], "a failed section is asked again before the repair pass"
    versions = [(line["id"], line["version"], line["repair"]) for line in lines if line["id"] == "p01.c01.s02"]
    assert versions == [("p01.c01.s02", 1, None), ("p01.c01.s02", 2, "continue")], "the journal keeps both"
    continued = [line for line in lines if line["id"] == "p01.c01.s02"][-1]["text"]
    assert continued.startswith(CUT + " And then it stops in the") and len(continued) > len(CUT) + 30
    outline = json.loads((tmp_path / "outline.json").read_text())
    assert outline["parts"][0]["chapters"][0]["sections"][4]["title"] != "Good one", "the duplicate was re-titled"
    assert (tmp_path / "book.pdf").exists() and "Good one" in (tmp_path / "book.md").read_text()


def test_a_markdown_book_is_a_capable_authors_unless_told(tmp_path):
    book = tmp_path / "book.md"
    book.write_text((FIXTURES / "near_duplicate.md").read_text())
    run = [sys.executable, "-m", "pipeline", "audit", str(book), "--json", "--judge", "none"]
    capable = json.loads(subprocess.run(run, capture_output=True, text=True, check=True).stdout)
    small = json.loads(subprocess.run(run + ["--author", "small"], capture_output=True, text=True, check=True).stdout)
    assert capable["author"] == "capable" and small["author"] == "small"
    assert "near_duplicate" in capable["figure_rules"] and capable["figure_why"]["near_duplicate"]
    assert "near_duplicate" not in small["figure_rules"], "a small model's near-duplicate titles are defects"
    assert capable["counts"]["near_duplicate"] == small["counts"]["near_duplicate"] == 1, "counted either way"
    bad = subprocess.run(run + ["--author", "huge"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--author" in bad.stderr


def test_the_last_line_names_each_rule_with_its_count_and_no_figure(tmp_path):
    planted_run(tmp_path)
    report = audit(load_run(tmp_path), judge="none")
    said = flagged(report)
    assert "1 section cut off mid-sentence" in said and "1 section never written" in said
    assert "1 title said twice under one parent" in said
    assert not any("off the request" in line for line in said), "no part or chapter is off the request"
    report.meaning.off_request_ids = ["p01.c01"]
    assert flagged(report)[-1] == "1 chapter off the request"
    report.figure_rules = ["truncated"]
    assert not any("cut off" in line for line in flagged(report)), "a figure is not named"
