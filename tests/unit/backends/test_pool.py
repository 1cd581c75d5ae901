"""The pool on FAKE engines: caps hold, load spreads by free capacity, failures go elsewhere."""

from __future__ import annotations

from functools import partial

import anyio
import pytest

from pipeline.backends.pool import BackendPool, FleetUnavailable, RequestFailed, RequestRefused, RetryPolicy
from pipeline.book.later import asked_until_answered
from pipeline.records import Backend, ChatRequest
from tests.fakes.fake_engine import BookReplies, FakeEngine
from tests.fakes.hostile_fleet import FAULTS, HostileBackend

pytestmark = pytest.mark.anyio
FAST = RetryPolicy(attempts=4, backoff_initial=0.01, backoff_max=0.05, read_timeout=2.0, probe_after=0.2)


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def started(*engines: FakeEngine) -> list[FakeEngine]:
    for engine in engines:
        await engine.start()
    return list(engines)


def backend(engine: FakeEngine, name: str, cap: int) -> Backend:
    return Backend(name=name, base_url=engine.url, model="fake-model", cap=cap)


def request(tag: str = "r") -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=8, tag=tag)


async def run_many(pool: BackendPool, count: int) -> list:
    results = [None] * count

    async def one(i: int) -> None:
        results[i] = await pool.complete(request(f"r{i}"))

    async with anyio.create_task_group() as group:
        for i in range(count):
            group.start_soon(one, i)
    return results


async def test_caps_are_never_exceeded_and_load_follows_capacity():
    engines = await started(FakeEngine(tokens=6, token_delay=0.01), FakeEngine(tokens=6, token_delay=0.01))
    pool = BackendPool([backend(engines[0], "a", 2), backend(engines[1], "b", 6)], FAST)
    results = await run_many(pool, 80)
    assert all(r is not None and r.completion_tokens == 6 for r in results)
    assert engines[0].peak_in_flight == 2 and engines[1].peak_in_flight == 6
    assert pool.states[0].peak_in_flight == 2 and pool.states[1].peak_in_flight == 6
    share_b = engines[1].requests / 80
    assert 0.6 < share_b < 0.9, f"the cap-6 backend should take about 3/4 of the work, took {share_b:.2f}"
    for engine in engines:
        await engine.stop()


@pytest.mark.parametrize("mode", ["http_500", "reset", "empty", "no_done"])
async def test_a_failed_attempt_is_retried_on_another_backend(mode):
    bad, good = await started(FakeEngine(modes=[mode]), FakeEngine())
    pool = BackendPool([backend(bad, "bad", 4), backend(good, "good", 4)], FAST)
    pool.states[1].in_flight = 1  # so the first pick is the bad backend
    streamed: list[str] = []
    completion = await pool.complete(request(), streamed.append, on_retry=lambda: streamed.append(None))
    pool.states[1].in_flight = 0
    assert streamed.count(None) == len(completion.attempts) - 1, "on_retry before every attempt but the first"
    assert "".join(streamed[len(streamed) - streamed[::-1].index(None) :]) == completion.text, (
        "what streamed after the last retry is the answer"
    )
    assert [a.outcome for a in completion.attempts][0] != "ok"
    assert [(a.backend, a.outcome) for a in completion.attempts][-1] == ("good", "ok")
    assert completion.backend == "good" and completion.text.startswith("w0")
    await bad.stop()
    await good.stop()


async def test_cut_before_first_byte_is_reasked_at_once_and_counted_apart():
    (engine,) = await started(FakeEngine(modes=["close_early", "close_early"]))
    pool = BackendPool([backend(engine, "a", 2)], FAST)
    completion = await pool.complete(request())
    assert completion.reissued == 2 and completion.failed_attempts == 0
    assert pool.states[0].reissued == 2 and pool.states[0].failed == 0
    await engine.stop()


async def test_retry_after_is_honoured():
    (engine,) = await started(FakeEngine(modes=["http_429"], retry_after=0.4))
    pool = BackendPool([backend(engine, "a", 2)], FAST)
    completion = await pool.complete(request())
    first, second = completion.attempts
    assert first.outcome == "http_429" and second.outcome == "ok"
    assert second.t_start - first.t_end >= 0.39


async def test_a_stall_times_out_and_goes_elsewhere():
    stalled, good = await started(FakeEngine(modes=["stall"]), FakeEngine())
    policy = RetryPolicy(attempts=3, backoff_initial=0.01, backoff_max=0.02, read_timeout=0.3)
    pool = BackendPool([backend(stalled, "stalled", 4), backend(good, "good", 4)], policy)
    pool.states[1].in_flight = 1
    completion = await pool.complete(request())
    pool.states[1].in_flight = 0
    assert [a.outcome for a in completion.attempts] == ["timeout", "ok"]
    await good.stop()


