"""The bench report: tables of a BenchRecord as text/Markdown and HTML, with the charts, written to a folder.

Takes a BenchRecord (and a folder); returns the Markdown text, the HTML text, and the paths written (bench.json,
report.md, report.html, charts/*.png). The ladder table gives per level the sustained, best-second and per-stream
tok/s and the step time, then the step-time fit; several backends get their per-backend figures beside the total,
and side-by-side series a ratio column. Under each table, every figure's source is named.
"""

from __future__ import annotations

import html
from pathlib import Path

from pydantic import ValidationError

from pipeline.bench.report.charts import draw_charts
from pipeline.bench.report.figures import comparison_rows
from pipeline.bench.report.loadreport import load_tables, open_loop_lines
from pipeline.bench.report.requestrows import write_rows
from pipeline.bench.report.table import Table, kinds_note, markdown_table, num, pair
from pipeline.errors import UsageError
from pipeline.records.bench import BenchRecord, Fit, LadderPoint, Series
from pipeline.records.provenance import MergedRun


def match(point: LadderPoint) -> str:
    if point.tokens_match is None:
        return "n/a"
    verdict = "yes" if point.tokens_match else "NO"
    return f"{verdict} ({point.level_client_tokens:,})"


def ladder_row(streams: int, point: LadderPoint) -> list[str]:
    return [
        str(streams),
        num(point.sustained),
        num(point.best_second),
        num(point.per_stream),
        num(point.step_ms, 2),
        num(point.step_ms_server, 2),
        num(point.ttft_p50_ms, 0),
        num(point.ttft_p90_ms, 0),
        num(point.ttft_p99_ms, 0),
        pair(point.running_mean, point.waiting_mean),
        "n/a" if point.kv_usage_mean is None else f"{100 * point.kv_usage_mean:.1f}%",
        match(point),
        num(point.power_w),
        num(point.tokens_per_joule, 2),
    ]


LADDER_HEADER = [
    "Streams",
    "Sustained tok/s",
    "Best second",
    "Per stream tok/s",
    "Step ms",
    "Step ms (server)",
    "TTFT p50 ms",
    "TTFT p90 ms",
    "TTFT p99 ms",
    "Running / waiting",
    "KV use",
    "Server = usage",
    "GPU power W",
    "tok/J",
]


def sources(points: list[LadderPoint]) -> list[str]:
    first = points[0]
    notes = [
        f"Sustained and best second: {first.sustained_source}.",
        "Per stream = sustained / streams; step ms = streams / sustained (one token a stream each engine step).",
        f"TTFT: {first.ttft_scope}.",
    ]
    if first.step_ms_server_source:
        notes.append(f"Step ms (server): window / engine steps, {first.step_ms_server_source}.")
    notes.append(
        "Running / waiting / KV: the engine's gauges, mean of the 0.5 s samples inside the window (n/a: not exposed)."
    )
    notes.append(
        "Server = usage: the engine's generated-token counter over the whole level (drain included) equals "
        "the sum of usage.completion_tokens; the count in brackets."
    )
    notes.append(f"GPU power: {first.power_source or 'n/a: no nvidia-smi on the bench host (null, not zero)'}.")
    return notes


def ladder_table(series: Series) -> Table:
    rows = [ladder_row(level.total.streams, level.total) for level in series.levels]
    points = [level.total for level in series.levels]
    notes = sources(points) + level_notes(series)
    streams_note = " (total streams over all backends)" if len(series.backends) > 1 else ""
    return Table(f"Ladder: {series.label}{streams_note}", LADDER_HEADER, rows, notes)


def level_notes(series: Series) -> list[str]:
    notes = []
    for level in series.levels:
        point = level.total
        if point.occupancy is not None and point.occupancy < 0.95:
            notes.append(
                f"{point.streams} streams: the engine ran {point.running_mean:.1f} on average "
                f"({100 * point.occupancy:.0f}% occupancy): under-loaded, the figure understates batching."
            )
        if point.requests_failed or point.reissued:
            kinds = kinds_note(point.failures_by_kind)
            notes.append(
                f"{point.streams} streams: {point.requests_failed} failed requests{kinds}, "
                f"{point.reissued} asked again after a connection closed before its first byte."
            )
    first = series.levels[0].total if series.levels else None
    if first is not None:
        cached = [lv.total.cached_prompt_tokens for lv in series.levels]
        hits = [lv.total.cache_hit_rate for lv in series.levels if lv.total.cache_hit_rate is not None]
        if any(c is not None for c in cached):
            notes.append(
                f"Prefix cache: the engine's cached-prompt counter ({first.cache_hit_rate_source or 'engine'}) rose "
                f"by {', '.join(num(c, 0) for c in cached)} tokens per level "
                f"(hit rate up to {100 * max(hits, default=0):.1f}% of usage prompt tokens)."
            )
        else:
            notes.append("Prefix cache: the engine exposes no cached-prompt counter.")
        told = [lv.total.request_cache_hit_rate for lv in series.levels]
        if any(t is not None for t in told):
            notes.append(
                "Prefix cache as the answers told it (cached prompt tokens in usage or llama.cpp timings): "
                + ", ".join("-" if t is None else f"{100 * t:.1f}%" for t in told)
                + " of their prompt tokens per level."
            )
        if first.prompt_tokens_median is not None:
            target = f"target {first.prompt_tokens_target}, " if first.prompt_tokens_target else ""
            notes.append(
                f"Prompt tokens reported by the engine: {target}median {num(first.prompt_tokens_median, 0)}, "
                f"range {first.prompt_tokens_min}–{first.prompt_tokens_max} (first level)."
            )
    return notes


