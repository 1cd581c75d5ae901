"""A bench run in the shapes users' tools already read: one JSON file a ladder level and an open-loop rate with
the keys and units `vllm bench serve --save-result` writes, and one CSV row a level or rate.

vLLM's keys, read from vllm/benchmarks/serve.py (vllm-project/vllm @ 009e6d4a): `main_async` writes the run's
metadata first (date, endpoint_type, backend, label, model_id, tokenizer_id, num_prompts, request_rate,
burstiness, max_concurrency), then `benchmark()`'s figures (duration s, completed, failed, token totals,
request/goodput/output/total-token throughputs, the per-request `latencies` and `queue_times` in seconds,
max_output_tokens_per_s, max_concurrent_requests, rtfx), then, per latency metric, `mean_`, `median_`,
`std_` and `p{P}_{metric}_ms` in milliseconds (`p99`, `p99.9`). With --detailed (vLLM's --save-detailed) a
rate's file also holds, in vLLM's order and units, input_lens, output_lens, ttfts (s), itls (s, a list a
request), start_times, generated_texts and errors, from the request rows (--save-requests). The figures are
fanout's own, defined as vLLM defines them (pipeline/bench/report/latency.py); where a figure differs,
FIELD_NOTES says how, and docs/figures.md lists the fields. A file is one plain JSON object, as vLLM's
`json.dump` writes it.

An open-loop rate maps field for field: vLLM's duration is the first send to the last answer, and so is
fanout's. A ladder level is a closed loop of N streams a backend: its figures are those of the requests
sent inside the steady window, so `duration` is the window, `request_rate` is "inf" (vLLM's value when
every request may go at once) and `max_concurrency` is the streams of the whole fleet.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.errors import UsageError
from pipeline.files import write_atomic
from pipeline.records import Endpoint
from pipeline.records.bench import BenchRecord, Distribution, LatencySummary, LevelResult, RatePoint, percentile_key

METRICS = ("ttft", "tpot", "itl", "e2el")  # vLLM's --percentile-metrics ttft,tpot,itl,e2el

FIELD_NOTES = {
    "endpoint_type": "openai-chat, or openai for a run over /v1/completions (--endpoint completions), as vLLM's "
    "--backend names them",
    "tokenizer_id": "null: prompt lengths are counted by the engine's own /tokenize",
    "duration": "ladder: the steady window; rate: first send to last answer, as vLLM",
    "total_input_tokens": "ladder: null (the window counts generated tokens only); rate: usage prompt tokens",
    "total_output_tokens": "ladder: tokens generated inside the window; rate: usage completion tokens",
    "max_output_tokens_per_s": "ladder: the best one-second token count; rate: null (not kept)",
    "max_concurrent_requests": "ladder: the streams held; rate: the peak in flight, client side",
    "latencies": "open-loop rates of a run that kept its request rows (--save-requests); failed 0.0, as vLLM",
    "queue_times": "only with request rows: send time minus arrival (--max-concurrency holding a request)",
    "start_times": "--detailed: seconds after the bench started (vLLM: its process's perf_counter)",
    "output_lens": "--detailed: the engine's usage completion tokens (vLLM: usage, else its tokenizer's count)",
    "itls": "--detailed: the gaps between content events, in seconds, as vLLM takes them",
    "rtfx": "0.0: no audio, as vLLM writes for text",
}


def result_name(label: str, rate: float | str, concurrency: int | None, model: str, date: str) -> str:
    """vLLM's default file name: `{label}-{rate}qps[-concurrency{N}]-{model}-{date}.json` (its
    compute_result_filename), with every character a file name should not hold made a dash."""
    concurrency_part = f"-concurrency{concurrency}" if concurrency is not None else ""
    name = f"{label}-{rate}qps{concurrency_part}-{model.split('/')[-1]}-{date}"
    return re.sub(r"[^\w.]*[^\w.-][^\w.]*", "-", name, flags=re.ASCII) + ".json"


def metric_keys(latency: LatencySummary | None, percentiles: list[float]) -> dict[str, float | None]:
    """mean_, median_, std_ and p{P}_{metric}_ms for each metric, in vLLM's order (process_one_metric)."""
    keys: dict[str, float | None] = {}
    for metric in METRICS:
        figures: Distribution | None = getattr(latency, metric) if latency is not None else None
        keys[f"mean_{metric}_ms"] = figures.mean_ms if figures else None
        keys[f"median_{metric}_ms"] = figures.median_ms if figures else None
        keys[f"std_{metric}_ms"] = figures.std_ms if figures else None
        for q in percentiles:
            keys[f"{percentile_key(q)}_{metric}_ms"] = figures.at(q) if figures else None
    return keys


