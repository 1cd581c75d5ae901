"""From one level's raw samples to its figures: a LadderPoint per backend and one for the summed fleet.

Takes a LevelRaw, each backend's EngineInfo and the spec; returns a LevelResult. Every backend's generated
tokens become a cumulative series on one common grid (0.1 s steps over the window): the engine's counter,
linearly interpolated between its 0.5 s samples, where it counts every step (vLLM); else the client's
per-token timestamps, each weighted so a request's chunks add up to its usage.completion_tokens (engines
that count at request end: llama.cpp, SGLang, TGI). The fleet's series is the sum, so its best second is a
simultaneous peak, not a sum of separate peaks.
"""

from __future__ import annotations

import bisect
import statistics
from collections import Counter
from dataclasses import dataclass
from itertools import accumulate

from pipeline.backends.engines import metric_names
from pipeline.bench.report.latency import percentile, summarise
from pipeline.records import EngineInfo
from pipeline.records.bench import (
    BenchSpec,
    ComparisonRow,
    CounterSample,
    LadderPoint,
    LevelRaw,
    LevelResult,
    PowerSample,
    RequestSample,
    Series,
    failures_by_kind,
)

GRID_STEP_S = 0.1
BEST_SPAN_S = 1.0


@dataclass(frozen=True)
class Grid:
    start: float
    step: float
    count: int  # points, both ends included

    @property
    def times(self) -> list[float]:
        return [self.start + i * self.step for i in range(self.count)]

    @property
    def length(self) -> float:
        return self.step * (self.count - 1)


def common_grid(start: float, end: float, step: float = GRID_STEP_S) -> Grid:
    count = max(2, round((end - start) / step) + 1)
    return Grid(start, (end - start) / (count - 1), count)


def interpolate(points: list[tuple[float, float]], t: float) -> float:
    """Linear interpolation of sorted (t, value) points; held flat beyond the ends."""
    times = [p[0] for p in points]
    i = bisect.bisect_left(times, t)
    if i == 0:
        return points[0][1]
    if i == len(points):
        return points[-1][1]
    (t1, v1), (t2, v2) = points[i - 1], points[i]
    return v1 if t2 == t1 else v1 + (v2 - v1) * (t - t1) / (t2 - t1)


def counter_series(samples: list[CounterSample], field: str) -> list[tuple[float, float]]:
    return sorted((s.t, getattr(s, field)) for s in samples if getattr(s, field) is not None)


def server_cumulative(points: list[tuple[float, float]], grid: Grid) -> list[float]:
    """Counter increase since the grid's start, at every grid point."""
    base = interpolate(points, grid.start)
    return [interpolate(points, t) - base for t in grid.times]


def weighted_token_times(requests: list[RequestSample]) -> tuple[list[float], list[float]]:
    """Every content chunk's client time, with weight completion_tokens / chunks for its request."""
    pairs: list[tuple[float, float]] = []
    for request in requests:
        if request.error or not request.token_times:
            continue
        weight = (request.completion_tokens or len(request.token_times)) / len(request.token_times)
        pairs.extend((t, weight) for t in request.token_times)
    pairs.sort()
    return [p[0] for p in pairs], [p[1] for p in pairs]


def client_cumulative(times: list[float], weights: list[float], grid: Grid) -> list[float]:
    """Weighted tokens received after the grid's start, up to each grid point."""
    prefix = [0.0, *accumulate(weights)]
    base = prefix[bisect.bisect_right(times, grid.start)]
    return [prefix[bisect.bisect_right(times, t)] - base for t in grid.times]


def best_span(cumulative: list[float], grid: Grid, span: float = BEST_SPAN_S) -> float:
    """Largest increase over any `span`-second stretch of the grid, as a rate."""
    steps = max(1, round(span / grid.step))
    if steps >= len(cumulative):
        return (cumulative[-1] - cumulative[0]) / grid.length
    return max(cumulative[i + steps] - cumulative[i] for i in range(len(cumulative) - steps)) / (steps * grid.step)


