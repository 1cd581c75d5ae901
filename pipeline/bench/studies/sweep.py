"""The concurrency sweep with repetitions: what N users get, each and together, measured R times.

Takes Settings and a SweepSpec; returns a SweepRecord. A coherence gate first: three trivial questions
with checkable answers; a model that fails is refused unless the gate is skipped (and the skip recorded).
Then for each level N and each of R repetitions: N requests at once, each a fixed-length prompt (counted
by the engine's tokenizer) with a fresh nonce per repetition, so no repetition is served from the previous
one's prefix cache, and a fixed output length (ignore_eos where the engine has it, so every answer is full
length). Aggregate = completion tokens (server usage) ÷ wall time from the first request sent to the last
done (client clock). Per level: mean ± standard deviation, per user, efficiency = aggregate ÷ (N × the
single-user aggregate), and the batch-time table (how long a B-question batch takes at that level). A
level with any failed request is marked failed. The slot count is required where the engine cannot report
it, and recorded.

With `prefix_len` every prompt starts with one of `prefix_groups` shared prefixes, the same for the whole
sweep (prompts.py), so a repetition finds the previous one's prefix cached unless `reset_cache` empties
every cache before each repetition; each run records its mean TTFT and the cached prompt tokens the answers
told, which shows the difference.
"""

from __future__ import annotations

import re
import statistics
import time

import anyio
from pydantic import BaseModel, Field

from pipeline.backends.cachereset import reset_prefix_cache
from pipeline.backends.engines import engine
from pipeline.backends.fleet import Fleet, open_fleet
from pipeline.backends.pool import RequestFailed
from pipeline.bench.load.prompts import PromptMaker, new_nonce, shared_prefixes, sized_prompts, token_counter
from pipeline.bench.report.provenance import host_info
from pipeline.bench.studies.identity import single_pool
from pipeline.errors import UsageError
from pipeline.records import CacheResetDone, ChatRequest, Completion, Endpoint

GATE = [
    ("What is 2 + 3? Answer with the number only.", r"\b5\b|\bfive\b"),
    ("What is the capital of France? Answer with one word.", r"\bparis\b"),
    ("What colour is the sky on a clear day? Answer with one word.", r"\bblue\b"),
]


class SweepSpec(BaseModel):
    levels: list[int] = Field(default_factory=lambda: [1, 2, 4, 8])
    repetitions: int = Field(default=5, gt=0)
    prompt_tokens: int = Field(default=128, gt=0)
    max_tokens: int = Field(default=256, gt=0)
    batch: int = Field(default=200, gt=0)  # questions in the batch-time table
    slots: int | None = None
    skip_gate: bool = False
    prefix_len: int | None = Field(default=None, gt=0)
    prefix_groups: int = Field(default=1, gt=0)
    reset_cache: bool = False
    endpoint: Endpoint = Endpoint.CHAT


class GateResult(BaseModel):
    passed: bool
    skipped: bool
    answers: list[str]


class SweepRun(BaseModel):
    tokens: int
    wall_s: float
    aggregate: float
    failed: int
    prompt_tokens: list[int]
    ttft_ms_mean: float | None = None
    cached_tokens: int | None = None  # summed over the answers that told it (usage or llama.cpp timings)
    cache_reset: list[CacheResetDone] = Field(default_factory=list)  # reset_cache: before this run


class SweepLevel(BaseModel):
    users: int
    runs: list[SweepRun]
    mean: float
    sd: float
    per_user: float
    efficiency: float | None
    batch_seconds: float | None
    failed: bool


class SweepRecord(BaseModel):
    engine: str
    version: str | None
    backend: str
    model: str | None
    slots: int
    slots_source: str
    prompt_tokens_target: int
    prefix_len: int | None = None  # shared prefix tokens before every prompt, same for the whole sweep
    prefix_groups: int = 1
    reset_cache: bool = False
    prompt_tokens_reported: float | None  # median of the engine's usage.prompt_tokens
    max_tokens: int
    ignore_eos: bool
    batch: int
    gate: GateResult
    levels: list[SweepLevel]
    duration_s: float
    tokens_source: str = "server usage (completion_tokens) over client wall clock"
    provenance: dict = Field(default_factory=dict)


def gate_prompt(question: str, endpoint: Endpoint) -> str:
    """A gate question as asked: as it is over chat, as a question-and-answer line to a text completion."""
    return question if endpoint is Endpoint.CHAT else f"Question: {question}\nAnswer:"


