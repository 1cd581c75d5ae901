"""`fanout frontier`: the Pareto front of quality against tok/s, and a run on a FAKE step-law engine
(tests/fakes/fake_steplaw.py) that writes one small book a setting."""

from __future__ import annotations

import json

import pytest

from pipeline.bench.studies.frontier import FrontierPoint, mark_front
from pipeline.cli import main
from pipeline.records.audit import BookQuality
from tests.fakes.fake_steplaw import steplaw_in_thread

QUALITY = BookQuality(
    distinct_2=1.0, seq_rep_4_median=0.0, seq_rep_4_max=0.0, sections_over_0_3=0, unfinished_share=0.0,
    words_median=10, title_echo_rate=0.0, placeholder_titles=0, near_duplicate_titles=0, repeated_passages=0,
    sections=1,
)  # fmt: skip


def point(name: str, tok_s: float | None, value: float | None) -> FrontierPoint:
    return FrontierPoint(
        setting=name, profile=name, best_of=1, run="", tok_s=tok_s, job_seconds=1, tokens_written=1, value=value,
        quality=QUALITY,
    )  # fmt: skip


@pytest.mark.parametrize("higher", [True, False])
def test_the_front_holds_exactly_the_settings_no_other_beats_on_both(higher):
    sign = 1 if higher else -1
    points = [
        point("fast, poor", 100, sign * 0.2),
        point("slow, good", 40, sign * 0.9),
        point("middle", 70, sign * 0.6),
        point("dominated", 60, sign * 0.5),  # "middle" is faster and better
        point("tied but slower", 65, sign * 0.6),  # same figure as "middle", less tok/s
        point("unmeasured", None, sign * 1.0),
    ]
    mark_front(points, higher_is_better=higher)
    assert [p.setting for p in points if p.on_front] == ["fast, poor", "slow, good", "middle"]
    # every setting took 1 s a book, so by job time only the best figure is on the front (tok/s aside)
    assert [p.setting for p in points if p.on_front_by_job_time] == ["unmeasured"]


def test_frontier_writes_a_book_a_setting_and_marks_the_front(tmp_path, capsys):
    with steplaw_in_thread((1.0, 0.01), (1.0, 0.01)) as (engine, planner):
        args = ["frontier", "A handbook on bees", "--shape", "1x2x2", "--words", "20", "--profiles", "greedy,small"]
        args += ["--best-of", "1,2", "--figure", "seq_rep_4_median", "--backend", f"{engine.url},cap=16"]
        args += ["--planner-backend", f"{planner.url},cap=4,name=planner", "--planning", "open"]  # profiles alone
        assert main([*args, "--quiet", "--out", str(tmp_path), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert [p["setting"] for p in record["points"]] == [
        f"{profile}, best of {k}{apart}"
        for profile in ("greedy", "small") for k in (1, 2) for apart in ("", ", planner apart")
    ]  # fmt: skip
    assert {p["planner"] for p in record["points"]} == {"the fleet", "planner"}
    assert all(p["tok_s"] and p["job_seconds"] and (tmp_path / p["run"]).exists() for p in record["points"])
    assert any(p["on_front"] for p in record["points"]) and not record["higher_is_better"]
    assert (tmp_path / "frontier.png").exists() and "| greedy, best of 2 |" in (tmp_path / "frontier.md").read_text()


def test_an_unknown_profile_or_figure_is_refused_before_any_engine(capsys):
    assert main(["frontier", "--profiles", "greedy,wild", "--backend", "http://127.0.0.1:9/v1"]) == 2
    assert main(["frontier", "--figure", "sections", "--backend", "http://127.0.0.1:9/v1"]) == 2
    assert "profiles are greedy" in capsys.readouterr().err


def test_section_prompt_variants_are_an_axis_and_reach_the_engine(tmp_path, capsys):
    variant = tmp_path / "terse.md"
    variant.write_text(
        'Be terse. Book: "$book_title".\n\nWrite the section "$section_title". It explains: $section_point\n'
    )
    with steplaw_in_thread((1.0, 0.01)) as (engine,):
        args = ["frontier", "A handbook on bees", "--shape", "1x1x2", "--words", "20", "--profiles", "greedy"]
        args += ["--best-of", "1", "--section-templates", f"shipped,{variant}", "--figure", "seq_rep_4_median"]
        assert main([*args, "--backend", f"{engine.url},cap=8", "--quiet", "--out", str(tmp_path / "f"), "--json"]) == 0
        prompts = list(engine.prompts)
    record = json.loads(capsys.readouterr().out)
    assert [p["section_prompt"] for p in record["points"]] == ["templates/section.md", str(variant)]
    assert record["points"][1]["setting"] == f"greedy, best of 1, prompt {variant}"
    terse = [p for p in prompts if p.startswith("Be terse.")]
    assert len(terse) == 2 and all("Write the section" in p for p in terse)  # the variant's two sections
    spec = json.loads((tmp_path / record["points"][1]["run"] / "spec.json").read_text())
    assert spec["section_template"].startswith("Be terse."), "a resume writes with the same prompt"
