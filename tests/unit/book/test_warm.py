"""Warm, then fan out (pipeline/book/warm.py): a chapter's first section leads, its siblings follow it to
its backend once its answer (or, under first-token, its first token) is in. On FAKE engines."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from pipeline.backends.pool import BackendPool, RetryPolicy
from pipeline.book.profiles import PROFILES, Sampler
from pipeline.book.warm import PrefixGroups
from pipeline.book.write import SectionWriter, WritePolicy
from pipeline.journal import Journal
from pipeline.meaning.embed import open_embedder
from pipeline.records import Backend, BookSpec, Chapter, EngineKind, Outline, Part, Section, WarmSchedule
from pipeline.watch.listeners import BookListener
from tests.fakes.fake_engine import FakeEngine

pytestmark = pytest.mark.anyio
SMALL = Sampler(profile=PROFILES["small"], kinds=frozenset({EngineKind.LLAMACPP}))


@pytest.fixture
def anyio_backend():
    return "asyncio"


def one_chapter() -> tuple[Outline, Part, Chapter]:
    sections = [Section(id=f"p01.c01.s0{n}", title=title, point=f"{title}.") for n, title in
                enumerate(["Choosing a Flour", "Feeding Times", "Storing It Cold"], 1)]  # fmt: skip
    chapter = Chapter(id="p01.c01", title="Feeding", point="How to feed a starter.", sections=sections)
    part = Part(id="p01", title="Keeping a Starter", point="", chapters=[chapter])
    return Outline(title="Sourdough", parts=[part]), part, chapter


async def write_chapter(schedule: WarmSchedule, tmp_path: Path) -> dict:
    engines = [await FakeEngine(tokens=12, token_delay=0.02).start() for _ in range(3)]
    try:
        pool = BackendPool([Backend(name=f"e{n}", base_url=e.url, cap=4) for n, e in enumerate(engines)], RetryPolicy())
        spec = BookSpec(prompt="A short handbook on feeding a sourdough starter.", parts=1, chapters=1, sections=3)
        writer = SectionWriter(
            pool, spec, Journal(tmp_path / "sections.jsonl"), SMALL, BookListener(), open_embedder(),
            WritePolicy(warm=schedule),
        )  # fmt: skip
        outline, part, chapter = one_chapter()
        async with anyio.create_task_group() as group:
            for section in chapter.sections:
                group.start_soon(writer.write, outline, part, chapter, section)
        writer.journal.close()
        return writer.results
    finally:
        for engine in engines:
            await engine.stop()


async def test_siblings_follow_their_leader_to_its_backend_once_its_answer_is_in(tmp_path):
    results = await write_chapter(WarmSchedule.ANSWER, tmp_path)
    leader, *siblings = (results[f"p01.c01.s0{n}"] for n in (1, 2, 3))
    assert all(s.t_sent >= leader.t_done for s in siblings), "sent only once the leader's answer was in"
    assert {s.backend for s in siblings} == {leader.backend}, "to the backend that holds the prefix"


async def test_under_first_token_siblings_go_once_the_leader_streams(tmp_path):
    results = await write_chapter(WarmSchedule.FIRST_TOKEN, tmp_path)
    leader, *siblings = (results[f"p01.c01.s0{n}"] for n in (1, 2, 3))
    assert all(leader.t_first_token <= s.t_sent < leader.t_done for s in siblings)
    assert {s.backend for s in siblings} == {leader.backend}


async def test_off_sends_every_section_at_once(tmp_path):
    results = await write_chapter(WarmSchedule.OFF, tmp_path)
    first = min(r.t_sent for r in results.values())
    assert all(r.t_sent - first < 0.1 for r in results.values()) and len({r.backend for r in results.values()}) > 1


async def test_a_failed_leader_never_holds_its_siblings_up():
    groups = PrefixGroups(WarmSchedule.ANSWER)
    leader = groups.lead("c1")
    assert leader is not None and groups.lead("c1") is None, "one leader a group"
    leader.finished()  # its request failed on every backend
    with anyio.fail_after(1):
        assert await groups.follow("c1") is None


def test_auto_waits_as_the_leaders_engine_needs():
    ready_after = {"llama": WarmSchedule.ANSWER, "vllm": WarmSchedule.FIRST_TOKEN}.__getitem__
    groups = PrefixGroups(WarmSchedule.AUTO, ready_after)
    on_llama, on_vllm = groups.lead("c1"), groups.lead("c2")
    assert on_llama is not None and on_vllm is not None
    on_llama.sent("llama")
    on_vllm.sent("vllm")
    on_llama.first_token("Once")
    on_vllm.first_token("Once")
    assert not on_llama.warm.is_set(), "llama.cpp shares a prompt only once its slot is free"
    assert on_vllm.warm.is_set(), "vLLM shares blocks once they are computed"
