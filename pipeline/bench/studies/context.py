"""What every level of one `fanout bench` run shares: the open fleet, the spec, the runner that sends the load
(which holds the request numbering and the watcher), the per-request rows being kept, who hears of each
finished level, and the prefix cache's state as planned (the shared prefixes, which of them each backend has
cached, the cache emptied before a level with --reset-cache). One record, so the studies pass one value down
instead of eight."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipeline.backends.cachereset import reset_prefix_cache
from pipeline.backends.fleet import Fleet
from pipeline.bench.load.prompts import SharedPrefixes
from pipeline.bench.load.runner import Runner, Target
from pipeline.bench.report.answers import audit_answers
from pipeline.bench.report.cache import planned_prefix_hit_rate
from pipeline.bench.report.requestrows import RowKeeper
from pipeline.records import CacheResetDone
from pipeline.records.bench import AnswerAudit, BenchSpec, RequestSample
from pipeline.watch.listeners import BenchListener

OnLevel = Callable[[str, Any], None]  # (series label, a LevelResult or an open-loop RatePoint)


@dataclass
class BenchRun:
    fleet: Fleet
    spec: BenchSpec
    runner: Runner
    rows: RowKeeper | None = None
    on_level: OnLevel | None = None
    prefixes: SharedPrefixes | None = None
    prefixes_cached: set[tuple[str, int]] = field(default_factory=set)  # (backend, group) as planned

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

    async def empty_caches(self, targets: list[Target]) -> list[CacheResetDone]:
        """--reset-cache: every target's prefix cache emptied where its engine offers a way (said per backend)."""
        if not self.spec.reset_cache:
            return []
        done = [await reset_prefix_cache(self.fleet.session, t.backend, t.info) for t in targets]
        emptied = {d.backend for d in done if d.done}
        self.prefixes_cached = {key for key in self.prefixes_cached if key[0] not in emptied}
        return done

    def planned_hit_rate(self, requests: list[RequestSample]) -> float | None:
        if self.prefixes is None:
            return None
        return planned_prefix_hit_rate(requests, self.prefixes.tokens, self.prefixes.group, self.prefixes_cached)

    def audit(self, requests: list[RequestSample], targets: list[Target]) -> AnswerAudit | None:
        """--audit-answers: the level's answers flagged (before their rows are kept) and summed up."""
        if not self.spec.audit_answers:
            return None
        return audit_answers(requests, ignore_eos=any(t.extra.get("ignore_eos") for t in targets))