async def test_every_attempt_failing_raises_with_the_attempts():
    (engine,) = await started(FakeEngine(modes=["http_500"] * 10))
    pool = BackendPool([backend(engine, "a", 2)], FAST)
    with pytest.raises(RequestFailed) as failure:
        await pool.complete(request("sec-1"))
    assert len(failure.value.attempts) == FAST.attempts
    assert "sec-1" in str(failure.value) and "http_500" in str(failure.value)
    await engine.stop()


async def test_a_backend_that_keeps_failing_is_rested_then_probed_again():
    flaky, good = await started(FakeEngine(modes=["http_500"] * 3), FakeEngine(token_delay=0.01))
    one_try = RetryPolicy(attempts=1, read_timeout=2.0, down_after=3, probe_after=0.3, backoff_initial=0.01)
    pool = BackendPool([backend(flaky, "flaky", 4), backend(good, "good", 4)], one_try)
    for _ in range(3):  # equal loads: flaky, listed first, is asked first; three failures in a row mark it down
        answer = await pool.complete(request())
        assert [a.backend for a in answer.attempts] == ["flaky", "good"], "each failure went to the other"
    assert pool.snapshot()[0]["down"]
    await run_many(pool, 8)
    assert flaky.requests == 3, "a rested backend gets nothing"
    await anyio.sleep(one_try.probe_after + 0.05)
    await run_many(pool, 8)
    assert flaky.requests > 3 and not pool.snapshot()[0]["down"], "after its rest it is probed and used again"
    await flaky.stop()
    await good.stop()


async def test_unreachable_backend_fails_as_connect_error():
    pool = BackendPool([Backend(name="gone", base_url="http://127.0.0.1:9/v1", cap=2)], FAST)
    with pytest.raises(RequestFailed) as failure:
        await pool.complete(request())
    assert {a.outcome for a in failure.value.attempts} == {"connect"}


async def test_a_reserved_slot_is_left_to_first_requests_until_the_reserve_ends():
    engine = (await started(FakeEngine(tokens=6, token_delay=0.05)))[0]  # 0.3 s a request
    pool = BackendPool([backend(engine, "a", 3)], FAST)
    done: list[str] = []

    async def send(tag: str, first: bool = False) -> None:
        await pool.complete(request(tag), first=first)
        done.append(tag)

    async with anyio.create_task_group() as group:
        with pool.reserve_for_first():
            for i in range(6):
                group.start_soon(send, f"w{i}")
            await anyio.sleep(0.1)
            assert pool.states[0].in_flight == 2, "two of three slots for writing, one kept"
            group.start_soon(send, "plan", True)
            await anyio.sleep(0.1)
            assert pool.states[0].in_flight == 3, "the planning request did not wait"
            while "plan" not in done:
                await anyio.sleep(0.01)
            await anyio.sleep(0.05)
            assert pool.states[0].in_flight == 2 and done[:2] == ["w0", "w1"], "kept again for planning"
        await anyio.sleep(0.05)
        assert pool.states[0].in_flight == 3, "the reserve is over: writing takes every slot"
    single = BackendPool([backend(engine, "b", 1)], FAST)
    with single.reserve_for_first():
        assert (await single.complete(request("alone"))).completion_tokens == 6, "a backend's only slot is never kept"
    await engine.stop()


async def test_a_planning_lane_keeps_its_backends_batch_small_for_planning_until_it_ends():
    lane, other = await started(FakeEngine(tokens=6, token_delay=0.05), FakeEngine(tokens=6, token_delay=0.05))
    pool = BackendPool([backend(lane, "lane", 8), backend(other, "other", 8)], FAST)
    sent: list[tuple[str, str]] = []

    async def send(tag: str, first: bool = False) -> None:
        completion = await pool.complete(request(tag), first=first)
        sent.append((tag, completion.backend))

    async with anyio.create_task_group() as group:
        with pool.planning_lane(2):
            for i in range(14):
                group.start_soon(send, f"w{i}")
            await anyio.sleep(0.1)
            assert [s.in_flight for s in pool.states] == [2, 8], "the lane takes two writers, the other its cap"
            for i in range(3):
                group.start_soon(send, f"plan{i}", True)
            await anyio.sleep(0.1)
            assert pool.states[0].in_flight == 5, "planning goes to the lane first, past the writers' two"
        await anyio.sleep(0.01)
        assert pool.states[0].in_flight == 8, "the lane is over: the waiting writers fill its backend at once"
    assert {backend for tag, backend in sent if tag.startswith("plan")} == {"lane"}
    one = BackendPool([backend(lane, "alone", 4)], FAST)
    with one.planning_lane(1):
        assert one.admission.limit(one.states[0], first=False) == 4, "a single backend is never made a lane"
    await lane.stop()
    await other.stop()


