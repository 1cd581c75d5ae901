"""Report tables for the prefix cache and over-saturation: per ladder level and per open-loop rate, the
engines' counter, the answers' own count, the plan (--prefix-len), later conversation turns, the engine's
prefill time and whether the cache was emptied first; and which rate over-saturated.

Takes a BenchRecord; returns Tables for report.py and note lines for the rate sweep's table.
"""

from __future__ import annotations

from pipeline.bench.report.table import Table, num
from pipeline.records import CacheResetDone
from pipeline.records.bench import BenchRecord, RateSweep

HEADER = ["Level", "Engine counter", "Answers told", "Planned", "Later turns", "Prefill ms mean", "Emptied first"]


def share(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def emptied(resets: list[CacheResetDone]) -> str:
    if not resets:
        return "–"
    return ", ".join(f"{r.backend}: {'yes' if r.done else 'no'}" for r in resets)


def cache_row(level: str, point, resets: list[CacheResetDone]) -> list[str]:
    return [
        level,
        share(point.cache_hit_rate),
        share(point.request_cache_hit_rate),
        share(point.prefix_planned_hit_rate),
        share(getattr(point, "follow_up_cache_hit_rate", None)),
        num(point.prefill_ms_mean),
        emptied(resets),
    ]


def cache_notes(record: BenchRecord, sources: list[str | None], resets: list[CacheResetDone]) -> list[str]:
    notes = [
        "Shares of the usage prompt tokens served from the prefix cache. Engine counter: "
        + (next((s for s in sources if s), None) or "none exposed")
        + ". Answers told: usage.prompt_tokens_details.cached_tokens, else llama.cpp's timings.cache_n."
    ]
    plan = record.shared_prefix
    if plan is not None:
        notes.append(
            f"Shared prefixes: {plan.groups} of {plan.tokens} tokens ({plan.counted_by}); {plan.rule}. An engine "
            "also caches the chat template's shared opening, and vLLM only whole 16-token blocks."
        )
    failed = sorted({f"{r.backend}: {r.note}" for r in resets if not r.done})
    done = sorted({f"{r.backend}: {r.asked} ({r.note})" for r in resets if r.done})
    notes += [f"Emptied with {line}." for line in done] + [f"Not emptied: {line}." for line in failed]
    return notes


def ladder_cache_table(record: BenchRecord) -> list[Table]:
    tables = []
    for series in record.series:
        rows = [cache_row(f"{lv.streams} streams", lv.total, lv.cache_reset) for lv in series.levels]
        if not any(row[1:5] != ["–"] * 4 for row in rows):
            continue
        resets = [r for lv in series.levels for r in lv.cache_reset]
        sources = [lv.total.cache_hit_rate_source for lv in series.levels]
        tables.append(Table(f"Prefix cache: {series.label}", HEADER, rows, cache_notes(record, sources, resets)))
    return tables


def rate_cache_table(record: BenchRecord, sweep: RateSweep) -> Table | None:
    rows = [cache_row(f"{num(p.rate, 2)} req/s", p, p.cache_reset) for p in sweep.points]
    if not any(row[1:5] != ["–"] * 4 for row in rows):
        return None
    resets = [r for p in sweep.points for r in p.cache_reset]
    notes = cache_notes(record, [p.cache_hit_rate_source for p in sweep.points], resets)
    if any(p.turns for p in sweep.points):
        notes.append(
            "Later turns: requests after a conversation's first, each sent with the history (the answers as "
            "the engine wrote them) to the backend of its first turn."
        )
    return Table(f"Prefix cache: {sweep.label} (open loop)", HEADER, rows, notes)


def saturation_notes(sweep: RateSweep) -> list[str]:
    checked = [p for p in sweep.points if p.saturation is not None]
    if not checked:
        return []
    rule = checked[0].saturation.rule if checked[0].saturation else ""
    if sweep.saturated_rate is None:
        return [f"Over-saturation: not detected at any rate ({rule})."]
    point = next(p for p in checked if p.rate == sweep.saturated_rate)
    verdict = point.saturation
    assert verdict is not None
    skipped = ", ".join(f"{r:g}" for r in sweep.rates_skipped) or "none"
    return [
        f"Over-saturation at {sweep.saturated_rate:g} req/s: arrivals stopped {num(verdict.stopped_at_s)} s in; "
        f"in flight rising {num(verdict.concurrent_slope, 2)} ± {num(verdict.concurrent_moe, 2)} a second "
        f"({verdict.concurrent_n} samples), TTFT rising {num(verdict.ttft_slope, 4)} ± {num(verdict.ttft_moe, 4)} "
        f"s a second ({verdict.ttft_n} requests); rates not run: {skipped}. Rule: {rule}."
    ]
