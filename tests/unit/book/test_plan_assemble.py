"""Planner and assembly logic on FAKE engines and fixed texts: shape enforcement, dedup, order, headings."""

from __future__ import annotations

import random
import time

import pytest

from pipeline.audit.analysis import similar_title_pairs
from pipeline.audit.book import load_run
from pipeline.backends.pool import BackendPool, RetryPolicy
from pipeline.book.assemble import assemble, demote_headings
from pipeline.book.plan.checks import TitleChecks
from pipeline.book.plan.choose import Coverage
from pipeline.book.plan.planner import Planner, PlanOptions
from pipeline.book.plan.prompts import CHOSEN_NOTE, PlanItem, StreamingSamples, carries_note, clean_point, parse_items
from pipeline.book.plan.rounds import CHOICES, OPEN, SECTION_CHOICES, SPARE_ITEMS, SampleNeed
from pipeline.book.profiles import PROFILES, Sampler
from pipeline.errors import FanoutError
from pipeline.meaning.embed import Embedder, open_embedder
from pipeline.meaning.offrequest import open_judge
from pipeline.records import (
    Backend,
    BookSpec,
    Chapter,
    ChatRequest,
    EngineKind,
    Outline,
    Part,
    PlanMode,
    PlanSchedule,
    Section,
    SectionResult,
)
from pipeline.text import close_open_fence
from pipeline.titles import title_key
from tests.fakes.fake_engine import FakeEngine, prompt_of, requested_count
from tests.fakes.fake_prompts import fake_title, phrase_answer, phrase_level, plan_answer, plan_level
from tests.unit.audit.test_quality import write_outline_run

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


GREEDY = Sampler(profile=PROFILES["greedy"], kinds=frozenset())  # an unknown engine: one request a sample
PARALLEL = Sampler(profile=PROFILES["greedy"], kinds=frozenset({EngineKind.LLAMACPP}))  # one request, `n` samples


class ScriptedPlanner:
    """FAKE planning answers: each level's first answers come from a script, later ones are clean lists. Every
    scripted answer is given to each of a round's samples."""

    def __init__(self, scripts: dict[str, list[str]]):
        samples = {"book": CHOICES, "part": CHOICES, "chapter": SECTION_CHOICES}
        self.scripts = {
            level: [a for a in answers for _ in range(samples[level])] for level, answers in scripts.items()
        }
        self.counter = 0
        self.prompts: list[str] = []
        self.bodies: list[dict] = []
        self.timeline: list[tuple[float, float, str]] = []  # (start, end, prompt) as the engine saw them

    def __call__(self, body: dict) -> str:
        prompt = prompt_of(body)
        self.prompts.append(prompt)
        self.bodies.append(body)
        if phrase_level(prompt) is not None:
            self.counter += 1
            return phrase_answer(self.title(self.counter, 0))
        level = plan_level(prompt)
        if self.scripts.get(level):
            return self.scripts[level].pop(0)
        self.counter += 1
        titles = [self.title(self.counter, i) for i in range(requested_count(body) + 1)]  # one spare, as models do
        return plan_answer(level, titles, "Book")

    @staticmethod
    def title(answer: int, item: int) -> str:
        """The item-th title of the answer-th clean answer: a distinct word."""
        return fake_title(answer * 16 + item, "clean")


async def plan_with(
    replies, spec: BookSpec, *, token_delay: float = 0.0, judge: Embedder | None = None
) -> tuple[Outline, Planner]:
    """Plan on a FAKE engine answering with `replies`; what the engine saw is left in `replies.timeline`. Every
    first round pools several samples, as a small model's plan does: the scripts answer sample by sample."""
    engine = await FakeEngine(reply=replies, token_delay=token_delay).start()
    try:
        pool = BackendPool([Backend(name="fake", base_url=engine.url, cap=8)], RetryPolicy())
        planner = Planner(pool, spec, GREEDY, judge=judge)
        planner.asker.need = SampleNeed(many=True)
        planner.checks.small = True  # its lines checked as a small model's are
        return await planner.plan(), planner
    finally:
        await engine.stop()
        replies.timeline = engine.timeline


def shape_of(outline: Outline) -> tuple[int, set[int], set[int]]:
    return (
        len(outline.parts),
        {len(p.chapters) for p in outline.parts},
        {len(c.sections) for p in outline.parts for c in p.chapters},
    )