def fit_table(series: Series) -> Table | None:
    fit: Fit | None = series.fit
    if fit is None:
        return None
    backends = len(series.backends)
    rows = []
    for streams, measured, predicted in zip(fit.streams, fit.measured_tok_s, fit.predicted_tok_s):
        step = fit.a_ms + fit.b_ms * streams
        rows.append(
            [
                str(streams),
                num(measured),
                num(predicted),
                f"{100 * (measured / predicted - 1):+.1f}%",
                num(backends * streams * 1000 / measured if measured else None, 2),
                num(step, 2),
            ]
        )
    ceiling = "n/a (slope not positive)" if fit.ceiling_tok_s is None else f"{fit.ceiling_tok_s:,.0f} tok/s per backend"
    notes = [
        f"Least squares: step_ms = {fit.a_ms:.2f} + {fit.b_ms:.4f} × streams "
        f"(r² {num(fit.r2, 4)}); ceiling 1/b = {ceiling}.",
        "Predicted tok/s = streams / (a + b × streams), times the number of backends. The line describes "
        "the curve; it is not a law.",
    ]
    return Table(
        f"Fit: {series.label}",
        [
            "Streams per backend",
            "Measured tok/s",
            "Predicted tok/s",
            "Measured vs predicted",
            "Measured step ms",
            "Fitted step ms",
        ],
        rows,
        notes,
    )


def backends_table(series: Series) -> Table | None:
    if len(series.backends) < 2:
        return None
    rows = []
    for level in series.levels:
        for point in [*level.backends, level.total]:
            rows.append(
                [
                    str(level.streams),
                    point.scope,
                    num(point.sustained),
                    num(point.best_second),
                    num(point.per_stream),
                    num(point.step_ms, 2),
                    num(point.ttft_p50_ms, 0),
                    match(point),
                ]
            )
    notes = [
        "One absolute schedule for every backend; the total is the backends' token series summed on a common "
        "grid, so its best second is a simultaneous peak, not a sum of separate peaks."
    ]
    notes += sorted({f"{p.scope}: {p.sustained_source}." for lv in series.levels for p in lv.backends})
    return Table(
        f"Per backend: {series.label}",
        [
            "Streams per backend",
            "Backend",
            "Sustained tok/s",
            "Best second",
            "Per stream",
            "Step ms",
            "TTFT p50 ms",
            "Server = usage",
        ],
        rows,
        notes,
    )


def comparison_table(record: BenchRecord) -> Table | None:
    if not record.comparison:
        return None
    base = record.series[0].label
    rows = [
        [
            row.label,
            str(row.streams),
            num(row.base),
            num(row.other),
            num(row.ratio, 2),
            num(row.other_ttft_p50_ms, 0),
            pair(row.other_running, row.other_waiting),
        ]
        for row in record.comparison
    ]
    return Table(
        f"Side by side (against {base})",
        [
            "Series",
            "Streams",
            f"{base} tok/s",
            "Series tok/s",
            "Ratio",
            "Series TTFT median ms",
            "Running / waiting (series)",
        ],
        rows,
        [f"Ratio = series sustained / {base} sustained at the same streams."],
    )


def provenance_lines(record: BenchRecord) -> list[str]:
    p, spec = record.provenance, record.spec
    host = p.host
    gpus = ", ".join(f"{g.name} ({num(g.memory_mib, 0)} MiB)" for g in host.gpus) or "none"
    ladder = (
        f"window {spec.window_s:g} s after a warm-up of at least {spec.warmup_s:g} s and full occupancy; "
        if record.series
        else ""
    )
    caps = {s.answer_cap for s in record.series if s.answer_cap} | {s.answer_cap for s in record.sweeps if s.answer_cap}
    cap = f"answer caps: {'; '.join(sorted(caps))}" if caps else f"max tokens {spec.max_tokens}"
    lines = [
        f"Started {p.started_at}, {p.duration_s:,.0f} s in all; {ladder}{cap}; "
        f"temperature 0 (a replay: the run's own sampling); counters sampled every {spec.sample_interval_s:g} s.",
        f"Host: {host.cpu_model}, {host.cores} cores, {host.ram_gib:g} GiB RAM; GPUs: {gpus}; load average "
        f"{host.loadavg_start} at start, {host.loadavg_end} at end; {host.platform}; fanout {host.fanout_version}.",
    ]
    for b in p.backends:
        embedded = f"; embedded engine {b.embedded}" if b.embedded else ""
        lines.append(
            f"Backend {b.name}: {b.base_url}, engine {b.engine} {b.version or '(version unknown)'}, model "
            f"{b.model}, {b.slots} slots ({b.slots_source}), cap {b.cap}, ignore_eos "
            f"{'on' if b.ignore_eos else 'off (not supported)'}, counter "
            f"{'per step' if b.counts_per_step else 'at request end'}"
            f"{', prompts counted by ' + b.tokenizer if b.tokenizer else ''}{embedded}."
        )
    return lines + open_loop_lines(record)


