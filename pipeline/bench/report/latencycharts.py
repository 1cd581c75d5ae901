"""Latency charts of a BenchRecord (matplotlib, Agg): TTFT, TPOT, ITL and E2EL against streams (the ladder)
and against the offered rate (the open loop), median and the highest percentile asked; and the open loop's
served against offered request rate, the knee marked. Takes the record and a folder; returns PNG paths."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pipeline.bench.report.plotting import beside, plt, save_figure
from pipeline.records.bench import (
    BenchRecord,
    Distribution,
    LatencySummary,
    percentile_key,
)

FIGURES = (("ttft", "Time to first token"), ("tpot", "Time per output token"), ("itl", "Inter-token latency"),
           ("e2el", "End-to-end latency"))  # fmt: skip
Line = tuple[str, list[float], list[LatencySummary]]  # label, x values, their summaries


def _panel(axes, lines: list[Line], figure_name: str, title: str, xlabel: str, top_q: float) -> None:
    for label, xs, summaries in lines:
        dists: list[Distribution] = [getattr(s, figure_name) for s in summaries]
        (line,) = axes.plot(xs, [d.median_ms for d in dists], "o-", label=f"{label} median")
        top = [d.percentiles_ms.get(percentile_key(top_q)) for d in dists]
        beside(axes, line, xs, top, "v:", alpha=0.7, label=f"{label} p{top_q:g}")
    axes.set_title(title, fontsize=10)
    axes.set_xlabel(xlabel, fontsize=9)
    axes.set_ylabel("ms", fontsize=9)
    axes.set_ylim(bottom=0)
    axes.grid(visible=True, alpha=0.3)


def _latency_grid(lines: list[Line], xlabel: str, title: str, top_q: float, path: Path) -> Path:
    figure, grid = plt.subplots(2, 2, figsize=(9.6, 6.4))
    for axes, (name, label) in zip(grid.flat, FIGURES):
        _panel(axes, lines, name, label, xlabel, top_q)
    grid.flat[0].legend(fontsize=7)
    figure.suptitle(title)
    return save_figure(figure, path)


def ladder_lines(record: BenchRecord) -> list[Line]:
    lines = []
    for series in record.series:
        levels = [lv for lv in series.levels if lv.total.latency is not None]
        summaries = [lv.total.latency for lv in levels if lv.total.latency is not None]
        lines.append((series.label, [float(lv.streams) for lv in levels], summaries))
    return lines


def rate_lines(record: BenchRecord) -> list[Line]:
    return [
        (sweep.label, [p.rate or 0.0 for p in sweep.points], [p.latency for p in sweep.points])
        for sweep in record.sweeps
    ]


def served_chart(record: BenchRecord, path: Path) -> Path:
    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    top = 0.0
    for sweep in record.sweeps:
        offered = [p.rate or 0.0 for p in sweep.points]
        top = max([top, *offered])
        (line,) = axes.plot(offered, [p.completion_rate or 0 for p in sweep.points], "o-", label=sweep.label)
        for point in sweep.points:
            if point.knee:
                axes.annotate("knee", (point.rate or 0, point.completion_rate or 0), color=line.get_color())
    axes.plot([0, top], [0, top], "k:", alpha=0.5, label="served = offered")
    axes.set_title("Open loop: served against offered")
    axes.set_xlabel("offered requests per second")
    axes.set_ylabel("completions per second")
    axes.grid(visible=True, alpha=0.3)
    axes.legend(fontsize=8)
    return save_figure(figure, path)


def draw_latency_charts(record: BenchRecord, folder: Path) -> dict[str, Path]:
    top_q = max(record.spec.percentiles)
    charts: dict[str, Path] = {}
    drawers: list[tuple[str, bool, Callable[[Path], Path]]] = [
        (
            "latency_streams",
            any(lv.total.latency for s in record.series for lv in s.levels),
            lambda p: _latency_grid(ladder_lines(record), "streams per backend", "Latency against streams", top_q, p),
        ),
        (
            "latency_rate",
            bool(record.sweeps),
            lambda p: _latency_grid(
                rate_lines(record), "offered requests per second", "Latency against rate", top_q, p
            ),
        ),
        ("served_rate", bool(record.sweeps), lambda p: served_chart(record, p)),
    ]
    for name, wanted, draw in drawers:
        if wanted:
            charts[name] = draw(folder / f"{name}.png")
    return charts
