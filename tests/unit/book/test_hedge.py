"""Hedged requests for late sections (SectionWriter with the `hedge` policy, write.py's Hedges): while the pool has
slots no request waits for, a section whose first candidate is late (its own pace against what a copy would take)
sends a second copy; the first copy that needs no retry is kept and the other cancelled. On FAKE engines: one
stalls each answer, the other answers at once; and the rule's arithmetic on its own."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from pipeline.backends.pool import BackendPool, RetryPolicy
from pipeline.book.hedges import HEDGE_SEEN, Hedges, _Progress, remaining
from pipeline.book.write import SectionWriter, WritePolicy
from pipeline.journal import Journal
from pipeline.meaning.embed import open_embedder
from pipeline.records import Backend, BookSpec, WarmSchedule
from pipeline.watch.listeners import BookListener
from tests.fakes.fake_engine import FakeEngine
from tests.unit.book.test_warm import SMALL, one_chapter

pytestmark = pytest.mark.anyio
STALL_S = 30.0  # the stalled engine's pause before its first byte: far longer than the test may take


@pytest.fixture
def anyio_backend():
    return "asyncio"


def reply(body: dict) -> str:
    """A section's text about its own title (the title the prompt ends with), so it is on its point."""
    prompt = body["messages"][-1]["content"]
    return f"{prompt.splitlines()[-1]} explained in plain words. It ends on a full sentence."


async def write_one(tmp_path: Path, *, hedge: bool) -> tuple[SectionWriter, FakeEngine, FakeEngine]:
    stalled = await FakeEngine(section_pause=STALL_S, reply=reply).start()
    quick = await FakeEngine(reply=reply).start()
    backends = [Backend(name="stalled", base_url=stalled.url, cap=2), Backend(name="quick", base_url=quick.url, cap=2)]
    pool = BackendPool(backends, RetryPolicy(read_timeout=STALL_S * 2))
    spec = BookSpec(prompt="A short handbook on feeding a sourdough starter.", parts=1, chapters=1, sections=1)
    policy = WritePolicy(warm=WarmSchedule.OFF, hedge=hedge)
    journal = Journal(tmp_path / "sections.jsonl")
    writer = SectionWriter(pool, spec, journal, SMALL, BookListener(), open_embedder(), policy)
    if writer.hedges is not None:  # as if HEDGE_SEEN sections of 8 pieces had landed at once: the stalled one is late
        writer.hedges.waits = writer.hedges.paces = {"quick": [0.0] * HEDGE_SEEN}
        writer.hedges.pieces = [8] * HEDGE_SEEN
    outline, part, chapter = one_chapter()
    del chapter.sections[1:]
    section = chapter.sections[0]
    async with anyio.create_task_group() as group:
        writer.planned(chapter)
        group.start_soon(writer.write, outline, part, chapter, section)  # both idle: the first listed takes it
        with anyio.fail_after(STALL_S / 2):
            while stalled.in_flight == 0:
                await anyio.sleep(0.01)
        writer.outline_complete()
        group.start_soon(writer.hedging)
        if not hedge:
            group.cancel_scope.cancel()  # nothing would end the stalled answer
    writer.journal.close()
    return writer, stalled, quick


async def test_the_hedge_to_another_backend_is_kept_and_the_stalled_copy_cancelled(tmp_path):
    writer, stalled, quick = await write_one(tmp_path, hedge=True)
    try:
        (result,) = writer.results.values()
        assert result.ok and result.backend == "quick"
        assert writer.hedge_counts == (1, 1)
        assert writer.pool.states[0].in_flight == 0, "the stalled copy's slot was given back"
        with anyio.fail_after(STALL_S / 2):
            while stalled.in_flight:  # the engine hears the client hang up
                await anyio.sleep(0.01)
        assert stalled.generated == 0, "the stalled copy was cancelled, not answered"
    finally:
        await stalled.stop()
        await quick.stop()


async def test_without_the_policy_no_hedge_goes(tmp_path):
    writer, stalled, quick = await write_one(tmp_path, hedge=False)
    try:
        assert writer.hedge_counts == (0, 0)
        assert quick.requests == 0
    finally:
        await stalled.stop()
        await quick.stop()