def mean_or_none(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


@dataclass
class Tokens:
    """One backend's tokens on the grid, with where they came from."""

    cumulative: list[float]
    source: str


def backend_tokens(raw: LevelRaw, name: str, info: EngineInfo, grid: Grid, requests: list[RequestSample]) -> Tokens:
    names = metric_names(info.kind)
    points = counter_series([s for s in raw.samples if s.backend == name], "generated")
    covers = len(points) >= 2 and points[0][0] <= grid.start and points[-1][0] >= grid.times[-1]
    if info.counts_per_step and names is not None and covers:
        return Tokens(server_cumulative(points, grid), f"server counter {names.generated_tokens}, sampled every 0.5 s")
    times, weights = weighted_token_times(requests)
    return Tokens(
        client_cumulative(times, weights, grid),
        "client token timestamps, scaled to usage (the engine counts at request end)",
    )


def ttft_figures(requests: list[RequestSample], raw: LevelRaw, spec: BenchSpec) -> dict:
    """TTFT percentiles as before, and every latency figure (latency.py) over the same requests: those sent
    inside the window, else (none was) every request of the level."""
    chosen = [r for r in requests if raw.window_start <= r.t_sent <= raw.window_end and r.ttft is not None]
    scope = "client: requests sent inside the window"
    if not chosen:
        chosen = [r for r in requests if r.ttft is not None]
        scope = "client: every request of the level (the opening burst included; none started inside the window)"
    ms = [1000 * r.ttft for r in chosen if r.ttft is not None]
    inside_window = [r for r in requests if raw.window_start <= r.t_sent <= raw.window_end] or requests
    return {
        "ttft_p50_ms": percentile(ms, 50),
        "ttft_p90_ms": percentile(ms, 90),
        "ttft_p99_ms": percentile(ms, 99),
        "ttft_scope": scope,
        "ttft_requests": len(ms),
        "latency": summarise(
            inside_window, scope, spec.percentiles, spec.goodput_slo_ms or None, raw.window_end - raw.window_start
        ),
    }


def gauge_figures(samples: list[CounterSample], raw: LevelRaw, streams: int) -> dict:
    inside = [s for s in samples if raw.window_start <= s.t <= raw.window_end]
    running = mean_or_none([s.running for s in inside if s.running is not None])
    waiting = [s.waiting for s in inside if s.waiting is not None]
    return {
        "running_mean": running,
        "waiting_mean": mean_or_none(waiting),
        "waiting_max": max(waiting, default=None),
        "kv_usage_mean": mean_or_none([s.kv_usage for s in inside if s.kv_usage is not None]),
        "occupancy": None if running is None else running / streams,
    }


def _delta(start: CounterSample | None, end: CounterSample | None, field: str) -> float | None:
    if start is None or end is None or getattr(start, field) is None or getattr(end, field) is None:
        return None
    return getattr(end, field) - getattr(start, field)


def level_counts(raw: LevelRaw, name: str, requests: list[RequestSample], spec: BenchSpec) -> dict:
    """Whole-level checks: server counter against usage, prompt sizes, the prefix cache."""
    start = next((s for s in raw.start if s.backend == name), None)
    end = next((s for s in raw.end if s.backend == name), None)
    done = [r for r in requests if not r.error]
    usage = sum(r.completion_tokens or 0 for r in done)
    server = _delta(start, end, "generated")
    prompts = [r.prompt_tokens for r in done if r.prompt_tokens is not None]
    cached = _delta(start, end, "cached_prompt")
    return {
        "requests_done": len(done),
        "requests_failed": len(requests) - len(done),
        "failures_by_kind": failures_by_kind(requests),
        "reissued": sum(r.reissued for r in requests),
        "level_server_tokens": server,
        "level_client_tokens": usage,
        "tokens_match": None if server is None else abs(server - usage) < 0.5,
        "prompt_tokens_target": spec.prompt_tokens,
        "prompt_tokens_median": statistics.median(prompts) if prompts else None,
        "prompt_tokens_min": min(prompts, default=None),
        "prompt_tokens_max": max(prompts, default=None),
        "cached_prompt_tokens": cached,
        "cache_hit_rate": None if cached is None or not prompts else cached / sum(prompts),
    } | request_cache(done)


def request_cache(done: list[RequestSample]) -> dict:
    """The prefix cache as each answer told it (usage.prompt_tokens_details.cached_tokens or llama.cpp's
    timings.cache_n), over the requests that told it."""
    told = [r for r in done if r.cached_tokens is not None and r.prompt_tokens]
    prompts = sum(r.prompt_tokens or 0 for r in told)
    prefill = [r.prefill_ms for r in done if r.prefill_ms is not None]
    return {
        "request_cached_tokens": sum(r.cached_tokens or 0 for r in told) if told else None,
        "request_cache_hit_rate": sum(r.cached_tokens or 0 for r in told) / prompts if prompts else None,
        "prefill_ms_mean": statistics.fmean(prefill) if prefill else None,
    }


def step_figures(samples: list[CounterSample], info: EngineInfo, raw: LevelRaw) -> dict:
    names = metric_names(info.kind)
    points = counter_series(samples, "decode_steps")
    if names is None or len(points) < 2:
        return {}
    steps = interpolate(points, raw.window_end) - interpolate(points, raw.window_start)
    if steps <= 0:
        return {}
    return {
        "step_ms_server": 1000 * (raw.window_end - raw.window_start) / steps,
        "step_ms_server_source": f"server counter {names.decode_steps}",
    }


def rates(scope: str, streams: int, tokens: Tokens, grid: Grid, window: float) -> dict:
    total = tokens.cumulative[-1]
    sustained = total / window
    return {
        "scope": scope,
        "streams": streams,
        "window_s": window,
        "tokens": total,
        "sustained": sustained,
        "sustained_source": tokens.source,
        "best_second": best_span(tokens.cumulative, grid),
        "best_second_source": tokens.source,
        "per_stream": sustained / streams,
        "step_ms": 1000 * streams / sustained if sustained > 0 else None,
    }


def window_extras(raw: LevelRaw, name: str, requests: list[RequestSample], grid: Grid) -> dict:
    points = counter_series([s for s in raw.samples if s.backend == name], "generated")
    times, weights = weighted_token_times(requests)
    client = client_cumulative(times, weights, grid)[-1]
    server = interpolate(points, grid.times[-1]) - interpolate(points, grid.start) if len(points) >= 2 else None
    return {"server_window_tokens": server, "client_window_tokens": client}


def backend_point(
    raw: LevelRaw, name: str, info: EngineInfo, grid: Grid, spec: BenchSpec
) -> tuple[LadderPoint, Tokens]:
    requests = [r for r in raw.requests if r.backend == name]
    samples = [s for s in raw.samples if s.backend == name]
    tokens = backend_tokens(raw, name, info, grid, requests)
    fields = rates(name, raw.streams, tokens, grid, grid.length)
    fields |= ttft_figures(requests, raw, spec) | gauge_figures(samples, raw, raw.streams)
    fields |= step_figures(samples, info, raw) | level_counts(raw, name, requests, spec)
    names = metric_names(info.kind)
    if names is not None and names.cached_prompt_tokens and fields["cached_prompt_tokens"] is not None:
        fields["cache_hit_rate_source"] = f"{names.cached_prompt_tokens} (engine /metrics) / usage prompt tokens"
    fields |= window_extras(raw, name, requests, grid)
    return LadderPoint(**fields), tokens


def power_figures(power: list[PowerSample], raw: LevelRaw, sustained: float) -> dict:
    inside = [p for p in power if raw.window_start <= p.t <= raw.window_end]
    if not inside:
        return {}
    watts = statistics.fmean(p.watts for p in inside)
    gpus = max(len(p.per_gpu) for p in inside)
    return {
        "power_w": watts,
        "tokens_per_joule": sustained / watts if watts > 0 else None,
        "power_source": f"nvidia-smi power.draw on the bench host, {gpus} GPU(s), mean over the window",
    }


def _sum_optional(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return None if len(present) < len(values) else sum(present)


def total_point(
    raw: LevelRaw, points: list[LadderPoint], series: list[Tokens], grid: Grid, spec: BenchSpec
) -> tuple[LadderPoint, list[float]]:
    cumulative = [sum(values) for values in zip(*(t.cumulative for t in series))]
    sources = sorted({t.source for t in series})
    source = (
        sources[0]
        if len(series) == 1
        else (f"sum of {len(series)} backends on a common {grid.step:.1f} s grid: " + "; ".join(sources))
    )
    streams = raw.streams * len(points)
    fields = rates("total", streams, Tokens(cumulative, source), grid, grid.length)
    fields |= ttft_figures(raw.requests, raw, spec)
    running = [p.running_mean for p in points]
    fields |= {
        "running_mean": _sum_optional(running),
        "waiting_mean": _sum_optional([p.waiting_mean for p in points]),
        "waiting_max": _sum_optional([p.waiting_max for p in points]),
        "kv_usage_mean": mean_or_none([p.kv_usage_mean for p in points if p.kv_usage_mean is not None]),
    }
    fields["occupancy"] = None if fields["running_mean"] is None else fields["running_mean"] / streams
    steps = [p.step_ms_server for p in points if p.step_ms_server is not None]
    if len(steps) == len(points):
        fields |= {
            "step_ms_server": statistics.fmean(steps),
            "step_ms_server_source": (points[0].step_ms_server_source or "")
            + (" (mean over backends)" if len(points) > 1 else ""),
        }
    fields |= _summed_counts(points) | power_figures(raw.power, raw, fields["sustained"])
    return LadderPoint(**fields), cumulative


def _summed_counts(points: list[LadderPoint]) -> dict:
    matches = [p.tokens_match for p in points]
    prompts = [p.prompt_tokens_median for p in points if p.prompt_tokens_median is not None]
    mins = [p.prompt_tokens_min for p in points if p.prompt_tokens_min is not None]
    maxes = [p.prompt_tokens_max for p in points if p.prompt_tokens_max is not None]
    cached = _sum_optional([p.cached_prompt_tokens for p in points])
    return {
        "requests_done": sum(p.requests_done for p in points),
        "requests_failed": sum(p.requests_failed for p in points),
        "failures_by_kind": dict(sum((Counter(p.failures_by_kind) for p in points), Counter()).most_common()),
        "reissued": sum(p.reissued for p in points),
        "level_server_tokens": _sum_optional([p.level_server_tokens for p in points]),
        "level_client_tokens": sum(p.level_client_tokens for p in points),
        "tokens_match": None if None in matches else all(matches),
        "server_window_tokens": _sum_optional([p.server_window_tokens for p in points]),
        "client_window_tokens": sum(p.client_window_tokens for p in points),
        "prompt_tokens_target": points[0].prompt_tokens_target,
        "prompt_tokens_median": statistics.median(prompts) if prompts else None,
        "prompt_tokens_min": min(mins, default=None),
        "prompt_tokens_max": max(maxes, default=None),
        "cached_prompt_tokens": cached,
        "cache_hit_rate": mean_or_none([p.cache_hit_rate for p in points if p.cache_hit_rate is not None]),
        "cache_hit_rate_source": next((p.cache_hit_rate_source for p in points if p.cache_hit_rate_source), None),
        "request_cached_tokens": _sum_optional([p.request_cached_tokens for p in points]),
        "request_cache_hit_rate": mean_or_none(
            [p.request_cache_hit_rate for p in points if p.request_cache_hit_rate is not None]
        ),
        "prefill_ms_mean": mean_or_none([p.prefill_ms_mean for p in points if p.prefill_ms_mean is not None]),
    }


def level_result(raw: LevelRaw, engines: dict[str, EngineInfo], spec: BenchSpec) -> LevelResult:
    grid = common_grid(raw.window_start, raw.window_end)
    made = [backend_point(raw, name, engines[name], grid, spec) for name in raw.backends]
    points = [point for point, _ in made]
    total, cumulative = total_point(raw, points, [tokens for _, tokens in made], grid, spec)
    if len(points) == 1:  # one backend: its own point carries the host's GPU power too
        points[0] = points[0].model_copy(
            update={k: getattr(total, k) for k in ("power_w", "tokens_per_joule", "power_source")}
        )
    return LevelResult(
        streams=raw.streams,
        total=total,
        backends=points,
        grid_step_s=grid.step,
        total_grid=[round(v, 3) for v in cumulative],
        samples=raw.samples,
        power=raw.power,
    )


def comparison_rows(series: list[Series]) -> list[ComparisonRow]:
    """Each later series against the first, level by level (the comparison table's ratio column)."""
    rows = []
    base = {level.streams: level.total for level in series[0].levels} if series else {}
    for other in series[1:]:
        for level in other.levels:
            first = base.get(level.streams)
            if first is None:
                continue
            point = level.total
            rows.append(
                ComparisonRow(
                    label=other.label,
                    streams=level.streams,
                    base=first.sustained,
                    other=point.sustained,
                    ratio=point.sustained / first.sustained if first.sustained > 0 else None,
                    other_ttft_p50_ms=point.ttft_p50_ms,
                    other_running=point.running_mean,
                    other_waiting=point.waiting_mean,
                )
            )
    return rows
