"""Over-saturation of an open-loop level, detected while it runs, as guidellm's over-saturation constraint
(`--detect-saturation`) defines it: the slope of the requests in flight (sampled every interval) and the
slope of TTFT (one point a request, at its first token) over a sliding window, each by least squares with
its one-sided margin of error from Student's t. The level is over-saturated when both slopes stay above
their margins: the queue and the wait for a first token both keep growing, with confidence.

Where we differ from guidellm (its defaults: 30 s before the first check, a 120 s window, 95 %
confidence, at least 5 points): checks begin after MIN_SECONDS = 10 s, since an open-loop level here
defaults to 30 s of arrivals; the first SETTLE_S of a level (the fill from empty) is left out of the window;
and there is no TTFT floor. Takes points as they come; says, at each check, the figures it judged on.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from pipeline.records.bench import SaturationCheck

MIN_SECONDS = 10.0
SETTLE_S = 3.0
WINDOW_S = 120.0
MIN_POINTS = 5
CONFIDENCE = 0.95
RULE = (
    f"over-saturated when the least-squares slopes of requests in flight and of TTFT are both above their "
    f"one-sided {CONFIDENCE:.0%} margins (Student's t) over the last {WINDOW_S:g} s, from {MIN_SECONDS:g} s "
    f"into the level, the first {SETTLE_S:g} s left out (guidellm's over-saturation rule)"
)


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile, by the Cornish-Fisher expansion about the normal one (within 1 % for df >= 3)."""
    z = statistics.NormalDist().inv_cdf(p)
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


def slope_with_margin(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(slope, one-sided margin of error) of y over x by least squares; None below MIN_POINTS or a flat x."""
    n = len(points)
    if n < MIN_POINTS:
        return None
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    if sxx <= 0:
        return None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sxx
    residual = sum((y - mean_y - slope * (x - mean_x)) ** 2 for x, y in points) / (n - 2)
    return slope, t_quantile(CONFIDENCE, n - 2) * math.sqrt(residual / sxx)


@dataclass
class SaturationDetector:
    t0: float  # the level's start
    concurrent: list[tuple[float, float]] = field(default_factory=list)  # (time, requests in flight)
    ttft: list[tuple[float, float]] = field(default_factory=list)  # (time of first token, TTFT seconds)

    def in_flight(self, t: float, count: int) -> None:
        self.concurrent.append((t, float(count)))

    def first_token(self, t: float, seconds: float) -> None:
        self.ttft.append((t, seconds))

    def check(self, now: float) -> SaturationCheck:
        start = max(self.t0 + SETTLE_S, now - WINDOW_S)
        concurrent = [(t - self.t0, y) for t, y in self.concurrent if t >= start]
        ttft = [(t - self.t0, y) for t, y in self.ttft if t >= start]
        a, b = slope_with_margin(concurrent), slope_with_margin(ttft)
        rising = a is not None and b is not None and a[0] > a[1] and b[0] > b[1]
        return SaturationCheck(
            saturated=rising and now - self.t0 >= MIN_SECONDS,
            concurrent_slope=None if a is None else a[0],
            concurrent_moe=None if a is None else a[1],
            concurrent_n=len(concurrent),
            ttft_slope=None if b is None else b[0],
            ttft_moe=None if b is None else b[1],
            ttft_n=len(ttft),
            rule=RULE,
        )
