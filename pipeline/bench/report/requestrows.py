"""Per-request records (`--save-requests`): one row a request, as JSONL and CSV, the way AIPerf's per-request
export and vLLM's `--save-detailed` keep them.

Takes RequestSamples with the series and level they belong to and the run's time origin; returns rows
(dicts) and writes requests.jsonl and requests.csv. Times are seconds after the bench started (the wall
clock of that moment is bench.json's provenance.started_at); latencies are milliseconds, defined as in
latency.py. Token counts are the engine's (usage); `retries` counts requests asked again because the server
closed the connection before the first byte. The JSONL rows also keep what one CSV cell cannot: each request's
inter-token gaps (`itls_ms`) and its answer's text (`text`), for `fanout report --format vllm --detailed`.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.bench.report.latency import itls_of, tpot_of
from pipeline.files import write_atomic
from pipeline.records.bench import RequestSample

COLUMNS = [
    "series",
    "level",
    "number",
    "backend",
    "t_scheduled",
    "t_sent",
    "t_first_token",
    "t_last_token",
    "t_done",
    "ttft_ms",
    "tpot_ms",
    "itl_mean_ms",
    "e2e_ms",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "prefill_ms",
    "turn",
    "content_events",
    "finish_reason",
    "retries",
    "error_kind",
    "error",
    "request_id",
    "response_id",
    "answer_flags",
]


def _at(t: float | None, origin: float) -> float | None:
    return None if t is None else round(t - origin, 6)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(1000 * seconds, 3)


def request_row(sample: RequestSample, series: str, level: str, origin: float) -> dict:
    done = not sample.error and sample.t_first is not None and sample.t_done is not None
    gaps = itls_of(sample)
    return {
        "series": series,
        "level": level,
        "number": sample.number,
        "backend": sample.backend,
        "t_scheduled": _at(sample.t_scheduled, origin),
        "t_sent": _at(sample.t_sent, origin),
        "t_first_token": _at(sample.t_first, origin),
        "t_last_token": _at(sample.t_last, origin),
        "t_done": _at(sample.t_done, origin),
        "ttft_ms": _ms(sample.ttft) if done else None,
        "tpot_ms": _ms(tpot_of(sample)) if done else None,
        "itl_mean_ms": _ms(sum(gaps) / len(gaps)) if done and gaps else None,
        "e2e_ms": _ms(sample.t_done - sample.t_sent) if done and sample.t_done is not None else None,
        "prompt_tokens": sample.prompt_tokens,
        "completion_tokens": sample.completion_tokens,
        "cached_tokens": sample.cached_tokens,
        "prefill_ms": sample.prefill_ms,
        "turn": sample.turn,
        "content_events": sample.chunks,
        "finish_reason": sample.finish_reason,
        "retries": sample.reissued,
        "error_kind": sample.error_kind,
        "error": sample.error,
        "request_id": sample.request_id,
        "response_id": sample.response_id,
        "answer_flags": None if sample.answer_flags is None else " ".join(sample.answer_flags) or "ok",
        "itls_ms": [round(1000 * gap, 3) for gap in gaps] if done else [],
        "text": sample.answer,
    }


def write_rows(rows: list[dict], folder: Path) -> dict[str, Path]:
    jsonl, table = folder / "requests.jsonl", folder / "requests.csv"
    write_atomic(jsonl, "".join(json.dumps(row) + "\n" for row in rows))
    with table.with_suffix(".csv.tmp").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, extrasaction="ignore")  # the lists stay in the JSONL
        writer.writeheader()
        writer.writerows(rows)
    table.with_suffix(".csv.tmp").replace(table)
    return {"requests_jsonl": jsonl, "requests_csv": table}


@dataclass
class RowKeeper:
    """Per-request rows for --save-requests, timed from the bench's start."""

    origin: float
    rows: list[dict] = field(default_factory=list)

    def keep(self, series: str, level: str, requests: list[RequestSample]) -> None:
        self.rows.extend(request_row(r, series, level, self.origin) for r in requests)