def hostile(fault: str, share: float = 1.0) -> HostileBackend:
    return HostileBackend(BookReplies(), seed=0, share=share, faults=[fault])


@pytest.mark.parametrize("fault", ["huge_answer", "huge_line", "html_200", "garbage_status", "lone_surrogate"])
async def test_whatever_a_backend_did_wrong_is_asked_again_on_another(fault):
    bad, good = await started(hostile(fault), FakeEngine())
    pool = BackendPool([backend(bad, "bad", 4), backend(good, "good", 4)], FAST)
    completion = await pool.complete(request())
    assert [(a.backend, a.outcome) for a in completion.attempts] == [("bad", FAULTS[fault]), ("good", "ok")]
    await bad.stop()
    await good.stop()


async def test_a_request_is_asked_of_every_backend_before_it_fails():
    """One attempt allowed, yet the request reaches the third backend: a failure is the backend's fault."""
    engines = await started(hostile("http_500"), hostile("empty"), FakeEngine())
    policy = RetryPolicy(attempts=1, backoff_initial=0.01, backoff_max=0.02, read_timeout=2.0)
    pool = BackendPool([backend(e, f"b{i}", 2) for i, e in enumerate(engines)], policy)
    completion = await pool.complete(request())
    assert [a.outcome for a in completion.attempts] == ["http_500", "empty", "ok"]
    await engines[2].stop()
    failing = BackendPool([backend(e, f"b{i}", 2) for i, e in enumerate(engines[:2])], policy)
    with pytest.raises(RequestFailed) as failure:
        await failing.complete(request("sec-2"))
    assert {a.backend for a in failure.value.attempts} == {"b0", "b1"} and len(failure.value.attempts) == 2
    for engine in engines[:2]:
        await engine.stop()


async def test_a_request_every_backend_blames_on_itself_fails_at_once_and_says_so():
    first, second = await started(hostile("http_400"), hostile("http_400"))
    pool = BackendPool([backend(first, "a", 2), backend(second, "b", 2)], FAST)
    with pytest.raises(RequestRefused) as refused:
        await pool.complete(request("sec-3"))
    assert [(a.backend, a.outcome) for a in refused.value.attempts] in (
        [("a", "http_400"), ("b", "http_400")],
        [("b", "http_400"), ("a", "http_400")],
    ), "each backend asked once, none twice"
    assert "refused by every backend as the request's own fault" in str(refused.value)
    assert not any(s["down"] for s in pool.snapshot()) and pool.states[0].failed == 0, "not held against them"
    await first.stop()
    await second.stop()


async def test_a_fleet_that_cannot_answer_ends_requests_in_one_line_naming_each_backend():
    engines = await started(hostile("http_500"), hostile("html_200"))
    policy = RetryPolicy(attempts=2, backoff_initial=0.01, backoff_max=0.02, down_after=1, probe_after=0.05,
                         give_up_after=0.3)  # fmt: skip
    pool = BackendPool([backend(e, f"b{i}", 2) for i, e in enumerate(engines)], policy)
    failures: list[BaseException] = []

    async def one() -> None:  # as the book's stages ask: again later while nothing is answered
        try:
            await asked_until_answered(pool, lambda: pool.complete(request()), pause=0.05)
        except FleetUnavailable as error:
            failures.append(error)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            for _ in range(6):
                group.start_soon(one)
    assert len(failures) == 6, "every request, asked or waiting, hears it"
    line = str(failures[0])
    assert "no backend has answered for 0.3 s" in line and "b0: http_500" in line and "b1: not_event_stream" in line
    for engine in engines:
        await engine.stop()


async def test_a_held_backend_gets_nothing_until_revived_at_its_new_address():
    old, new = await started(FakeEngine(), FakeEngine())
    pool = BackendPool([backend(old, "engine", 2)], FAST)
    pool.hold("engine")
    done = anyio.Event()

    async def ask() -> None:
        await pool.complete(request())
        done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(ask)
        await anyio.sleep(0.3)
        assert not done.is_set() and old.requests == 0, "held: the request waits, spending no attempt"
        pool.revive("engine", new.url)
    assert new.requests == 1 and old.requests == 0 and pool.states[0].backend.base_url == new.url
    await old.stop()
    await new.stop()


