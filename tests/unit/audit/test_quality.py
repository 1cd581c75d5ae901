"""Quality figures on hand-built books with hand-computed values, their gates, and `fanout audit` printing them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.audit.book import AuditBook, AuditSection, BookNode, load_book, load_run
from pipeline.audit.quality import FIGURES, measure, seq_rep
from pipeline.audit.report import audit, gate, parse_fail_on
from pipeline.errors import UsageError
from pipeline.records import Author, BookSpec, Chapter, Outline, Part, Section, SectionResult
from pipeline.text import words_of
from pipeline.typeset.appendix import appendix_html

FIGURES_PAGE = Path(__file__).parents[3] / "docs" / "figures.md"


def bare_book(*texts: str, titles: list[str] | None = None) -> AuditBook:
    titles = titles or [f"Topic {chr(65 + i)}" for i in range(len(texts))]
    sections = [AuditSection(f"s{i + 1:04d}", title, text) for i, (title, text) in enumerate(zip(titles, texts))]
    nodes = [BookNode(s.id, s.title, "section", 3) for s in sections]
    return AuditBook("hand-built", nodes, sections, False, list(texts))


def test_seq_rep_4_counts_repeated_4_grams():
    assert seq_rep(words_of("a b c d a b c d")) == pytest.approx(0.2)  # 5 4-grams, 4 unique
    assert seq_rep(words_of("a b c d e")) == 0.0
    assert seq_rep(words_of("a b c")) == 0.0  # under 4 words: no 4-gram at all


def test_distinct_2_pools_sections_without_a_bigram_across_them():
    # "a b c" gives ab, bc; "c d a b" gives cd, da, ab: 4 unique of 5. A bigram spanning the two
    # sections ("c c") would make it 5 of 6.
    quality, sections = measure(bare_book("a b c.", "c d a b."))
    assert quality.distinct_2 == pytest.approx(0.8)
    assert [s.seq_rep_4 for s in sections] == [0.0, 0.0]


def test_length_ratio_unfinished_and_their_medians():
    book = bare_book("One two three four five.", "One two three four five six seven eight nine ten and")
    quality, sections = measure(book, target=10)
    assert [(s.words, s.length_ratio, s.unfinished) for s in sections] == [(5, 0.5, False), (11, 1.1, True)]
    assert quality.words_median == 8 and quality.length_ratio_median == pytest.approx(0.8)
    assert quality.unfinished_share == 0.5
    untargeted, sections = measure(book)
    assert untargeted.length_ratio_median is None and sections[0].length_ratio is None


def test_failed_sections_are_not_measured():
    book = bare_book("One two three.", "", titles=["Written", "Failed"])
    book.sections[1].error = "request failed after 4 attempts"
    quality, sections = measure(book, target=3)
    assert [s.id for s in sections] == ["s0001"] and quality.sections == 1
    assert quality.words_median == 3 and quality.length_ratio_median == 1.0


def test_a_section_ending_inside_an_open_fence_is_unfinished():
    _, sections = measure(bare_book("Some code:\n\n```python\nprint(1)\n```", "Some code:\n\n```python\nprint(1)"))
    assert [s.unfinished for s in sections] == [False, True]


def test_seq_rep_4_book_figures():
    loop = "a b c d " * 4  # 13 4-grams, 4 unique
    quality, _ = measure(bare_book("a b c d e f.", loop + ".", "one two three four five."))
    assert quality.seq_rep_4_max == pytest.approx(round(1 - 4 / 13, 4))
    assert quality.seq_rep_4_median == 0.0 and quality.sections_over_0_3 == 1


def write_outline_run(
    folder: Path, outline: Outline, texts: dict[str, str], prompt: str = "p", words: int = 250
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spec.json").write_text(
        BookSpec(prompt=prompt, parts=1, chapters=1, sections=1, words=words).model_dump_json()
    )
    (folder / "outline.json").write_text(outline.model_dump_json())
    (folder / "sections.jsonl").write_text(
        "".join(
            SectionResult(id=i, title=i, text=t, finish_reason="stop").model_dump_json() + "\n"
            for i, t in texts.items()
        )
    )


def echo_outline() -> Outline:
    sections = [
        Section(id="p01.c01.s01", title="Morning Feeding Routine"),
        Section(id="p01.c01.s02", title="Feeding Schedules Basics"),
        Section(id="p01.c01.s03", title="Flour Choices"),
    ]
    return Outline(
        title="The Bread Book",
        parts=[
            Part(
                id="p01",
                title="Sourdough Starters",
                chapters=[Chapter(id="p01.c01", title="Feeding Schedules", sections=sections)],
            )
        ],
    )


def test_title_echo_rate_reads_the_prompt_and_the_ancestors_from_the_run_folder(tmp_path):
    write_outline_run(tmp_path, echo_outline(), {}, prompt="A short handbook about bread")
    book = load_run(tmp_path)
    assert book.prompt == "A short handbook about bread" and book.title == "The Bread Book"
    quality = audit(book).quality
    assert quality.title_echo_rate == pytest.approx(1 / 5)  # one of part + chapter + 3 sections
    assert quality.echoing_titles == ["p01.c01.s02: Feeding Schedules Basics ~ chapter 'Feeding Schedules'"]


def test_a_part_echoing_the_prompt_counts_and_a_cousin_is_no_ancestor(tmp_path):
    outline = echo_outline()
    outline.parts[0].title = "Rye Flour"
    outline.parts.append(
        Part(
            id="p02",
            title="Storing Loaves",
            chapters=[
                Chapter(
                    id="p02.c01",
                    title="Freezing",
                    sections=[Section(id="p02.c01.s01", title="Feeding Schedules Explained")],
                )
            ],
        )
    )
    write_outline_run(tmp_path, outline, {}, prompt="A short handbook about rye flour")
    echoing = audit(load_run(tmp_path)).quality.echoing_titles
    assert [line.split(":")[0] for line in echoing] == ["p01", "p01.c01.s02"]
    assert "~ prompt" in echoing[0]


def test_placeholders_flagged_in_the_outline_and_named_the_old_way(tmp_path):
    sections = [
        Section(id="p01.c01.s01", title="Keeping Warm", placeholder=True),
        Section(id="p01.c01.s02", title="Feeding (section 2)"),
        Section(id="p01.c01.s03", title="Python 3"),
    ]
    outline = Outline(
        title="Book",
        parts=[
            Part(id="p01", title="Starters", chapters=[Chapter(id="p01.c01", title="Feeding", sections=sections)]),
            Part(id="p02", title="Part 2"),
        ],
    )
    write_outline_run(tmp_path, outline, {})
    book = load_run(tmp_path)
    assert book.placeholders == {"p01.c01.s01"}
    assert audit(book).quality.placeholder_titles == 3


def test_placeholders_named_after_their_parent_are_not_counted_again_as_similar_titles(tmp_path):
    chapters = [Chapter(id=f"p01.c0{n}", title=f"Feeding (chapter {n})", placeholder=n > 1) for n in (1, 2, 3)]
    outline = Outline(title="Book", parts=[Part(id="p01", title="Starters", chapters=chapters)])
    write_outline_run(tmp_path, outline, {})
    report = audit(load_run(tmp_path))
    assert report.quality.placeholder_titles == 3 and report.quality.similar_titles == 0


def test_near_duplicate_titles_are_counted_only_among_siblings():
    sections = {
        "p01.c01.s01": "Choosing Flour",
        "p01.c01.s02": "Choosing the Flour",
        "p01.c02.s01": "Choosing Flour",
        "p01.c02.s02": "Storing Water",
    }
    containers = [("p01", "Starters", "part", 1), ("p02", "Loaves", "part", 1)]
    containers += [("p01.c01", "Flour", "chapter", 2), ("p01.c02", "Water", "chapter", 2)]
    book = AuditBook(
        "hand-built",
        [BookNode(*node) for node in containers] + [BookNode(i, title, "section", 3) for i, title in sections.items()],
        [AuditSection(i, title, "") for i, title in sections.items()],
        True,
        parents={i: i.rsplit(".", 1)[0] for i in ["p01.c01", "p01.c02", *sections]},
    )
    quality, _ = measure(book)
    assert quality.near_duplicate_titles == 1  # the two in p01.c01; p01.c02's "Choosing Flour" is a cousin


def test_a_bare_markdown_book_nests_its_headings(tmp_path):
    path = tmp_path / "book.md"
    path.write_text(
        "# Bread\n\n## Part 1. Loaves\n\n### 1. Flour\n\n#### 1.1 Flour Basics\n\nText.\n\n"
        "#### 1.2 Water\n\nText.\n\n## Part 2. Part 2\n\n### 2. Salt\n\n#### 2.1 Salt\n\nText.\n"
    )
    report = audit(load_book(path))
    assert report.quality.echoing_titles == ["L7: Flour Basics ~ h3 'Flour'", "L19: Salt ~ h3 'Salt'"]
    assert report.quality.placeholder_titles == 1 and report.quality.length_ratio_median is None


def test_an_old_run_folder_without_spec_or_flags_still_loads(tmp_path):
    write_outline_run(tmp_path, echo_outline(), {"p01.c01.s01": "Fine."})
    (tmp_path / "spec.json").unlink()
    old = (tmp_path / "outline.json").read_text().replace(',"point":""', "").replace(',"placeholder":false', "")
    assert "placeholder" not in old and "point" not in old
    (tmp_path / "outline.json").write_text(old)
    book = load_run(tmp_path)
    assert book.prompt is None and book.target_words is None and book.placeholders == set()
    assert audit(book).quality.length_ratio_median is None


# ---------------------------------------------------------------- gates


def test_gate_on_thresholds_and_rules():
    book = bare_book("a b c.", "c d a b.")  # distinct_2 0.8
    book.from_journal, book.author = True, Author.SMALL  # a small model's run's floor: both are empty (under 40 words)
    report = audit(book)
    assert gate(report, "distinct_2<0.5") == []
    assert gate(report, "distinct_2<0.9") == ["distinct_2 0.8 < 0.9"]
    assert gate(report, "empty, seq_rep_4_max>0.3, sections>1") == ["empty 2", "sections 2 > 1"]
    assert gate(report, None) == []


@pytest.mark.parametrize(
    "text, words",
    [
        ("distinct_2=0.5", "unknown rule"),
        ("distinct_2<", "not NAME>VALUE"),
        ("distinct_2<abc", "not a number"),
        ("distinct_2<nan", "not a number"),
        ("bogus>1", "unknown quality figure"),
    ],
)
def test_bad_gates_are_one_line_usage_errors_naming_the_figures(text, words):
    with pytest.raises(UsageError, match=words) as raised:
        parse_fail_on(text)
    assert "\n" not in str(raised.value)
    if "unknown" in words:
        assert all(name in str(raised.value) for name in FIGURES)


def test_a_gate_on_a_figure_the_book_lacks_is_a_usage_error():
    with pytest.raises(UsageError, match="not measured"):
        gate(audit(bare_book("Some words here.")), "length_ratio_median<0.5")


# ---------------------------------------------------------------- the command and docs/figures.md


def test_audit_command_prints_the_figures_and_json_carries_them(tmp_path):
    write_outline_run(
        tmp_path,
        echo_outline(),
        {f"p01.c01.s0{i}": "a b c d a b c d." for i in (1, 2, 3)},
        prompt="A short handbook about bread",
        words=4,
    )
    run = [sys.executable, "-m", "pipeline", "audit", str(tmp_path)]
    printed = subprocess.run(run, capture_output=True, text=True)
    assert printed.returncode == 0, printed.stderr
    assert "quality" in printed.stdout and all(name in printed.stdout for name in FIGURES)
    report = json.loads(subprocess.run(run + ["--json"], capture_output=True, text=True).stdout)
    assert report["quality"]["seq_rep_4_max"] == 0.2 and report["quality"]["length_ratio_median"] == 2.0
    assert [s["id"] for s in report["section_quality"]] == ["p01.c01.s01", "p01.c01.s02", "p01.c01.s03"]
    gated = subprocess.run(run + ["--fail-on", "title_echo_rate>0.1,repetition_loop"], capture_output=True, text=True)
    assert gated.returncode == 3 and "title_echo_rate 0.2 > 0.1" in gated.stderr
    refused = subprocess.run(run + ["--fail-on", "bogus>1"], capture_output=True, text=True)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1


def test_the_appendix_shows_the_figures_once_and_no_row_a_section(tmp_path):
    write_outline_run(tmp_path, echo_outline(), {"p01.c01.s01": "Fine words here."})
    report = audit(load_run(tmp_path)).model_dump(mode="json")
    html = appendix_html({"sections": 3, "quality": report["quality"]}, report)
    assert html.count("Title echo rate") == 1 and "Feeding Schedules Basics ~ chapter" in html
    assert "Seq rep 4</th>" not in html and "Length ratio</th>" not in html


def test_the_figures_page_defines_every_figure_as_the_module_does():
    page = FIGURES_PAGE.read_text()
    for name, definition in FIGURES.items():
        assert f"| `{name}` | {definition} |" in page, name