async def test_shape_is_enforced_from_malformed_short_and_overlong_answers():
    scripts = {
        "book": ['{"title": "Short", "parts": ["Only one: its point"]}'],
        "part": ["1. Alpha: a\n2. Bravo: b\n3. Charlie: c\n4. Delta\n5. Echo\n6. Foxtrot", "no list at all"],
        "chapter": ['[{"title": "1. Numbered", "point": "Its point."}, {"title": "**Bold**"}]', "Sure!\n\n"],
    }
    outline, planner = await plan_with(ScriptedPlanner(scripts), BookSpec(prompt="p", parts=3, chapters=2, sections=3))
    assert shape_of(outline) == (3, {2}, {3})
    titles = {s.title for _, _, s in outline.sections()}
    assert not any(title[0].isdigit() or "*" in title or "#" in title for title in titles), "numbering, Markdown off"
    assert planner.stats.short == 0 and planner.stats.levels == [1, 3, 6]


async def test_duplicate_titles_are_pooled_once_and_a_second_round_shows_only_what_was_chosen():
    same = "1. Getting Started: a.\n2. getting  STARTED: b.\n3. Common Pitfalls: c."
    replies = ScriptedPlanner({"chapter": [same] * 4})
    outline, planner = await plan_with(replies, BookSpec(prompt="p", parts=1, chapters=4, sections=3))
    keys = [title_key(s.title) for _, _, s in outline.sections()]
    assert len(keys) == 12 and len(set(keys)) == 12, "section titles are unique across the book"
    assert planner.stats.reasked >= 1
    second = [p for p in replies.prompts if CHOSEN_NOTE in p]
    assert second and all("(is already" not in p and "refused" not in p.lower() for p in replies.prompts), (
        "a second round shows what was chosen, never why a line was not taken"
    )


async def test_a_title_nearly_repeating_one_elsewhere_in_the_book_is_never_taken():
    near = ["1. Making a Sourdough: a.", "1. How to Make Sourdough: b.", "1. How to Make Sourdough: b."]
    replies = ScriptedPlanner({"chapter": near})
    outline, planner = await plan_with(replies, BookSpec(prompt="p", parts=1, chapters=2, sections=1))
    sections = [s for _, _, s in outline.sections()]
    assert sum(s.title in ("How to Make Sourdough", "Making a Sourdough") for s in sections) == 1
    assert len(sections) == 1 and planner.stats.short >= 1, "the chapter left with no section is taken out"
    assert outline.parts[0].short and not any(s.placeholder for s in sections)
    assert any(verdict.rule == "near_elsewhere" for _, _, verdict in planner.stats.refused)


async def test_titles_the_model_never_gave_are_phrased_from_what_the_request_still_asks_for():
    replies = ScriptedPlanner(
        {
            "book": ["Title: Bees\n1. The Apiary: where the hives stand and why."],
            "part": ["1. Hive Parts: the boxes, frames and covers of a hive."],
            "chapter": ["garbage"] * 10,
        }
    )
    prompt = "A guide to keeping bees, covering swarm control, winter feeding and honey extraction."
    spec = BookSpec(prompt=prompt, parts=1, chapters=1, sections=2)
    outline, planner = await plan_with(replies, spec)
    sections = outline.parts[0].chapters[0].sections
    asked = [p.splitlines()[-1] for p in replies.prompts if phrase_level(p) == "section"]
    assert asked and all("the section about" in line for line in asked), "the model phrases them, nothing is made"
    assert {line.split("the section about ")[1].split(" is titled")[0] for line in asked} <= {
        "swarm control",
        "winter feeding",
        "honey extraction",
    }, "what it is asked to phrase is what the chapter still owes"
    assert len(sections) == 2 and planner.stats.filled_from_asks == 2 and all(s.point for s in sections)
    assert not any(s.placeholder for s in sections) and not outline.parts[0].chapters[0].short


async def test_titles_the_planner_takes_are_never_a_pair_the_audit_calls_similar(tmp_path):
    replies = ScriptedPlanner(
        {
            "book": ["Title: Bread\n1. Starters: a.\n2. Loaves: b."],
            "part": [
                "1. Baking and Souring: mixing the dough and letting it sour.",
                "1. Souring Your Bread: how the starter sours a loaf.\n2. Storing It Cold: the fridge.",
            ],
        }
    )
    outline, planner = await plan_with(replies, BookSpec(prompt="p", parts=2, chapters=2, sections=1))
    chapters = [c.title for p in outline.parts for c in p.chapters]
    assert ("Baking and Souring" in chapters) != ("Souring Your Bread" in chapters), "a cosine of 0.70: one is refused"
    write_outline_run(tmp_path, outline, {})
    assert similar_title_pairs(load_run(tmp_path), planner.embedder) == []


