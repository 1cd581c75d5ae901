"""The audit of Markdown nobody wrote for fanout: the structure found from the file itself, every
heading-delimited block with text a unit, duplicates by path, floors that follow the document. Fixtures in
tests/fixtures/audit/shapes/ (written for these tests) in the shapes of an API reference, release notes, a
STORM-style article and a fanout run, each with its expected counts."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.audit.book import load_book
from pipeline.audit.report import audit, gate
from pipeline.audit.rules import word_floor
from pipeline.records import Author, BookSpec

SHAPES = Path(__file__).parents[2] / "fixtures" / "audit" / "shapes"
STRUCTURAL = ("duplicate", "repeated_title", "near_duplicate", "truncated", "empty", "failed", "unclosed_fence")
EXPECTED = {
    "api_reference.md": {
        "structure": "markdown: title 'Job queue' (with text) > h2 4 (3 with text, 2 holding others) > "
        "h3 11 (11 with text, 1 holding others) > h4 1 (1 with text); 17 units",
        "words": 431,
        "code_blocks": 3,
        "counts": dict(
            duplicate=0, repeated_title=1, near_duplicate=0, truncated=0, empty=2, failed=0, unclosed_fence=0
        ),
    },
    "release_notes.md": {
        "structure": "markdown: h1 200 (8 with text, 192 holding others) > h2 571 (567 with text); 579 units",
        "words": 7269,
        "code_blocks": 0,
        "counts": dict(
            duplicate=0, repeated_title=563, near_duplicate=0, truncated=0, empty=4, failed=0, unclosed_fence=0
        ),
    },
    "storm_article.md": {
        "structure": "markdown: title 'Lighthouse keeping' (with text) > h2 4 (4 with text, 3 holding others) > "
        "h3 6 (6 with text); 11 units",
        "words": 636,
        "code_blocks": 0,
        "counts": dict(
            duplicate=0, repeated_title=1, near_duplicate=0, truncated=1, empty=0, failed=0, unclosed_fence=0
        ),
    },
    "fanout_run": {
        "structure": "fanout run: part 2 (2 holding others) > chapter 4 (4 holding others) > section 12 (11 with "
        "text); 12 units",
        "words": 824,
        "code_blocks": 0,
        "counts": dict(
            duplicate=1, repeated_title=1, near_duplicate=0, truncated=1, empty=1, failed=1, unclosed_fence=0
        ),
    },
}


def recount_words(markdown: str) -> int:
    """An independent count of what a reader reads: no comments, headings, setext underlines, anchors or link
    definitions, and each link's text without where it points."""
    markdown = re.sub(r"<!--.*?-->", "", markdown, flags=re.S)
    lines = markdown.splitlines()
    underline = re.compile(r"^(=+|-+)$")
    setext = {i for i in range(len(lines) - 1) if lines[i].strip() and underline.match(lines[i + 1])}
    kept = [
        line
        for i, line in enumerate(lines)
        if i not in setext
        and not underline.match(line)
        and not line.startswith("#")
        and not re.match(r"^\[[^\]]+\]: ", line)
        and not re.match(r"^<a id=[^>]*></a>$", line)
    ]
    return len(re.sub(r"\]\([^)]*\)", "]", "\n".join(kept)).split())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_shape_gives_its_expected_counts(name):
    expected = EXPECTED[name]
    report = audit(load_book(SHAPES / name))
    assert report.structure is not None and report.structure.line() == expected["structure"]
    assert report.sections == report.structure.units
    assert (report.structure.words, report.code_blocks) == (expected["words"], expected["code_blocks"])
    assert {rule: report.counts[rule] for rule in STRUCTURAL} == expected["counts"]


@pytest.mark.parametrize("name", ["api_reference.md", "release_notes.md", "storm_article.md"])
def test_words_match_an_independent_recount(name):
    assert audit(load_book(SHAPES / name), only=["empty"]).structure.words == recount_words((SHAPES / name).read_text())


