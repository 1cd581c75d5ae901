"""`fanout book --outline FILE` and the request: the prompt on the command line, else the file's front-matter
request, else its title and its parts' titles (a person who wrote the outline has said what the book is); a file
with none of them is refused in one line (exit 2) before any work. `fanout plan` (no --outline) refuses a
missing prompt the same way."""

from __future__ import annotations

import json

import pytest

from pipeline.book.outlinefile import read_outline_file
from pipeline.cli import main
from pipeline.cli.book import book_spec
from pipeline.cli.main import build_parser

TITLE = "Sourdough Starter and Bread"
REQUEST = "Write a short handbook on keeping a sourdough starter alive"
UNREACHABLE = ["--backend", "http://127.0.0.1:9/v1"]


@pytest.fixture
def outlines(tmp_path):
    files = {"bare": tmp_path / "bare.md", "asked": tmp_path / "asked.md", "json": tmp_path / "outline.json"}
    files["bare"].write_text(f"# {TITLE}\n## Feeding\n### Flour\n")
    files["asked"].write_text(f"---\nrequest: {REQUEST}\n---\n# {TITLE}\n## Feeding\n### Flour\n")
    parts = [{"id": "p01", "title": "Feeding", "point": "", "chapters": []}]
    files["json"].write_text(json.dumps({"title": TITLE, "parts": parts}))
    return files


@pytest.mark.parametrize("name", ["bare", "json"])
def test_an_outline_without_a_request_is_asked_for_as_its_title_and_parts(outlines, name):
    assert spec_of(outline=outlines[name]).prompt == f"{TITLE}: Feeding"


def test_an_outline_with_neither_request_nor_title_is_refused_in_one_line(tmp_path, capsys):
    untitled = tmp_path / "outline.json"
    untitled.write_text(json.dumps({"title": "", "parts": [{"id": "p01", "title": "", "point": "", "chapters": []}]}))
    out = tmp_path / "run"
    assert main(["book", "--outline", str(untitled), "--out", str(out), *UNREACHABLE]) == 2
    assert capsys.readouterr().err.startswith(f"fanout: error: --outline {untitled}: it has no request and no title")
    assert not out.exists(), "nothing is started"


def spec_of(*args: str, outline):
    return book_spec(build_parser().parse_args(["book", *args, "--outline", str(outline)]), read_outline_file(outline))


def test_the_request_comes_from_the_command_line_else_from_the_file(outlines, tmp_path):
    assert spec_of(outline=outlines["asked"]).prompt == REQUEST
    assert spec_of("A handbook on rye", outline=outlines["bare"]).prompt == "A handbook on rye"
    assert spec_of("A handbook on rye", outline=outlines["asked"]).prompt == "A handbook on rye"
    brief = tmp_path / "brief.txt"
    brief.write_text("A handbook on spelt\n")
    assert spec_of("--prompt-file", str(brief), outline=outlines["json"]).prompt == "A handbook on spelt"


def test_plan_without_a_prompt_is_refused_in_one_line(tmp_path, capsys):
    assert main(["plan", "--out", str(tmp_path / "run"), *UNREACHABLE]) == 2
    assert capsys.readouterr().err == "fanout: error: the prompt is empty\n"
    assert not (tmp_path / "run").exists()