DEFECTS = {  # an answer line -> the defect it is refused for; a line with a colon is 'title: point'
    "Reading the Weather Basics": "repeats the chapter title",
    "The Weather Book": "repeats the book title",
    "Reading the Sky Basics": "repeats the part title",
    "weatherReadingGuide": "looks like a code identifier",
    "Barometer Basics": "comes from the worked example",
    "Lunar Sails": "comes from the worked example",  # another level's example, by its rare word 'sail'
    "Keeping Watch: Clouds and Fronts": "comes from the worked example",  # by meaning, from its point
    "Why Falling Pressure Means Rain: how the barometer warns of a change": "comes from the worked example",
    "Keeping a Log (section 3)": "is told apart from others only by a number",
    "Checklists: Checklists.": "has a point that only repeats its title",
    "Lets Begin: does not repeat the chapter title": "copies a planning note",
}
FAULTS = {  # an answer line -> the fault it is passed over for while the pool holds better lines
    "Morning Fog: the fog at first light": 'says the same as "Fog at Dawn"',  # by meaning: no word in common
    "Wet Weather Kit: rain gear and shelter": 'covers what "Staying Dry" covers',  # by its title and point
    "Dressing Warm: what you need to know": "has a key point that says nothing of its own",
}
GOOD = ["Staying Dry: rain gear and shelter", "Fog at Dawn: why mist gathers in the valley", "Frost Pockets: a."]


async def test_lines_with_a_defect_are_refused_and_lines_with_a_fault_held_back():
    lines = [*GOOD[:2], *DEFECTS, *FAULTS, GOOD[2]]
    answer = "\n".join(f"{n}. {line}{'' if ':' in line else ': covered here.'}" for n, line in enumerate(lines, 1))
    replies = ScriptedPlanner(
        {
            "book": ["Title: The Weather Book\n1. Reading the Sky: what frost and dew tell a gardener."],
            "part": ["1. Reading the Weather: frost dates and garden planning."],
            "chapter": [answer, "1. Frost Pockets: a."],
        }
    )
    spec = BookSpec(prompt="Write about weather", parts=1, chapters=1, sections=len(lines) - SPARE_ITEMS)
    outline, planner = await plan_with(replies, spec)
    kept = {s.title for s in outline.parts[0].chapters[0].sections}
    assert {"Staying Dry", "Fog at Dawn", "Frost Pockets"} <= kept
    for line, reason in DEFECTS.items():
        assert line.split(":")[0] not in kept, line
        found = [str(why) for _, title, why in planner.stats.refused if title == line.split(":")[0]]
        assert any(why.startswith(reason) for why in found), (line, found)
    assert "Morning Fog" not in kept, "a title saying what a chosen sibling's says is never taken"
    assert planner.stats.held_back, "the faulted lines were held back while better ones were left"


@pytest.mark.parametrize("note", ["Already chosen, so give others", "does not repeat the chapter title", "refused"])
def test_a_planning_notes_words_are_a_defect(note):
    assert carries_note(f"Lets Begin: {note}") and not carries_note("Feeding the Starter: flour and water daily")


async def test_a_part_not_about_the_request_is_held_back_for_one_that_is():
    replies = ScriptedPlanner(
        {
            "book": [
                "Title: How Vaccines Work\n1. The Stock Market: how shares are bought and sold.\n"
                "2. Memory Cells: why the body answers a germ faster the second time.",
                "1. Antibodies: how the body makes proteins that fit a germ's antigens.",
            ],
            "part": ["1. Antigens: the pieces of a germ the immune system learns."],
            "chapter": ["1. Adjuvants: what wakes the immune system up.\n2. Boosters: why a second dose helps."],
        }
    )
    spec = BookSpec(prompt="Explain how vaccines train the immune system.", parts=2, chapters=1, sections=2)
    outline, planner = await plan_with(replies, spec, judge=open_judge())
    assert "The Stock Market" not in [part.title for part in outline.parts]
    assert {"Memory Cells", "Antibodies"} <= {part.title for part in outline.parts}


async def test_the_worked_examples_book_title_is_refused_and_the_request_names_the_book():
    replies = ScriptedPlanner(
        {
            "book": ["Title: Small Boat Sailing\n1. Front of House: selling tickets and checking them at the door."],
            "part": ["1. The Box Office: how tickets are sold and checked."],
            "chapter": ["1. Card Payments: taking a payment at the door.\n2. Comps: free tickets and who gets them."],
        }
    )
    brief = (
        "We run a small community theatre in a converted chapel and need a handbook for its volunteers. "
        "Explain selling tickets and ushering."
    )
    outline, planner = await plan_with(replies, BookSpec(prompt=brief, parts=1, chapters=1, sections=2))
    assert outline.title == "Small Community Theatre", "a brief's first clause is no title: its subject is"
    refused = [(node, title, verdict.rule) for node, title, verdict in planner.stats.refused]
    assert ("book", "Small Boat Sailing", "book_title_example") in refused


