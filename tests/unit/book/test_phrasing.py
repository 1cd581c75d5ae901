"""Planning from what is given (pipeline/book/plan/phrasing.py, levels.py) on FAKE engines: every unit
phrased at once by the model, the best sample taken, and nothing of the pipeline's own making in the outline."""

from __future__ import annotations

import json

import pytest

from pipeline.backends.pool import BackendPool, RetryPolicy
from pipeline.book.outlinefile import outline_markdown
from pipeline.book.plan.planner import Planner, PlanOptions
from pipeline.book.plan.rounds import GIVEN
from pipeline.book.profiles import PROFILES, Sampler
from pipeline.records import Backend, BookSpec, EngineKind, Outline, PlanMode
from tests.fakes.fake_engine import FakeEngine, prompt_of
from tests.fakes.fake_prompts import fake_title, phrase_answer, phrase_level, plan_level

pytestmark = pytest.mark.anyio
SMALL = Sampler(profile=PROFILES["small"], kinds=frozenset({EngineKind.LLAMACPP}))  # `n` samples in one request
SOURDOUGH = "Write a short handbook on keeping a sourdough starter alive. Practical, with examples."


@pytest.fixture
def anyio_backend():
    return "asyncio"


class Phrasings:
    """FAKE phrasing answers: a unit's first `bad` answers are the planted `lines` in turn, later ones clean
    `Title: point` lines of distinct FAKE words."""

    def __init__(self, lines: list[str] | None = None, bad: int = 0, levels: frozenset[str] | None = None):
        self.lines = lines or []
        self.bad = bad
        self.levels = levels  # the levels whose answers are planted (None: every level)
        self.seen: dict[str, int] = {}
        self.prompts: list[str] = []
        self.planted = 0
        self.counter = 0

    def __call__(self, body: dict) -> str:
        prompt = prompt_of(body)
        self.prompts.append(prompt)
        unit = prompt.strip().splitlines()[-1]
        self.seen[unit] = self.seen.get(unit, 0) + 1
        planted_here = self.levels is None or phrase_level(prompt) in self.levels
        if self.lines and self.seen[unit] <= self.bad and planted_here:
            self.planted += 1
            return self.lines[self.planted % len(self.lines)]
        self.counter += 1
        return phrase_answer(fake_title(self.counter, "phrased"))


async def plan_given(replies: Phrasings, spec: BookSpec) -> tuple[Outline, Planner, FakeEngine]:
    engine = await FakeEngine(reply=replies).start()
    try:
        pool = BackendPool([Backend(name="fake", base_url=engine.url, cap=16)], RetryPolicy())
        planner = Planner(pool, spec, SMALL, options=PlanOptions(mode=PlanMode.GIVEN))
        return await planner.plan(), planner, engine
    finally:
        await engine.stop()


async def test_every_unit_is_phrased_by_the_model_and_carries_what_it_was_given():
    replies = Phrasings()
    outline, planner, engine = await plan_given(replies, BookSpec(prompt=SOURDOUGH, parts=2, chapters=3, sections=4))
    assert [len(p.chapters) for p in outline.parts] == [3, 3] and len(outline.sections()) == 24
    assert not any(plan_level(p) for p in replies.prompts), "no open planning prompt: every unit was given"
    nodes = [*outline.parts, *(c for p in outline.parts for c in p.chapters), *(s for *_, s in outline.sections())]
    assert all(node.about and node.point and not node.placeholder for node in nodes)
    assert outline.parts[0].chapters[1].about == "getting started"
    assert {body["n"] for body in engine.bodies} == {GIVEN.samples[0]}, "one round each: every first sample usable"
    part_prompts = [p for p in replies.prompts if phrase_level(p) == "part"]
    first_part = outline.parts[0]
    assert any(all(f'"{c.title}"' in p for c in first_part.chapters) for p in part_prompts), "titled from its chapters"
    order = [phrase_level(prompt_of(body)) for body in engine.bodies]
    assert order[: order.index("part")].count("chapter") >= 3, "a part is asked once its chapters are taken"
    assert order.index("section") < order.index("part"), "every first round goes out at the start"
    assert planner.stats.phrased == 32 and planner.stats.short == 0, "2 parts, 6 chapters, 24 sections"


PLANTED = [
    "Getting Started (section 3): the third of them.",  # a placeholder's shape
    "Starter Alive: what keeps it going.",  # a fragment cut from the request
    "Its Part Made of the Chapters: a part.",  # a prompt's own words
    "Feeding Schedules",  # no key point
    "The Flour: the flour, as it bears on feeding.",  # the filler an earlier planner joined from phrases
    "Shit Happens: when a starter dies.",  # a word a handbook would not print
    "Pots, Compost and Canes: the containers, soil and supports a balcony tomato needs.",  # a worked example's
]


async def test_what_a_reader_would_see_as_the_pipelines_own_making_never_reaches_the_outline(tmp_path):
    replies = Phrasings(PLANTED, bad=GIVEN.samples[0])  # every unit's whole first round is planted
    outline, planner, _ = await plan_given(replies, BookSpec(prompt=SOURDOUGH, parts=1, chapters=2, sections=3))
    assert replies.planted >= len(PLANTED)
    nodes = [*outline.parts, *(c for p in outline.parts for c in p.chapters), *(s for *_, s in outline.sections())]
    titles = {outline.title, *(node.title for node in nodes)}
    points = {node.point for node in nodes}
    for line in PLANTED:
        title, _, point = line.partition(": ")
        assert title not in titles and point.strip() not in points, line
    assert "as it bears on" not in outline_markdown(outline, SOURDOUGH) + json.dumps(outline.model_dump())
    rules = set(planner.stats.refusals)
    assert {"counted", "fragment", "prompt_words", "no_point", "planning_note", "offensive"} <= rules
    assert rules & {"example_words", "example_meaning"}, "a worked example's line"
    assert len(outline.sections()) == 6 and planner.stats.reasked > 0, "each unit's second round gave a clean line"


async def test_a_unit_that_cannot_be_phrased_takes_a_spare_then_its_chapter_has_fewer_sections():
    sections = frozenset({"section"})  # no section's line ever has a point
    replies = Phrasings(["Feeding Schedules", "Rye Flour", "Warm Places", "Glass Jars"], bad=100, levels=sections)
    spec = BookSpec(prompt=SOURDOUGH, parts=1, chapters=1, sections=2)
    with pytest.raises(Exception, match="planning gave no section a reader could use"):
        await plan_given(replies, spec)
    sections = [p for p in replies.prompts if phrase_level(p) == "section"]
    abouts = {p.strip().splitlines()[-1].split("the section about ")[1] for p in sections}
    assert len(abouts) > 2, "past its two sections' facets, the chapter's spare facets were asked"
