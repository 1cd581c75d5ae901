"""What every level of one `fanout bench` run shares: the open fleet, the spec, the runner that sends the load
(which holds the request numbering and the watcher), the per-request rows being kept, and who hears of each
finished level. One record, so the studies pass one value down instead of six."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipeline.backends.fleet import Fleet
from pipeline.bench.load.runner import Runner
from pipeline.bench.report.requestrows import RowKeeper
from pipeline.records.bench import BenchSpec, RequestSample
from pipeline.watch.listeners import BenchListener

OnLevel = Callable[[str, Any], None]  # (series label, a LevelResult or an open-loop RatePoint)


@dataclass
class BenchRun:
    fleet: Fleet
    spec: BenchSpec
    runner: Runner
    rows: RowKeeper | None = None
    on_level: OnLevel | None = None

    @property
    def watcher(self) -> BenchListener | None:
        return self.runner.watcher

    @property
    def read_timeout(self) -> float:
        return self.fleet.pool.policy.read_timeout

    def keep(self, series: str, level: str, requests: list[RequestSample]) -> None:
        if self.rows is not None:
            self.rows.keep(series, level, requests)

    def level_done(self, label: str, result: Any) -> None:
        if self.on_level is not None:
            self.on_level(label, result)