def test_the_same_title_under_two_parents_is_reported_apart_with_both_paths():
    report = audit(load_book(SHAPES / "api_reference.md"), only=["duplicate", "repeated_title"])
    (repeat,) = [d for d in report.defects if d.rule == "repeated_title"]
    assert "Class: `jobq.Queue` > Event: `'close'`" in repeat.detail
    assert "Class: `jobq.Job` > Event: `'close'`" in repeat.detail
    assert report.figure_rules == ["repeated_title"] and report.counts["duplicate"] == 0


def test_a_foreign_files_repeated_titles_are_figures_until_the_gate_names_them():
    report = audit(load_book(SHAPES / "release_notes.md"), only=["repeated_title", "word_count_outliers", "empty"])
    assert set(report.figure_rules) == {"repeated_title", "word_count_outliers"}
    flawed = {d.section_id for d in report.defects if d.rule == "empty"}
    assert f"{len(flawed)} of 579 sections have at least one defect" in report.summary
    assert gate(report, "empty") == ["empty 4"] and gate(report, "repeated_title") == ["repeated_title 563"]


def test_in_a_run_a_repeated_title_is_a_defect():
    report = audit(load_book(SHAPES / "fanout_run"), skip=["off_subject"])  # its texts are stand-ins
    assert report.figure_rules == []
    assert report.ids("repeated_title") == ["p02.c02.s01"] and report.ids("duplicate") == ["p01.c01.s02"]
    assert "p02.c02.s01" in {d.section_id for d in report.defects} and "8 of 12 sections" in report.summary[-1]


def test_a_reference_floor_follows_its_siblings():
    reference = load_book(SHAPES / "api_reference.md")
    by_id = {d.section_id: d.detail for d in audit(reference, only=["empty"]).defects}
    assert set(by_id) == {"L80", "L152"}  # `queue.pause()`: "See …" (2 words); an alias heading with no text
    assert "a capable author's stub" in by_id["L80"], "a Markdown book is a capable author's: under 3 words"
    reference.author = Author.SMALL
    by_id = {d.section_id: d.detail for d in audit(reference, only=["empty"]).defects}
    assert set(by_id) == {"L80", "L152"} and "siblings' median" in by_id["L80"]
    short = next(s for s in load_book(SHAPES / "api_reference.md").sections if s.title == "`queue.size`")
    assert 0 < short.words < 40 and short.id not in by_id, "a short entry among short ones is what a reference is"


def test_a_runs_floor_follows_the_words_asked(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(SHAPES / "fanout_run", run)
    book = load_book(run)
    for words in (150, 250, 600):
        spec = BookSpec.model_validate_json((run / "spec.json").read_text()).model_copy(update={"words": words})
        (run / "spec.json").write_text(spec.model_dump_json())
        below = {s.id for s in book.sections if s.error is None and s.words < word_floor(words)}
        assert set(audit(load_book(run), only=["empty"]).ids("empty")) == below
    assert word_floor(250) == 40 and word_floor(None) == 40


def test_a_runs_book_md_read_as_a_foreign_file_finds_the_same_units():
    run, markdown = audit(load_book(SHAPES / "fanout_run")), audit(load_book(SHAPES / "fanout_run" / "book.md"))
    assert run.structure and markdown.structure and run.structure.units == markdown.structure.units == 12
    for rule in ("duplicate", "repeated_title", "truncated"):
        assert run.counts[rule] == markdown.counts[rule] == 1, rule


def test_the_audit_command_prints_the_structure_and_gates_on_repeated_titles(tmp_path):
    source = tmp_path / "api.md"
    shutil.copy(SHAPES / "api_reference.md", source)
    command = [sys.executable, "-m", "pipeline", "audit", str(source)]
    plain = subprocess.run(command, capture_output=True, text=True)
    assert plain.returncode == 0, plain.stderr
    assert "markdown: title 'Job queue'" in " ".join(plain.stdout.split())
    gated = subprocess.run(command + ["--fail-on", "repeated_title"], capture_output=True, text=True)
    assert gated.returncode == 3 and "repeated_title 1" in gated.stderr
    saved = json.loads((tmp_path / "api.audit.json").read_text())
    assert saved["structure"]["units"] == 17
    assert saved["author"] == "capable" and "repeated_title" in saved["figure_rules"]
    assert saved["figure_why"]["repeated_title"].startswith("a reference repeats")
