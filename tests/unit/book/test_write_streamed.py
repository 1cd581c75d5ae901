"""A section sent the moment its line is planned (the streamed schedule) is scored, and so journaled, only once
its chapter is whole: its on-point margin and its retry see every sibling. On FAKE engines."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from pipeline.backends.pool import BackendPool, RetryPolicy
from pipeline.book.write import SectionWriter, WritePolicy
from pipeline.journal import Journal
from pipeline.meaning.embed import open_embedder
from pipeline.records import Backend, BookSpec, WarmSchedule
from pipeline.watch.listeners import BookListener
from tests.fakes.fake_engine import FakeEngine
from tests.unit.book.test_warm import SMALL, one_chapter

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def writer_on(engine: FakeEngine, tmp_path: Path, *, sections: int) -> SectionWriter:
    """A writer on one FAKE engine for a 1x1xN book, every section sent at once (warm off)."""
    pool = BackendPool([Backend(name="e", base_url=engine.url, cap=4)], RetryPolicy())
    spec = BookSpec(prompt="A short handbook on feeding a sourdough starter.", parts=1, chapters=1, sections=sections)
    journal, policy = Journal(tmp_path / "sections.jsonl"), WritePolicy(warm=WarmSchedule.OFF)
    return SectionWriter(pool, spec, journal, SMALL, BookListener(), open_embedder(), policy)


async def test_sections_sent_early_are_scored_once_their_chapter_is_whole(tmp_path):
    engine = await FakeEngine(tokens=8, token_delay=0.01).start()
    try:
        writer = writer_on(engine, tmp_path, sections=3)
        outline, part, chapter = one_chapter()
        last = chapter.sections.pop()
        async with anyio.create_task_group() as group:
            for section in chapter.sections:
                writer.planned(chapter)
                group.start_soon(writer.write, outline, part, chapter, section)
            with anyio.fail_after(10):
                while len(engine.timeline) < 2:  # both answered (the timeline lists finished requests)
                    await anyio.sleep(0.05)
            await anyio.sleep(0.3)
            assert writer.results == {}, "answered, but not scored while a sibling is still unplanned"
            chapter.sections.append(last)
            writer.planned(chapter)
            group.start_soon(writer.write, outline, part, chapter, last)
        writer.journal.close()
        assert sorted(writer.results) == [s.id for s in chapter.sections]
        assert all(r.margin is not None for r in writer.results.values()), "scored against all three siblings"
    finally:
        await engine.stop()


async def test_a_chapter_short_of_the_shape_is_not_waited_for_once_the_outline_is_complete(tmp_path):
    engine = await FakeEngine(tokens=8).start()
    try:
        writer = writer_on(engine, tmp_path, sections=4)
        outline, part, chapter = one_chapter()  # three sections where the shape says four (edited by hand)
        writer.outline_complete()
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                for section in chapter.sections:
                    writer.planned(chapter)
                    group.start_soon(writer.write, outline, part, chapter, section)
        writer.journal.close()
        assert len(writer.results) == 3
    finally:
        await engine.stop()
