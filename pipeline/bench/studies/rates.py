"""The open-loop runs of `fanout bench`: a rate sweep, and a book run replayed.

Takes the open fleet, its targets and slot counts, the spec and a workload; returns a RateSweep (one
RatePoint a rate, the knee marked) or a ReplayCheck (the replay's RatePoint and its counts against the
original run's request log). The load generator is load/openloop.py, the figures report/ratefigures.py.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pipeline.backends.fleet import Fleet
from pipeline.bench.load.openloop import run_rate
from pipeline.bench.load.prompts import SharedPrefixes, new_nonce, token_counter
from pipeline.bench.load.runner import RatePlan, Target
from pipeline.bench.load.workload import (
    Lengths,
    ReplayWorkload,
    Workload,
    load_dataset,
    parse_lengths,
    synthetic_workload,
)
from pipeline.bench.report.cache import cache_counter_source
from pipeline.bench.report.ratefigures import KNEE_RULE, mark_knee, rate_point
from pipeline.bench.studies.context import BenchRun
from pipeline.records.bench import BenchSpec, RatePoint, RateSweep, ReplayCheck


async def workload_of(
    fleet: Fleet, targets: list[Target], spec: BenchSpec, prefixes: SharedPrefixes | None = None
) -> Workload:
    """The dataset, or synthetic prompts of the asked lengths (the engine's tokenizer sizes them), after the
    shared prefixes where there are any."""
    output = parse_lengths(spec.output_len, "output_len") if spec.output_len else None
    if spec.dataset:
        return load_dataset(Path(spec.dataset), spec.max_tokens, output, spec.seed, multi_turn=spec.multi_turn)
    input_len = parse_lengths(spec.input_len, "input_len") if spec.input_len else None
    counter = await token_counter(fleet.session, targets[0].backend, spec.endpoint) if input_len else None
    return await synthetic_workload(
        counter, new_nonce(), input_len, output or Lengths(spec.max_tokens, spec.max_tokens), spec.seed, prefixes
    )


def cap_rule(spec: BenchSpec) -> str:
    """Which cap each answer had, in the ladder and the open loop alike."""
    if spec.output_len:
        return f"--output-len {spec.output_len} (drawn per request, seeded)"
    if spec.dataset:
        return (
            f"each dataset row's own: JSONL max_tokens (--max-tokens {spec.max_tokens} where a row has none), "
            "a ShareGPT reply's length in tiktoken cl100k tokens"
        )
    return f"--max-tokens {spec.max_tokens}"


def rate_plan(spec: BenchSpec, rate: float | None, read_timeout: float, index: int) -> RatePlan:
    return RatePlan(
        rate=rate,
        burstiness=spec.burstiness,
        duration_s=spec.duration_s,
        requests=spec.num_requests,
        max_concurrency=spec.max_concurrency,
        seed=spec.seed * 1000 + index,
        interval_s=spec.sample_interval_s,
        read_timeout=read_timeout,
        stop_when_saturated=spec.stop_when_saturated,
        keep_answers=spec.keeps_answers,
    )


async def run_rate_sweep(
    run: BenchRun, label: str, targets: list[Target], slots: dict[str, int], workload: Workload
) -> RateSweep:
    spec, watcher = run.spec, run.watcher
    points: list[RatePoint] = []
    source = cache_counter_source([t.info for t in targets])
    saturated: float | None = None
    for index, rate in enumerate(spec.rates):
        plan = rate_plan(spec, rate, run.read_timeout, index)
        resets = await run.empty_caches(targets)
        if watcher is not None:
            watcher.rate_started(label, rate, slots, len(spec.rates))
        raw = await run_rate(run.fleet.session, run.runner, targets, slots, plan, workload)
        answers = run.audit(raw.requests, targets)
        run.keep(label, f"rate {rate:g}/s", raw.requests)
        scope = f"client: every request of the {rate:g} req/s level, drain included"
        point = rate_point(raw, sum(slots.values()), spec.percentiles, spec.goodput_slo_ms, scope, source)
        point.cache_reset = resets
        point.prefix_planned_hit_rate = run.planned_hit_rate(raw.requests)
        point.answers = answers
        points.append(point)
        run.level_done(label, point)
        if watcher is not None:
            watcher.rate_done(label, point)
        if point.saturation is not None and point.saturation.saturated:
            saturated = rate
            break
    knee = mark_knee(points)
    return RateSweep(
        label=label,
        backends=[t.backend.name for t in targets],
        workload=workload.name,
        points=points,
        knee_rate=knee,
        knee_rule=KNEE_RULE,
        answer_cap=cap_rule(spec),
        saturated_rate=saturated,
        rates_skipped=[] if saturated is None else [r for r in spec.rates if r > saturated],
    )


async def run_replay(
    run: BenchRun, targets: list[Target], slots: dict[str, int], workload: ReplayWorkload
) -> ReplayCheck:
    """Every logged request once, at its original time / speed (speed 0: at once, paced by the caps)."""
    spec = run.spec
    plan = replace(
        rate_plan(spec, None, run.read_timeout, 0),
        requests=len(workload.rows),
        duration_s=None,
        speed=spec.replay_speed,
        respect_caps=spec.replay_speed == 0,
        stop_when_saturated=False,  # a replay sends every logged request, to compare with the log
    )
    raw = await run_rate(run.fleet.session, run.runner, targets, slots, plan, workload)
    answers = run.audit(raw.requests, targets)
    run.keep("replay", workload.name, raw.requests)
    source = cache_counter_source([t.info for t in targets])
    point = rate_point(
        raw, sum(slots.values()), spec.percentiles, spec.goodput_slo_ms, f"client: {workload.name}", source
    )
    point.answers = answers
    first = min((r.number for r in raw.requests), default=0)
    pairs = [(workload.rows[r.number - first], r) for r in raw.requests]
    counted = [(row, r) for row, r in pairs if row.prompt_tokens is not None and not r.error]
    return ReplayCheck(
        source=str(workload.source),
        requests_logged=len(workload.rows),
        requests_replayed=point.completed,
        compared=len(counted),
        prompt_tokens_logged=sum(row.prompt_tokens or 0 for row, _ in counted),
        prompt_tokens_replayed=sum(r.prompt_tokens or 0 for _, r in counted),
        output_tokens_replayed=point.completion_tokens,
        over_cap=sum((r.completion_tokens or 0) > row.max_tokens for row, r in pairs),
        by_kind=count_kinds(workload),
        speed=spec.replay_speed,
        point=point,
    )


def count_kinds(workload: ReplayWorkload) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for row in workload.rows:
        kinds[row.kind] = kinds.get(row.kind, 0) + 1
    return kinds
