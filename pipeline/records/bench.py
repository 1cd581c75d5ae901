"""Typed records of the bench: what was asked (BenchSpec), what was sampled (raw counter, power and request
samples), what was derived (LadderPoint per backend and for the total, Fit), and the whole run
(BenchRecord, with its Provenance). Times are time.monotonic seconds unless a name says otherwise; every
figure that could come from more than one place carries a `*_source` label saying where it came from."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import ClassVar

from pydantic import BaseModel, Field, field_validator

from pipeline.records import CacheResetDone, Endpoint
from pipeline.records.provenance import MergedRun, Provenance, RayInfo

SLO_METRICS = {"ttft": "ttft", "tpot": "tpot", "e2e": "e2el", "e2el": "e2el"}


class CpuUse(BaseModel):
    """CPU seconds spent over `seconds` of wall time (pipeline/cpu.py): the client's, by stage; its child
    processes'; each backend's server where it runs on this machine (None: elsewhere, or inside the client)."""

    seconds: float
    client: float
    by_stage: dict[str, float]
    children: float
    backends: dict[str, float | None]


class Distribution(BaseModel):
    """One latency figure over many values, in milliseconds."""

    count: int
    mean_ms: float | None
    median_ms: float | None
    percentiles_ms: dict[str, float | None] = Field(default_factory=dict)  # "p99" -> ms
    std_ms: float | None = None  # population standard deviation (numpy's np.std, as vLLM's std_*_ms)

    def at(self, q: float) -> float | None:
        return self.percentiles_ms.get(percentile_key(q))


class Goodput(BaseModel):
    slo_ms: dict[str, float]  # "ttft", "tpot", "e2el" -> limit in ms
    good: int
    requests: int  # every request of the scope, failed ones included
    share: float | None
    rate: float | None  # good requests per second of `duration_s`
    duration_s: float | None


class LatencySummary(BaseModel):
    scope: str  # which requests, in words
    requests: int
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2el: Distribution
    goodput: Goodput | None = None
    source: str = "client clock (time.monotonic at send and at each content event); output tokens: engine usage"


def percentile_key(q: float) -> str:
    return f"p{q:g}"


MIN_WINDOW_S = 2.0  # a best second needs a 1-second span inside the window, with samples every 0.5 s


class BenchSpec(BaseModel):
    """The ladder asked for. `streams` are per backend: with three backends, level 8 is 24 streams."""

    streams: list[int]
    window_s: float = Field(default=40.0, gt=0)
    warmup_s: float = Field(default=3.0, ge=0)
    max_tokens: int = Field(default=512, gt=0)
    prompt_tokens: int | None = Field(default=None, gt=0)
    label: str = "bench"
    compare: bool = False  # each backend its own labelled series (side by side) instead of one summed fleet
    engine_slots: dict[str, int] = Field(default_factory=dict)  # backend name ("*" for all) -> slots
    ignore_eos: bool = True
    sample_interval_s: float = Field(default=0.5, gt=0)
    ramp_limit_s: float = Field(default=120.0, gt=0)  # longest wait for full occupancy before a window
    percentiles: list[float] = Field(default_factory=lambda: [50.0, 90.0, 99.0])
    goodput_slo_ms: dict[str, float] = Field(default_factory=dict)  # "ttft", "tpot", "e2el" -> ms
    save_requests: bool = False
    workers: int = Field(default=1, gt=0)  # client processes the load is sharded over
    # the open loop (empty `rates`: none)
    rates: list[float] = Field(default_factory=list)
    burstiness: float = Field(default=1.0, gt=0)
    duration_s: float = Field(default=30.0, gt=0)
    num_requests: int | None = Field(default=None, gt=0)
    max_concurrency: int | None = Field(default=None, gt=0)
    seed: int = 0
    # what the open loop sends: synthetic lengths, a dataset, or a book run replayed
    input_len: str | None = None  # N or LO-HI tokens
    output_len: str | None = None
    dataset: str | None = None
    workload: str | None = None  # a book run folder
    replay_speed: float = Field(default=1.0, ge=0)  # 0: as fast as the caps allow
    prefix_len: int | None = Field(default=None, gt=0)  # shared prefix tokens before each synthetic prompt
    prefix_groups: int = Field(default=1, gt=0)  # distinct shared prefixes, taken in turn
    multi_turn: bool = False  # a ShareGPT dataset's conversations turn by turn, the history resent
    endpoint: Endpoint = Endpoint.CHAT  # chat completions, or text completions (the prompt sent as it is)
    reset_cache: bool = False  # empty every backend's prefix cache before each level
    stop_when_saturated: bool = False  # open loop: stop a level, and those above, once it over-saturates
    audit_answers: bool = False  # keep each answer's text and audit every level's answers
    ray: bool = False  # the workers are Ray actors (a cluster, or a local instance)
    ray_address: str | None = None  # the cluster to join; None: RAY_ADDRESS, else a local instance

    @property
    def keeps_answers(self) -> bool:
        """Each answer's text stays in its sample: the answer audit reads it, the saved request rows hold it."""
        return self.audit_answers or self.save_requests

    @field_validator("streams")
    @classmethod
    def _levels(cls, levels: list[int]) -> list[int]:
        if any(n <= 0 for n in levels):
            raise ValueError("stream levels must be positive whole numbers")
        return sorted(set(levels))

    @field_validator("rates")
    @classmethod
    def _rates(cls, rates: list[float]) -> list[float]:
        if any(not 0 < r < float("inf") for r in rates):
            raise ValueError("request rates must be positive numbers of requests per second")
        return sorted(set(rates))

    @field_validator("goodput_slo_ms")
    @classmethod
    def _slo(cls, slo: dict[str, float]) -> dict[str, float]:
        if any(name not in SLO_METRICS or limit <= 0 for name, limit in slo.items()):
            raise ValueError(f"goodput SLOs are {', '.join(SLO_METRICS)} with a positive number of ms")
        return {SLO_METRICS[name]: limit for name, limit in slo.items()}

    @field_validator("percentiles")
    @classmethod
    def _percentiles(cls, qs: list[float]) -> list[float]:
        if not qs or any(not 0 <= q <= 100 for q in qs):
            raise ValueError("percentiles must lie between 0 and 100")
        return sorted(set(qs))


