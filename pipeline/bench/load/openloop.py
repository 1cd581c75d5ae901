"""The open loop: requests arrive on a seeded schedule, independent of completions, as `vllm bench serve` sends them.

Takes the open session, the runner, the targets, a RatePlan and a Workload; returns a RateRaw (every request,
the engines' gauges sampled beside them). Arrivals: inter-arrival gaps drawn from a gamma distribution of shape
`burstiness` and mean 1 / rate (burstiness 1: a Poisson process; below 1 burstier, above 1 more regular),
vLLM's definition, seeded, over `duration_s` (or until `requests` have arrived). A replay keeps its own
arrival times (scaled by `speed`), or with speed 0 sends everything at once and lets the caps pace it.

Each arrival goes to the backend with the fewest requests in flight per slot. Nothing waits for a free
slot unless `max_concurrency` is set (then arrivals queue in the client, first come first served, and the
wait is recorded as each request's send delay) or `respect_caps` (a replay "as fast as the caps allow"):
past the engines' slots the engines queue, which the record labels as queueing.

An arrival with follow-up turns is a conversation: each later turn is sent when the answer before it is
in, to the same backend (where its prefix is cached), with the whole history (the answers as the engine
wrote them); a failed turn ends its conversation. With `stop_when_saturated` each shard runs the
over-saturation detector (saturation.py) and stops its arrivals once it fires; what was sent drains.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import aiohttp
import anyio

from pipeline.bench.load.runner import Arrival, RatePlan, Runner, Shard, ShardResult, Target, share
from pipeline.bench.load.sampler import counter_loop, sample_all, settled_end, sleep_until
from pipeline.bench.load.saturation import SaturationDetector
from pipeline.bench.load.send import START_DELAY_S, send_request
from pipeline.bench.load.workload import Work, Workload
from pipeline.records import ChatRequest
from pipeline.records.bench import CounterSample, RequestSample, SaturationCheck
from pipeline.watch.listeners import BenchListener, request_id


@dataclass
class RateRaw:
    plan: RatePlan
    backends: list[str]
    t0: float
    t_last_arrival: float
    t_end: float
    requests: list[RequestSample]
    samples: list[CounterSample]
    start: list[CounterSample]
    end: list[CounterSample]
    peak_in_flight: dict[str, int]
    saturation: SaturationCheck | None = None


def arrival_offsets(
    rate: float, burstiness: float, duration_s: float | None, count: int | None, seed: int
) -> list[float]:
    """Seconds after the level starts: gaps ~ Gamma(shape=burstiness, scale=1 / (rate * burstiness))."""
    if rate <= 0 or burstiness <= 0:
        raise ValueError("rate and burstiness must be positive")
    if duration_s is None and count is None:
        raise ValueError("an open-loop level needs a duration or a request count")
    rng = random.Random(seed)
    scale = 1.0 / (rate * burstiness)
    offsets: list[float] = []
    t = 0.0
    while count is None or len(offsets) < count:
        if duration_s is not None and t >= duration_s:
            break
        offsets.append(t)
        t += rng.gammavariate(burstiness, scale)
    return offsets


def replay_offsets(work: list[Work], speed: float) -> list[float]:
    first = min((w.offset_s or 0.0) for w in work) if work else 0.0
    if speed == 0:
        return [0.0] * len(work)
    return [((w.offset_s or 0.0) - first) / speed for w in work]


@dataclass
class Dispatcher:
    """Picks the backend with the fewest in flight per slot; with caps, waits until one has a free slot. A
    request asking `n` samples holds a slot a sample, as many as are free and at least one, as the book's pool
    counts it (pipeline/backends/pool/admission.py): an engine runs each sample as its own sequence."""

    targets: list[Target]
    slots: dict[str, int]
    caps: dict[str, int] | None
    in_flight: dict[str, int] = field(default_factory=dict)
    peak: dict[str, int] = field(default_factory=dict)
    freed: anyio.Condition = field(default_factory=anyio.Condition)

    def __post_init__(self) -> None:
        for target in self.targets:
            self.in_flight[target.backend.name] = self.peak[target.backend.name] = 0

    def _open(self) -> list[Target]:
        if self.caps is None:
            return self.targets
        return [t for t in self.targets if self.in_flight[t.backend.name] < self.caps[t.backend.name]]

    def _choices(self, pinned: Target | None) -> list[Target]:
        return self._open() if pinned is None else [t for t in self._open() if t.backend.name == pinned.backend.name]

    @property
    def total_in_flight(self) -> int:
        return sum(self.in_flight.values())

    async def acquire(self, pinned: Target | None = None, *, samples: int = 1) -> tuple[Target, int]:
        """The least loaded open backend, or `pinned` (a conversation's) once it is open, and the slots the
        request holds there."""
        async with self.freed:
            while not self._choices(pinned):
                await self.freed.wait()
            target = min(
                self._choices(pinned), key=lambda t: self.in_flight[t.backend.name] / self.slots[t.backend.name]
            )
            name = target.backend.name
            free = samples if self.caps is None else self.caps[name] - self.in_flight[name]
            held = max(1, min(samples, free))
            self.in_flight[name] += held
            self.peak[name] = max(self.peak[name], self.in_flight[name])
            return target, held

    async def release(self, target: Target, held: int = 1) -> None:
        async with self.freed:
            self.in_flight[target.backend.name] -= held
            self.freed.notify(held)


def request_of(work: Work, target: Target, number: int, *, greedy: bool) -> ChatRequest:
    extra = {**target.extra, **work.extra} if greedy else {**work.extra}
    temperature = float(extra.pop("temperature", 0.0))
    return ChatRequest(
        messages=work.messages,
        max_tokens=work.max_tokens,
        temperature=temperature,
        extra=extra,
        keep_token_times=True,
        tag=f"bench-{number}",
        endpoint=target.endpoint,
        choices=work.choices,
    )


@dataclass
class _Sender:
    shard: Shard
    dispatcher: Dispatcher
    limiter: anyio.CapacityLimiter | None
    watcher: BenchListener | None
    detector: SaturationDetector | None = None
    requests: list[RequestSample] = field(default_factory=list)

    async def send(self, work: Work, number: int, t_scheduled: float) -> None:
        if self.limiter is None:
            await self._conversation(work, number, t_scheduled)
            return
        async with self.limiter:
            await self._conversation(work, number, t_scheduled)

    async def _conversation(self, work: Work, number: int, t_scheduled: float) -> None:
        """One request, or a conversation's turns one after another on the backend of its first."""
        turns: list[tuple[int, int, str | None]] = [(number, work.max_tokens, None)]
        turns += [(n, cap, message) for n, (message, cap) in zip(work.turn_numbers, work.follow_ups)]
        history, pinned = list(work.messages), None
        for index, (turn_number, cap, message) in enumerate(turns, 1):
            if message is not None:
                history = [*history, {"role": "user", "content": message}]
            last = index == len(turns)
            turn = replace(work, messages=history, max_tokens=cap)
            keep = self.shard.keep_answers or not last
            sample, pinned = await self._send(turn, turn_number, t_scheduled, pinned, keep_answer=keep)
            if work.follow_ups:
                sample.turn = index
            if sample.error is not None or last:
                return
            history = [*history, {"role": "assistant", "content": sample.answer or ""}]
            t_scheduled = time.monotonic()

    async def _send(
        self, work: Work, number: int, t_scheduled: float, pinned: Target | None, *, keep_answer: bool
    ) -> tuple[RequestSample, Target]:
        target, held = await self.dispatcher.acquire(pinned, samples=work.choices)
        try:
            if self.watcher is not None:
                self.watcher.request_started(target.backend.name, number)
            request = request_of(work, target, number, greedy=self.shard.greedy)
            sample = await send_request(
                target, request, number, self.shard.read_timeout, self._deltas(number), keep_answer=keep_answer
            )
        finally:
            await self.dispatcher.release(target, held)
        sample.t_scheduled = t_scheduled
        self.requests.append(sample)
        if self.detector is not None and sample.t_first is not None and sample.ttft is not None:
            self.detector.first_token(sample.t_first, sample.ttft)
        if self.watcher is not None:
            self.watcher.request_done(sample)
        return sample, target

    def _deltas(self, number: int):
        watcher = self.watcher
        if watcher is None or not watcher.wants_deltas:
            return None
        current = request_id(number)
        return lambda text: watcher.section_delta(current, text)


async def send_arrivals(shard: Shard, t0: float, watcher: BenchListener | None = None) -> ShardResult:
    """Every arrival of the shard sent at t0 + its offset (or later, held by a cap); every answer awaited.
    With the saturation detector on, the arrivals stop once it fires."""
    dispatcher = Dispatcher(shard.targets, shard.slots, shard.caps)
    limiter = anyio.CapacityLimiter(shard.max_concurrency) if shard.max_concurrency else None
    detector = SaturationDetector(t0) if shard.stop_when_saturated else None
    sender = _Sender(shard, dispatcher, limiter, watcher, detector)
    saturated, arrivals_over = anyio.Event(), anyio.Event()
    verdict: list[SaturationCheck] = []
    async with anyio.create_task_group() as senders:
        if detector is not None:
            senders.start_soon(
                watch_saturation, detector, dispatcher, shard.interval_s, arrivals_over, saturated, verdict
            )
        for offset, number, work in shard.arrivals:
            if detector is None:
                await sleep_until(t0 + offset)
            else:
                with anyio.move_on_after(max(0.0, t0 + offset - time.monotonic())):
                    await saturated.wait()
                if saturated.is_set():
                    break
            senders.start_soon(sender.send, work, number, t0 + offset)
        arrivals_over.set()
    return ShardResult(sender.requests, dispatcher.peak, verdict[-1] if verdict else None)


async def watch_saturation(
    detector: SaturationDetector,
    dispatcher: Dispatcher,
    interval: float,
    arrivals_over: anyio.Event,
    saturated: anyio.Event,
    verdict: list[SaturationCheck],
) -> None:
    """Sample the requests in flight every `interval` and judge, until the arrivals are over or it fires."""
    while not arrivals_over.is_set():
        with anyio.move_on_after(interval):
            await arrivals_over.wait()
        now = time.monotonic()
        detector.in_flight(now, dispatcher.total_in_flight)
        verdict[:] = [detector.check(now)]
        if verdict[0].saturated:
            verdict[0].stopped_at_s = round(now - detector.t0, 3)
            saturated.set()
            return


def split(total: int | None, parts: int, index: int) -> int | None:
    """A limit's share: at least 1, so no part is shut; None (no limit) stays None."""
    return None if total is None else max(1, share(total, parts, index))


def shards(targets: list[Target], slots: dict[str, int], plan: RatePlan, *, greedy: bool, arrivals: list[Arrival],
           parts: int) -> list[Shard]:  # fmt: skip
    """Arrivals dealt round-robin; each part holds its share of every cap and of the client limit."""
    caps = {t.backend.name: t.cap for t in targets} if plan.respect_caps else None
    return [
        Shard(
            targets=targets,
            slots=slots,
            caps=None if caps is None else {name: split(cap, parts, i) or 1 for name, cap in caps.items()},
            max_concurrency=split(plan.max_concurrency, parts, i),
            greedy=greedy,
            read_timeout=plan.read_timeout,
            arrivals=arrivals[i::parts],
            stop_when_saturated=plan.stop_when_saturated,
            interval_s=plan.interval_s,
            keep_answers=plan.keep_answers,
        )
        for i in range(parts)
    ]


def schedule(plan: RatePlan, workload: Workload, numbers: Iterator[int]) -> list[Arrival]:
    """(offset, request number, work) for every arrival of the level, in time order."""
    if plan.rate is None:
        work = [workload.item(n) for n in range(1, (plan.requests or 0) + 1)]
        return [(offset, next(numbers), w) for offset, w in zip(replay_offsets(work, plan.speed), work)]
    offsets = arrival_offsets(plan.rate, plan.burstiness, plan.duration_s, plan.requests, plan.seed)
    arrivals = []
    for offset in offsets:
        number = next(numbers)
        item = workload.item(number)
        if item.follow_ups:  # a conversation: its later turns numbered now, after its first
            item = replace(item, turn_numbers=tuple(next(numbers) for _ in item.follow_ups))
        arrivals.append((offset, number, item))
    return arrivals


async def run_rate(
    session: aiohttp.ClientSession,
    runner: Runner,
    targets: list[Target],
    slots: dict[str, int],
    plan: RatePlan,
    workload: Workload,
) -> RateRaw:
    """One open-loop level: every arrival sent at its time, then every answer awaited (the drain). The
    arrivals are dealt among the runner's parts; this process samples the counters."""
    pairs = [(t.backend, t.info) for t in targets]
    start = await sample_all(session, pairs)
    arrivals = schedule(plan, workload, runner.numbers)
    parts = shards(targets, slots, plan, greedy=workload.greedy, arrivals=arrivals, parts=runner.parts)
    samples: list[CounterSample] = []
    stop = anyio.Event()
    t0 = time.monotonic() + START_DELAY_S
    async with anyio.create_task_group() as samplers:
        samplers.start_soon(counter_loop, session, pairs, t0, plan.interval_s, stop, samples)
        results = await runner.open_level(parts, t0)
        requests = [r for result in results for r in result.requests]
        end = await settled_end(session, pairs, start, requests)
        stop.set()
    return RateRaw(
        plan=plan,
        backends=[t.backend.name for t in targets],
        t0=t0,
        t_last_arrival=t0 + (arrivals[-1][0] if arrivals else 0.0),
        t_end=time.monotonic(),
        requests=sorted(requests, key=lambda r: r.number),
        samples=sorted(samples, key=lambda s: s.t),
        start=start,
        end=end,
        peak_in_flight={
            t.backend.name: sum(r.peak_in_flight[t.backend.name] for r in results) for t in targets
        },  # one process: the peak; several: the sum of their peaks (an upper bound)
        saturation=first_verdict(results),
    )


def first_verdict(results: list[ShardResult]) -> SaturationCheck | None:
    """The verdict of the first shard that fired, else the first shard's last one."""
    verdicts = [r.saturation for r in results if r.saturation is not None]
    return next((v for v in verdicts if v.saturated), verdicts[0] if verdicts else None)
