"""The plans of one bench level and the Runner interface that sends them.

A Target is one backend as the bench sends to it; a LevelPlan one closed-loop level, a RatePlan one
open-loop level, a Shard one process's part of an open-loop level. A Runner sends a level's requests: the
in-process runner (local.py) from this process, the worker-process runner (workers.py) from N spawned
processes; a cluster runner would implement the same two methods. The runner holds the run's request
numbering and its watcher (the live page), so every level numbers its requests apart and is watched alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pipeline.records import Backend, Endpoint, EngineInfo
from pipeline.records.bench import RequestSample, SaturationCheck
from pipeline.watch.listeners import BenchListener

if TYPE_CHECKING:
    from pipeline.bench.load.prompts import Prompts
    from pipeline.bench.load.workload import Work


@dataclass(frozen=True)
class Target:
    backend: Backend
    info: EngineInfo
    extra: dict  # engine-specific body fields (ignore_eos)
    cap: int  # the effective cap: the pool's, after the open-file limit (backend.cap is only the configured one)
    endpoint: Endpoint = Endpoint.CHAT  # where its requests go: chat or text completions


@dataclass(frozen=True)
class LevelPlan:
    streams: int
    window_s: float
    warmup_s: float
    max_tokens: int
    interval_s: float
    ramp_limit_s: float
    read_timeout: float
    keep_answers: bool = False  # keep each answer's text in its sample (--audit-answers)


@dataclass(frozen=True)
class RatePlan:
    rate: float | None  # requests per second offered; None: the workload's own times (a replay)
    burstiness: float
    duration_s: float | None
    requests: int | None  # stop after this many arrivals (a replay: its request count)
    max_concurrency: int | None
    seed: int
    interval_s: float
    read_timeout: float
    speed: float = 1.0  # a replay's time scale: 2 runs it twice as fast; 0 sends all at once
    respect_caps: bool = False
    stop_when_saturated: bool = False  # stop the arrivals once the level over-saturates (saturation.py)
    keep_answers: bool = False  # keep each answer's text in its sample (--audit-answers)


Arrival = tuple[float, int, "Work"]  # (seconds after t0, request number, what to send)


@dataclass(frozen=True)
class Shard:
    """One process's part of an open-loop level: its arrivals, and its share of the caps and the client limit."""

    targets: list[Target]
    slots: dict[str, int]
    caps: dict[str, int] | None
    max_concurrency: int | None
    greedy: bool
    read_timeout: float
    arrivals: list[Arrival]
    stop_when_saturated: bool = False
    interval_s: float = 0.5  # how often the saturation detector samples the requests in flight
    keep_answers: bool = False


@dataclass
class ShardResult:
    requests: list[RequestSample]
    peak_in_flight: dict[str, int]
    saturation: SaturationCheck | None = None  # the detector's last verdict, where it ran


@dataclass
class ClosedResult:
    """A closed-loop level as sent: every request, and the window every stream shared."""

    requests: list[RequestSample]
    window_start: float
    window_end: float


class Runner(Protocol):
    parts: int  # processes the load is sent from; an open-loop level is dealt into this many shards
    numbers: Iterator[int]  # the run's request numbering
    watcher: BenchListener | None

    async def closed_level(self, targets: list[Target], plan: LevelPlan, prompts: Prompts, t0: float) -> ClosedResult:
        """Every stream of a closed-loop level from t0; the window opens once every stream has a first token."""
        ...

    async def open_level(self, shards: list[Shard], t0: float) -> list[ShardResult]:
        """Every shard's arrivals sent at t0 + their offsets; one result a shard."""
        ...


def share(total: int, parts: int, index: int) -> int:
    """Part `index` of `total` shared as evenly as whole numbers allow (the first ones take the remainder)."""
    base, extra = divmod(total, parts)
    return base + (index < extra)