async def test_a_model_that_never_complies_ends_the_plan_with_one_clear_error_not_placeholders():
    replies = ScriptedPlanner({"chapter": ["garbage"] * 100})
    with pytest.raises(FanoutError, match="planning gave no section a reader could use"):
        await plan_with(replies, BookSpec(prompt="p", parts=1, chapters=1, sections=2))


async def test_a_chapter_the_model_cannot_fill_has_fewer_sections_never_a_made_up_one():
    replies = ScriptedPlanner({"chapter": ["1. Rye Flour: the grain.\ngarbage"] + ["garbage"] * 100})
    outline, planner = await plan_with(replies, BookSpec(prompt="p", parts=1, chapters=1, sections=3))
    chapter = outline.parts[0].chapters[0]
    assert [s.title for s in chapter.sections] == ["Rye Flour"] and chapter.short and planner.stats.short == 1
    assert not any(s.placeholder for s in chapter.sections)


async def test_planning_asks_after_a_worked_example_with_the_profile_sampling():
    replies = ScriptedPlanner({})
    engine = await FakeEngine(reply=replies).start()
    pool = BackendPool([Backend(name="fake", base_url=engine.url, cap=4)])
    small = Sampler(profile=PROFILES["small"], kinds=frozenset({EngineKind.LLAMACPP}))
    await Planner(
        pool, BookSpec(prompt="p", parts=2, chapters=3, sections=4), small, options=PlanOptions(mode=PlanMode.OPEN)
    ).plan()
    await engine.stop()
    for body in engine.bodies:
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["system", "user", "assistant", "user"] and "1." in body["messages"][2]["content"]
        assert body["messages"][0]["content"].endswith("request: p"), "the request opens every request of the book"
        assert body["n"] == (SECTION_CHOICES if plan_level(prompt_of(body)) == "chapter" else CHOICES)
        assert (
            body["temperature"] == OPEN.temperatures[0]
            and body["dry_multiplier"] == 0.8
            and "response_format" not in body
        )
    counts = sorted(requested_count(b) for b in engine.bodies)
    assert counts == [n + SPARE_ITEMS for n in (2, 3, 3, 4, 4, 4, 4, 4, 4)], "each ask wants its spare items"
    assert len({b["seed"] for b in engine.bodies}) == 9, "every planning request has its own seed"


@pytest.mark.parametrize(
    "text, items",
    [
        (
            "Title: Book\n1. First one: its point.\n2) **Second** - another point\nchatter",
            [("First one", "its point."), ("Second", "another point")],
        ),
        ('- "Quoted" — a dash point\n* Bare bullet', [("Quoted", "a dash point"), ("Bare bullet", "")]),
        ('Sure! {"items": ["x1: p", {"title": "y2", "point": "q"}]} hope it helps', [("x1", "p"), ("y2", "q")]),
        ('{"titles": "not a list"}', []),
        (  # a heading runs on past its own semicolon or colon while what follows is in title case
            "1. Typesetting; The Printing Press; how type is set",
            [("Typesetting; The Printing Press", "how type is set")],
        ),
        (
            "1. Time Value of Money I: Single Payment Value: How a sum grows.\n2. Budgeting: how to plan: weekly.",
            [
                ("Time Value of Money I: Single Payment Value", "How a sum grows."),
                ("Budgeting", "how to plan: weekly."),
            ],
        ),
        ("", []),
    ],
)
def test_parse_items_takes_what_it_can(text, items):
    assert [(item.title, item.point) for item in parse_items(text)] == items


def outline_of(parts: int, chapters: int, sections: int) -> Outline:
    return Outline(
        title="T",
        parts=[
            Part(
                id=f"p{p}",
                title=f"Part {p}",
                chapters=[
                    Chapter(
                        id=f"p{p}.c{c}",
                        title=f"Chapter {p}.{c}",
                        sections=[Section(id=f"p{p}.c{c}.s{s}", title=f"Section {p}.{c}.{s}") for s in range(sections)],
                    )
                    for c in range(chapters)
                ],
            )
            for p in range(parts)
        ],
    )


def test_assembly_follows_the_outline_whatever_the_completion_order():
    outline = outline_of(2, 3, 4)
    results = [SectionResult(id=s.id, title=s.title, text=f"Body of {s.id}.") for _, _, s in outline.sections()]
    random.Random(7).shuffle(results)
    book = assemble(outline, {r.id: r for r in results})
    positions = [book.index(f"Body of {s.id}.") for _, _, s in outline.sections()]
    assert positions == sorted(positions)
    assert book.count("\n## Part ") == 2 and book.count("\n### ") == 6 and book.count("\n#### ") == 24