class CounterSample(BaseModel):
    """One /metrics scrape of one backend, read through its engine's name map (None: not exposed)."""

    backend: str
    t: float
    generated: float | None = None
    prompt: float | None = None
    cached_prompt: float | None = None
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None
    decode_steps: float | None = None


class PowerSample(BaseModel):
    """GPU draw of the bench host (nvidia-smi), summed over its GPUs."""

    t: float
    watts: float
    per_gpu: list[float] = Field(default_factory=list)


class RequestSample(BaseModel):
    """One bench request. `token_times` (client receive time of each content chunk) stay in memory for the
    per-second and inter-token figures and are not written to the record; `t_scheduled` is its arrival
    time in the open loop (it is sent then, or later when --max-concurrency holds it back)."""

    backend: str
    number: int
    t_sent: float
    t_scheduled: float | None = None
    t_first: float | None = None
    t_done: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    chunks: int = 0
    finish_reason: str | None = None
    reissued: int = 0
    error: str | None = None
    cached_tokens: int | None = None  # the engine's cached prompt tokens for this request (usage or timings)
    prefill_ms: float | None = None  # the engine's own prompt time (llama.cpp)
    request_id: str | None = None  # the X-Request-Id sent
    response_id: str | None = None  # the engine's id of the answer
    turn: int | None = None  # --multi-turn: this request's turn in its conversation (1: the first)
    answer: str | None = Field(default=None, exclude=True)  # the text, kept for a next turn or --audit-answers
    prompt_key: str | None = None  # --audit-answers: names the prompt, so answers to the same one are told apart
    answer_flags: list[str] | None = None  # --audit-answers: capped, looping, empty, duplicate
    token_times: list[float] = Field(default_factory=list, exclude=True)

    @property
    def ttft(self) -> float | None:
        return None if self.t_first is None else self.t_first - self.t_sent

    @property
    def t_last(self) -> float | None:
        return self.token_times[-1] if self.token_times else self.t_first

    @property
    def error_kind(self) -> str | None:
        return None if self.error is None else self.error.partition(":")[0]


