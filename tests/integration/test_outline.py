"""Plan, edit, write: `fanout plan` writes outline.md and stops; `fanout book --outline FILE` writes the book
from a person's outline, its titles and points verbatim, planning only the levels the file leaves out; the
prompt can come from a file or standard input. On a FAKE engine in its own process (its prompts are read
back to see what was asked)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from pypdf import PdfReader

from pipeline.book.outlinefile import read_outline_file
from tests.environ import isolated_env
from tests.fakes.fake_engine import fake_process_serving
from tests.fakes.fake_prompts import plan_level, section_title

FANOUT = [sys.executable, "-m", "pipeline"]
EXAMPLES = Path(__file__).parents[2] / "examples" / "outlines"
BRIEF = Path(__file__).parents[2] / "examples" / "briefs" / "choir_section_leaders.txt"  # 310 words, 5 paragraphs


@pytest.fixture(scope="module")
def engine():
    with fake_process_serving(0.001, 0.0) as url:
        yield url


def fanout(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*FANOUT, *args], input=stdin, capture_output=True, text=True, timeout=300, env=isolated_env()
    )


def prompts_since(url: str, before: int) -> list[str]:
    with urllib.request.urlopen(url[:-3] + "/fake/prompts") as response:
        return json.load(response)[before:]


def prompt_count(url: str) -> int:
    return len(prompts_since(url, 0))


def headings(book_md: Path) -> list[str]:
    """Every heading's title in book.md, the book's numbering taken off."""
    found = re.findall(r"^#{1,4} (.+)$", book_md.read_text(), flags=re.MULTILINE)
    return [re.sub(r"^(Part \d+\. |\d+\. |\d+\.\d+ )", "", title) for title in found]


def titles_of(outline) -> list[str]:
    return [outline.title] + [
        node.title for part in outline.parts for node in (part, *[n for c in part.chapters for n in (c, *c.sections)])
    ]


def test_a_hand_written_outline_is_written_verbatim_without_a_planning_request(engine, tmp_path):
    given = read_outline_file(EXAMPLES / "tide_pools.md")
    before = prompt_count(engine)
    out = tmp_path / "run"
    done = fanout("book", "--outline", str(EXAMPLES / "tide_pools.md"), "--backend", f"{engine},cap=8",
                  "--out", str(out), "--quiet", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["requests_planning"] == 0 and stats["sections_ok"] == 8 and stats["complete"]
    asked = prompts_since(engine, before)
    assert not [p for p in asked if plan_level(p) is not None], "nothing was planned"
    assert headings(out / "book.md") == titles_of(given.outline)
    run_outline = json.loads((out / "outline.json").read_text())
    assert run_outline == given.outline.model_dump(mode="json"), "every title and point as the file gives it"
    spec = json.loads((out / "spec.json").read_text())
    assert spec["prompt"] == given.request and (spec["parts"], spec["chapters"], spec["sections"]) == (2, 2, 2)
    for _, _, section in given.outline.sections():
        (request,) = [p for p in asked if section_title(p) == section.title]
        assert section.point in request, "each section is asked with its own point"
    contents = " ".join(page.extract_text() for page in PdfReader(out / "book.pdf").pages[:4])
    assert all(section.title in contents for _, _, section in given.outline.sections()), "the contents list them"


def test_an_outline_of_parts_and_chapters_plans_only_the_sections_under_its_chapters(engine, tmp_path):
    given = read_outline_file(EXAMPLES / "tide_pools_chapters.md")
    before = prompt_count(engine)
    out = tmp_path / "run"
    done = fanout("book", "--outline", str(EXAMPLES / "tide_pools_chapters.md"), "--shape", "8x12x3",
                  "--backend", f"{engine},cap=8", "--out", str(out), "--quiet", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["sections_ok"] == 2 * 2 * 3, "the shape: the file's parts and chapters, --shape's sections"
    planning = [p for p in prompts_since(engine, before) if plan_level(p) is not None]
    assert planning and {plan_level(p) for p in planning} == {"chapter"}, "only the sections were planned"
    chapters = {c.title for p in given.outline.parts for c in p.chapters}
    assert {re.search(r'for the chapter "([^"]+)"', p).group(1) for p in planning} == chapters
    run_outline = json.loads((out / "outline.json").read_text())
    for part, kept in zip(given.outline.parts, run_outline["parts"]):
        assert (kept["title"], kept["point"]) == (part.title, part.point)
        assert [(c["title"], c["point"]) for c in kept["chapters"]] == [(c.title, c.point) for c in part.chapters]
        assert all(len(c["sections"]) == 3 for c in kept["chapters"])


def test_an_outline_without_a_request_is_written_with_its_title_and_parts_as_the_request(engine, tmp_path):
    bare = tmp_path / "bare.md"
    bare.write_text("# Tide Pools\n## Reading the Tides\n### Tide Tables\n### Spring and Neap Tides\n")
    done = fanout("book", "--outline", str(bare), "--shape", "1x1x2", "--backend", f"{engine},cap=8",
                  "--out", str(tmp_path / "run"), "--quiet", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sections_ok"] == 2 * 2, "the file's two chapters, two sections each"
    assert json.loads((tmp_path / "run" / "spec.json").read_text())["prompt"] == "Tide Pools: Reading the Tides"


def test_plan_then_book_from_its_outline_md_unchanged_gives_the_planned_headings(engine, tmp_path):
    plan_dir, book_dir = tmp_path / "plan", tmp_path / "book"
    planned = fanout("plan", "A pocket guide to tide pools", "--shape", "2x2x2", "--backend", f"{engine},cap=8",
                     "--out", str(plan_dir), "--quiet")  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    assert sorted(p.name for p in plan_dir.iterdir() if not p.name.startswith(".")) == [
        "audit.json", "outline.json", "outline.md", "requests.jsonl", "run.log", "spec.json",
    ]  # fmt: skip
    outline = read_outline_file(plan_dir / "outline.json").outline
    assert planned.stdout.splitlines()[0] == outline.title and len(planned.stdout.splitlines()) == 1 + 2 + 4 + 8
    assert (
        "planning requests" in planned.stderr and f"fanout book --outline {plan_dir / 'outline.md'}" in planned.stderr
    )
    before = prompt_count(engine)
    done = fanout("book", "--outline", str(plan_dir / "outline.md"), "--backend", f"{engine},cap=8",
                  "--out", str(book_dir), "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not [p for p in prompts_since(engine, before) if plan_level(p) is not None]
    assert headings(book_dir / "book.md") == titles_of(outline)


@pytest.mark.parametrize("from_stdin", [False, True])
def test_a_brief_of_several_lines_comes_from_a_file_or_standard_input(engine, tmp_path, from_stdin):
    brief = BRIEF.read_text()
    source = "-" if from_stdin else str(BRIEF)
    done = fanout("plan", "--prompt-file", source, "--shape", "1x1x2", "--backend", f"{engine},cap=8",
                  "--out", str(tmp_path / "plan"), "--quiet", stdin=brief if from_stdin else None)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "plan" / "spec.json").read_text())["prompt"] == brief.strip()
    assert read_outline_file(tmp_path / "plan" / "outline.md").request == brief.strip(), "kept whole in outline.md"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["book", "--outline", "{bad}"], "bad.md line 3: a section outside a chapter (a heading level skipped)"),
        (["book", "A prompt", "--prompt-file", "{bare}"], "give the prompt or --prompt-file, not both"),
        (["plan", "--prompt-file", "{missing}"], "--prompt-file"),
    ],
)
def test_a_bad_outline_or_prompt_file_is_one_line_and_exit_2(tmp_path, args, message):
    files = {"bad": tmp_path / "bad.md", "bare": tmp_path / "bare.md", "missing": tmp_path / "missing.txt"}
    files["bad"].write_text("# Book\n## Part\n#### Section\n")
    files["bare"].write_text("# Book\n## Part\n")
    done = fanout(*[arg.format(**files) for arg in args], "--backend", "http://127.0.0.1:9/v1")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("fanout: error: ") and message in done.stderr, done.stderr
    assert not list(tmp_path.glob("outputs")), "nothing is started"


def test_quality_takes_briefs_from_files_and_standard_input(engine, tmp_path):
    done = fanout("quality", "--prompt-file", str(BRIEF), "--prompt-file", "-", "--shape", "1x1x2",
                  "--backend", f"{engine},cap=8", "--out", str(tmp_path / "q"), "--quiet",
                  stdin="A second brief, from standard input.\n")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads((tmp_path / "q" / "quality.json").read_text())["rows"]
    assert [row["prompt"] for row in rows] == [BRIEF.read_text().strip(), "A second brief, from standard input."]
