"""Where a bench ran, as its records say it: the host (CPU, memory, GPUs, load, versions), each backend's engine
and how many sequences it runs at once, the command and its start, the saved runs a merged report was made
from, and the Ray cluster its workers ran on with each actor's clock. bench/report/provenance.py measures the
host; bench/studies/ladder.py fills the backends; records/bench.py's BenchRecord holds them."""

from __future__ import annotations

from pydantic import BaseModel, Field


class GpuInfo(BaseModel):
    name: str
    memory_mib: float | None = None


class HostInfo(BaseModel):
    cpu_model: str
    cores: int
    ram_gib: float
    gpus: list[GpuInfo]
    loadavg_start: list[float]
    loadavg_end: list[float] = Field(default_factory=list)
    platform: str
    python: str
    fanout_version: str


class BackendInfo(BaseModel):
    name: str
    base_url: str
    engine: str
    version: str | None
    model: str | None
    slots: int
    slots_source: str  # "engine (/props)" or "--engine-slots"
    cap: int
    counts_per_step: bool
    has_metrics: bool
    ignore_eos: bool
    tokenizer: str | None = None  # how --prompt-tokens counted
    embedded: dict[str, int] | None = None  # slots, threads, ctx_per_slot of the embedded engine


class Provenance(BaseModel):
    host: HostInfo
    backends: list[BackendInfo]
    started_at: str  # wall clock, ISO 8601 UTC
    duration_s: float = 0.0
    command: list[str] = Field(default_factory=list)


class MergedRun(BaseModel):
    """One saved run a merged report was made from."""

    folder: str
    label: str
    provenance: Provenance


class ActorClock(BaseModel):
    """One Ray worker's clock against the driver's (bench/load/raypool.py measures it)."""

    node: str
    offset_s: float  # the actor's monotonic clock minus the driver's at the same instant
    uncertainty_ms: float  # half the tightest round trip


class RayInfo(BaseModel):
    """What the record says of the cluster a bench ran its workers on (--ray)."""

    address: str  # "local" for an instance started for the run
    nodes: int
    actors: list[ActorClock]
    start_seconds: float  # connecting (or starting) Ray and the actors, clocks measured

    @property
    def worst_uncertainty_ms(self) -> float:
        return max((a.uncertainty_ms for a in self.actors), default=0.0)