def failures_by_kind(requests: Iterable[RequestSample]) -> dict[str, int]:
    """Failed requests by the outcome of their attempt (records.Outcome's recorded names), most first."""
    return dict(Counter(r.error_kind for r in requests if r.error_kind is not None).most_common())


class LevelRaw(BaseModel):
    """What one level of the ladder recorded, on one absolute schedule for every backend."""

    streams: int  # per backend
    backends: list[str]
    t0: float
    window_start: float
    window_end: float
    t_end: float
    requests: list[RequestSample]
    samples: list[CounterSample]
    power: list[PowerSample] = Field(default_factory=list)
    start: list[CounterSample] = Field(default_factory=list)  # one scrape per backend before the level
    end: list[CounterSample] = Field(default_factory=list)  # one per backend after the drain, counters settled


class AnswerAudit(BaseModel):
    """--audit-answers: what one level's answers were (bench/report/answers.py defines each flag)."""

    FLAGS: ClassVar[tuple[str, ...]] = ("capped", "looping", "empty", "duplicate")

    answers: int  # answered requests audited
    capped: int = 0
    looping: int = 0
    empty: int = 0
    duplicate: int = 0
    capped_share: float | None = None
    looping_share: float | None = None
    empty_share: float | None = None
    duplicate_share: float | None = None
    ignore_eos: bool = False  # on: every answer runs to its cap by construction, so "capped" says little
    rule: str = ""


class LadderPoint(BaseModel):
    """Figures of one level for one backend (`scope` its name) or for the whole fleet (`scope` "total")."""

    scope: str
    streams: int
    window_s: float
    tokens: float  # generated inside the window, counted by `sustained_source`
    sustained: float
    sustained_source: str
    best_second: float
    best_second_source: str
    per_stream: float
    step_ms: float | None  # streams / sustained
    step_ms_server: float | None = None  # window / engine steps (a per-step counter)
    step_ms_server_source: str | None = None
    ttft_p50_ms: float | None = None
    ttft_p90_ms: float | None = None
    ttft_p99_ms: float | None = None
    ttft_scope: str = ""
    ttft_requests: int = 0
    latency: LatencySummary | None = None  # TTFT, TPOT, ITL, E2EL and goodput over the same requests
    running_mean: float | None = None
    waiting_mean: float | None = None
    waiting_max: float | None = None
    kv_usage_mean: float | None = None
    occupancy: float | None = None  # server-reported running / streams, mean over the window
    server_window_tokens: float | None = None  # counter increase inside the window (lumpy on request-end engines)
    client_window_tokens: float = 0.0  # client token timestamps inside the window, scaled to usage
    requests_done: int = 0
    requests_failed: int = 0
    failures_by_kind: dict[str, int] = Field(default_factory=dict)  # the failed requests by outcome
    reissued: int = 0
    level_server_tokens: float | None = None  # counter increase over the whole level, drain included
    level_client_tokens: int = 0  # sum of usage.completion_tokens over the whole level
    tokens_match: bool | None = None
    prompt_tokens_target: int | None = None
    prompt_tokens_median: float | None = None
    prompt_tokens_min: int | None = None
    prompt_tokens_max: int | None = None
    cached_prompt_tokens: float | None = None  # engine's cached-prompt counter increase over the level
    cache_hit_rate: float | None = None  # cached / usage prompt tokens
    cache_hit_rate_source: str | None = None  # which engine counter cache_hit_rate was read from
    request_cached_tokens: int | None = None  # summed over the answers that told it (usage or llama.cpp timings)
    request_cache_hit_rate: float | None = None  # those cached tokens / those answers' usage prompt tokens
    prefill_ms_mean: float | None = None  # the engine's own prompt time per request (llama.cpp timings)
    prefix_planned_hit_rate: float | None = None  # --prefix-len: planned shared-prefix tokens / usage prompt tokens
    answers: AnswerAudit | None = None  # --audit-answers
    power_w: float | None = None  # null where nvidia-smi is absent, never zero
    tokens_per_joule: float | None = None
    power_source: str | None = None


