"""Warm, then fan out (pipeline/book/warm.py): one book a schedule, side by side in one run, with the share of
prompt tokens the engines took from their prefix cache (sections, and every request), the job's seconds and
its planning seconds.

    PYTHONPATH=. .venv/bin/python examples/warm_schedules.py --engine embedded   (the default demo book)
    PYTHONPATH=. .venv/bin/python examples/warm_schedules.py --engine fake --shape 8x12x16

`embedded` is the real llama-server the book starts by itself (FANOUT_THREADS as set); `fake` is six FAKE
step-law engines (tests/fakes/fake_steplaw.py) that model vLLM's block prefix cache and charge prefill for
every uncached prompt token, cap 256 each. Cache shares come from each answer's own count
(usage.prompt_tokens_details.cached_tokens) in the run's requests.jsonl; times from stats.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio

from pipeline.book.run import RunOptions, book
from pipeline.config import Settings, load_settings
from pipeline.records import Backend, BookSpec, WarmSchedule
from pipeline.watch.listeners import BookListener
from tests.fakes.fake_steplaw import steplaw_in_thread

DEMO_PROMPT = "Write a short handbook on keeping a sourdough starter alive."
FAKE_LAW = (12.94, 0.2451)  # a_ms, b_ms: the step law of the efficiency study's FAKE engines
FAKE_PREFILL_MS = 0.05  # per uncached prompt token, on the step that admits it


def shares(folder: Path) -> tuple[float | None, float | None]:
    """Cached ÷ prompt tokens over the run's section requests, and over all of its answered requests."""
    section = [0, 0]
    every = [0, 0]
    for line in (folder / "requests.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("cached_tokens") is None or not row.get("prompt_tokens"):
            continue
        for total in (every, section) if row["kind"] == "section" else (every,):
            total[0] += row["cached_tokens"]
            total[1] += row["prompt_tokens"]
    return tuple(round(c / p, 3) if p else None for c, p in (section, every))  # type: ignore[return-value]


async def one_book(settings: Settings, spec: BookSpec, schedule: WarmSchedule, folder: Path) -> str:
    run = folder / schedule.value
    outcome = await book(
        settings.model_copy(update={"warm": schedule}), spec, run, None, BookListener(), options=RunOptions()
    )
    stats = outcome.stats
    section, every = shares(run)
    return (
        f"| {schedule.value} | {stats.sections_ok} | {section} | {every} | {stats.job_seconds:.1f} "
        f"| {stats.plan_seconds:.1f} | {stats.write_seconds:.1f} |"
    )


@contextmanager
def fleet(engine: str) -> Iterator[Settings]:
    if engine == "embedded":
        yield load_settings({}, None)
        return
    with steplaw_in_thread(*[FAKE_LAW] * 6, prefill_ms=FAKE_PREFILL_MS) as engines:
        backends = [Backend(name=f"fake{n}", base_url=e.url, cap=256) for n, e in enumerate(engines)]
        yield Settings(backends=backends, best_of=1, off_point_retries=0, judge="none")


async def main(engine: str, shape: str, order: list[WarmSchedule]) -> None:
    parts, chapters, sections = (int(n) for n in shape.split("x"))
    spec = BookSpec(prompt=DEMO_PROMPT, parts=parts, chapters=chapters, sections=sections)
    print(f"{engine}, {shape}: one book a schedule, in this order: {', '.join(s.value for s in order)}\n")
    print("| warm | sections | section prompt cached | all prompt cached | job s | plan s | write s |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="fanout-warm-") as folder, fleet(engine) as settings:
        for schedule in order:
            print(await one_book(settings, spec, schedule, Path(folder)), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["embedded", "fake"], default="embedded")
    parser.add_argument("--shape", default="2x3x4")
    parser.add_argument("--order", default="off,answer,first-token", help="the schedules, in the order run")
    args = parser.parse_args()
    anyio.run(main, args.engine, args.shape, [WarmSchedule(name) for name in args.order.split(",")])
