"""`fanout bench`: the throughput ladder, then the open loop and replays (rates.py).

Takes Settings (the backends, or the embedded engine) and a BenchSpec; returns a BenchRecord. It opens the
fleet, refuses what would not measure batching (a level above a backend's cap or its engine's slots, a
window too short, a backend that does not answer, an engine whose slot count is unknown and not given),
builds the prompts, runs every level of every series (one summed fleet, or each backend alone with
`compare`), and turns the raw samples into figures and a fit. This module wires the stages together;
the stages are load/ (the closed loop, the runners, the samplers) and report/ (figures, fit, provenance).
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

from pipeline.backends.engines import engine
from pipeline.backends.fleet import Fleet, open_fleet
from pipeline.bench.load.closed import run_level
from pipeline.bench.load.local import InProcessRunner
from pipeline.bench.load.prompts import (
    PromptMaker,
    Prompts,
    SharedPrefixes,
    new_nonce,
    shared_prefixes,
    sized_prompts,
    token_counter,
)
from pipeline.bench.load.runner import LevelPlan, Runner, Target
from pipeline.bench.load.workers import WorkerPool
from pipeline.bench.load.workload import Workload, WorkloadPrompts, load_dataset, load_replay, parse_lengths
from pipeline.bench.report.figures import comparison_rows, level_result
from pipeline.bench.report.fit import fit_levels
from pipeline.bench.report.provenance import host_info, loadavg
from pipeline.bench.report.requestrows import RowKeeper
from pipeline.bench.studies.context import BenchRun, OnLevel
from pipeline.bench.studies.rates import cap_rule, run_rate_sweep, run_replay, workload_of
from pipeline.config import Settings
from pipeline.errors import UsageError
from pipeline.records import Endpoint, EngineInfo
from pipeline.records.bench import (
    MIN_WINDOW_S,
    BenchRecord,
    BenchSpec,
    RateSweep,
    ReplayCheck,
    Series,
    SharedPrefixPlan,
)
from pipeline.records.provenance import BackendInfo, Provenance
from pipeline.watch.listeners import BenchListener

log = logging.getLogger("fanout")


def check_spec(spec: BenchSpec) -> None:
    """What can be refused before any backend is touched."""
    if not spec.streams and not spec.rates and not spec.workload:
        raise UsageError("bench: nothing to measure: give stream levels, request rates or a workload to replay")
    check_endpoint(spec)
    if spec.dataset and spec.input_len:
        raise UsageError("setting 'input_len': a dataset brings its own prompts")
    if spec.prompt_tokens and (spec.input_len or spec.dataset):
        raise UsageError("setting 'prompt_tokens': give it, or input_len, or a dataset, not two of them")
    for name in ("input_len", "output_len"):
        if getattr(spec, name):
            parse_lengths(getattr(spec, name), name)
    if spec.dataset:
        load_dataset(Path(spec.dataset), spec.max_tokens, None, spec.seed, multi_turn=spec.multi_turn)
    if spec.workload:
        load_replay(Path(spec.workload))
    check_cache_settings(spec)
    if spec.window_s < MIN_WINDOW_S:
        raise UsageError(
            f"setting 'window' {spec.window_s:g}: too short to hold full occupancy and a best second; "
            f"at least {MIN_WINDOW_S:g} s"
        )


def check_endpoint(spec: BenchSpec) -> None:
    """Text completions take one prompt: not a conversation's history, nor a book's requests with roles."""
    if spec.endpoint is not Endpoint.COMPLETIONS:
        return
    if spec.multi_turn:
        raise UsageError("setting 'multi_turn': a conversation's turns need roles; use the chat endpoint")
    if spec.workload:
        raise UsageError("setting 'workload': a book's requests carry roles and worked examples; replay them over chat")


def check_cache_settings(spec: BenchSpec) -> None:
    if spec.prefix_len and (spec.dataset or not (spec.streams or spec.rates)):
        raise UsageError("setting 'prefix_len': shared prefixes go before synthetic prompts, not a dataset or replay")
    if spec.prefix_groups > 1 and not spec.prefix_len:
        raise UsageError("setting 'prefix_groups': give 'prefix_len' too (the length of each shared prefix)")
    if spec.multi_turn and not spec.dataset:
        raise UsageError("setting 'multi_turn': give a ShareGPT-style dataset (conversations sent turn by turn)")
    if spec.multi_turn and spec.streams:
        raise UsageError("setting 'multi_turn': conversations run in the open loop (request rates), not the ladder")
    if spec.stop_when_saturated and not spec.rates:
        raise UsageError("setting 'stop_when_saturated': it stops open-loop levels, so give request rates")


def slots_for(name: str, info: EngineInfo, spec: BenchSpec) -> tuple[int, str]:
    if info.slots is not None:
        return info.slots, "engine (/props total_slots)"
    given = spec.engine_slots.get(name, spec.engine_slots.get("*"))
    if given is None:
        raise UsageError(
            f"backend {name} ({info.kind.value}) does not report how many sequences it runs at once: "
            f"give setting 'engine_slots' {name}=N (vLLM --max-num-seqs, SGLang --max-running-requests)"
        )
    return given, "--engine-slots"


def check_level_fits(name: str, cap: int, slots: int, slots_source: str, levels: list[int]) -> None:
    """Closed-loop levels only: the open loop may go past the caps (its record labels that queueing)."""
    if not levels:
        return
    top = max(levels)
    if top > cap:
        raise UsageError(
            f"setting 'streams' {top}: backend {name} has cap {cap}, so {top} streams would measure "
            f"queueing, not batching (raise its cap, or setting 'slots' for the embedded engine)"
        )
    if top > slots:
        raise UsageError(
            f"setting 'streams' {top}: backend {name} runs at most {slots} sequences at once "
            f"({slots_source}), so {top} streams would measure queueing, not batching"
        )


def targets_of(fleet: Fleet, spec: BenchSpec) -> tuple[list[Target], list[BackendInfo]]:
    """Every backend as a bench target, checked; with what the record says about it."""
    targets, infos = [], []
    for state in fleet.pool.states:
        backend, info = state.backend, fleet.engines[state.backend.name]
        if not info.models:
            raise UsageError(f"backend {backend.name} ({backend.base_url}) is not reachable")
        slots, source = slots_for(backend.name, info, spec)
        check_level_fits(backend.name, state.cap, slots, source, spec.streams)
        ignore_eos = spec.ignore_eos and engine(info.kind).ignore_eos
        extra = {"ignore_eos": True} if ignore_eos else {}
        targets.append(Target(backend, info, extra, cap=state.cap, endpoint=spec.endpoint))
        infos.append(
            BackendInfo(
                name=backend.name,
                base_url=backend.base_url,
                engine=info.kind.value,
                version=info.version,
                model=backend.model,
                slots=slots,
                slots_source=source,
                cap=state.cap,
                counts_per_step=info.counts_per_step,
                has_metrics=info.has_metrics,
                ignore_eos=ignore_eos,
                embedded=embedded_settings(fleet, backend.name),
            )
        )
    return targets, infos


def embedded_settings(fleet: Fleet, name: str) -> dict[str, int] | None:
    if fleet.embedded is None or name != fleet.embedded.backend.name:
        return None
    s = fleet.embedded.settings
    return {"slots": s.slots, "threads": s.threads, "ctx_per_slot": s.ctx_per_slot}


async def prompt_maker(
    run: BenchRun, targets: list[Target], infos: list[BackendInfo], workload: Workload | None
) -> Prompts:
    if workload is not None:  # --input-len or --dataset: the ladder sends the open loop's prompts
        return WorkloadPrompts(workload, own_caps=bool(run.spec.dataset or run.spec.output_len))
    nonce = new_nonce()
    if run.spec.prompt_tokens is None:
        return PromptMaker(nonce, prefixes=run.prefixes)
    counter = await token_counter(run.fleet.session, targets[0].backend, run.spec.endpoint)
    for info in infos:
        info.tokenizer = f"{counter.name} of {targets[0].backend.name}"
    return await sized_prompts(counter, run.spec.prompt_tokens, nonce, run.prefixes)


async def prefixes_of(fleet: Fleet, targets: list[Target], spec: BenchSpec) -> SharedPrefixes | None:
    """--prefix-len: the run's shared prefixes, sized by the first backend's tokenizer (one nonce a run, so
    levels share them and only --reset-cache keeps one level's cache from serving the next)."""
    if not spec.prefix_len:
        return None
    counter = await token_counter(fleet.session, targets[0].backend, spec.endpoint)
    return await shared_prefixes(counter, spec.prefix_len, spec.prefix_groups, new_nonce())


def level_plan(spec: BenchSpec, streams: int, read_timeout: float) -> LevelPlan:
    return LevelPlan(
        streams=streams,
        window_s=spec.window_s,
        warmup_s=spec.warmup_s,
        max_tokens=spec.max_tokens,
        interval_s=spec.sample_interval_s,
        ramp_limit_s=spec.ramp_limit_s,
        read_timeout=read_timeout,
        keep_answers=spec.keeps_answers,
    )


async def run_series(run: BenchRun, label: str, targets: list[Target], prompts: Prompts) -> Series:
    spec, watcher = run.spec, run.watcher
    engines = {t.backend.name: t.info for t in targets}
    levels = []
    for streams in spec.streams:
        plan = level_plan(spec, streams, run.read_timeout)
        resets = await run.empty_caches(targets)
        if watcher is not None:
            watcher.level_started(label, streams, list(engines), len(spec.streams))
        raw = await run_level(run.fleet.session, run.runner, targets, plan, prompts)
        answers = run.audit(raw.requests, targets)
        run.keep(label, f"{streams} streams", raw.requests)
        levels.append(level_result(raw, engines, spec))
        levels[-1].cache_reset = resets
        levels[-1].total.prefix_planned_hit_rate = run.planned_hit_rate(raw.requests)
        levels[-1].total.answers = answers
        run.level_done(label, levels[-1])
        if watcher is not None:
            watcher.level_done(label, levels[-1])
    return Series(
        label=label,
        backends=list(engines),
        levels=levels,
        fit=fit_levels(levels, len(targets)),
        answer_cap=cap_rule(spec),
    )


def groups(targets: list[Target], spec: BenchSpec) -> list[tuple[str, list[Target]]]:
    if spec.compare:
        return [(t.backend.name, [t]) for t in targets]
    return [(spec.label, targets)]


async def open_loop(
    run: BenchRun, targets: list[Target], infos: list[BackendInfo], shared: Workload | None
) -> tuple[list[RateSweep], list[ReplayCheck]]:
    spec = run.spec
    slots = {info.name: info.slots for info in infos}
    sweeps, replays = [], []
    if spec.rates:
        workload = shared if shared is not None else await workload_of(run.fleet, targets, spec, run.prefixes)
        for label, group in groups(targets, spec):
            chosen = {t.backend.name: slots[t.backend.name] for t in group}
            sweeps.append(await run_rate_sweep(run, label, group, chosen, workload))
    if spec.workload:
        replay = load_replay(Path(spec.workload))
        replays.append(await run_replay(run, targets, slots, replay))
    return sweeps, replays


async def runner_for(
    spec: BenchSpec, settings: Settings, numbers: Iterator[int], watcher: BenchListener | None, stack: AsyncExitStack
) -> Runner:
    """Ray actors (--ray, or a TOML [ray] address), worker processes (--workers N), or this process."""
    if spec.ray or settings.ray_address is not None:
        from pipeline.bench.load.raypool import RayPool

        address = spec.ray_address or settings.ray_address or None
        return await stack.enter_async_context(RayPool(spec.workers, numbers, watcher, address=address))
    if spec.workers > 1:
        return stack.enter_context(WorkerPool(spec.workers, numbers, watcher))
    return InProcessRunner(numbers, watcher)


async def bench(
    settings: Settings,
    spec: BenchSpec,
    *,
    engine_log: Path | None = None,
    command: list[str] | None = None,
    on_level: OnLevel | None = None,
    watcher: BenchListener | None = None,
) -> BenchRecord:
    """The ladder, then the open loop; `watcher` (the live page) hears of the fleet, every level and request."""
    check_spec(spec)
    if not settings.backends:  # the embedded engine: refuse before starting it
        check_level_fits("embedded", settings.slots, settings.slots, "--slots", spec.streams)
    host = host_info()
    started, wall = time.monotonic(), dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    rows = RowKeeper(started) if spec.save_requests else None
    async with AsyncExitStack() as stack:  # the runner first: a cluster out of reach fails before any engine starts
        runner = await runner_for(spec, settings, itertools.count(1), watcher, stack)
        fleet = await stack.enter_async_context(open_fleet(settings, engine_log, ram_prompt_cache=not spec.reset_cache))
        targets, infos = targets_of(fleet, spec)
        if watcher is not None:
            watcher.fleet_opened(fleet)
        series = []
        run = BenchRun(fleet, spec, runner, rows, on_level, prefixes=await prefixes_of(fleet, targets, spec))
        shared = await workload_of(fleet, targets, spec, run.prefixes) if spec.input_len or spec.dataset else None
        if spec.streams:
            prompts = await prompt_maker(run, targets, infos, shared)
            for label, group in groups(targets, spec):
                series.append(await run_series(run, label, group, prompts))
        sweeps, replays = await open_loop(run, targets, infos, shared)
        cluster = getattr(runner, "info", None)  # the Ray runner's: its nodes and each actor's clock
    host.loadavg_end = loadavg()
    provenance = Provenance(
        host=host,
        backends=infos,
        started_at=wall,
        duration_s=round(time.monotonic() - started, 2),
        command=command or [],
    )
    record = BenchRecord(
        spec=spec,
        provenance=provenance,
        series=series,
        comparison=comparison_rows(series),
        sweeps=sweeps,
        replays=replays,
        client=settings.client,
        request_rows=rows.rows if rows is not None else [],
        ray=cluster,
        shared_prefix=None
        if run.prefixes is None
        else SharedPrefixPlan(tokens=run.prefixes.tokens, groups=run.prefixes.groups, counted_by=run.prefixes.counter),
    )
    if watcher is not None:
        watcher.bench_finished(record)
    return record


def run_bench(
    settings: Settings,
    spec: BenchSpec,
    *,
    engine_log: Path | None = None,
    command: list[str] | None = None,
    on_level: OnLevel | None = None,
) -> BenchRecord:
    async def job() -> BenchRecord:
        return await bench(settings, spec, engine_log=engine_log, command=command, on_level=on_level)

    return anyio.run(job)
