"""Shared prefixes and cache resets, measured side by side on the FAKE step-law engine (tests/fakes/fake_steplaw.py,
which models vLLM's block prefix cache and its counters): the hit rate each --prefix-len/--prefix-groups plans
against what the engine's counter and the answers report, per ladder level and open-loop rate; then a sweep
level repeated with and without --reset-cache, TTFT per repetition (the FAKE's prefill costs 0.5 ms a token).

    PYTHONPATH=. .venv/bin/python examples/prefix_cache.py   (from the repository root: tests/ holds the FAKE)

The same questions on a real engine: `fanout bench --rate R --input-len N --prefix-len P --prefix-groups G`
and `fanout sweep --prefix-len P [--reset-cache]` (the embedded engine when no --backend is given).
"""

from __future__ import annotations

import anyio

from pipeline.bench.studies.ladder import bench
from pipeline.bench.studies.sweep import SweepSpec, run_sweep
from pipeline.config import Settings
from pipeline.records import Backend
from pipeline.records.bench import BenchSpec
from tests.fakes.fake_steplaw import steplaw_in_thread

SHAPES = [(256, 1), (256, 4), (1024, 16), (64, 64)]  # (prefix tokens, groups)


def share(value: float | None) -> str:
    return "   –  " if value is None else f"{100 * value:5.1f}%"


async def hit_rates(url: str) -> None:
    settings = Settings(backends=[Backend(name="fake", base_url=url, cap=64)], read_timeout=10)
    print("prefix  groups  level          planned  counter  answers")
    for tokens, groups in SHAPES:
        spec = BenchSpec(
            streams=[8], window_s=2.0, warmup_s=0.2, rates=[40.0], duration_s=3.0, max_tokens=8,
            input_len="64", engine_slots={"*": 64}, prefix_len=tokens, prefix_groups=groups, reset_cache=True,
        )  # fmt: skip
        record = await bench(settings, spec)
        rows = [(f"{lv.streams} streams", lv.total) for lv in record.series[0].levels]
        rows += [(f"{p.rate:g} req/s", p) for p in record.sweeps[0].points]
        for level, p in rows:
            print(
                f"{tokens:6d}  {groups:6d}  {level:12s}  {share(p.prefix_planned_hit_rate)}  "
                f"{share(p.cache_hit_rate)}  {share(p.request_cache_hit_rate)}"
            )


async def repeated_level(url: str) -> None:
    settings = Settings(backends=[Backend(name="fake", base_url=url, cap=8)], read_timeout=10)
    print("\nsweep: 4 users, 5 repetitions, 1,024-token shared prefix, 32-token prompts, 16-token answers")
    for reset in (False, True):
        spec = SweepSpec(
            levels=[4], repetitions=5, prompt_tokens=32, max_tokens=16, slots=8, skip_gate=True,
            prefix_len=1024, reset_cache=reset,
        )  # fmt: skip
        record = await run_sweep(settings, spec)
        runs = record.levels[0].runs
        ttft = "  ".join(f"{r.ttft_ms_mean:6.1f}" for r in runs)
        cached = "  ".join(f"{r.cached_tokens:6d}" for r in runs)
        label = "--reset-cache" if reset else "cache kept   "
        print(f"{label}  TTFT ms mean per run: {ttft}   cached tokens: {cached}")


def main() -> None:
    with steplaw_in_thread((2.0, 0.01), prefill_ms=0.5) as (engine,):
        anyio.run(hit_rates, engine.url)
        anyio.run(repeated_level, engine.url)


if __name__ == "__main__":
    main()
