"""Report tables for latency, the open loop and replays: latency by ladder level, the rate sweep (offered
against served, queueing, the knee), latency by rate, and a replayed book run against its own log.

Takes a BenchRecord; returns Tables (report.py lays them out with the ladder's) and the lines the report's
header adds for the open loop and for merged runs. Every figure's source and definition is in the notes.
"""

from __future__ import annotations

from pipeline.bench.report.answerreport import answer_tables
from pipeline.bench.report.cachereport import ladder_cache_table, rate_cache_table, saturation_notes
from pipeline.bench.report.ratefigures import KNEE_RULE
from pipeline.bench.report.table import Table, kinds_note, num
from pipeline.records.bench import (
    BenchRecord,
    Distribution,
    LatencySummary,
    RatePoint,
    RateSweep,
    ReplayCheck,
    Series,
    percentile_key,
)

DEFINITIONS = (
    "Definitions as in vllm bench serve: TTFT = first content event - send; TPOT = (E2EL - TTFT) / (output "
    "tokens - 1), answers over one token; ITL = every gap between content events, pooled; E2EL = last byte - "
    "send. Percentiles interpolate linearly (numpy's default). Client clock; output tokens from the engine's usage."
)


def cell(dist: Distribution, percentiles: list[float]) -> str:
    values = [dist.mean_ms, *(dist.percentiles_ms.get(percentile_key(q)) for q in percentiles)]
    return " · ".join(num(v, 0 if (v or 0) >= 100 else 1) for v in values)


def latency_header(first: str, percentiles: list[float], *, goodput: bool) -> list[str]:
    order = "mean · " + " · ".join(f"p{q:g}" for q in percentiles)
    header = [first, "Requests", f"TTFT ms ({order})", f"TPOT ms ({order})", f"ITL ms ({order})", f"E2EL ms ({order})"]
    return header + (["Goodput (share, req/s)"] if goodput else [])


def goodput_cell(summary: LatencySummary) -> str:
    g = summary.goodput
    if g is None:
        return "n/a"
    share = "n/a" if g.share is None else f"{100 * g.share:.1f}%"
    return f"{share}, {num(g.rate, 2)}/s ({g.good}/{g.requests})"


def latency_row(level: str, summary: LatencySummary, percentiles: list[float], *, goodput: bool) -> list[str]:
    row = [level, str(summary.requests)] + [
        cell(getattr(summary, name), percentiles) for name in ("ttft", "tpot", "itl", "e2el")
    ]
    return row + ([goodput_cell(summary)] if goodput else [])


def goodput_note(record: BenchRecord) -> list[str]:
    slo = record.spec.goodput_slo_ms
    if not slo:
        return []
    limits = ", ".join(f"{name.upper()} <= {ms:g} ms" for name, ms in slo.items())
    return [
        f"Goodput (vLLM's --goodput): requests meeting every SLO ({limits}; a one-token answer counts TPOT 0) "
        f"as a share of all requests of the scope, failed ones included, and per second of its duration."
    ]


def ladder_latency_table(record: BenchRecord, series: Series) -> Table | None:
    levels = [lv for lv in series.levels if lv.total.latency is not None]
    if not levels:
        return None
    qs, goodput = record.spec.percentiles, bool(record.spec.goodput_slo_ms)
    rows = [latency_row(str(lv.streams), lv.total.latency, qs, goodput=goodput) for lv in levels if lv.total.latency]
    scope = levels[0].total.latency.scope if levels[0].total.latency else ""
    notes = [DEFINITIONS, f"Requests: {scope}; goodput per second of the window.", *goodput_note(record)]
    return Table(f"Latency: {series.label} (closed loop)", latency_header("Streams", qs, goodput=goodput), rows, notes)


SWEEP_HEADER = [
    "Offered req/s",
    "Arrived req/s",
    "Served req/s",
    "Served / arrived",
    "Req throughput",
    "Output tok/s",
    "In flight mean / peak",
    "Slots",
    "Send delay ms mean / max",
    "Engine running / waiting",
    "Done / failed",
    "Verdict",
]


def verdict(point: RatePoint) -> str:
    words = ["keeps up" if point.keeps_up else "falls behind"]
    if point.knee:
        words.append("KNEE")
    if point.queueing:
        words.append("queueing")
    return ", ".join(words)


def sweep_row(point: RatePoint) -> list[str]:
    return [
        num(point.rate, 2),
        num(point.arrival_rate, 2),
        num(point.completion_rate, 2),
        "n/a" if point.served_ratio is None else f"{point.served_ratio:.3f}",
        num(point.request_throughput, 2),
        num(point.output_throughput),
        f"{num(point.concurrency_mean)} / {point.peak_in_flight}",
        str(point.slots),
        f"{num(point.send_delay_mean_ms)} / {num(point.send_delay_max_ms)}",
        f"{num(point.running_mean)} / {num(point.waiting_mean)} (max {num(point.waiting_max, 0)})",
        f"{point.completed} / {point.failed}",
        verdict(point),
    ]