def test_headings_in_a_body_never_outrank_the_section():
    body = "# Big\n\ntext\n\n## Smaller\n\nSetext\n======\n\n> ## quoted\n\n```\n# not a heading\n```"
    out = demote_headings(body, "Some section")
    assert "##### Big" in out and "###### Smaller" in out and "##### Setext" in out
    assert "> ###### quoted" in out and "# not a heading" in out.split("```")[1]
    assert "======" not in out


def test_a_leading_heading_repeating_the_title_is_dropped():
    assert demote_headings("## The Title\n\nBody.", "the title") == "Body."


def test_an_open_fence_is_closed_so_it_cannot_swallow_later_sections():
    assert close_open_fence("text\n```python\nx = 1") == "text\n```python\nx = 1\n```"
    assert close_open_fence("~~~~\ncode\n~~~~\nafter") == "~~~~\ncode\n~~~~\nafter"
    assert close_open_fence("````\n```\nstill code") == "````\n```\nstill code\n````"


def test_failed_and_missing_sections_show_as_such():
    outline = outline_of(1, 1, 2)
    first, second = [s for _, _, s in outline.sections()]
    book = assemble(outline, {first.id: SectionResult(id=first.id, title=first.title, error="boom")})
    assert "could not be written: boom" in book and "was not written" in book


async def test_a_partial_outline_is_completed_without_planning_again():
    done = Part(
        id="p01",
        title="Kept part",
        chapters=[
            Chapter(
                id="p01.c01",
                title="Kept chapter",
                sections=[Section(id="p01.c01.s01", title="Kept one"), Section(id="p01.c01.s02", title="Kept two")],
            )
        ],
    )
    partial = Outline(title="Book", parts=[done, Part(id="p02", title="Second part")], complete=False)
    replies = ScriptedPlanner({})
    engine = await FakeEngine(reply=replies).start()
    pool = BackendPool([Backend(name="fake", base_url=engine.url, cap=4)])
    planner = Planner(pool, BookSpec(prompt="p", parts=2, chapters=1, sections=2), PARALLEL)
    outline = await planner.plan(partial)
    await engine.stop()
    assert planner.stats.requests == 2, "one request for part 2's chapters, one for its chapter's sections"
    assert outline.complete and outline.parts[0] == done and shape_of(outline) == (2, {1}, {2})


async def announced_plan(
    spec: BookSpec, delay: float, schedule: PlanSchedule = PlanSchedule.PIPELINED
) -> tuple[Outline, Planner, dict[str, float], list]:
    """Plan on a FAKE engine streaming a token every `delay` s: the outline, the planner, when each section
    was announced (by title), and what the engine saw."""
    engine = await FakeEngine(reply=ScriptedPlanner({}), token_delay=delay).start()
    pool = BackendPool([Backend(name="fake", base_url=engine.url, cap=16)])
    announced: dict[str, float] = {}
    planner = Planner(pool, spec, PARALLEL)

    def on_section(book: Outline, part: Part, chapter: Chapter, section: Section) -> None:
        announced.setdefault(section.title, time.time())

    outline = await planner.plan(schedule=schedule, on_section=on_section)
    await engine.stop()
    return outline, planner, announced, engine.timeline


@pytest.mark.parametrize("barrier", [False, True])
async def test_a_chapters_sections_are_announced_the_moment_it_has_them_all(barrier):
    delay = 0.02
    spec = BookSpec(prompt="p", parts=2, chapters=2, sections=4)
    schedule = PlanSchedule.BARRIER if barrier else PlanSchedule.PIPELINED
    outline, planner, announced, timeline = await announced_plan(spec, delay, schedule)
    assert list(announced) == [s.title for _, _, s in outline.sections()] if barrier else len(announced) == 16
    assert planner.stats.requests == 7, "one request a node, its samples as n"
    assert planner.stats.samples == 7, "the model's first answers fill their nodes: one sample a node"
    answers = {prompt: (start, end) for start, end, prompt in timeline}
    for part in outline.parts:
        for chapter in part.chapters:
            start, _ = next(v for k, v in answers.items() if f'chapter "{chapter.title}"' in k)
            times = [announced[section.title] for section in chapter.sections]
            assert max(times) - min(times) < delay, "a chapter's sections start together, each knowing the others"
            if barrier:
                assert min(times) >= max(start for start, _ in answers.values())
            else:
                assert start < min(times)


