"""Latency as users feel it, defined as `vllm bench serve` defines it, and goodput against SLOs.

Takes RequestSamples (client send, first-token and per-content-event receive times, the engine's usage
count of output tokens); returns a LatencySummary. The definitions, per successful request:

- TTFT: first content event received - request sent.
- E2EL: last byte ([DONE]) received - request sent.
- TPOT: (E2EL - TTFT) / (output tokens - 1), only for answers longer than one token (the first token
  excluded); the output token count is the engine's usage.completion_tokens.
- ITL: the gap between consecutive content events of one answer, every gap of every answer pooled (an
  event that carries several tokens is one gap, as in vLLM).

Percentiles interpolate linearly between order statistics (numpy's default, which vLLM uses); the mean
and the median are given beside them. AIPerf and GenAI-Perf call the per-request (E2EL - TTFT) / (out - 1)
"inter-token latency": that figure is TPOT here, as in vLLM.

Goodput (vLLM's `--goodput`): a request is good when every SLO given holds (value <= limit; a one-token
answer counts TPOT 0, as vLLM does); goodput is good requests per second over the same duration as the
request throughput, and their share of every request sent (failed ones count as not good).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pipeline.errors import UsageError
from pipeline.records.bench import SLO_METRICS, Distribution, Goodput, LatencySummary, percentile_key

if TYPE_CHECKING:
    from pipeline.records.bench import RequestSample

DEFAULT_PERCENTILES = (50.0, 90.0, 99.0)


def percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between order statistics (numpy's default); q in 0..100; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def distribution(seconds: list[float], percentiles: Iterable[float]) -> Distribution:
    ms = [1000 * value for value in seconds]
    return Distribution(
        count=len(ms),
        mean_ms=statistics.fmean(ms) if ms else None,
        median_ms=statistics.median(ms) if ms else None,
        percentiles_ms={percentile_key(q): percentile(ms, q) for q in percentiles},
        std_ms=statistics.pstdev(ms) if ms else None,
    )


def finished(requests: Iterable[RequestSample]) -> list[RequestSample]:
    return [r for r in requests if not r.error and r.t_first is not None and r.t_done is not None]


def ttft_of(request: RequestSample) -> float:
    assert request.t_first is not None
    return request.t_first - request.t_sent


def e2el_of(request: RequestSample) -> float:
    assert request.t_done is not None
    return request.t_done - request.t_sent


def output_tokens(request: RequestSample) -> int:
    return request.completion_tokens if request.completion_tokens is not None else request.chunks


def tpot_of(request: RequestSample) -> float | None:
    """None for an answer of one token or none (vLLM leaves it out of the TPOT figures)."""
    tokens = output_tokens(request)
    if tokens <= 1:
        return None
    return (e2el_of(request) - ttft_of(request)) / (tokens - 1)


def itls_of(request: RequestSample) -> list[float]:
    times = request.token_times
    return [later - earlier for earlier, later in zip(times, times[1:])]


def parse_goodput(text: str) -> dict[str, float]:
    """`ttft:MS,tpot:MS,e2e:MS` (any subset; e2el also accepted) -> {"ttft": ms, "tpot": ms, "e2el": ms}."""
    slo: dict[str, float] = {}
    for item in text.replace(" ", ",").split(","):
        if not item:
            continue
        name, sep, value = item.partition(":")
        metric = SLO_METRICS.get(name.strip().lower())
        try:
            limit = float(value)
        except ValueError:
            limit = -1.0
        if not sep or metric is None or limit <= 0:
            raise UsageError(
                f"setting 'goodput' {text!r}: expected NAME:MS pairs with NAME one of ttft, tpot, e2e "
                f"and MS a positive number of milliseconds"
            )
        slo[metric] = limit
    if not slo:
        raise UsageError(f"setting 'goodput' {text!r}: no SLO given")
    return slo


def is_good(request: RequestSample, slo_ms: dict[str, float]) -> bool:
    if request.error or request.t_first is None or request.t_done is None:
        return False
    values = {"ttft": ttft_of(request), "tpot": tpot_of(request) or 0.0, "e2el": e2el_of(request)}
    return all(1000 * values[name] <= limit for name, limit in slo_ms.items())


def goodput(requests: list[RequestSample], slo_ms: dict[str, float], duration_s: float | None) -> Goodput:
    good = sum(is_good(r, slo_ms) for r in requests)
    return Goodput(
        slo_ms=slo_ms,
        good=good,
        requests=len(requests),
        share=good / len(requests) if requests else None,
        rate=good / duration_s if duration_s else None,
        duration_s=duration_s,
    )


def summarise(
    requests: list[RequestSample],
    scope: str,
    percentiles: Iterable[float] = DEFAULT_PERCENTILES,
    slo_ms: dict[str, float] | None = None,
    duration_s: float | None = None,
) -> LatencySummary:
    done = finished(requests)
    qs = list(percentiles)
    tpots = [t for t in map(tpot_of, done) if t is not None]
    return LatencySummary(
        scope=scope,
        requests=len(requests),
        ttft=distribution([ttft_of(r) for r in done], qs),
        tpot=distribution(tpots, qs),
        itl=distribution([gap for r in done for gap in itls_of(r)], qs),
        e2el=distribution([e2el_of(r) for r in done], qs),
        goodput=goodput(requests, slo_ms, duration_s) if slo_ms else None,
    )


def request_duration(requests: list[RequestSample]) -> float | None:
    """vLLM's benchmark duration for one run: from the first send to the last answer's end."""
    ends = [r.t_done for r in requests if r.t_done is not None]
    if not requests or not ends:
        return None
    return max(ends) - min(r.t_sent for r in requests)
