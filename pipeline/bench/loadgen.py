"""The closed loop for one level: N streams per backend, every backend on one absolute schedule.

Takes the open session, the targets (backend, engine, extra body fields), a LevelPlan, the Prompts and
the run's request numbering; returns a LevelRaw. Every stream starts at t0; the window opens once every
stream has its first token and the warm-up has passed, and closes `window_s` later. Until then, the moment
a request finishes the stream starts a new, distinct one. Requests still running at the close finish (the
drain) so the engine's counter can be checked against the client's usage over the whole level. The
requests go straight to each backend, not through the pool: the pool would queue, and a ladder must
measure batching, not queueing. Counters and GPU power are sampled beside the load.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import aiohttp
import anyio

from pipeline.backends.chat import chat
from pipeline.backends.sse import AttemptError
from pipeline.bench.prompts import Prompts
from pipeline.bench.sampler import counter_loop, power_loop, sample_all, sleep_until
from pipeline.errors import BackendError
from pipeline.records import Backend, ChatRequest, Completion, EngineInfo
from pipeline.records.bench import CounterSample, LevelRaw, PowerSample, RequestSample
from pipeline.watch.listeners import BenchListener, request_id

if TYPE_CHECKING:
    from pipeline.bench.workers import WorkerPool

REASK_BEFORE_FIRST_BYTE = 5  # llama-server drops idle keep-alives: ask again at once, counted apart
FAILURES_IN_A_ROW = 5
START_DELAY_S = 0.2
SETTLE_S = 3.0  # llama-server adds to its counter a moment after a stream ends


@dataclass(frozen=True)
class Target:
    backend: Backend
    info: EngineInfo
    extra: dict  # engine-specific body fields (ignore_eos)


@dataclass(frozen=True)
class LevelPlan:
    streams: int
    window_s: float
    warmup_s: float
    max_tokens: int
    interval_s: float
    ramp_limit_s: float
    read_timeout: float


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
        max_tokens=plan.max_tokens,
        temperature=0.0,
        extra=target.extra,
        keep_token_times=True,
        tag=f"bench-{number}",
    )


def _sample(target: Target, number: int, t_sent: float, completion: Completion, reissued: int) -> RequestSample:
    return RequestSample(
        backend=target.backend.name,
        number=number,
        t_sent=t_sent,
        t_first=completion.t_first_token,
        t_done=completion.t_done,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
        chunks=completion.chunks,
        finish_reason=completion.finish_reason,
        reissued=reissued,
        token_times=completion.token_times,
    )


async def one_request(
    session: aiohttp.ClientSession | None, target: Target, plan: LevelPlan, prompts: Prompts, number: int, on_delta
) -> RequestSample:
    return await send_request(target, chat_request(plan, prompts, target, number), number, plan.read_timeout, on_delta)


async def send_request(
    target: Target, request: ChatRequest, number: int, read_timeout: float, on_delta=None
) -> RequestSample:
    """One request, asked again at once when the server closed the connection before the first byte."""
    t_sent = time.monotonic()
    error = "cut_before_first_byte"
    for reissued in range(REASK_BEFORE_FIRST_BYTE):
        try:
            completion = await chat(target.backend, request, read_timeout, on_delta)
        except AttemptError as failure:
            error = f"{failure.kind}: {failure.detail}"[:300]
            if failure.kind == "cut_before_first_byte":
                continue
            return RequestSample(
                backend=target.backend.name,
                number=number,
                t_sent=t_sent,
                t_done=time.monotonic(),
                reissued=reissued,
                error=error,
            )
        return _sample(target, number, t_sent, completion, reissued)
    return RequestSample(
        backend=target.backend.name,
        number=number,
        t_sent=t_sent,
        t_done=time.monotonic(),
        reissued=REASK_BEFORE_FIRST_BYTE,
        error=error,
    )


async def stream_worker(
    loop: StreamLoop,
    session: aiohttp.ClientSession | None,
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
        sample = await one_request(session, target, plan, prompts, number, on_delta)
        if watcher is not None:
            watcher.request_done(sample)
        loop.requests.append(sample)
        failures = failures + 1 if sample.error else 0
        if failures >= FAILURES_IN_A_ROW:
            raise BackendError(
                f"backend {target.backend.name}: {failures} bench requests failed in a row (last: {sample.error})"
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


async def settled_end(
    session: aiohttp.ClientSession, targets: list[Target], start: list[CounterSample], requests: list[RequestSample]
) -> list[CounterSample]:
    """Scrape until every counter has taken in the level's usage tokens (or SETTLE_S passes)."""
    wanted = {
        t.backend.name: sum(r.completion_tokens or 0 for r in requests if r.backend == t.backend.name) for t in targets
    }
    before = {s.backend: s.generated for s in start}
    deadline = time.monotonic() + SETTLE_S
    pairs = [(t.backend, t.info) for t in targets]
    while True:
        end = await sample_all(session, pairs)
        settled = all(
            s.generated is None or (was := before.get(s.backend)) is None or s.generated - was >= wanted[s.backend]
            for s in end
        )
        if settled or time.monotonic() > deadline:
            return end
        await anyio.sleep(0.05)


async def local_streams(
    session: aiohttp.ClientSession,
    targets: list[Target],
    plan: LevelPlan,
    prompts: Prompts,
    numbers: Iterator[int],
    t0: float,
    watcher: BenchListener | None,
) -> tuple[list[RequestSample], float, float]:
    """Every stream of the level in this process; returns its requests and the window."""
    loop = StreamLoop(total_streams=plan.streams * len(targets), numbers=numbers)
    async with anyio.create_task_group() as streams:
        for target in targets:
            for _ in range(plan.streams):
                streams.start_soon(stream_worker, loop, session, target, plan, prompts, t0, watcher)
        window_start, window_end = await open_window(loop, plan, t0, [t.backend.name for t in targets])
    return loop.requests, window_start, window_end


async def run_level(
    session: aiohttp.ClientSession,
    targets: list[Target],
    plan: LevelPlan,
    prompts: Prompts,
    numbers: Iterator[int],
    watcher: BenchListener | None = None,
    workers: WorkerPool | None = None,
) -> LevelRaw:
    """One level; with worker processes, their streams share one window (workers.py)."""
    pairs = [(t.backend, t.info) for t in targets]
    names = [t.backend.name for t in targets]
    start = await sample_all(session, pairs)
    samples: list[CounterSample] = []
    power: list[PowerSample] = []
    stop = anyio.Event()
    t0 = time.monotonic() + START_DELAY_S
    async with anyio.create_task_group() as samplers:
        samplers.start_soon(counter_loop, session, pairs, t0, plan.interval_s, stop, samples)
        samplers.start_soon(power_loop, t0, plan.interval_s, stop, power)
        if workers is None:
            requests, window_start, window_end = await local_streams(
                session, targets, plan, prompts, numbers, t0, watcher
            )
        else:
            requests, window_start, window_end = await workers.run_ladder(targets, plan, prompts, numbers, t0, watcher)
        end = await settled_end(session, targets, start, requests)
        stop.set()
    return LevelRaw(
        streams=plan.streams,
        backends=names,
        t0=t0,
        window_start=window_start,
        window_end=window_end,
        t_end=time.monotonic(),
        requests=requests,
        samples=sorted(samples, key=lambda s: s.t),
        power=power,
        start=start,
        end=end,
    )