def test_a_first_round_asks_one_sample_until_the_fleets_record_says_it_needs_more():
    need = SampleNeed(many=False)
    assert [need.samples(OPEN, level, 0) for level in ("parts", "sections")] == [1, 1]
    assert need.samples(OPEN, "parts", 1) == CHOICES, "a second round pools several"
    for filled in (True, False, False):
        need.heard(samples=1, filled=filled)
    assert (
        need.poor()
        and need.samples(OPEN, "parts", 0) == CHOICES
        and need.samples(OPEN, "sections", 0) == SECTION_CHOICES
    )
    assert SampleNeed(many=True).samples(OPEN, "parts", 0) == CHOICES, "a small model's record from the start"
    usable = SampleNeed(many=False)
    for _ in range(10):
        usable.heard(samples=1, filled=True)
    usable.heard(samples=1, filled=False)
    assert usable.samples(OPEN, "chapters", 0) == 1


async def test_a_planning_answer_cut_mid_stream_is_asked_again_and_the_node_filled():
    replies = ScriptedPlanner({})
    engine = await FakeEngine(reply=replies, plan_modes=["reset"]).start()
    pool = BackendPool([Backend(name="fake", base_url=engine.url, cap=8)], RetryPolicy(backoff_initial=0.01))
    planner = Planner(pool, BookSpec(prompt="p", parts=6, chapters=1, sections=2), PARALLEL)
    outline = await planner.plan()
    await engine.stop()
    assert [p.id for p in outline.parts] == [f"p0{n}" for n in range(1, 7)] and shape_of(outline) == (6, {1}, {2})
    assert planner.stats.short == 0 and planner.stats.failed_requests == 0


async def test_a_resumed_chapter_keeps_its_journaled_sections_and_plans_around_their_ids():
    from pipeline.book.planstage import adopt_journaled_sections
    from pipeline.book.writestage import already_written

    chapter = Chapter(id="p01.c01", title="Kept chapter", sections=[Section(id="p01.c01.s01", title="Kept one")])
    partial = Outline(title="Book", parts=[Part(id="p01", title="Kept part", chapters=[chapter])], complete=False)
    journal = {
        r.id: r
        for r in [
            SectionResult(id="p01.c01.s03", title="Written third", text="Body."),
            SectionResult(id="p01.c01.s02", title="Failed second", error="boom"),
            SectionResult(id="p01.c02.s01", title="Of a chapter never saved", text="Body."),
        ]
    }
    adopt_journaled_sections(partial, journal)
    assert [s.id for s in chapter.sections] == ["p01.c01.s01", "p01.c01.s03"]
    engine = await FakeEngine(reply=ScriptedPlanner({})).start()
    pool = BackendPool([Backend(name="fake", base_url=engine.url, cap=4)])
    outline = await Planner(pool, BookSpec(prompt="p", parts=1, chapters=2, sections=4), GREEDY).plan(partial)
    await engine.stop()
    first, second = outline.parts[0].chapters
    assert [s.id for s in first.sections] == ["p01.c01.s01", "p01.c01.s02", "p01.c01.s03", "p01.c01.s04"]
    assert first.sections[2].title == "Written third" and "Failed second" not in {s.title for s in first.sections}
    assert already_written(journal, first.sections[2])
    assert not already_written(journal, second.sections[0]), "same id, another title: written again"


async def test_planning_requests_wait_ahead_of_writing_requests():
    engine = await FakeEngine(tokens=4, token_delay=0.05).start()
    order: list[str] = []
    pool = BackendPool([Backend(name="fake", base_url=engine.url, cap=1)])

    async def send(tag: str, first: bool) -> None:
        await pool.complete(
            ChatRequest(messages=[{"role": "user", "content": tag}], max_tokens=4, tag=tag), first=first
        )
        order.append(tag)

    import anyio

    async with anyio.create_task_group() as group:
        group.start_soon(send, "busy", False)
        await anyio.sleep(0.02)
        group.start_soon(send, "write-1", False)
        group.start_soon(send, "write-2", False)
        await anyio.sleep(0.02)
        group.start_soon(send, "plan", True)
    await engine.stop()
    assert order == ["busy", "plan", "write-1", "write-2"]


