"""Sampling profiles, the section request's neighbourhood, the word budget and cut-to-sentence, and the planner
backend: mechanisms on FAKE engines and fixed texts, never what a model writes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from pipeline.book.profiles import PROFILES, Sampler, choose_profile, honoured_fields, is_small_model, sampling_body
from pipeline.book.trim import cut_to_sentence, paragraphs_for, tidy_closing, tidy_opening, unfenced
from pipeline.book.write import WallClock, finished, section_prompt, section_request
from pipeline.config import load_settings
from pipeline.errors import UsageError
from pipeline.records import BookSpec, Chapter, Completion, EngineKind, Outline, Part, Section, token_cap
from pipeline.templating import section_template
from tests.fakes.fake_prompts import plan_level, section_title


@pytest.mark.parametrize(
    "models, profile",
    [
        (["SmolLM2-135M-Instruct"], "small"),
        (["gemma-3-270m-it-Q4_K_M.gguf"], "small"),
        (["Qwen/Qwen2.5-0.5B-Instruct"], "small"),
        (["Qwen/Qwen3-8B"], "default"),
        (["llama-3.1-70b"], "default"),
        (["SmolLM2-135M", "Qwen/Qwen3-8B"], "default"),
        ([], "default"),
    ],
)
def test_the_profile_is_chosen_from_the_models_the_engines_report(models, profile):
    assert choose_profile(None, {}, models).name == profile


def test_a_named_profile_and_field_overrides_win_and_bad_ones_are_one_line_errors(tmp_path: Path):
    config = tmp_path / "fleet.toml"
    config.write_text('profile = "greedy"\n[sampling]\ntemperature = 0.3\nseed = 9\n')
    settings = load_settings({}, config, environ={})
    chosen = choose_profile(settings.profile, settings.sampling, ["SmolLM2-135M"])
    assert (chosen.name, chosen.temperature, chosen.seed) == ("greedy", 0.3, 9)
    assert choose_profile("small", {}, ["Qwen/Qwen3-8B"]).name == "small", "a named profile beats the model"
    assert load_settings({"profile": "default"}, config, environ={}).profile == "default", "the flag beats TOML"
    with pytest.raises(UsageError, match="unknown sampling profile 'tiny'"):
        choose_profile("tiny", {}, [])
    with pytest.raises(UsageError, match="sampling setting temprature"):
        choose_profile(None, {"temprature": 1.0}, [])


def test_each_engine_gets_the_fields_it_honours_in_its_own_names():
    small = PROFILES["small"]
    llama = sampling_body(small, {EngineKind.LLAMACPP}, "p01.c01.s01")
    assert llama["repeat_penalty"] == 1.1 and llama["dry_multiplier"] == 0.8 and "repetition_penalty" not in llama
    vllm = sampling_body(small, {EngineKind.VLLM}, "p01.c01.s01")
    assert vllm["repetition_penalty"] == 1.1 and "dry_multiplier" not in vllm and vllm["min_p"] == 0.05
    assert set(sampling_body(small, {EngineKind.OLLAMA}, "x")) == {"top_p", "seed"}, "the OpenAI standard only"
    mixed = sampling_body(small, {EngineKind.LLAMACPP, EngineKind.VLLM}, "x")
    assert mixed["repeat_penalty"] == mixed["repetition_penalty"] == 1.1 and "dry_multiplier" not in mixed
    assert honoured_fields({EngineKind.TGI, EngineKind.SGLANG}) == honoured_fields({EngineKind.UNKNOWN})
    assert sampling_body(PROFILES["greedy"], {EngineKind.LLAMACPP}, "x") == {}, "greedy sends no seed"


def test_seeds_are_fixed_per_section_so_a_rerun_asks_the_same_way():
    small = PROFILES["small"]
    first, again, other = (
        sampling_body(small, {EngineKind.LLAMACPP}, tag)["seed"]
        for tag in ("p01.c01.s01", "p01.c01.s01", "p01.c01.s02")
    )
    assert first == again != other
    assert is_small_model("SmolLM2-135M-Instruct.Q4_1.gguf") and not is_small_model("Mistral-7B-Instruct")


def chapter_of_four() -> tuple[Outline, Part, Chapter]:
    sections = [
        Section(id=f"p01.c01.s0{n}", title=title, point=point)
        for n, (title, point) in enumerate(
            [
                ("Choosing a Flour", "Why rye feeds a starter faster."),
                ("The Feeding Ratio", "How to weigh 1:1:1."),
                ("Feeding Schedules", "How often to feed it."),
                ("Signs of Hunger", ""),
            ],
            1,
        )
    ]
    chapter = Chapter(id="p01.c01", title="Feeding Your Starter", point="What and when to feed.", sections=sections)
    part = Part(id="p01", title="Daily Care", chapters=[chapter])
    return Outline(title="Starter Care", parts=[part]), part, chapter


def test_a_section_request_carries_its_book_chapter_and_own_point_and_no_sibling():
    outline, part, chapter = chapter_of_four()
    spec = BookSpec(prompt="Write a short handbook on keeping a sourdough starter alive.", words=180)
    prompt = section_prompt(spec, outline, chapter, chapter.sections[1])
    assert '"Starter Care"' in prompt and '"Feeding Your Starter"' in prompt
    assert (
        'Write the section "The Feeding Ratio" of this book on keeping a sourdough starter alive. It explains: How '
        "to weigh 1:1:1." in prompt
    ), "the subject as the request frames it beside the section's own title"
    for elsewhere in ("Choosing a Flour", "rye", "Feeding Schedules", "Signs of Hunger", "What and when to feed"):
        assert elsewhere not in prompt, "siblings and the chapter's point pull a small model off its own point"
    assert spec.prompt not in prompt and "Daily Care" not in prompt
    assert f"Write {paragraphs_for(180)} paragraphs, about 180 words" in prompt and "complete sentence" in prompt
    assert section_title(prompt) == "The Feeding Ratio" and plan_level(prompt) is None
    sampler = Sampler(profile=PROFILES["small"], kinds=frozenset({EngineKind.LLAMACPP}))
    request = section_request(spec, (outline, chapter, chapter.sections[1]), sampler)
    assert request.temperature == 0.5 and request.extra["dry_multiplier"] == 0.8 and request.tag == "p01.c01.s02"
    other = section_request(spec, (outline, chapter, chapter.sections[1]), sampler, candidate=2)
    assert other.tag == "p01.c01.s02#2" and other.extra["seed"] != request.extra["seed"], "a candidate's own seed"


def test_the_requests_audience_and_asks_for_every_part_reach_the_section_prompt():
    outline, part, chapter = chapter_of_four()
    for request, note in (
        (
            "Explain how vaccines train the immune system, for curious readers without a biology degree.",
            "The book is written for curious readers without a biology degree.",
        ),
        (
            "Write a handbook on building command-line tools in Python, with code examples.",
            "The book is written with code examples.",
        ),
    ):
        prompt = section_prompt(BookSpec(prompt=request), outline, chapter, chapter.sections[0])
        assert note in prompt and request not in prompt
    plain = section_prompt(
        BookSpec(prompt="Sourdough. Practical, with examples."), outline, chapter, chapter.sections[0]
    )
    assert "The book is written" not in plain, "'practical, with examples' is said by the prompt already"


def test_a_chapters_section_prompts_share_everything_before_their_own_title():
    outline, part, chapter = chapter_of_four()
    spec = BookSpec(prompt="Explain how vaccines work, for curious readers without a biology degree.")
    prompts = [section_prompt(spec, outline, chapter, section) for section in chapter.sections]
    shared = os.path.commonprefix(prompts)
    assert shared.endswith('Write the section "') and chapter.title in shared and outline.title in shared
    assert "complete sentence" in shared and "without a biology degree" in shared, "the instructions come first"


def test_a_users_own_section_template_is_filled_and_a_bad_one_refused_in_one_line(tmp_path: Path):
    outline, part, chapter = chapter_of_four()
    own = "Section of $book_title: $section_title. Point: $section_point. About $words words; $$5 is a price."
    spec = BookSpec(prompt="Sourdough.", words=120, section_template=section_template(own, "own.md"))
    prompt = section_prompt(spec, outline, chapter, chapter.sections[1])
    assert (
        prompt
        == f"Section of {outline.title}: The Feeding Ratio. Point: How to weigh 1:1:1.. About 120 words; $5 is a price."
    )
    for bad, message in [
        ("Write $section_title about $topic. $section_point", "unknown placeholders ['topic']"),
        ("Write about $section_point.", "must use $section_title"),
        ("Write $section_title ($section_point) for $ 5.", "starts no placeholder"),
    ]:
        with pytest.raises(UsageError, match=re.escape(message)):
            section_template(bad, "bad.md")
    (tmp_path / "bad.md").write_text("Write about $topic.")
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "book", "Bees", "--section-template", str(tmp_path / "bad.md")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "bad.md" in done.stderr


def test_the_cap_follows_the_word_budget():
    assert token_cap(250) == 455 and token_cap(100) == 182 and paragraphs_for(250) == 3 and paragraphs_for(20) == 1
    assert BookSpec(prompt="p").max_tokens == 455 and BookSpec(prompt="p", words=100, max_tokens=None).max_tokens == 182
    assert BookSpec(prompt="p", words=100, max_tokens=64).max_tokens == 64


@pytest.mark.parametrize(
    "text, cut",
    [
        ("Feed it daily. Use rye, e.g. dark rye. Then wait until it dou", "Feed it daily. Use rye, e.g. dark rye."),
        ("Intro.\n\n```python\nprint(1)\n```\n\nMore text that is cut", "Intro.\n\n```python\nprint(1)\n```"),
        ("Intro.\n\n```python\nprint(1)\nprint(", "Intro."),
        ('He said "stop." Then the', 'He said "stop."'),
        ("It works (mostly). And then", "It works (mostly)."),
        ("no sentence end anywhere", None),
        ("Already finished.", None),
    ],
)
def test_a_capped_answer_is_cut_back_to_its_last_full_sentence(text, cut):
    assert cut_to_sentence(text) == cut


def completion(text: str, finish: str) -> Completion:
    return Completion(
        backend="b0",
        text=text,
        finish_reason=finish,
        prompt_tokens=5,
        completion_tokens=9,
        t_sent=1.0,
        t_first_token=1.1,
        t_done=2.0,
    )


def test_a_trimmed_section_keeps_both_texts_and_a_closed_or_listed_ending_is_left_alone():
    section = Section(id="p01.c01.s01", title="T")
    trimmed = finished(section, completion("One. Two. Thr", "length"), WallClock())
    assert (trimmed.text, trimmed.raw_text, trimmed.trimmed) == ("One. Two.", "One. Two. Thr", True)
    stopped = finished(section, completion("One. Two. Thr", "stop"), WallClock())
    assert (stopped.text, stopped.trimmed) == ("One. Two.", True), "a model stopping mid-sentence is cut too"
    listed = finished(section, completion("Steps:\n- mix\n- wait", "stop"), WallClock())
    assert (listed.text, listed.raw_text, listed.trimmed) == ("Steps:\n- mix\n- wait", None, False)
    whole = finished(section, completion("One. Two.", "stop"), WallClock())
    assert (whole.text, whole.raw_text, whole.trimmed) == ("One. Two.", None, False)
    hopeless = finished(section, completion("no end at all", "length"), WallClock())
    assert (hopeless.text, hopeless.trimmed) == ("no end at all", False)


def start_fake(prefix: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.fake_engine", "0.001", "0.01", "--title-prefix", prefix],
        stdout=subprocess.PIPE,
        text=True,
    )
    return process, process.stdout.readline().strip()


def prompts_of(url: str) -> list[str]:
    with urllib.request.urlopen(url[:-3] + "/fake/prompts") as response:
        return json.load(response)


def test_the_planner_backend_gets_every_planning_request_and_no_section(tmp_path: Path):
    writer, writer_url = start_fake("Writer")
    planner, planner_url = start_fake("Planner")
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pipeline",
                "book",
                "Two fleets",
                "--shape",
                "2x2x3",
                "--backend",
                f"{writer_url},cap=4",
                "--planner-backend",
                f"{planner_url},cap=2",
                "--out",
                str(tmp_path / "run"),
                "--quiet",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        planned, written = prompts_of(planner_url), prompts_of(writer_url)
    finally:
        for process in (writer, planner):
            process.kill()
            process.wait()
    assert len(planned) == 1 + 2 + 4 and all(plan_level(p) for p in planned)
    assert all(section_title(p) for p in written), "no planning request reached the writers"
    assert len({section_title(p) for p in written}) == 12
    spec = json.loads((tmp_path / "run" / "spec.json").read_text())
    assert spec["profile"]["name"] == spec["planner_profile"]["name"] == "default", "both recorded"


@pytest.mark.parametrize(
    "text, tidied",
    [
        ('"The Basics of Souring: What to Know First"\nSouring is a process.', "Souring is a process."),
        (
            "What is your pleasure? I'm happy to help. Here's a sample chapter:\n\n"
            '"Sourdough Making"\n\nRye is a grain.',
            "Rye is a grain.",
        ),
        ("Section: Choosing A Flour\nA starter needs flour.", "A starter needs flour."),
        (
            "You're writing a book that answers just what you asked, but with more practical and actionable advice "
            "than your typical nonfiction content. Here's how you can craft your chapter:\n\nRye is a grain.",
            "Rye is a grain.",
        ),
        (
            "You are writing about rye, a grain that feeds a starter well.",
            "You are writing about rye, a grain that feeds a starter well.",
        ),
        ("<<The Sourdough Souring: A Simple Recipe>>\n\nA starter needs flour.", "A starter needs flour."),
        ('"Quoted opening. Cut mid-way\n\nSecond.', "Quoted opening. Cut mid-way\n\nSecond."),
        ("Feeding Schedules\n\nFeed it twice a day.", "Feed it twice a day."),
        ("Rye flour feeds a starter faster.\nMore.", "Rye flour feeds a starter faster.\nMore."),
        ("```python\nprint(1)\n```\nThat prints.", "```python\nprint(1)\n```\nThat prints."),
        ("- a list item first\n- second", "- a list item first\n- second"),
        ("Only a title-like line", "Only a title-like line"),
    ],
)
def test_the_opening_loses_chatter_and_an_echoed_title_line_but_never_content(text, tidied):
    assert tidy_opening(text) == tidied


PROSE = (
    "To keep a starter alive, feed it flour and water every day at the same hour, and keep it somewhere warm.\n\n"
    "When it doubles within eight hours of a feed, it is strong enough to raise a loaf of bread on its own."
)
CODE = (
    "def feed(starter, flour_g=50, water_g=50):\n    starter.add(flour=flour_g, water=water_g)\n"
    "    return starter.rise_hours() < 8  # strong enough to bake with"
)


@pytest.mark.parametrize(
    ("text", "unwrapped"),
    [
        ("```Markdown\n# How to Make It\nFeed it daily.\n```", "# How to Make It\nFeed it daily."),
        ("~~~md\nFeed it daily.\n~~~\n\n", "Feed it daily."),
        ("```text\nFeed it daily. The answer ran to the cap", "Feed it daily. The answer ran to the cap"),
        ("```python\nprint(1)\n```", "```python\nprint(1)\n```"),  # code stays code
        ("```\nplain block\n```", "```\nplain block\n```"),  # no label and not prose: it may be code
        ("```\n" + PROSE + "\n```", PROSE),  # no label, but prose: the demo's 3.4
        (
            "```\n# The Sourdough\nMaking It\n" + PROSE + "\n# Souring\n" + PROSE,
            "# The Sourdough\nMaking It\n" + PROSE + "\n# Souring\n" + PROSE,
        ),
        ("```\n" + CODE + "\n```", "```\n" + CODE + "\n```"),  # no label, and code
        ("```plaintext\nFeed it daily.\n```", "Feed it daily."),
        ("```markdown\n# A\n```\nText after the block.", "```markdown\n# A\n```\nText after the block."),
        ("Feed it.\n```markdown\n# Example\n```", "Feed it.\n```markdown\n# Example\n```"),  # an example
    ],
)
def test_an_answer_wrapped_whole_in_a_markdown_fence_or_a_bare_one_around_prose_is_unwrapped_and_code_is_not(
    text, unwrapped
):
    assert unfenced(text) == unwrapped


def test_a_fenced_answers_headings_are_taken_out_once_it_is_unwrapped():
    fenced = "```Markdown\n# How to Make a Sourdough\n### Key Ingredients\nFlour, water and salt.\n```"
    result = finished(Section(id="p01.c01.s01", title="Ingredients"), completion(fenced, "stop"), WallClock())
    assert result.text == "Flour, water and salt." and result.headings_removed == 2


def test_the_opening_inside_a_fence_is_tidied_as_an_answers_opening_is():
    # the demo's 2.3: chatter, a bare fence, a heading, then the section's title echoed before the prose
    fenced = (
        "Here's a sample of your text in Markdown format using the markdown divider:\n```\n# The Sourdough\n"
        "Making the Slippery Sourdough\n" + PROSE + "\n```"
    )
    section = Section(id="p01.c02.s03", title="Making the Slippery Sourdough")
    result = finished(section, completion(fenced, "stop"), WallClock())
    assert result.text == PROSE and result.headings_removed == 1


@pytest.mark.parametrize(
    "text, tidied",
    [
        ("I sold my bread at market.\nEND OF THIS SECTION", "I sold my bread at market."),
        ("Tell the truth.\nPart: What Makes It Sour\n**Next**", "Tell the truth."),
        ("It ends mid-way\nEND", "It ends mid-way\nEND"),  # nothing closed before it: the audit must see it
        ("Steps to follow.\n- mix the flour\n- wait", "Steps to follow.\n- mix the flour\n- wait"),
        ("Run it:\n```\nls\n```", "Run it:\n```\nls\n```"),
        ("One line only", "One line only"),
        ('It helps.\n\nIt works across many disciplines."', "It helps.\n\nIt works across many disciplines."),
        ('She said "feed it daily."', 'She said "feed it daily."'),  # a quote it opened stays
    ],
)
def test_the_closing_loses_a_label_line_after_the_last_sentence_but_never_content(text, tidied):
    assert tidy_closing(text) == tidied


def test_a_tidied_answer_keeps_the_raw_one_beside_it():
    result = finished(Section(id="p01.c01.s01", title="T"), completion('"T"\nBody text.', "stop"), WallClock())
    assert (result.text, result.raw_text, result.trimmed) == ("Body text.", '"T"\nBody text.', False)


def test_a_looping_answer_is_cut_where_the_loop_starts_and_ends_on_a_sentence():
    loop = "Sifter in German has been around for thousands of years, they say. "
    capped = finished(
        Section(id="s", title="T"), completion("It starts well. " + loop * 2 + "Sifter in Ger", "length"), WallClock()
    )
    assert capped.text == "It starts well. " + loop.strip() and capped.trimmed
    stopped = finished(Section(id="s", title="T"), completion("Fine. " + loop * 2, "stop"), WallClock())
    assert stopped.text == "Fine. " + (loop * 2).strip() and not stopped.trimmed, "twice is not a loop when it stopped"
    looped = finished(Section(id="s", title="T"), completion("Fine. " + loop * 3, "stop"), WallClock())
    assert looped.text == "Fine. " + loop.strip() and looped.trimmed
