"""`fanout repair` plans a chapter the audit found off the request again (title, point, sections, with the
planner's checks and the real off-request judge) and writes its sections anew; on a FAKE engine."""

from __future__ import annotations

import pytest

from pipeline.audit.book import load_run
from pipeline.audit.report import audit
from pipeline.backends.pool import BackendPool, RetryPolicy
from pipeline.book.plan.planner import Planner
from pipeline.book.profiles import PROFILES
from pipeline.book.repair import Repairer, replan_off_request
from pipeline.journal import Journal
from pipeline.meaning.embed import open_embedder
from pipeline.meaning.offrequest import open_judge
from pipeline.records import Backend, BookSpec, Chapter, Outline, Part, Section, SectionResult
from tests.fakes.fake_engine import FakeEngine, prompt_of
from tests.fakes.fake_prompts import plan_level
from tests.unit.book.test_plan_assemble import GREEDY

pytestmark = pytest.mark.anyio

REQUEST = "A guide for parents to childhood vaccines: how they work, the schedule, and side effects."
PROSE = "A vaccine shows the body a harmless piece of a germ so that it is ready when the real one comes."


@pytest.fixture
def anyio_backend():
    return "asyncio"


class ScriptedRepair:
    """FAKE answers: the part's re-plan offers the off chapter again, then one on the request; its sections."""

    def __init__(self) -> None:
        self.plans = {
            "part": [
                "1. Computer Viruses: how malware spreads between machines.\n"
                "2. Side Effects: the sore arm, the fever, and the rare serious reactions."
            ],
            "chapter": ["1. A Sore Arm: why the arm aches after a shot.\n2. Shots by Age: the schedule of doses."],
        }
        self.prose_asked = 0

    def __call__(self, body: dict) -> str:
        level = plan_level(prompt_of(body))
        if level is None:
            self.prose_asked += 1
            return PROSE
        return self.plans[level][0]  # every sample of a round gives the scripted answer


def off_request_run(folder) -> Outline:
    def chapter(cid: str, title: str, point: str, sections: list[tuple[str, str]]) -> Chapter:
        return Chapter(
            id=cid,
            title=title,
            point=point,
            sections=[Section(id=f"{cid}.s0{n}", title=t, point=p) for n, (t, p) in enumerate(sections, 1)],
        )

    chapters = [
        chapter("p01.c01", "How Vaccines Work", "how a vaccine trains the immune system.",
                [("Antibodies", "what antibodies do."), ("Memory Cells", "how the body remembers a germ.")]),
        chapter("p01.c02", "Computer Viruses", "how malware infects a laptop and how antivirus software stops it.",
                [("Trojans", "malware hidden in a download."), ("Firewalls", "blocking traffic from the internet.")]),
    ]  # fmt: skip
    outline = Outline(title="Vaccines for Parents", parts=[Part(id="p01", title="Vaccines", chapters=chapters)])
    spec = BookSpec(prompt=REQUEST, parts=1, chapters=2, sections=2, profile=PROFILES["small"])  # titles judged
    (folder / "spec.json").write_text(spec.model_dump_json())
    (folder / "outline.json").write_text(outline.model_dump_json())
    results = [
        SectionResult(id=s.id, title=s.title, text=PROSE, finish_reason="stop") for _, _, s in outline.sections()
    ]
    (folder / "sections.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in results))
    return outline


async def test_a_chapter_off_the_request_is_planned_again_and_its_sections_written_anew(tmp_path):
    outline = off_request_run(tmp_path)
    before = audit(load_run(tmp_path), judge="minilm")
    assert before.meaning is not None and before.meaning.off_request_ids == ["p01.c02"]
    replies = ScriptedRepair()
    engine = await FakeEngine(reply=replies).start()
    try:
        pool = BackendPool([Backend(name="fake", base_url=engine.url, cap=8)], RetryPolicy())
        spec = BookSpec.model_validate_json((tmp_path / "spec.json").read_text())
        planner = Planner(pool, spec, GREEDY, embedder=open_embedder(), judge=open_judge("minilm"))
        replanned = await replan_off_request(planner, outline, before)
        journal = {s.id: SectionResult(id=s.id, title=s.title, text=PROSE) for _, _, s in outline.sections()}
        repairer = Repairer(pool, spec, outline, journal, GREEDY, open_embedder())
        outcome = await repairer.repair(before, Journal(tmp_path / "repairs.jsonl"), replanned)
    finally:
        await engine.stop()
    assert replanned == {"p01.c02": ("Computer Viruses", "Side Effects")}, "the off title is refused again"
    new = outline.parts[0].chapters[1]
    assert new.id == "p01.c02" and sorted(s.title for s in new.sections) == ["A Sore Arm", "Shots by Age"]
    assert [c.title for c in outline.parts[0].chapters] == ["How Vaccines Work", "Side Effects"], "its place kept"
    assert {i: a for i, a in outcome.actions.items() if a == "replan"} == {s.id: "replan" for s in new.sections}
    assert all(outcome.results[s.id].repair == "replan" and outcome.results[s.id].ok for s in new.sections)
    assert replies.prose_asked >= 2
    assert planner.stats.held_back["off_subject"] >= 1, "the off title is held back"