def sweep_notes(record: BenchRecord, sweep: RateSweep) -> list[str]:
    spec = record.spec
    first = sweep.points[0] if sweep.points else None
    cap = (
        f"at most {spec.max_concurrency} in flight (later arrivals wait in the client)"
        if spec.max_concurrency
        else "no client cap on requests in flight"
    )
    notes = [
        f"Workload: {sweep.workload}. Arrivals: gamma gaps of shape {spec.burstiness:g} (1 = Poisson) and mean "
        f"1/rate, seed {spec.seed}, for {spec.duration_s:g} s"
        + (f" or {spec.num_requests} requests" if spec.num_requests else "")
        + f" per rate; {cap}.",
        "Arrived = (arrivals - 1) / their span: what the seeded schedule offered. Served = (completions - 1) / "
        "their span: what the fleet delivered, drain excluded. Req throughput and output tok/s: vLLM's "
        "(completed requests and usage tokens over first send .. last answer, drain included).",
        f"Knee: {sweep.knee_rule or KNEE_RULE}: "
        + (f"{sweep.knee_rate:g} req/s." if sweep.knee_rate is not None else "none in this sweep."),
        "Queueing: more requests in flight than the engines' slots; the engines queued the rest (their waiting "
        "gauge). Send delay: arrival to send, the client's own queue (--max-concurrency).",
    ]
    if first is not None and first.gauge_source:
        notes.append(f"Engine running / waiting: {first.gauge_source}.")
    for point in sweep.points:
        if point.failed:
            kinds = kinds_note(point.failures_by_kind)
            notes.append(f"{num(point.rate, 2)} req/s: {point.failed} failed requests{kinds}.")
    mismatched = [p for p in sweep.points if p.tokens_match is False]
    if mismatched:
        notes.append(
            f"The engine's token counter did not match usage at {', '.join(num(p.rate, 2) for p in mismatched)} req/s."
        )
    return notes + saturation_notes(sweep)


def sweep_table(record: BenchRecord, sweep: RateSweep) -> Table:
    rows = [sweep_row(p) for p in sweep.points]
    return Table(f"Open loop: {sweep.label}", SWEEP_HEADER, rows, sweep_notes(record, sweep))


def rate_latency_table(record: BenchRecord, sweep: RateSweep) -> Table:
    qs, goodput = record.spec.percentiles, bool(record.spec.goodput_slo_ms)
    rows = [latency_row(num(p.rate, 2), p.latency, qs, goodput=goodput) for p in sweep.points]
    notes = [DEFINITIONS, "Requests: every arrival of the rate, its drain included.", *goodput_note(record)]
    return Table(
        f"Latency: {sweep.label} (open loop)", latency_header("Offered req/s", qs, goodput=goodput), rows, notes
    )


def replay_table(record: BenchRecord, replay: ReplayCheck) -> Table:
    point = replay.point
    speed = "all at once, paced by the backends' caps" if replay.speed == 0 else f"original times / {replay.speed:g}"
    header = ["Requests logged", "Replayed", "Compared", "Prompt tokens: run / replay", "Output tokens",
              "Over cap", "Served req/s", "Output tok/s", "TTFT p50 ms", "E2EL p50 ms"]  # fmt: skip
    row = [
        str(replay.requests_logged),
        f"{replay.requests_replayed} ({', '.join(f'{k} {v}' for k, v in sorted(replay.by_kind.items()))})",
        str(replay.compared),
        f"{replay.prompt_tokens_logged:,} / {replay.prompt_tokens_replayed:,}",
        f"{replay.output_tokens_replayed:,}",
        str(replay.over_cap),
        num(point.request_throughput, 2),
        num(point.output_throughput),
        num(point.latency.ttft.median_ms, 0),
        num(point.latency.e2el.median_ms, 0),
    ]
    notes = [
        f"Replay of {replay.source}: every request the book run sent (planning, sections, repairs) with its "
        f"messages, cap and sampling fields, {speed}.",
        "Compared: requests answered in both runs (planning answers the run cancelled once it had enough "
        "titles have no engine count); prompt tokens are the engine's usage counts in each run.",
        "Req throughput and output tok/s: over first send .. last answer (vLLM's duration).",
    ]
    return Table("Replay of a book run", header, [row], notes)


def load_tables(record: BenchRecord) -> list[Table]:
    found: list[Table | None] = [ladder_latency_table(record, series) for series in record.series]
    found += ladder_cache_table(record)
    for sweep in record.sweeps:
        found += [sweep_table(record, sweep), rate_latency_table(record, sweep), rate_cache_table(record, sweep)]
    found += [replay_table(record, replay) for replay in record.replays]
    return [t for t in found if t is not None] + answer_tables(record)


def open_loop_lines(record: BenchRecord) -> list[str]:
    client = {
        "fast": "the fast client (httptools over plain sockets)",
        "sdk": "the openai SDK (httpx)",
    }.get(record.client, record.client)
    processes = "one client process" if record.spec.workers == 1 else f"{record.spec.workers} client processes"
    lines = [f"Requests sent by {client}, from {processes}."]
    for run in record.merged_from:
        p = run.provenance
        lines.append(
            f"Merged from {run.folder} ({run.label}): started {p.started_at}, {p.duration_s:,.0f} s, host "
            f"{p.host.cpu_model} ({p.host.cores} cores), backends "
            + ", ".join(f"{b.name} {b.engine} {b.model}" for b in p.backends)
            + "."
        )
    return lines