async def coherence_gate(fleet: Fleet, *, skip: bool, endpoint: Endpoint = Endpoint.CHAT) -> GateResult:
    pool = single_pool(fleet, 0)
    answers = []
    for question, _ in GATE:
        message = {"role": "user", "content": gate_prompt(question, endpoint)}
        request = ChatRequest(messages=[message], max_tokens=24, tag="gate", endpoint=endpoint)
        answers.append((await pool.complete(request)).text.strip())
    passed = all(re.search(pattern, answer, re.IGNORECASE) for (_, pattern), answer in zip(GATE, answers))
    if not passed and not skip:
        raise UsageError(
            f"coherence gate failed ({'; '.join(repr(a[:40]) for a in answers)}): the model cannot "
            "answer trivial questions, so its figures would not mean much; --skip-gate measures anyway"
        )
    return GateResult(passed=passed, skipped=skip and not passed, answers=answers)


def slot_count(fleet: Fleet, spec: SweepSpec) -> tuple[int, str]:
    reported = fleet.engines[fleet.backends[0].name].slots
    if reported is not None:
        return reported, "engine (/props total_slots)"
    if spec.slots is None:
        raise UsageError(
            "this engine cannot report its slot count: give setting 'engine_slots' N (recorded with the results)"
        )
    return spec.slots, "given (engine_slots, not verifiable)"


async def one_repetition(
    fleet: Fleet, prompts: PromptMaker, users: int, spec: SweepSpec, *, ignore_eos: bool
) -> SweepRun:
    resets = await empty_cache(fleet) if spec.reset_cache else []
    pool = single_pool(fleet, 0)
    extra = {"ignore_eos": True} if ignore_eos else {}
    done: list[Completion] = []
    failed = 0

    async def one(number: int) -> None:
        nonlocal failed
        request = ChatRequest(
            messages=[{"role": "user", "content": prompts.prompt(number)}],
            max_tokens=spec.max_tokens,
            endpoint=spec.endpoint,
            extra=extra,
            tag=f"sweep-{number}",
        )
        try:
            done.append(await pool.complete(request))
        except RequestFailed:
            failed += 1

    started = time.monotonic()
    async with anyio.create_task_group() as group:
        for number in range(1, users + 1):
            group.start_soon(one, number)
    wall = (max(c.t_done for c in done) if done else time.monotonic()) - started
    tokens = sum(c.completion_tokens or 0 for c in done)
    ttfts = [c.ttft for c in done if c.ttft is not None]
    told = [c.cached_tokens for c in done if c.cached_tokens is not None]
    return SweepRun(
        tokens=tokens,
        wall_s=round(wall, 3),
        aggregate=round(tokens / wall, 2) if wall > 0 else 0.0,
        failed=failed,
        prompt_tokens=[c.prompt_tokens or 0 for c in done],
        ttft_ms_mean=round(1000 * statistics.fmean(ttfts), 2) if ttfts else None,
        cached_tokens=sum(told) if told else None,
        cache_reset=resets,
    )


async def empty_cache(fleet: Fleet) -> list[CacheResetDone]:
    backend = fleet.backends[0]
    return [await reset_prefix_cache(fleet.session, backend, fleet.engines[backend.name])]


def summarise(users: int, runs: list[SweepRun], single: float | None, spec: SweepSpec) -> SweepLevel:
    rates = [run.aggregate for run in runs]
    mean = statistics.fmean(rates)
    return SweepLevel(
        users=users,
        runs=runs,
        mean=round(mean, 2),
        sd=round(statistics.stdev(rates), 2) if len(rates) > 1 else 0.0,
        per_user=round(mean / users, 2),
        efficiency=round(mean / (users * single), 3) if single else None,
        batch_seconds=round(spec.batch * spec.max_tokens / mean, 1) if mean > 0 else None,
        failed=any(run.failed for run in runs),
    )


