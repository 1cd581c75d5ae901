"""The in-process runner: a level's requests sent from this process's event loop (the Runner of runner.py)."""

from __future__ import annotations

from collections.abc import Iterator

from pipeline.bench.load.closed import local_streams
from pipeline.bench.load.openloop import send_arrivals
from pipeline.bench.load.prompts import Prompts
from pipeline.bench.load.runner import ClosedResult, LevelPlan, Shard, ShardResult, Target
from pipeline.watch.listeners import BenchListener


class InProcessRunner:
    parts = 1

    def __init__(self, numbers: Iterator[int], watcher: BenchListener | None = None):
        self.numbers = numbers
        self.watcher = watcher

    async def closed_level(self, targets: list[Target], plan: LevelPlan, prompts: Prompts, t0: float) -> ClosedResult:
        return await local_streams(targets, plan, prompts, t0, numbers=self.numbers, watcher=self.watcher)

    async def open_level(self, shards: list[Shard], t0: float) -> list[ShardResult]:
        return [await send_arrivals(shard, t0, self.watcher) for shard in shards]
