"""The closed loop for one level: N streams per backend, every backend on one absolute schedule.

Takes the open session, the runner, the targets (backend, engine, extra body fields), a LevelPlan and the
Prompts; returns a LevelRaw. Every stream starts at t0; the window opens once every stream has its first
token and the warm-up has passed, and closes `window_s` later. Until then, the moment a request finishes
the stream starts a new, distinct one. Requests still running at the close finish (the drain) so the
engine's counter can be checked against the client's usage over the whole level. The requests go straight
to each backend, not through the pool: the pool would queue, and a ladder must measure batching, not
queueing. Counters and GPU power are sampled beside the load, in this process whichever runner sends it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import aiohttp
import anyio
from anyio.abc import TaskGroup

from pipeline.bench.load.prompts import Prompts
from pipeline.bench.load.runner import ClosedResult, LevelPlan, Runner, Target
from pipeline.bench.load.sampler import counter_loop, power_loop, sample_all, settled_end, sleep_until
from pipeline.bench.load.send import START_DELAY_S, send_request
from pipeline.errors import BackendError
from pipeline.records import ChatRequest
from pipeline.records.bench import CounterSample, LevelRaw, PowerSample, RequestSample
from pipeline.watch.listeners import BenchListener, request_id

FAILURES_IN_A_ROW = 5


@dataclass
class StreamLoop:
    """State shared by the streams of one level."""

    total_streams: int
    numbers: Iterator[int]
    stop_at: float = math.inf
    started: int = 0
    t_full: float | None = None
    full: anyio.Event = field(default_factory=anyio.Event)
    requests: list[RequestSample] = field(default_factory=list)

    def note_first_token(self) -> None:
        self.started += 1
        if self.started == self.total_streams:
            self.t_full = time.monotonic()
            self.full.set()


def chat_request(plan: LevelPlan, prompts: Prompts, target: Target, number: int) -> ChatRequest:
    return ChatRequest(
        messages=[{"role": "user", "content": prompts.prompt(number)}],
        max_tokens=prompts.cap(number) or plan.max_tokens,
        temperature=0.0,
        extra=target.extra,
        keep_token_times=True,
        tag=f"bench-{number}",
        endpoint=target.endpoint,
    )


def answered_any(loop: StreamLoop, name: str) -> bool:
    """Has the backend answered any request of this level? A flaky one is measured, failures counted; one
    that answers nothing ends the bench."""
    return any(sample.error is None and sample.backend == name for sample in loop.requests)


async def stream_worker(
    loop: StreamLoop,
    target: Target,
    plan: LevelPlan,
    prompts: Prompts,
    t0: float,
    watcher: BenchListener | None = None,
) -> None:
    """One closed-loop stream: a new request the moment the last one ends, until the window closes.
    A watcher (the live page) hears of each request and, if it wants them, its streamed pieces."""
    seen_first = False
    watching_text = watcher is not None and watcher.wants_deltas
    current = ""

    def on_delta(text: str) -> None:
        nonlocal seen_first
        if not seen_first:
            seen_first = True
            loop.note_first_token()
        if watching_text and watcher is not None:
            watcher.section_delta(current, text)

    await sleep_until(t0)
    failures = 0
    while time.monotonic() < loop.stop_at:
        number = next(loop.numbers)
        if watcher is not None:
            current = request_id(number)
            watcher.request_started(target.backend.name, number)
        request = chat_request(plan, prompts, target, number)
        sample = await send_request(target, request, number, plan.read_timeout, on_delta, keep_answer=plan.keep_answers)
        if watcher is not None:
            watcher.request_done(sample)
        loop.requests.append(sample)
        failures = failures + 1 if sample.error else 0
        if failures >= FAILURES_IN_A_ROW and not answered_any(loop, target.backend.name):
            raise BackendError(
                f"backend {target.backend.name}: {failures} bench requests failed in a row and none was answered "
                f"(last: {sample.error})"
            )
        if sample.error:
            await anyio.sleep(0.2)


async def open_window(loop: StreamLoop, plan: LevelPlan, t0: float, names: list[str]) -> tuple[float, float]:
    """Wait for full occupancy (every stream has a first token) and the warm-up; set and return the window."""
    with anyio.move_on_after(max(t0 - time.monotonic(), 0) + plan.ramp_limit_s):
        await loop.full.wait()
    if loop.t_full is None:
        loop.stop_at = time.monotonic()
        raise BackendError(
            f"{plan.streams} streams on {', '.join(names)}: only {loop.started} of "
            f"{loop.total_streams} got a first token within {plan.ramp_limit_s:.0f} s, so the "
            f"engine is not running them at once"
        )
    start = max(t0 + plan.warmup_s, loop.t_full)
    loop.stop_at = start + plan.window_s
    return start, loop.stop_at


def start_share(
    group: TaskGroup, loop: StreamLoop, counts: list[tuple[Target, int]], plan: LevelPlan,
    prompts: Prompts, t0: float,
) -> None:  # fmt: skip
    """One worker's share of a level's streams (so many a backend) started in `group`; a share of none is
    full at once, so it never holds the level's window back."""
    for target, count in counts:
        for _ in range(count):
            group.start_soon(stream_worker, loop, target, plan, prompts, t0)
    if loop.total_streams == 0:
        loop.t_full = t0
        loop.full.set()


async def local_streams(
    targets: list[Target],
    plan: LevelPlan,
    prompts: Prompts,
    t0: float,
    *,
    numbers: Iterator[int],
    watcher: BenchListener | None,
) -> ClosedResult:
    """Every stream of the level in this process; returns its requests and the window."""
    loop = StreamLoop(total_streams=plan.streams * len(targets), numbers=numbers)
    async with anyio.create_task_group() as streams:
        for target in targets:
            for _ in range(plan.streams):
                streams.start_soon(stream_worker, loop, target, plan, prompts, t0, watcher)
        window_start, window_end = await open_window(loop, plan, t0, [t.backend.name for t in targets])
    return ClosedResult(loop.requests, window_start, window_end)


async def run_level(
    session: aiohttp.ClientSession, runner: Runner, targets: list[Target], plan: LevelPlan, prompts: Prompts
) -> LevelRaw:
    """One level, sent by the runner (this process, or worker processes sharing one window)."""
    pairs = [(t.backend, t.info) for t in targets]
    start = await sample_all(session, pairs)
    samples: list[CounterSample] = []
    power: list[PowerSample] = []
    stop = anyio.Event()
    t0 = time.monotonic() + START_DELAY_S
    async with anyio.create_task_group() as samplers:
        samplers.start_soon(counter_loop, session, pairs, t0, plan.interval_s, stop, samples)
        samplers.start_soon(power_loop, t0, plan.interval_s, stop, power)
        sent = await runner.closed_level(targets, plan, prompts, t0)
        end = await settled_end(session, pairs, start, sent.requests)
        stop.set()
    return LevelRaw(
        streams=plan.streams,
        backends=[t.backend.name for t in targets],
        t0=t0,
        window_start=sent.window_start,
        window_end=sent.window_end,
        t_end=time.monotonic(),
        requests=sent.requests,
        samples=sorted(samples, key=lambda s: s.t),
        power=power,
        start=start,
        end=end,
    )