def test_a_part_source_pickles_and_assembles_its_part_of_the_book():
    import pickle

    from pipeline.book.assemble import PartSource
    from pipeline.records import Chapter, Outline, Part, Section, SectionResult

    outline = Outline(
        title="T",
        parts=[
            Part(
                id=f"p{p:02d}",
                title=f"Part {p}",
                chapters=[
                    Chapter(
                        id=f"p{p:02d}.c{c:02d}",
                        title=f"Chapter {c}",
                        sections=[Section(id=f"p{p:02d}.c{c:02d}.s{s:02d}", title=f"Section {s}") for s in (1, 2)],
                    )
                    for c in (1, 2, 3)
                ],
            )
            for p in (1, 2, 3)
        ],
    )
    results = {
        s.id: SectionResult(
            id=s.id, title=s.title, text=f"# {s.title}\nBody\n## inner\n```\nopen", finish_reason="length"
        )
        for p in outline.parts
        for c in p.chapters
        for s in c.sections
        if s.id != "p02.c01.s02"
    }
    book = assemble(outline, results)
    for index in range(3):
        source = pickle.loads(pickle.dumps(PartSource(outline.parts[index], index + 1, results, index * 3)))
        part = source.markdown()
        assert part.startswith(f"## Part {index + 1}. Part {index + 1}\n") and part in book
        assert "*This section was not written.*" in part if index == 1 else "not written" not in part
        assert source.heading_counts() == (1, 3, 6)


async def test_a_word_of_the_worked_example_is_the_books_own_where_its_parent_uses_it():
    replies = ScriptedPlanner(
        {
            "book": ["Title: Go in Production\n1. Running Services: deploying Go programs for real users."],
            "part": ["1. Cloud Hosting: running Go servers on rented machines."],
            "chapter": ["1. Cloud Costs: what rented servers cost a month.\n2. Picking Regions: where to put servers."],
        }
    )
    outline, planner = await plan_with(replies, BookSpec(prompt="A handbook on Go", parts=1, chapters=1, sections=2))
    assert [s.title for _, _, s in outline.sections()] == ["Cloud Costs", "Picking Regions"], planner.stats.refused
    assert "Cloud" in outline.parts[0].chapters[0].title, "'cloud': a word of the example's 'Clouds and Fronts'"


async def test_each_sample_asks_for_spare_lines_and_stops_at_the_line_after_them():
    """A FAKE model that goes on past the lines it was asked for: each sample asks for the need and
    SPARE_ITEMS more, stops at the next number, and no line past them is pooled."""
    rambling = [ScriptedPlanner.title(90, n) for n in range(40)]
    replies = ScriptedPlanner({"chapter": [plan_answer("chapter", rambling, "Book")]})
    outline, planner = await plan_with(replies, BookSpec(prompt="p", parts=1, chapters=1, sections=2))
    assert shape_of(outline) == (1, {1}, {2})
    body = next(b for b in replies.bodies if plan_level(prompt_of(b)) == "chapter")
    lines = 2 + SPARE_ITEMS
    assert f"List {lines} sections" in prompt_of(body) and f"\n{lines + 1}." in body["stop"]
    assert planner.stats.pooled <= CHOICES * (2 * (1 + SPARE_ITEMS) + lines), "no line past those asked for"


BRIEF = (
    "My mother has dementia and lives with us now. We need a guide for the family, not for nurses. "
    "Please cover what dementia is, keeping a daily routine, and how to talk with her when she is confused."
)


def test_each_child_takes_along_an_even_share_of_the_open_asks_the_last_all_that_are_left():
    asks = ["ticket sales", "ushering", "the interval bar", "first aid", "fire evacuation", "locking up", "lighting"]
    coverage = Coverage(open_embedder(), list(asks), leaf=False)
    shares = [coverage.take(PlanItem(title, "what volunteers do."), slots_after=left) for title, left in
              (("Front of House", 2), ("Safety", 1), ("Backstage", 0))]  # fmt: skip
    assert [len(share) for share in shares] == [3, 2, 2] and sorted(sum(shares, [])) == sorted(asks)


@pytest.mark.parametrize(
    ("title", "refused"),
    [
        ("Small Boat Sailing", True),
        ("The Boat and Its Equipment", True),
        ("Staying Safe at the Allotment", False),
        ("Staying Safe While Growing Food at the Allotment", False),  # a word of the example beside the request's
        ("Staying Safe While Growing Food", True),  # a fragment of the request (the title is made whole from it)
    ],
)
def test_a_book_title_from_the_worked_example_is_refused(title, refused):
    checks = TitleChecks(open_embedder(), "A handbook on staying safe while growing food at our allotment.")
    assert (checks.book_title(title) is not None) == refused


@pytest.mark.parametrize(
    ("request_text", "title", "refused"),
    [
        ("A field guide to lichens.", "The Greatest Field Guide Ever!", True),
        ("A field guide to lichens.", "Lichens: A Field Guide", False),
        ("A field guide to lichens.", "Lichens of Rock and Bark", True),  # adds words: the writers follow them
        ("Write an introduction to the history of cartography.", "Ancient Maps: From Ptolemy to Today", True),
        ("Write an introduction to the history of cartography.", "A Short History of Cartography", False),
        (BRIEF, "Caring for Dad at Home", True),
        (BRIEF, "Living with Dementia: A Family Guide", False),  # a brief's title may carry any of its asks
    ],
)
def test_a_book_title_that_does_not_name_what_was_asked_is_refused(request_text, title, refused):
    assert (TitleChecks(open_embedder(), request_text).book_title(title) is not None) == refused