async def test_spare_slots_are_none_while_a_request_waits(tmp_path):
    engine = await FakeEngine(section_pause=STALL_S).start()
    try:
        pool = BackendPool([Backend(name="e", base_url=engine.url, cap=1)], RetryPolicy(read_timeout=STALL_S * 2))
        assert pool.spare_slots() == 1
        spec = BookSpec(prompt="A short handbook on feeding a sourdough starter.", parts=1, chapters=1, sections=3)
        policy = WritePolicy(warm=WarmSchedule.OFF)
        journal = Journal(tmp_path / "s.jsonl")
        writer = SectionWriter(pool, spec, journal, SMALL, BookListener(), open_embedder(), policy)
        outline, part, chapter = one_chapter()
        async with anyio.create_task_group() as group:
            for section in chapter.sections[:2]:
                group.start_soon(writer.write, outline, part, chapter, section)
            with anyio.fail_after(STALL_S / 2):
                while not pool.admission._waiters:
                    await anyio.sleep(0.01)
            assert pool.spare_slots() == 0, "one slot, taken, and a request waits for it"
            group.cancel_scope.cancel()
        writer.journal.close()
    finally:
        await engine.stop()


def test_a_candidate_is_late_when_its_own_pace_ends_it_after_two_new_copies():
    # 10 pieces in 10 s of an answer of 100: 90 s to go at its pace
    assert remaining(_Progress(sent=0.0, first_piece=1.0, pieces=10), 100, now=11.0) == 90.0
    assert remaining(_Progress(sent=0.0, first_piece=1.0, pieces=90), 100, now=10.0) == 1.0
    assert remaining(_Progress(sent=0.0), 100, now=40.0) == 40.0, "no piece yet: the time it has waited"
    hedges = Hedges(BackendPool([Backend(name="e", base_url="http://127.0.0.1:9/v1", cap=4)], RetryPolicy()))
    # a copy on the fastest backend: a second's wait and 0.1 s a piece, 11 s for 100 pieces (the slow one is not it)
    hedges.waits = {"fast": [1.0] * HEDGE_SEEN, "slow": [1.0] * HEDGE_SEEN}
    hedges.paces = {"fast": [0.1] * HEDGE_SEEN, "slow": [1.0] * HEDGE_SEEN}
    hedges.pieces = [100] * HEDGE_SEEN
    now = time.monotonic()
    assert hedges.copy_seconds(100, now) == 11.0
    for section_id in ("slow", "quick", "unheard"):
        hedges.wait(section_id)
    hedges.progress["slow"] = _Progress(sent=now - 11, first_piece=now - 10, pieces=10)  # 90 s to go: late
    hedges.progress["quick"] = _Progress(sent=now - 11, first_piece=now - 10, pieces=60)  # 6.7 s: not
    hedges.progress["unheard"] = _Progress(sent=now - 20)  # waited 20 s, under two copies' 22
    assert hedges.late() == ["slow"]


def test_where_first_answers_often_need_a_retry_every_last_section_is_hedged():
    hedges = Hedges(BackendPool([Backend(name="e", base_url="http://127.0.0.1:9/v1", cap=4)], RetryPolicy()))
    for section_id in ("a", "b"):
        hedges.wait(section_id)
    hedges.retried = [True] * 4 + [False] * (HEDGE_SEEN * 3)  # a quarter needed a retry
    assert hedges.late() == [], "sections are still to be handed over: their slots are theirs"
    hedges.complete = True
    assert hedges.late() == ["a", "b"]
    hedges.retried = [True] + [False] * (HEDGE_SEEN * 3)
    assert hedges.late() == [], "a model whose first answers rarely need one"


def test_a_copy_is_judged_by_the_pace_now_of_what_streams_on_the_backend():
    hedges = Hedges(BackendPool([Backend(name="e", base_url="http://127.0.0.1:9/v1", cap=4)], RetryPolicy()))
    hedges.waits, hedges.paces = {"e": [1.0] * HEDGE_SEEN}, {"e": [0.1] * HEDGE_SEEN}  # landed while it was light
    now = time.monotonic()
    for number in range(HEDGE_SEEN):  # streaming there now, in a fuller batch: half a second a piece
        hedges.wait(f"s{number}")
        hedges.progress[f"s{number}"] = _Progress(sent=now - 11, first_piece=now - 10, pieces=20, backend="e")
    assert hedges.copy_seconds(100, now) == 51.0, "a second's wait, then 100 pieces at the pace now"
    assert hedges.late() == [], "each at the batch's own pace: none is late"