class LevelResult(BaseModel):
    streams: int  # per backend
    cache_reset: list[CacheResetDone] = Field(default_factory=list)  # --reset-cache: before this level
    total: LadderPoint
    backends: list[LadderPoint]
    grid_step_s: float
    total_grid: list[float]  # cumulative tokens of the summed fleet on the common grid, from window start
    samples: list[CounterSample]
    power: list[PowerSample]


class Fit(BaseModel):
    """Least squares step_ms = a + b * streams; predicted tok/s = streams / step."""

    a_ms: float
    b_ms: float
    r2: float | None
    ceiling_tok_s: float | None  # 1 / b
    streams: list[int]
    measured_tok_s: list[float]
    predicted_tok_s: list[float]


class Series(BaseModel):
    """One labelled ladder: one backend, or several summed on a common grid."""

    label: str
    backends: list[str]
    levels: list[LevelResult]
    fit: Fit | None = None
    answer_cap: str = ""  # which cap each answer had


class ComparisonRow(BaseModel):
    """A series (`label`) against the first series at each level both measured."""

    label: str
    streams: int
    base: float
    other: float
    ratio: float | None
    other_ttft_p50_ms: float | None
    other_running: float | None
    other_waiting: float | None


class SaturationCheck(BaseModel):
    """Over-saturation as guidellm's detector defines it: the slopes of requests in flight (sampled) and of
    TTFT (per request, at its first token) over a sliding window, each with its one-sided margin of error
    (Student's t); over-saturated when both slopes stay positive past their margins."""

    saturated: bool
    stopped_at_s: float | None = None  # seconds into the level when the arrivals stopped
    concurrent_slope: float | None = None  # requests in flight per second
    concurrent_moe: float | None = None
    concurrent_n: int = 0
    ttft_slope: float | None = None  # seconds of TTFT per second
    ttft_moe: float | None = None
    ttft_n: int = 0
    rule: str = ""


class SharedPrefixPlan(BaseModel):
    """--prefix-len: the shared prefixes every synthetic prompt started with."""

    tokens: int  # each prefix's length, chat template left out
    groups: int
    counted_by: str  # the tokenizer that sized them
    rule: str = (
        "planned hit rate: each request's prefix tokens count as cached unless it is the first of its group "
        "since the run began or the cache was last emptied; over the answers' usage prompt tokens"
    )


