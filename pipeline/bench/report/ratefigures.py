"""From one open-loop level's raw requests to its figures (a RatePoint), and the knee of a rate sweep.

Takes a RateRaw, the backends' slot counts and the spec's percentiles and SLOs; returns a RatePoint.
Throughputs follow `vllm bench serve`: completed requests, and their usage tokens, over the duration from
the first send to the last answer (the drain included). Whether the fleet kept up is judged without the
drain: the completion rate (completions between the first and the last one) against the arrival rate the
seeded schedule actually offered over its own span, so a level's random count of arrivals and its
answers' latency do not bias the ratio. A level keeps up when it served at least KEEP_UP of its arrival
rate and no request failed; the knee is the first level of a sweep that did not.
"""

from __future__ import annotations

import statistics

from pipeline.bench.load.openloop import RateRaw
from pipeline.bench.report.cache import rate_cache_figures
from pipeline.bench.report.latency import request_duration, summarise
from pipeline.records.bench import CounterSample, RatePoint, RequestSample, failures_by_kind

KEEP_UP = 0.95
KNEE_RULE = f"the first rate whose completion rate fell below {KEEP_UP:.0%} of its arrival rate (or that had failures)"


def span_rate(times: list[float]) -> float | None:
    if len(times) < 2 or max(times) == min(times):
        return None
    return (len(times) - 1) / (max(times) - min(times))


def concurrency_mean(requests: list[RequestSample], start: float, end: float) -> float | None:
    """Requests in flight, averaged over [start, end] (each request counted from send to answer)."""
    if end <= start:
        return None
    busy = sum(max(0.0, min(r.t_done or end, end) - max(r.t_sent, start)) for r in requests)
    return busy / (end - start)


def send_delays_ms(requests: list[RequestSample]) -> list[float]:
    return [1000 * (r.t_sent - r.t_scheduled) for r in requests if r.t_scheduled is not None]


def gauges(samples: list[CounterSample], backends: list[str], start: float, end: float, interval: float) -> dict:
    """The engines' running and waiting gauges, summed over backends at each scrape, over the arrivals.
    Every backend is scraped on the same tick (start + k * interval), each stamped a little after it."""
    by_tick: dict[int, list[CounterSample]] = {}
    for sample in samples:
        if start <= sample.t <= end:
            by_tick.setdefault(int((sample.t - start) / interval), []).append(sample)
    running, waiting = [], []
    for group in by_tick.values():
        if len(group) == len(backends) and all(s.running is not None for s in group):
            running.append(sum(s.running or 0 for s in group))
        if len(group) == len(backends) and all(s.waiting is not None for s in group):
            waiting.append(sum(s.waiting or 0 for s in group))
    return {
        "running_mean": statistics.fmean(running) if running else None,
        "waiting_mean": statistics.fmean(waiting) if waiting else None,
        "waiting_max": max(waiting, default=None),
        "gauge_source": "server gauges (running, waiting) on /metrics, summed over backends, every scrape "
        "during the arrivals"
        if running or waiting
        else None,
    }


def server_tokens(raw: RateRaw) -> float | None:
    starts = {s.backend: s.generated for s in raw.start}
    total = 0.0
    for end in raw.end:
        before = starts.get(end.backend)
        if end.generated is None or before is None:
            return None
        total += end.generated - before
    return total


def rate_point(
    raw: RateRaw,
    slots: int,
    percentiles: list[float],
    slo_ms: dict[str, float],
    scope: str,
    cache_source: str | None = None,
) -> RatePoint:
    requests = raw.requests
    done = [r for r in requests if not r.error]
    arrivals = [r.t_scheduled for r in requests if r.t_scheduled is not None]
    completions = [r.t_done for r in done if r.t_done is not None]
    duration = request_duration(requests)
    arrival_rate, completion_rate = span_rate(arrivals), span_rate(completions)
    served = None if not arrival_rate or completion_rate is None else completion_rate / arrival_rate
    prompt = sum(r.prompt_tokens or 0 for r in done)
    completion = sum(r.completion_tokens or 0 for r in done)
    delays = send_delays_ms(requests)
    peak = sum(raw.peak_in_flight.values())
    server = server_tokens(raw)
    plan = raw.plan
    return RatePoint(
        rate=plan.rate,
        burstiness=plan.burstiness,
        duration_s=plan.duration_s,
        max_concurrency=plan.max_concurrency,
        scheduled=len(requests),
        completed=len(done),
        failed=len(requests) - len(done),
        failures_by_kind=failures_by_kind(requests),
        arrival_rate=arrival_rate,
        completion_rate=completion_rate,
        request_throughput=len(done) / duration if duration else None,
        output_throughput=completion / duration if duration else None,
        total_token_throughput=(prompt + completion) / duration if duration else None,
        duration_s_measured=duration,
        served_ratio=served,
        keeps_up=served is not None and served >= KEEP_UP and len(done) == len(requests),
        send_delay_mean_ms=statistics.fmean(delays) if delays else None,
        send_delay_max_ms=max(delays, default=None),
        delayed_requests=sum(d > 1.0 for d in delays),
        concurrency_mean=concurrency_mean(requests, raw.t0, raw.t_last_arrival),
        peak_in_flight=peak,
        slots=slots,
        queueing=peak > slots,
        prompt_tokens=prompt,
        completion_tokens=completion,
        level_server_tokens=server,
        tokens_match=None if server is None else abs(server - completion) < 0.5,
        latency=summarise(requests, scope, percentiles, slo_ms or None, duration),
        **gauges(raw.samples, raw.backends, raw.t0, raw.t_last_arrival, plan.interval_s),
        **rate_cache_figures(raw, done, cache_source),
        saturation=raw.saturation,
    )


def mark_knee(points: list[RatePoint]) -> float | None:
    """Flag the first level (by rate) that did not keep up; return its rate."""
    for point in sorted(points, key=lambda p: p.rate or 0.0):
        if not point.keeps_up:
            point.knee = True
            return point.rate
    return None
