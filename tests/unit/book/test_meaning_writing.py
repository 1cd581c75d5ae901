"""The writer and the planner by meaning, on FAKE engines: best of k keeps the candidate nearer its own point,
an off-point section is asked again, stray headings are taken out, a repair refocuses an off-point section
(and never leaves it worse), and the request's asks are carried by the plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.audit.book import load_run
from pipeline.audit.report import audit
from pipeline.backends.pool import BackendPool, RetryPolicy
from pipeline.book.plan.planner import Planner, PlanOptions
from pipeline.book.plan.prompts import CHOSEN_NOTE
from pipeline.book.profiles import PROFILES, Sampler
from pipeline.book.repair import Repairer
from pipeline.book.write import SectionWriter, WritePolicy
from pipeline.book.writestage import spare_best_of
from pipeline.journal import Journal
from pipeline.meaning.embed import Embedder, open_embedder
from pipeline.records import (
    Author,
    Backend,
    BookSpec,
    Chapter,
    EngineKind,
    Outline,
    Part,
    PlanMode,
    Section,
    SectionResult,
)
from pipeline.watch.listeners import BookListener
from tests.fakes.fake_embeddings import CountingEmbedder
from tests.fakes.fake_engine import FakeEngine, prompt_of
from tests.fakes.fake_prompts import plan_level, section_title
from tests.unit.audit.test_meaning import FEEDING, ON_FLOUR, ON_HUNGER, ON_SCHEDULE
from tests.unit.book.test_plan_assemble import ScriptedPlanner

pytestmark = pytest.mark.anyio
SMALL = Sampler(profile=PROFILES["small"], kinds=frozenset({EngineKind.LLAMACPP}))
OWN = {"Choosing a Flour": ON_FLOUR, "Feeding Schedules": ON_SCHEDULE, "Signs of Hunger": ON_HUNGER}


@pytest.fixture
def anyio_backend():
    return "asyncio"


def feeding_chapter() -> tuple[Outline, Part, Chapter]:
    sections = [Section(id=f"p01.c01.s0{i + 1}", title=t, point=p) for i, (t, p) in enumerate(FEEDING)]
    chapter = Chapter(id="p01.c01", title="Feeding Your Starter", point="What a starter eats.", sections=sections)
    part = Part(id="p01", title="Daily Care", chapters=[chapter])
    return Outline(title="Starter Care", parts=[part]), part, chapter


class SeededReplies:
    """FAKE answers that depend on the request's seed: the first `off` seeds a section is asked with give
    its neighbour's text (a model writing its sibling's section), later ones its own."""

    def __init__(self, off: int, after: str = ""):
        self.off = off
        self.after = after  # appended to every answer
        self.seeds: dict[str, list[int]] = {}

    def __call__(self, body: dict) -> str:
        title = section_title(prompt_of(body))
        seeds = self.seeds.setdefault(title, [])
        seeds.append(body["seed"])
        titles = list(OWN)
        text = OWN[titles[(titles.index(title) + 1) % 3]] if len(seeds) <= self.off else OWN[title]
        return text + self.after


async def write_one(
    replies: SeededReplies,
    best_of: int,
    retries: int,
    tmp_path: Path,
    judge: Embedder | None = None,
    author: Author = Author.SMALL,
) -> SectionWriter:
    engine = await FakeEngine(reply=replies).start()
    try:
        pool = BackendPool([Backend(name="fake", base_url=engine.url, cap=8)], RetryPolicy())
        spec = BookSpec(
            prompt="Write a short handbook on feeding a sourdough starter.", parts=1, chapters=1, sections=3
        )
        writer = SectionWriter(
            pool, spec, Journal(tmp_path / "sections.jsonl"), SMALL, BookListener(), open_embedder(),
            WritePolicy(best_of=best_of, off_point_retries=retries, judge=judge, author=author),
        )  # fmt: skip
        outline, part, chapter = feeding_chapter()
        await writer.write(outline, part, chapter, chapter.sections[0])
        writer.journal.close()
        return writer
    finally:
        await engine.stop()


async def test_best_of_k_keeps_the_candidate_nearest_its_own_point(tmp_path):
    replies = SeededReplies(off=1)
    result = (await write_one(replies, best_of=2, retries=0, tmp_path=tmp_path)).results["p01.c01.s01"]
    assert len(set(replies.seeds["Choosing a Flour"])) == 2, "each candidate with a seed of its own"
    assert result.text == ON_FLOUR and result.margin > 0
    assert result.candidates == 2 and result.discarded_tokens > 0


async def test_an_off_point_section_is_asked_again_and_an_on_point_one_is_not(tmp_path):
    replies = SeededReplies(off=1)
    writer = await write_one(replies, best_of=1, retries=2, tmp_path=tmp_path)
    result = writer.results["p01.c01.s01"]
    assert len(replies.seeds["Choosing a Flour"]) == 2 and result.text == ON_FLOUR and result.candidates == 2
    assert writer.retry_tail_seconds and writer.retry_tail_seconds > 0, "the retry ran after the first answer"
    replies = SeededReplies(off=0)
    writer = await write_one(replies, best_of=1, retries=2, tmp_path=tmp_path)
    result = writer.results["p01.c01.s01"]
    assert len(replies.seeds["Choosing a Flour"]) == 1 and result.candidates == 1 and result.margin > 0
    assert writer.retry_tail_seconds == 0, "no retry: the last answer was a first one"


async def test_a_capable_authors_section_nearer_a_siblings_point_is_not_asked_again(tmp_path):
    replies = SeededReplies(off=1)
    writer = await write_one(replies, best_of=1, retries=2, tmp_path=tmp_path, author=Author.CAPABLE)
    result = writer.results["p01.c01.s01"]
    assert result.margin is not None and result.margin < 0, "the answer is nearer its sibling's point"
    assert len(replies.seeds["Choosing a Flour"]) == 1 and result.candidates == 1, "off_point is a figure here"


async def test_the_judge_scores_a_sections_candidates_only_when_it_has_a_choice_to_make(tmp_path):
    lone = CountingEmbedder(open_embedder())
    result = (await write_one(SeededReplies(off=0), 1, 0, tmp_path, judge=lone)).results["p01.c01.s01"]
    assert lone.texts == 0 and result.subject_fit is None, "one candidate is kept whatever its fit"
    two = CountingEmbedder(open_embedder())
    result = (await write_one(SeededReplies(off=1), 2, 0, tmp_path, judge=two)).results["p01.c01.s01"]
    assert two.texts > 0 and result.subject_fit is not None


async def test_headings_inside_an_answer_are_taken_out_and_counted(tmp_path):
    more = "Keep the flour in a sealed tin, away from damp, and it will feed the starter for months."
    replies = SeededReplies(off=0, after=f"\n\n## How to Buy (What's the most important thing?)\n\n{more}")
    result = (await write_one(replies, best_of=1, retries=0, tmp_path=tmp_path)).results["p01.c01.s01"]
    assert result.text == f"{ON_FLOUR}\n\n{more}" and result.headings_removed == 1


def test_best_of_comes_from_the_slots_the_fleet_has_to_spare():
    def pool(*caps: int) -> BackendPool:
        return BackendPool([Backend(name=f"b{i}", base_url="http://127.0.0.1:9/v1", cap=c) for i, c in enumerate(caps)])

    assert spare_best_of(pool(16), 24) == 1, "the embedded engine and the demo's book"
    assert spare_best_of(pool(*[256] * 6), 24) == 4 and spare_best_of(pool(*[256] * 6), 1536) == 1
    assert spare_best_of(pool(64), 24) == 2


async def test_a_repair_refocuses_an_off_point_section_and_never_leaves_it_worse(tmp_path):
    outline, part, chapter = feeding_chapter()
    spec = BookSpec(
        prompt="Write a short handbook on feeding a sourdough starter.",
        parts=1,
        chapters=1,
        sections=3,
        profile=SMALL.profile,
    )
    (tmp_path / "spec.json").write_text(spec.model_dump_json())
    (tmp_path / "outline.json").write_text(outline.model_dump_json())
    texts = [ON_SCHEDULE, ON_SCHEDULE.replace("twelve", "ten"), ON_HUNGER]  # s01 writes its sibling's point
    journal = {
        s.id: SectionResult(id=s.id, title=s.title, text=t, finish_reason="stop")
        for s, t in zip(chapter.sections, texts)
    }
    (tmp_path / "sections.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in journal.values()))
    before = audit(load_run(tmp_path))
    assert "p01.c01.s01" in before.ids("off_point")
    for replies, expected in ((SeededReplies(off=0), ON_FLOUR), (SeededReplies(off=5), ON_SCHEDULE)):
        engine = await FakeEngine(reply=replies).start()
        try:
            pool = BackendPool([Backend(name="fake", base_url=engine.url, cap=8)], RetryPolicy())
            repairer = Repairer(pool, spec, outline, dict(journal), SMALL, open_embedder())
            outcome = await repairer.repair(before, Journal(tmp_path / "repairs.jsonl"))
        finally:
            await engine.stop()
        fixed = outcome.results["p01.c01.s01"]
        assert outcome.actions["p01.c01.s01"] == "refocus" and fixed.text == expected and fixed.version == 2


async def test_the_requests_asks_are_carried_and_the_last_slots_kept_for_them():
    woodwork = "Write a beginner's guide to woodworking: sharpening, joints and finishing."
    replies = ScriptedPlanner(
        {
            "book": ["Title: Working Wood\n1. The Workshop: tools and timber for a first bench."],
            "part": ["1. First Projects: a stool, a box and a shelf to learn on."],
            "chapter": [
                "1. Choosing Timber: oak, pine and ash for first projects.\n2. Glue Types: which glue holds "
                "which wood.\n3. Clamping Up: how hard to squeeze the glued parts.\n4. Saw Kinds: rip and "
                "crosscut teeth.",
                "1. Sharpening Chisels: flatten the back and hone the bevel.\n2. Cutting Joints: dovetails and "
                "mortises by hand.\n3. Finishing With Oil: wiping on oil and wax.",
            ],
        }
    )
    engine = await FakeEngine(reply=replies).start()
    try:
        pool = BackendPool([Backend(name="fake", base_url=engine.url, cap=8)], RetryPolicy())
        spec = BookSpec(prompt=woodwork, parts=1, chapters=1, sections=4)
        planner = Planner(pool, spec, SMALL, options=PlanOptions(mode=PlanMode.OPEN))
        outline = await planner.plan()
    finally:
        await engine.stop()
    titles = [s.title for _, _, s in outline.sections()]
    assert titles == ["Choosing Timber", "Sharpening Chisels", "Cutting Joints", "Finishing With Oil"]
    assert planner.stats.asks_dropped == 0
    part_prompt = next(p for p in replies.prompts if plan_level(p) == "part")
    note = part_prompt.split("let each chapter cover several of them: ")[1].split(".")[0]
    assert sorted(note.split("; ")) == ["finishing", "joints", "sharpening"], "a part takes the asks along"
    second = [p for p in replies.prompts if plan_level(p) == "chapter" and CHOSEN_NOTE in p]
    assert second and '"Choosing Timber"' in second[0] and "Glue Types" not in second[0], "what was chosen, no more"


class SwearingFirst(SeededReplies):
    """FAKE answers whose first for a section uses a word a handbook would not print; later ones are clean."""

    def __call__(self, body: dict) -> str:
        text = super().__call__(body)
        title = section_title(prompt_of(body))
        return text.replace("flour", "fucking flour", 1) if len(self.seeds[title]) == 1 else text


async def test_a_section_with_a_word_no_handbook_prints_is_asked_again_and_the_clean_answer_kept(tmp_path):
    replies = SwearingFirst(off=0)
    writer = await write_one(replies, best_of=1, retries=1, tmp_path=tmp_path)
    result = writer.results["p01.c01.s01"]
    assert len(replies.seeds["Choosing a Flour"]) == 2, "asked again although it was on its point"
    assert "fucking" not in result.text and result.candidates == 2