def _model(record: BenchRecord, backends: list[str]) -> str:
    models = sorted({b.model or b.name for b in record.provenance.backends if b.name in backends})
    return ",".join(models) or "unknown"


def _date(record: BenchRecord) -> str:
    return datetime.fromisoformat(record.provenance.started_at).strftime("%Y%m%d-%H%M%S")


def _rows(folder: Path | None) -> dict[tuple[str, str], list[dict]]:
    """The run's request rows (requests.jsonl, --save-requests) by (series, level), or none."""
    rows: dict[tuple[str, str], list[dict]] = {}
    path = None if folder is None else folder / "requests.jsonl"
    if path is None or not path.exists():
        return rows
    for line in path.read_text().splitlines():
        row = json.loads(line)
        rows.setdefault((row["series"], row["level"]), []).append(row)
    return rows


def _request_lists(rows: list[dict] | None, *, detailed: bool = False) -> dict[str, list[Any]]:
    """vLLM's per-request lists from the request rows, in its order: `latencies` and `queue_times` always,
    and with `detailed` the lists --save-detailed keeps (a failed request: 0 and empty, as vLLM writes it)."""
    if not rows:
        return {}
    seconds = lambda ms: (ms or 0.0) / 1000  # noqa: E731
    queued = [
        max(row["t_sent"] - row["t_scheduled"], 0.0) if row.get("t_scheduled") is not None else 0.0 for row in rows
    ]
    if not detailed:
        return {"latencies": [seconds(row["e2e_ms"]) for row in rows], "queue_times": queued}
    return {
        "input_lens": [row["prompt_tokens"] or 0 for row in rows],
        "output_lens": [row["completion_tokens"] or 0 for row in rows],
        "ttfts": [seconds(row["ttft_ms"]) for row in rows],
        "itls": [[seconds(gap) for gap in row.get("itls_ms") or []] for row in rows],
        "latencies": [seconds(row["e2e_ms"]) for row in rows],
        "start_times": [row["t_sent"] for row in rows],
        "queue_times": queued,
        "generated_texts": [row.get("text") or "" for row in rows],
        "errors": [row["error"] or "" for row in rows],
    }


def vllm_backend(record: BenchRecord) -> str:
    """vLLM's --backend for the endpoint the run used: `openai` is its text completions, `openai-chat` chat."""
    return "openai" if record.spec.endpoint is Endpoint.COMPLETIONS else "openai-chat"


def _head(record: BenchRecord, label: str, backends: list[str], requests: int, rate: float | str) -> dict[str, Any]:
    return {
        "date": _date(record),
        "endpoint_type": vllm_backend(record),
        "backend": vllm_backend(record),
        "label": label,
        "model_id": _model(record, backends),
        "tokenizer_id": None,
        "num_prompts": requests,
        "request_rate": rate,
    }


def level_result(record: BenchRecord, label: str, backends: list[str], level: LevelResult) -> dict[str, Any]:
    """One ladder level as vLLM's result: the requests sent inside the steady window."""
    point, percentiles = level.total, record.spec.percentiles
    latency = point.latency
    completed = latency.e2el.count if latency else point.requests_done
    failed = (latency.requests - completed) if latency else point.requests_failed
    window = point.window_s or None
    goodput = latency.goodput if latency else None
    concurrency = level.streams * len(backends)
    return (
        _head(record, label, backends, completed + failed, "inf")
        | {"burstiness": 1.0, "max_concurrency": concurrency}
        | {
            "duration": point.window_s,
            "completed": completed,
            "failed": failed,
            "total_input_tokens": None,  # the window counts generated tokens, not their prompts
            "total_output_tokens": point.tokens,
            "request_throughput": completed / window if window else None,
            "request_goodput": goodput.rate if goodput else None,
            "output_throughput": point.sustained,
            "total_token_throughput": None,
        }
        | {"max_output_tokens_per_s": point.best_second, "max_concurrent_requests": concurrency, "rtfx": 0.0}
        | metric_keys(latency, percentiles)
    )


