"""Chat requests read in worker processes (backends/chatworkers.py) against FAKE engines: the same answers as
this process reads, pieces in order, every choice of a request for several, failures with the pool's kinds, a
cancel that reaches the worker, and a book written with --workers 2 that sends the same requests as one
written in one process."""

from __future__ import annotations

import json

import anyio
import pytest

from pipeline.backends.chat import chat
from pipeline.backends.chatworkers import ChatWorkers
from pipeline.backends.sse import AttemptError, EveryChoice
from pipeline.cli import main
from pipeline.records import Backend, ChatRequest
from tests.fakes.fake_engine import FakeEngine
from tests.fakes.fake_steplaw import steplaw_in_thread

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def workers():
    with ChatWorkers(2) as pool:
        yield pool


def request(tokens: int = 8) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=tokens, tag="t")


async def test_a_worker_reads_the_same_answer_with_its_pieces_in_order(workers):
    engine = await FakeEngine(tokens=40).start()
    try:
        backend = Backend(name="b0", base_url=engine.url)
        here = await chat(backend, request(), 5)
        pieces: list[str] = []
        there = await workers.chat(backend, request(), 5, pieces.append)
        assert there.text == here.text and "".join(pieces) == there.text
        assert (there.completion_tokens, there.finish_reason, there.backend) == (8, "length", "b0")
        engine.modes.extend(["http_500"])
        with pytest.raises(AttemptError) as failed:
            await workers.chat(backend, request(), 5)
        assert failed.value.kind == "http_500" and not failed.value.blames_request
    finally:
        await engine.stop()


async def test_a_worker_sends_back_every_choice():
    engine = await FakeEngine(tokens=4).start()
    try:
        backend = Backend(name="b0", base_url=engine.url)
        asked = request().model_copy(update={"choices": 3})
        here = await chat(backend, asked, 5)
        heard: dict[int, str] = {}
        every = EveryChoice(lambda index, text: heard.update({index: heard.get(index, "") + text}))
        with ChatWorkers(1) as own:  # the module's workers answer on the event loop of the first test only
            there = await own.chat(backend, asked, 5, every)
        assert (there.text, there.more_texts, there.more_finish_reasons) == (
            here.text,
            here.more_texts,
            here.more_finish_reasons,
        )
        assert len(set(there.more_texts)) == 2 and there.more_finish_reasons == ["stop", "stop"]
        assert [heard[index] for index in range(3)] == [there.text, *there.more_texts]  # each piece, its choice
    finally:
        await engine.stop()


async def test_a_cancelled_request_is_cancelled_in_the_worker(workers):
    engine = await FakeEngine(tokens=400, token_delay=0.01).start()
    try:
        backend = Backend(name="b0", base_url=engine.url)
        with anyio.move_on_after(0.5):
            await workers.chat(backend, request(400), 10, lambda _: None)
        await anyio.sleep(0.5)
        assert engine.in_flight == 0 and engine.generated == 0  # hung up, never finished
    finally:
        await engine.stop()


def test_a_book_from_two_worker_processes_sends_what_one_process_sends(tmp_path):
    runs = {}
    with steplaw_in_thread((1.0, 0.01)) as (engine,):
        for workers in (1, 2):
            folder = tmp_path / f"w{workers}"
            args = ["book", "A handbook on bees", "--shape", "2x2x3", "--backend", f"{engine.url},cap=8"]
            assert main([*args, "--out", str(folder), "--quiet", "--workers", str(workers)]) == 0
            stats = json.loads((folder / "stats.json").read_text())
            logged = [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]
            runs[workers] = (stats, sorted(row["kind"] for row in logged if row["outcome"] == "ok"))
    (one, kinds_one), (two, kinds_two) = runs[1], runs[2]
    assert two["complete"] and two["sections"] == one["sections"] == 12
    assert kinds_two.count("section") == kinds_one.count("section") == 12
    assert two["tokens_written"] == one["tokens_written"] and two["requests_writing"] == one["requests_writing"]


async def test_a_lost_worker_fails_its_requests_and_the_pool_asks_them_again():
    from pipeline.backends.pool import BackendPool, RetryPolicy
    from pipeline.book.plan.rounds import PlanStats
    from pipeline.book.stats import JobTally, book_stats
    from pipeline.records import Outcome

    engine = await FakeEngine(tokens=30, token_delay=0.02).start()
    try:
        with ChatWorkers(2) as pool_workers:
            pool = BackendPool([Backend(name="b0", base_url=engine.url, cap=8)], RetryPolicy(backoff_initial=0.05))
            pool.transport = pool_workers.chat
            results: list = []

            async def ask() -> None:
                results.append(await pool.complete(request(30)))

            async with anyio.create_task_group() as group:
                for _ in range(6):
                    group.start_soon(ask)
                await anyio.sleep(0.2)  # every request in flight, three a worker
                pool_workers.processes.processes[0].kill()
            assert len(results) == 6 and all(r.completion_tokens == 30 for r in results)
            attempts = [a for r in results for a in r.attempts]
            lost = [a for a in attempts if a.kind is Outcome.CLIENT_WORKER_LOST]
            assert len(lost) == 3 and pool_workers.lost == {0}
            # the pool and the book's stats read the same outcome: not the backend's failure, not a request error
            assert pool.states[0].failed == 0
            tally = JobTally(written={}, write_seconds=1.0, generate_seconds=1.0, attempts=attempts, backends=[])
            stats = book_stats(PlanStats(), tally, {}, section_total=0, job_seconds=1.0, resumed=False)
            assert stats.request_errors == 0 and stats.reissued_worker_lost == 3
    finally:
        await engine.stop()
