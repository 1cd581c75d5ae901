"""Charts of a BenchRecord, drawn with matplotlib (Agg, no display): total and per-stream tok/s against
streams, step time with its fitted line, and TTFT percentiles. Takes the record and a folder; returns the
PNG paths it wrote, by name."""

from __future__ import annotations

from pathlib import Path

from matplotlib.ticker import FuncFormatter

from pipeline.bench.report.answerreport import answers_chart
from pipeline.bench.report.latencycharts import draw_latency_charts
from pipeline.bench.report.plotting import beside, plt, save_figure
from pipeline.records.bench import BenchRecord, Series


def _axes(title: str, ylabel: str, levels: list[int]):
    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    axes.set_title(title)
    axes.set_xlabel("streams per backend")
    axes.set_ylabel(ylabel)
    axes.set_xscale("log", base=2)
    axes.set_xticks(levels, [str(n) for n in levels])
    axes.grid(visible=True, alpha=0.3)
    return figure, axes


def _finished(figure, axes, path: Path) -> Path:
    """A chart on a linear scale from zero, with its legend, written to `path`."""
    axes.set_ylim(bottom=0)
    axes.legend(fontsize=8)
    return save_figure(figure, path)


def _levels(record: BenchRecord) -> list[int]:
    return sorted({level.streams for series in record.series for level in series.levels})


def _xs(series: Series) -> list[int]:
    return [level.streams for level in series.levels]


def throughput_chart(record: BenchRecord, path: Path) -> Path:
    figure, axes = _axes("Total throughput (sustained and best second)", "tokens per second", _levels(record))
    for series in record.series:
        (line,) = axes.plot(
            _xs(series), [lv.total.sustained for lv in series.levels], "o-", label=f"{series.label} sustained"
        )
        best = [lv.total.best_second for lv in series.levels]
        beside(axes, line, _xs(series), best, "^:", label=f"{series.label} best second")
        if series.fit is not None:
            fit = series.fit
            beside(axes, line, fit.streams, fit.predicted_tok_s, "--", alpha=0.6, label=f"{series.label} fit")
    return _finished(figure, axes, path)


def per_stream_chart(record: BenchRecord, path: Path) -> Path:
    figure, axes = _axes("What each stream gets", "tokens per second per stream", _levels(record))
    for series in record.series:
        axes.plot(_xs(series), [lv.total.per_stream for lv in series.levels], "o-", label=series.label)
    return _finished(figure, axes, path)


def step_chart(record: BenchRecord, path: Path) -> Path:
    levels = _levels(record)
    figure, axes = _axes("Step time = streams / sustained, with its least-squares line", "ms per step", levels)
    for series in record.series:
        (line,) = axes.plot(
            _xs(series), [lv.total.step_ms for lv in series.levels], "o", label=f"{series.label} measured"
        )
        fit = series.fit
        if fit is not None:
            xs = [levels[0] + (levels[-1] - levels[0]) * i / 100 for i in range(101)]
            label = f"{series.label}: {fit.a_ms:.2f} + {fit.b_ms:.4f} x streams"
            beside(axes, line, xs, [fit.a_ms + fit.b_ms * x for x in xs], "-", alpha=0.7, label=label)
    return _finished(figure, axes, path)


def ttft_chart(record: BenchRecord, path: Path) -> Path:
    figure, axes = _axes("Time to first token", "ms", _levels(record))
    for series in record.series:
        levels = [lv for lv in series.levels if lv.total.ttft_p50_ms is not None]
        xs = [lv.streams for lv in levels]
        (line,) = axes.plot(xs, [lv.total.ttft_p50_ms for lv in levels], "o-", label=f"{series.label} median")
        beside(axes, line, xs, [lv.total.ttft_p90_ms for lv in levels], "s--", alpha=0.7, label=f"{series.label} p90")
        beside(axes, line, xs, [lv.total.ttft_p99_ms for lv in levels], "v:", alpha=0.5, label=f"{series.label} p99")
    axes.set_yscale("log")
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: f"{value:g}" if f"{value:g}"[0] in "25" else ""))
    axes.legend(fontsize=8)
    return save_figure(figure, path)


def draw_charts(record: BenchRecord, folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    charts: dict[str, Path] = {}
    if record.series:
        charts = {
            "throughput": throughput_chart(record, folder / "throughput.png"),
            "per_stream": per_stream_chart(record, folder / "per_stream.png"),
            "step_time": step_chart(record, folder / "step_time.png"),
            "ttft": ttft_chart(record, folder / "ttft.png"),
        }
    answers = answers_chart(record, folder / "answers.png")
    return charts | draw_latency_charts(record, folder) | ({"answers": answers} if answers else {})