async def test_a_stopped_fleet_fails_every_waiting_request_with_its_reason():
    (engine,) = await started(FakeEngine(tokens=4, token_delay=0.2))
    pool = BackendPool([backend(engine, "a", 1)], FAST)
    outcomes: list[str] = []

    async def ask() -> None:
        try:
            await pool.complete(request())
            outcomes.append("answered")
        except FleetUnavailable as error:
            outcomes.append(str(error))

    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(ask)
        await anyio.sleep(0.1)
        pool.stop_all("the embedded engine died again")
    assert sorted(outcomes) == ["answered", *["the embedded engine died again"] * 2], "the one in flight ends"
    await engine.stop()


async def test_a_request_that_failed_everywhere_is_asked_again_later():
    (engine,) = await started(FakeEngine(modes=["http_500"] * 4))
    policy = RetryPolicy(attempts=2, backoff_initial=0.01, backoff_max=0.02, read_timeout=2.0, probe_after=0.05)
    pool = BackendPool([backend(engine, "a", 2)], policy)
    waits: list[int] = []
    completion = await asked_until_answered(
        pool, lambda: pool.complete(request()), on_later=lambda: waits.append(1), pause=0.05
    )
    assert len(waits) == 2 and completion.text.startswith("w0"), "two rounds of two failures, then the answer"
    assert engine.modes_used == ["http_500"] * 4 + ["ok"]
    await engine.stop()


async def test_a_retry_that_must_wait_for_one_backend_holds_up_no_request_behind_it():
    """r1 failed on `bad` and, its attempts spent, may only go to `good`, busy with a slow r0; r2 arrives
    behind r1 and takes bad's free slot at once instead of waiting for good."""
    bad, good = await started(hostile("http_500"), FakeEngine(tokens=6, token_delay=0.1))
    policy = RetryPolicy(attempts=1, backoff_initial=0.01, backoff_max=0.02, read_timeout=2.0, down_after=99)
    pool = BackendPool([backend(good, "good", 1), backend(bad, "bad", 2)], policy)
    answers: dict[str, object] = {}

    async def ask(tag: str) -> None:
        answers[tag] = await pool.complete(request(tag))

    async with anyio.create_task_group() as group:
        group.start_soon(ask, "r0")  # good, the least loaded first in the list, for 0.6 s
        await anyio.sleep(0.05)
        group.start_soon(ask, "r1")  # bad (good is full), fails, then waits for good
        await anyio.sleep(0.1)
        group.start_soon(ask, "r2")
    r0, r2 = answers["r0"], answers["r2"]
    assert [a.backend for a in answers["r1"].attempts] == ["bad", "good"]
    assert r2.attempts[0].backend == "bad" and r2.attempts[0].t_start < r0.t_done, "r2 did not wait behind r1"
    await bad.stop()
    await good.stop()


async def test_a_request_takes_its_preferred_backend_while_it_has_a_free_slot_and_another_when_not():
    engines = await started(FakeEngine(tokens=4, token_delay=0.05), FakeEngine(tokens=4, token_delay=0.05))
    pool = BackendPool([backend(engines[0], "a", 2), backend(engines[1], "b", 2)], FAST)
    sent: list[str] = []
    async with anyio.create_task_group() as group:
        for i in range(3):  # two fit on 'b', the third finds it full
            group.start_soon(lambda i=i: pool.complete(request(f"r{i}"), prefer="b", on_sent=sent.append))
    assert sorted(sent) == ["a", "b", "b"] and engines[1].requests == 2
    for engine in engines:
        await engine.stop()


async def test_a_request_with_several_choices_takes_a_slot_for_each_that_is_free_and_is_sent_with_as_many():
    """A planning request sampled four times takes four of the cap (the engine gives each sample a slot) when
    four are free; with fewer free it goes at once with as many samples as there are slots, never over the cap."""
    engine = await FakeEngine(tokens=4, token_delay=0.03).start()
    pool = BackendPool([Backend(name="fake", base_url=engine.url, cap=4)])

    async def send(tag: str, *, choices: int = 1) -> None:
        request = ChatRequest(messages=[{"role": "user", "content": tag}], max_tokens=4, tag=tag, choices=choices)
        await pool.complete(request, first=choices > 1)

    await send("alone", choices=4)
    async with anyio.create_task_group() as group:
        for n in range(3):
            group.start_soon(send, f"busy-{n}")
        await anyio.sleep(0.02)
        group.start_soon(partial(send, "squeezed", choices=4))
    await engine.stop()
    sent = {prompt: body.get("n", 1) for body in engine.bodies for prompt in [body["messages"][0]["content"]]}
    assert sent["alone"] == 4 and sent["squeezed"] == 1, "as many samples as free slots, at least one"
    assert pool.states[0].peak_in_flight == 4 and engine.peak_in_flight <= 4