def tables(record: BenchRecord) -> list[Table]:
    found: list[Table | None] = []
    for series in record.series:
        found += [ladder_table(series), fit_table(series), backends_table(series)]
    found.append(comparison_table(record))
    return [table for table in found if table is not None] + load_tables(record)


def text_report(record: BenchRecord) -> str:
    """What the terminal shows: every table in Markdown, with its notes."""
    parts = []
    for table in tables(record):
        parts.append(f"{table.title}\n{markdown_table(table)}\n" + "\n".join(f"  {n}" for n in table.notes))
    return "\n\n".join(parts)


CHART_TITLES = {
    "throughput": "Total tok/s against streams",
    "per_stream": "Per-stream tok/s against streams",
    "step_time": "Step time with its fit",
    "ttft": "Time to first token",
    "latency_streams": "Latency against streams",
    "latency_rate": "Latency against offered rate",
    "served_rate": "Served against offered rate",
    "answers": "Answers capped, looping, empty or duplicated against load",
}


def markdown_report(record: BenchRecord, charts: dict[str, str]) -> str:
    parts = [f"# Bench: {record.spec.label}", "\n".join(f"- {line}" for line in provenance_lines(record))]
    for table in tables(record):
        parts.append(f"## {table.title}\n\n{markdown_table(table)}\n\n" + "\n".join(f"- {n}" for n in table.notes))
    parts.append("## Charts\n\n" + "\n\n".join(f"![{CHART_TITLES[k]}]({v})" for k, v in charts.items()))
    return "\n\n".join(parts) + "\n"


def html_table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in table.rows)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in table.notes)
    return (
        f"<h2>{html.escape(table.title)}</h2><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        f"<ul class='notes'>{notes}</ul>"
    )


STYLE = (
    "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}"
    "th{background:#f3f3f3}.notes{font-size:13px;color:#444}img{max-width:48%;margin:0.5%}"
)


def html_report(record: BenchRecord, charts: dict[str, str]) -> str:
    title = html.escape(f"Bench: {record.spec.label}")
    provenance = "".join(f"<li>{html.escape(line)}</li>" for line in provenance_lines(record))
    images = "".join(f"<img src='{html.escape(v)}' alt='{html.escape(CHART_TITLES[k])}'>" for k, v in charts.items())
    body = "".join(html_table(table) for table in tables(record))
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>{STYLE}</style></head>"
        f"<body><h1>{title}</h1><ul>{provenance}</ul>{body}<h2>Charts</h2>{images}</body></html>\n"
    )


def write_report(record: BenchRecord, folder: Path) -> dict[str, Path]:
    """bench.json, charts, report.md and report.html in `folder`; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"record": folder / "bench.json", "markdown": folder / "report.md", "html": folder / "report.html"}
    paths["record"].write_text(record.model_dump_json(indent=1))
    charts = {name: f"charts/{path.name}" for name, path in draw_charts(record, folder / "charts").items()}
    paths["markdown"].write_text(markdown_report(record, charts))
    paths["html"].write_text(html_report(record, charts))
    if record.request_rows:
        paths |= write_rows(record.request_rows, folder)
    return paths


def merge_runs(folders: list[Path]) -> BenchRecord:
    """One record from several saved runs: every series, sweep and replay, labelled by its run where two
    runs share a label; the first run's spec and provenance head it, every run's provenance is listed."""
    records = [load_run(folder) for folder in folders]
    merged = records[0].model_copy(deep=True)
    merged.series, merged.sweeps, merged.replays, merged.merged_from = [], [], [], []
    taken: set[str] = set()
    for folder, record in zip(folders, records):
        for series in record.series:
            series.label = unique_label(series.label, folder, taken)
            merged.series.append(series)
        for sweep in record.sweeps:
            sweep.label = unique_label(sweep.label, folder, taken)
            merged.sweeps.append(sweep)
        merged.replays += record.replays
        merged.merged_from.append(MergedRun(folder=str(folder), label=record.spec.label, provenance=record.provenance))
    merged.spec.percentiles = sorted(set.intersection(*(set(r.spec.percentiles) for r in records)))
    merged.comparison = comparison_rows(merged.series)
    return merged


def unique_label(label: str, folder: Path, taken: set[str]) -> str:
    chosen = label if label not in taken else f"{label} ({folder.name})"
    taken.add(chosen)
    return chosen


def load_run(folder: Path) -> BenchRecord:
    path = folder / "bench.json"
    try:
        return BenchRecord.model_validate_json(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{folder}: no bench.json in it (not a fanout bench run folder)") from None
    except ValidationError as exc:
        raise UsageError(f"{path}: not a bench record this fanout can read ({exc.error_count()} errors)") from None