def rate_result(
    record: BenchRecord, label: str, backends: list[str], point: RatePoint, rows: list[dict] | None, *, detailed: bool
) -> dict[str, Any]:
    """One open-loop rate as vLLM's result: every request of the level, drain included, as vLLM counts them."""
    goodput = point.latency.goodput
    return (
        _head(record, label, backends, point.scheduled, "inf" if point.rate is None else point.rate)
        | {"burstiness": point.burstiness, "max_concurrency": point.max_concurrency}
        | {
            "duration": point.duration_s_measured,
            "completed": point.completed,
            "failed": point.failed,
            "total_input_tokens": point.prompt_tokens,
            "total_output_tokens": point.completion_tokens,
            "request_throughput": point.request_throughput,
            "request_goodput": goodput.rate if goodput else None,
            "output_throughput": point.output_throughput,
            "total_token_throughput": point.total_token_throughput,
        }
        | _request_lists(rows, detailed=detailed)
        | {"max_output_tokens_per_s": None, "max_concurrent_requests": point.peak_in_flight, "rtfx": 0.0}
        | metric_keys(point.latency, record.spec.percentiles)
    )


@dataclass(frozen=True)
class VllmResult:
    kind: str  # "ladder" (a closed-loop level) or "rate" (an open-loop level)
    name: str  # vLLM's file name for it
    fields: dict[str, Any]


def vllm_results(record: BenchRecord, folder: Path | None = None, *, detailed: bool = False) -> Iterator[VllmResult]:
    """Every ladder level and every open-loop rate of the record as vLLM's result; `folder` (the run's)
    lends its request rows to the per-request lists (with `detailed`, those --save-detailed adds)."""
    rows, date = _rows(folder), _date(record)
    for series in record.series:
        model = _model(record, series.backends)
        for level in series.levels:  # its rows span the whole level, not the window its figures are of
            fields = level_result(record, series.label, series.backends, level)
            yield VllmResult("ladder", result_name(series.label, "inf", fields["max_concurrency"], model, date), fields)
    for sweep in record.sweeps:
        model = _model(record, sweep.backends)
        for point in sweep.points:
            kept = rows.get((sweep.label, f"rate {point.rate:g}/s")) if point.rate is not None else None
            fields = rate_result(record, sweep.label, sweep.backends, point, kept, detailed=detailed)
            name = result_name(sweep.label, fields["request_rate"], point.max_concurrency, model, date)
            yield VllmResult("rate", name, fields)


def write_vllm(record: BenchRecord, out: Path, folder: Path | None = None, *, detailed: bool = False) -> list[Path]:
    """One vLLM-style result file a level and a rate in `out` (`detailed`: with --save-detailed's lists);
    returns their paths."""
    if detailed and (folder is None or not (folder / "requests.jsonl").exists()):
        raise UsageError(
            "--detailed lists each request: the run must have kept its request rows (bench --save-requests)"
        )
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for result in vllm_results(record, folder, detailed=detailed):
        path = out / result.name
        write_atomic(path, json.dumps(result.fields))
        paths.append(path)
    return paths


def write_csv(record: BenchRecord, out: Path, folder: Path | None = None) -> Path:
    """bench.csv: one row a ladder level or open-loop rate, vLLM's scalar keys as columns (the per-request
    lists left out), led by `kind` (ladder or rate)."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [
        {"kind": result.kind} | {key: value for key, value in result.fields.items() if not isinstance(value, list)}
        for result in vllm_results(record, folder)
    ]
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    path = out / "bench.csv"
    write_atomic(path, buffer.getvalue())
    return path
