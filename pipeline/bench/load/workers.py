"""Bench load from more than one process (`--workers N`): one client process holds about 76k tok/s of
engine-like pacing (the ceiling bench), so a bigger fleet needs its streams sharded.

Takes the worker count; gives a pool of N spawned processes (each its own event loop, uvloop where
installed) kept for the whole bench. For an open-loop level each worker gets a Shard (its arrivals dealt
round-robin, its share of every cap and of the client limit) and returns its requests. For a ladder level
each worker runs its share of every backend's streams, numbered apart (worker i of N: base + i, base + i +
N, ...); it says when all of its streams have a first token, the parent opens one window for all of them
on the shared monotonic clock (CLOCK_MONOTONIC is system-wide on Linux) and sends its end; the workers
drain and return their requests. The parent samples the engines' counters and computes every figure from
the merged requests, so the counts are exactly those one process would report. What a watcher (the live
page) hears of the requests arrives when a worker's level ends, not as they stream.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any

import anyio

from pipeline.backends.processes import Processes
from pipeline.bench.load.closed import StreamLoop, start_share
from pipeline.bench.load.openloop import send_arrivals
from pipeline.bench.load.prompts import Prompts
from pipeline.bench.load.runner import ClosedResult, LevelPlan, Shard, ShardResult, Target, share
from pipeline.errors import BackendError, FanoutError
from pipeline.records.bench import RequestSample
from pipeline.watch.listeners import BenchListener


class WorkerPool:
    """The worker-process runner (the Runner of runner.py), kept for the whole bench."""

    def __init__(self, count: int, numbers: Iterator[int], watcher: BenchListener | None = None):
        self.parts = count
        self.numbers = numbers
        self.watcher = watcher
        self.processes = Processes(count, worker_main, "bench worker")
        self.connections: list[Connection] = []

    def __enter__(self) -> WorkerPool:
        self.connections = self.processes.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.processes.stop()

    async def receive(self, connection: Connection) -> Any:
        try:
            message = await anyio.to_thread.run_sync(connection.recv)
        except (EOFError, OSError):
            raise FanoutError("a bench worker process ended before its level did") from None
        if isinstance(message, tuple) and message and message[0] == "error":
            raise FanoutError(f"bench worker: {message[1]}")
        return message

    async def gather(self) -> list[Any]:
        """Every worker's ("done", result), passing over a late ("full", t) of a ladder that gave up waiting."""
        results: list[Any] = [None] * self.parts

        async def one(index: int) -> None:
            message = await self.receive(self.connections[index])
            while message[0] != "done":
                message = await self.receive(self.connections[index])
            results[index] = message

        async with anyio.create_task_group() as group:
            for index in range(self.parts):
                group.start_soon(one, index)
        return results

    async def open_level(self, shards: list[Shard], t0: float) -> list[ShardResult]:
        for connection, shard in zip(self.connections, shards):
            connection.send(("open", shard, t0))
        results: list[ShardResult] = [message[1] for message in await self.gather()]
        tell(self.watcher, [r for result in results for r in result.requests])
        return results

    async def closed_level(self, targets: list[Target], plan: LevelPlan, prompts: Prompts, t0: float) -> ClosedResult:
        """Every worker's streams on one window; returns the merged requests and the window."""
        base = next(self.numbers)
        for index, connection in enumerate(self.connections):
            streams = [(t, share(plan.streams, self.parts, index)) for t in targets]
            connection.send(("ladder", streams, plan, prompts, base + index, self.parts, t0))
        fulls = await self.first_tokens(t0 + plan.ramp_limit_s)
        window = level_window(fulls, time.monotonic(), t0, plan)
        for connection in self.connections:
            connection.send(window[1])
        requests = [r for message in await self.gather() for r in message[1]]
        return finish_level(self.numbers, self.watcher, targets, plan, requests, base, window)

    async def first_tokens(self, deadline: float) -> list[float | None]:
        """Each worker's moment of full occupancy, None for one that did not get there by the deadline."""
        fulls: list[float | None] = [None] * self.parts

        async def one(index: int) -> None:
            with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                while not await anyio.to_thread.run_sync(self.connections[index].poll, 0.2):
                    pass
                message = await self.receive(self.connections[index])
                fulls[index] = message[1]

        async with anyio.create_task_group() as group:
            for index in range(self.parts):
                group.start_soon(one, index)
        return fulls


def level_window(
    fulls: list[float | None], now: float, t0: float, plan: LevelPlan
) -> tuple[float, float, float | None]:
    """(start, end, full occupancy) of a ladder level run from several workers: the window opens once every
    worker is full and the warm-up has passed; a worker that never got full closes it at once (full None)."""
    full = None if None in fulls else max(f for f in fulls if f is not None)
    start = now if full is None else max(t0 + plan.warmup_s, full)
    return start, now if full is None else start + plan.window_s, full


def finish_level(
    numbers: Iterator[int],
    watcher: BenchListener | None,
    targets: list[Target],
    plan: LevelPlan,
    requests: list[RequestSample],
    base: int,
    window: tuple[float, float, float | None],
) -> ClosedResult:
    """A multi-worker ladder level's end: the numbering moved past every worker's, the watcher told, and a
    level that never reached full occupancy refused (after its requests were kept)."""
    start, end, full = window
    advance(numbers, max((r.number for r in requests), default=base))
    tell(watcher, requests)
    if full is None:
        raise BackendError(
            f"{plan.streams} streams on {', '.join(t.backend.name for t in targets)}: not every stream got "
            f"a first token within {plan.ramp_limit_s:.0f} s, so the engine is not running them at once"
        )
    return ClosedResult(requests, start, end)


def advance(numbers: Iterator[int], past: int) -> None:
    """Move the run's request numbering beyond every number a worker used."""
    for number in numbers:
        if number >= past:
            return


def tell(watcher: BenchListener | None, requests: list[RequestSample]) -> None:
    if watcher is None:
        return
    for request in sorted(requests, key=lambda r: r.t_sent):
        watcher.request_started(request.backend, request.number)
        watcher.request_done(request)


# ---------------------------------------------------------------- in the worker process


def worker_main(connection: Connection) -> None:
    from pipeline.backends.loop import fast_loop

    connection.send("ready")
    with fast_loop():
        while True:
            task = connection.recv()
            if task is None:
                return
            try:
                result = anyio.run(HANDLERS[task[0]], connection, *task[1:])
            except Exception as exc:  # told to the parent, which raises it there
                connection.send(("error", f"{type(exc).__name__}: {exc}"))
                continue
            connection.send(("done", result))


async def open_loop_task(connection: Connection, shard: Shard, t0: float) -> ShardResult:
    return await send_arrivals(shard, t0)


async def ladder_task(
    connection: Connection,
    counts: list[tuple[Target, int]],  # streams of each backend this worker runs
    plan: LevelPlan,
    prompts: Prompts,
    first_number: int,
    step: int,
    t0: float,
) -> list[RequestSample]:
    loop = StreamLoop(total_streams=sum(n for _, n in counts), numbers=itertools.count(first_number, step))

    async def report_full() -> None:
        await loop.full.wait()
        await anyio.to_thread.run_sync(connection.send, ("full", loop.t_full))

    async with anyio.create_task_group() as streams:
        streams.start_soon(report_full)
        start_share(streams, loop, counts, plan, prompts, t0)
        loop.stop_at = await anyio.to_thread.run_sync(connection.recv)
        if not loop.full.is_set():
            streams.cancel_scope.cancel()
    return loop.requests


HANDLERS: dict[str, Callable[..., Awaitable[Any]]] = {"open": open_loop_task, "ladder": ladder_task}