async def run_sweep(settings, spec: SweepSpec) -> SweepRecord:
    started = time.monotonic()
    async with open_fleet(settings, ram_prompt_cache=not spec.reset_cache) as fleet:
        backend = fleet.backends[0]
        info = fleet.engines[backend.name]
        slots, slots_source = slot_count(fleet, spec)
        if max(spec.levels) > min(slots, fleet.pool.states[0].cap):
            raise UsageError(
                f"level {max(spec.levels)} exceeds the {min(slots, fleet.pool.states[0].cap)} slots/cap: "
                "that would measure queueing, not batching"
            )
        gate = await coherence_gate(fleet, skip=spec.skip_gate, endpoint=spec.endpoint)
        counter = await token_counter(fleet.session, backend, spec.endpoint)
        prefixes = (
            await shared_prefixes(counter, spec.prefix_len, spec.prefix_groups, new_nonce())
            if spec.prefix_len
            else None
        )
        ignore_eos = engine(info.kind).ignore_eos
        levels, single = [], None
        for users in spec.levels:
            runs = [
                await one_repetition(
                    fleet,
                    await sized_prompts(counter, spec.prompt_tokens, new_nonce(), prefixes),
                    users,
                    spec,
                    ignore_eos=ignore_eos,
                )
                for _ in range(spec.repetitions)
            ]
            if users == 1:
                single = statistics.fmean(run.aggregate for run in runs)
            levels.append(summarise(users, runs, single, spec))
    reported = [p for level in levels for run in level.runs for p in run.prompt_tokens if p]
    return SweepRecord(
        engine=info.kind.value,
        version=info.version,
        backend=backend.base_url,
        model=backend.model,
        slots=slots,
        slots_source=slots_source,
        prompt_tokens_target=spec.prompt_tokens,
        prefix_len=spec.prefix_len,
        prefix_groups=spec.prefix_groups,
        reset_cache=spec.reset_cache,
        prompt_tokens_reported=statistics.median(reported) if reported else None,
        max_tokens=spec.max_tokens,
        ignore_eos=ignore_eos,
        batch=spec.batch,
        gate=gate,
        levels=levels,
        duration_s=round(time.monotonic() - started, 2),
        provenance=host_info().model_dump(),
    )


def sweep_markdown(record: SweepRecord) -> str:
    lines = [
        f"# Concurrency sweep: {record.engine} {record.version or ''}, {record.model}",
        "",
        f"{record.slots} slots ({record.slots_source}); prompts {record.prompt_tokens_target} tokens "
        f"(engine reports median {record.prompt_tokens_reported}); {record.max_tokens} output tokens"
        f"{' with ignore_eos' if record.ignore_eos else ''}; gate "
        f"{'passed' if record.gate.passed else 'FAILED (skipped by request)'}; {record.tokens_source}; "
        f"{record.duration_s:.0f} s.",
        "",
        f"| users | aggregate tok/s (mean ± sd, {len(record.levels[0].runs) if record.levels else 0} runs) "
        f"| per user | efficiency | {record.batch}-question batch s | status |",
        "|---|---|---|---|---|---|",
    ]
    for level in record.levels:
        efficiency = "–" if level.efficiency is None else f"{level.efficiency:.0%}"
        lines.append(
            f"| {level.users} | {level.mean:.1f} ± {level.sd:.1f} | {level.per_user:.1f} | {efficiency} | "
            f"{level.batch_seconds} | {'FAILED' if level.failed else 'ok'} |"
        )
    return "\n".join(lines + run_lines(record)) + "\n"


def run_lines(record: SweepRecord) -> list[str]:
    """Each run's mean TTFT and cached prompt tokens, in order: a cache left warm shows as a falling TTFT."""
    prefix = (
        f"a {record.prefix_len}-token shared prefix in {record.prefix_groups} group(s)"
        if record.prefix_len
        else "no shared prefix"
    )
    reset = "each run after emptying the prefix cache" if record.reset_cache else "the prefix cache left as it was"
    lines = [
        "",
        f"Per run, in order ({prefix}; {reset}):",
        "",
        "| users | TTFT ms mean per run | cached prompt tokens per run |",
        "|---|---|---|",
    ]
    for level in record.levels:
        ttft = ", ".join("–" if r.ttft_ms_mean is None else f"{r.ttft_ms_mean:,.0f}" for r in level.runs)
        cached = ", ".join("–" if r.cached_tokens is None else str(r.cached_tokens) for r in level.runs)
        lines.append(f"| {level.users} | {ttft} | {cached} |")
    failed = {d.note for level in level_runs(record) for d in level.cache_reset if not d.done}
    return lines + [f"Cache not emptied: {note}" for note in sorted(failed)]


def level_runs(record: SweepRecord) -> list[SweepRun]:
    return [run for level in record.levels for run in level.runs]
