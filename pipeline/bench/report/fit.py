"""The step-time line: least squares step_ms = a + b * streams over a ladder's levels.

Takes (streams per backend, step_ms, measured tok/s, backends) for each level; returns a Fit with the
predicted total rate at every level (backends * streams / step) and the ceiling 1/b (per backend), or None
when fewer than two distinct levels have a step time. A description of the curve, not a law.
"""

from __future__ import annotations

from pipeline.records.bench import Fit, LevelResult


def least_squares(xs: list[float], ys: list[float]) -> tuple[float, float, float | None]:
    """Intercept, slope and r^2 of the line through (xs, ys); needs two distinct xs."""
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
    slope = sxy / sxx
    intercept = mean_y - slope * mean_x
    syy = sum((y - mean_y) ** 2 for y in ys)
    residual = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys))
    return intercept, slope, None if syy == 0 else 1 - residual / syy


def fit_levels(levels: list[LevelResult], backends: int) -> Fit | None:
    """Fit the fleet's step time (total streams / total rate) against streams per backend."""
    usable = [level for level in levels if level.total.step_ms is not None]
    if len({level.streams for level in usable}) < 2:
        return None
    xs = [float(level.streams) for level in usable]
    a, b, r2 = least_squares(xs, [step for level in usable if (step := level.total.step_ms) is not None])
    predicted = [backends * x * 1000 / (a + b * x) if a + b * x > 0 else float("nan") for x in xs]
    return Fit(
        a_ms=a,
        b_ms=b,
        r2=r2,
        ceiling_tok_s=1000 / b if b > 0 else None,
        streams=[level.streams for level in usable],
        measured_tok_s=[level.total.sustained for level in usable],
        predicted_tok_s=predicted,
    )