@pytest.mark.parametrize(
    "point",
    [
        'Where the rota goes (nearly repeats "Rota", a title elsewhere in the book)',
        "Where the rota goes (leaves out what the request asks for: aphids; blight; slugs…",
        'Where the rota goes ("Rota Basics" (says nothing of its own)',
        "Where the rota goes (comes from the worked example, not from this book)",
    ],
)
def test_a_re_ask_note_copied_into_a_point_is_cut_off(point):
    assert clean_point(point) == "Where the rota goes"


def test_a_bracket_of_the_points_own_stays():
    assert clean_point("Where the rota goes (two weeks ahead, on the board)") == (
        "Where the rota goes (two weeks ahead, on the board)"
    )


async def test_streamed_sections_are_announced_as_each_is_chosen():
    spec = BookSpec(prompt="p", parts=1, chapters=1, sections=4)
    outline, _, announced, _ = await announced_plan(spec, 0.01, PlanSchedule.STREAMED)
    assert list(announced) == [section.title for _, _, section in outline.sections()]


async def test_streamed_planning_is_a_chain_of_first_lines():
    """A part's chapters are asked while the book's samples still stream, a chapter's sections while its
    part's do, and the first section is announced before its chapter's samples end."""
    spec = BookSpec(prompt="p", parts=2, chapters=2, sections=4)
    outline, planner, announced, timeline = await announced_plan(spec, 0.01, PlanSchedule.STREAMED)
    spans = {
        level: sorted((start, end) for start, end, prompt in timeline if plan_level(prompt) == level)
        for level in ("book", "part", "chapter")
    }
    (book,), first_part, first_chapter = spans["book"], spans["part"][0], spans["chapter"][0]
    assert first_part[0] < book[1] and first_chapter[0] < first_part[1]
    assert min(announced.values()) < first_chapter[1]
    assert planner.stats.taken_early > 0 and shape_of(outline) == (2, {2}, {4})


async def test_a_one_sample_round_takes_every_line_as_it_lands():
    """Each section of a chapter is announced before the chapter's answer ends (its spare lines still to come),
    not only the first: a one-sample round has nothing to pool."""
    spec = BookSpec(prompt="p", parts=1, chapters=2, sections=4)
    outline, planner, announced, timeline = await announced_plan(spec, 0.01, PlanSchedule.STREAMED)
    answers = {prompt: end for _, end, prompt in timeline}
    for part in outline.parts:
        for chapter in part.chapters:
            end = next(v for k, v in answers.items() if f'chapter "{chapter.title}"' in k)
            assert max(announced[section.title] for section in chapter.sections) < end
    assert planner.stats.taken_early == 1 + 2 + 2 * 4, "every part, chapter and section line, taken as it landed"


async def test_the_barrier_takes_no_line_before_the_whole_pool():
    spec = BookSpec(prompt="p", parts=1, chapters=2, sections=3)
    _, planner, _, _ = await announced_plan(spec, 0.005, PlanSchedule.BARRIER)
    assert planner.stats.taken_early == 0


async def test_a_round_that_gave_no_line_at_all_is_asked_again_without_spending_the_nodes_rounds():
    replies = ScriptedPlanner({"chapter": ["Sure! Here you go.", "Sure! Here you go."]})
    outline, planner = await plan_with(replies, BookSpec(prompt="p", parts=1, chapters=1, sections=3))
    assert shape_of(outline) == (1, {1}, {3}) and planner.stats.short == 0
    chapter_asks = [p for p in replies.prompts if plan_level(p) == "chapter"]
    assert len(chapter_asks) == 3 * SECTION_CHOICES, "two empty rounds, then one that gave lines"
    assert planner.stats.reasked == 0


def test_a_streamed_line_that_is_not_text_is_not_taken_while_it_streams():
    """Bytes that are not UTF-8 reach a delta as lone surrogates (the pool asks such an answer again once it ends):
    its line is left out of the lines so far, the others stay."""
    samples = StreamingSamples(1)
    samples.piece(0, "1. Feeding Times: When to feed it.\n2. Bad \udcff Line: A point.\n3. Storing It: In the cold.\n")
    assert [item.title for item in samples.items[0]] == ["Feeding Times", "Storing It"]