class RatePoint(BaseModel):
    """One open-loop level. Rates are requests per second; `*_source` names where a figure came from."""

    rate: float | None  # offered (None: a replay at the original times)
    burstiness: float
    duration_s: float | None
    max_concurrency: int | None
    scheduled: int  # arrivals the seeded schedule made
    completed: int
    failed: int
    failures_by_kind: dict[str, int] = Field(default_factory=dict)  # the failed requests by outcome
    arrival_rate: float | None  # (arrivals - 1) / (last arrival - first arrival): what the schedule offered
    completion_rate: float | None  # (completed - 1) / (last completion - first completion): what was served
    request_throughput: float | None  # completed / (first send .. last answer): vLLM's request throughput
    output_throughput: float | None  # usage completion tokens / the same duration (vLLM's)
    total_token_throughput: float | None  # prompt + completion tokens / the same duration
    duration_s_measured: float | None  # first send .. last answer
    served_ratio: float | None  # completion_rate / arrival_rate
    keeps_up: bool
    knee: bool = False  # the first level that did not keep up
    send_delay_mean_ms: float | None = None  # arrival -> send: client-side queueing (--max-concurrency)
    send_delay_max_ms: float | None = None
    delayed_requests: int = 0  # sent more than 1 ms after their arrival
    concurrency_mean: float | None = None  # requests in flight, time-averaged (client)
    peak_in_flight: int = 0
    slots: int = 0  # summed over backends
    queueing: bool = False  # more in flight than the engines run at once: the engines queued
    running_mean: float | None = None
    waiting_mean: float | None = None
    waiting_max: float | None = None
    gauge_source: str | None = None
    prompt_tokens: int = 0  # usage, summed
    completion_tokens: int = 0
    level_server_tokens: float | None = None
    tokens_match: bool | None = None
    latency: LatencySummary
    cached_prompt_tokens: float | None = None  # engines' cached-prompt counters, summed increase over the level
    cache_hit_rate: float | None = None  # that / usage prompt tokens
    cache_hit_rate_source: str | None = None
    request_cached_tokens: int | None = None  # as the answers told it (usage or llama.cpp timings)
    request_cache_hit_rate: float | None = None
    prefill_ms_mean: float | None = None
    prefix_planned_hit_rate: float | None = None  # --prefix-len: planned shared-prefix tokens / usage prompt tokens
    follow_up_cache_hit_rate: float | None = None  # --multi-turn: the same over second and later turns only
    turns: int | None = None  # --multi-turn: requests that were a later turn of a conversation
    cache_reset: list[CacheResetDone] = Field(default_factory=list)  # --reset-cache: before this level
    saturation: SaturationCheck | None = None  # --stop-when-saturated: the detector's last verdict
    answers: AnswerAudit | None = None  # --audit-answers


class RateSweep(BaseModel):
    label: str
    backends: list[str]
    workload: str
    points: list[RatePoint]
    knee_rate: float | None = None
    knee_rule: str = ""
    answer_cap: str = ""  # which cap each answer had
    saturated_rate: float | None = None  # --stop-when-saturated: the level that over-saturated
    rates_skipped: list[float] = Field(default_factory=list)  # the levels above it, not run


class ReplayCheck(BaseModel):
    """A replayed book run against its own request log."""

    source: str
    requests_logged: int
    requests_replayed: int  # answered in the replay
    compared: int  # requests answered in both runs (the original's cancelled planning answers have no count)
    prompt_tokens_logged: int  # engine-counted in the original run, over the compared requests
    prompt_tokens_replayed: int  # engine-counted in the replay, over the same requests
    output_tokens_replayed: int
    over_cap: int  # replayed answers longer than their cap (should be none)
    by_kind: dict[str, int]
    speed: float
    point: RatePoint


class BenchRecord(BaseModel):
    spec: BenchSpec
    provenance: Provenance
    series: list[Series]
    comparison: list[ComparisonRow] = Field(default_factory=list)  # every later series against the first
    sweeps: list[RateSweep] = Field(default_factory=list)  # open-loop rate sweeps
    replays: list[ReplayCheck] = Field(default_factory=list)
    client: str = "fast"  # the HTTP client that sent the requests: fast (httptools) or sdk (openai)
    merged_from: list[MergedRun] = Field(default_factory=list)  # set by `fanout report DIR...`
    request_rows: list[dict] = Field(default_factory=list, exclude=True)  # --save-requests, written apart
    shared_prefix: SharedPrefixPlan | None = None  # --prefix-len
    ray: RayInfo | None = None  # --ray: the cluster the workers ran on, each actor's clock
