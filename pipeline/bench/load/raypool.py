"""Bench load from Ray actors (`--workers N --ray [ADDRESS]`): the worker-process runner's job (workers.py)
spread over a cluster, for a fleet that serves more than one client machine can read.

Ray (an optional extra: pip install 'fanout[ray]') runs fanout's asyncio client as it is: each worker is an
async actor (one CPU, spread over the nodes) that sends an open-loop Shard with `send_arrivals` or runs its
share of a ladder level's streams with the closed loop's `stream_worker`, exactly as a worker process does,
and returns its RequestSamples; the driver computes every figure from the merged rows. `ADDRESS` (or
RAY_ADDRESS) joins a running cluster (`ray start --head` on one machine, `ray start --address HEAD:6379`
on the others); without one a local Ray instance is started for the run and stopped after it.

Clocks: actors on other machines do not share the driver's monotonic clock. At start the driver asks each
actor for its clock CLOCK_ROUNDS times and keeps the round trip with the least delay: offset = actor time −
the round trip's midpoint, uncertain by half that round trip. Every time sent to an actor (a level's t0, a
window's end) is put on its clock and every time it returns is put back on the driver's; the record keeps
each actor's node, offset and uncertainty. A level's window is the driver's.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio

from pipeline.backends.raycluster import connect
from pipeline.bench.load.closed import StreamLoop, start_share
from pipeline.bench.load.openloop import send_arrivals
from pipeline.bench.load.prompts import Prompts
from pipeline.bench.load.runner import ClosedResult, LevelPlan, Shard, ShardResult, Target, share
from pipeline.bench.load.workers import finish_level, level_window, tell
from pipeline.errors import FanoutError
from pipeline.records.bench import RequestSample
from pipeline.records.provenance import ActorClock, RayInfo
from pipeline.watch.listeners import BenchListener

CLOCK_ROUNDS = 9


def shifted(sample: RequestSample, offset: float) -> RequestSample:
    """A sample from an actor's clock put on the driver's."""

    def back(t: float | None) -> float | None:
        return None if t is None else t - offset

    return sample.model_copy(
        update={
            "t_sent": sample.t_sent - offset,
            "t_scheduled": back(sample.t_scheduled),
            "t_first": back(sample.t_first),
            "t_done": back(sample.t_done),
            "token_times": [t - offset for t in sample.token_times],
        }
    )


class BenchActor:
    """One worker on the cluster: the same closed and open loops a worker process runs."""

    def __init__(self) -> None:
        self.loop: StreamLoop | None = None
        self.streams: asyncio.Task | None = None

    async def clock(self) -> tuple[float, str]:
        import ray

        return time.monotonic(), ray.get_runtime_context().get_node_id()

    async def open_level(self, shard: Shard, t0: float) -> ShardResult:
        return await send_arrivals(shard, t0)

    async def ladder_start(
        self, counts: list[tuple[Target, int]], plan: LevelPlan, prompts: Prompts, first: int, step: int, t0: float
    ) -> None:
        self.loop = StreamLoop(total_streams=sum(n for _, n in counts), numbers=itertools.count(first, step))
        self.streams = asyncio.create_task(run_streams(self.loop, counts, plan, prompts, t0))

    async def ladder_full(self) -> float | None:
        assert self.loop is not None, "ladder_start comes first"
        await self.loop.full.wait()
        return self.loop.t_full

    async def ladder_end(self, stop_at: float) -> list[RequestSample]:
        assert self.loop is not None and self.streams is not None, "ladder_start comes first"
        self.loop.stop_at = stop_at
        if not self.loop.full.is_set():
            self.streams.cancel()
        try:
            await self.streams
        except asyncio.CancelledError:
            pass
        return self.loop.requests


async def run_streams(loop: StreamLoop, counts: list[tuple[Target, int]], plan: LevelPlan, prompts: Prompts,
                      t0: float) -> None:  # fmt: skip
    async with anyio.create_task_group() as streams:
        start_share(streams, loop, counts, plan, prompts, t0)


@dataclass
class Actor:
    handle: Any  # a Ray actor handle
    clock: ActorClock


class RayPool:
    """The Ray runner (the Runner of runner.py), kept for the whole bench."""

    def __init__(self, count: int, numbers: Iterator[int], watcher: BenchListener | None = None, *,
                 address: str | None = None):  # fmt: skip
        self.parts = count
        self.numbers = numbers
        self.watcher = watcher
        self.address = address
        self.actors: list[Actor] = []
        self.info: RayInfo | None = None

    async def __aenter__(self) -> RayPool:
        started = time.monotonic()
        ray = connect(self.address, self.parts)
        remote = ray.remote(num_cpus=1, scheduling_strategy="SPREAD")(BenchActor)
        handles = [remote.remote() for _ in range(self.parts)]
        self.actors = [Actor(handle, await measure_clock(handle)) for handle in handles]
        self.info = RayInfo(
            address=self.address or os.environ.get("RAY_ADDRESS") or "local",
            nodes=len(ray.nodes()),
            actors=[a.clock for a in self.actors],
            start_seconds=round(time.monotonic() - started, 2),
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor.handle)
        ray.shutdown()

    async def open_level(self, shards: list[Shard], t0: float) -> list[ShardResult]:
        results = await gather(
            [a.handle.open_level.remote(s, t0 + a.clock.offset_s) for a, s in zip(self.actors, shards)]
        )
        merged = [
            ShardResult(
                [shifted(r, a.clock.offset_s) for r in result.requests], result.peak_in_flight, result.saturation
            )
            for a, result in zip(self.actors, results)
        ]
        tell(self.watcher, [r for result in merged for r in result.requests])
        return merged

    async def closed_level(self, targets: list[Target], plan: LevelPlan, prompts: Prompts, t0: float) -> ClosedResult:
        base = next(self.numbers)
        starts = []
        for index, actor in enumerate(self.actors):
            counts = [(t, share(plan.streams, self.parts, index)) for t in targets]
            starts.append(actor.handle.ladder_start.remote(counts, plan, prompts, base + index, self.parts,
                                                           t0 + actor.clock.offset_s))  # fmt: skip
        await gather(starts)
        fulls = await self.first_tokens(t0 + plan.ramp_limit_s)
        window = level_window(fulls, time.monotonic(), t0, plan)
        ends = [a.handle.ladder_end.remote(window[1] + a.clock.offset_s) for a in self.actors]
        requests = [shifted(r, a.clock.offset_s) for a, got in zip(self.actors, await gather(ends)) for r in got]
        return finish_level(self.numbers, self.watcher, targets, plan, requests, base, window)

    async def first_tokens(self, deadline: float) -> list[float | None]:
        fulls: list[float | None] = [None] * self.parts

        async def one(index: int) -> None:
            actor = self.actors[index]
            with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                t_full = await actor.handle.ladder_full.remote()
                fulls[index] = None if t_full is None else t_full - actor.clock.offset_s

        async with anyio.create_task_group() as group:
            for index in range(self.parts):
                group.start_soon(one, index)
        return fulls


async def measure_clock(handle: Any) -> ActorClock:
    """The actor's clock against ours from the tightest of CLOCK_ROUNDS round trips."""
    best: tuple[float, float, str] | None = None  # (round trip, offset, node)
    for _ in range(CLOCK_ROUNDS):
        sent = time.monotonic()
        theirs, node = await handle.clock.remote()
        back = time.monotonic()
        trip = back - sent
        if best is None or trip < best[0]:
            best = (trip, theirs - (sent + back) / 2, node)
    assert best is not None
    return ActorClock(node=best[2], offset_s=best[1], uncertainty_ms=round(1000 * best[0] / 2, 3))


async def gather(refs: list[Any]) -> list[Any]:
    """Every Ray call's answer; an actor or node that died is a FanoutError naming it."""
    try:
        return list(await asyncio.gather(*refs))
    except Exception as exc:
        if type(exc).__name__ in ("RayActorError", "ActorDiedError", "NodeDiedError", "ActorUnavailableError"):
            raise FanoutError(f"a bench worker on the cluster was lost: {type(exc).__name__}") from None
        raise
