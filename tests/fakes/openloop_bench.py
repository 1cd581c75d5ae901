"""Open-loop benchmark against a FAKE step-law engine in its own process: does `fanout bench --rate`
measure what the law and the engine's own per-request log say it should?

    python -m tests.fakes.openloop_bench [--duration 20] [--seqs 8] [--tokens 32]

The engine runs at most SEQS requests at once, each TOKENS steps of (a + b * running) ms, so it serves at
most C = SEQS / (TOKENS * (a + b * SEQS)) requests a second. The sweep offers 0.25, 0.5, 0.75, 0.9, 1.1 and
1.3 C; the law puts the knee at 1.1 C. Printed per rate: served / arrived (the goal: within 2 % below the
knee), whether fanout marked the knee, and for TTFT, TPOT, ITL and E2EL the client's p50 / p90 / p99 against
the same percentile computed directly from the engine's log (arrival, every event, end on the engine's
clock). Then goodput against planted outcomes: a dataset of short (8-token) and long (96-token) answers
at a low rate with an E2EL SLO between their durations, so exactly the short ones are good.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import anyio

from pipeline.bench.report.latency import percentile
from pipeline.bench.studies.ladder import bench
from pipeline.config import Settings
from pipeline.records import Backend
from pipeline.records.bench import BenchSpec
from tests.fakes.fake_steplaw import log_of, steplaw_process

A_MS, B_MS = 12.94, 0.2451
FACTORS = (0.25, 0.5, 0.75, 0.9, 1.1, 1.3)


def reference(log: list[dict], heads: set[str]) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {"ttft": [], "tpot": [], "itl": [], "e2el": []}
    for entry in log:
        if entry["prompt"][:14] not in heads or entry["done"] is None:
            continue
        events = entry["events"]
        figures["ttft"].append(1000 * (events[0] - entry["arrived"]))
        figures["e2el"].append(1000 * (entry["done"] - entry["arrived"]))
        if len(events) > 1:
            figures["tpot"].append(1000 * (entry["done"] - events[0]) / (len(events) - 1))
        figures["itl"] += [1000 * (b - a) for a, b in zip(events, events[1:])]
    return figures


def sweep(url: str, capacity: float, args: argparse.Namespace) -> None:
    settings = Settings(backends=[Backend(name="fake", base_url=url, cap=1024)], read_timeout=60)
    print(f"capacity by the law: {capacity:.2f} req/s; knee expected at {1.1 * capacity:.2f} req/s (1.1 C)\n")
    print("| offered | x C | arrived | served | served / arrived | knee | " + " | ".join(
        f"{n} p50/p90/p99 ms ours (log) max dev" for n in ("TTFT", "TPOT", "ITL", "E2EL")) + " |")  # fmt: skip
    for factor in FACTORS:
        rate = round(factor * capacity, 2)
        before = len(log_of(url))
        spec = BenchSpec(streams=[], rates=[rate], duration_s=args.duration, max_tokens=args.tokens,
                         engine_slots={"*": args.seqs}, seed=17)  # fmt: skip
        record = anyio.run(bench, settings, spec)
        (point,) = record.sweeps[0].points
        log = log_of(url)[before:]
        ref = reference(log, {entry["prompt"][:14] for entry in log})
        cells = []
        for name in ("ttft", "tpot", "itl", "e2el"):
            ours = getattr(point.latency, name).percentiles_ms
            theirs = [percentile(ref[name], q) or 0.0 for q in (50, 90, 99)]
            mine = [ours[f"p{q:g}"] or 0.0 for q in (50.0, 90.0, 99.0)]
            worst = max(abs(m - t) / t for m, t in zip(mine, theirs) if t)
            cells.append(
                "/".join(f"{m:.1f}" for m in mine) + " (" + "/".join(f"{t:.1f}" for t in theirs) + f") {worst:.1%}"
            )
        knee = "KNEE" if point.knee or not point.keeps_up else ""
        print(f"| {rate:.2f} | {factor:.2f} | {point.arrival_rate:.2f} | {point.completion_rate:.2f} | "
              f"{point.served_ratio:.3f} | {knee} | " + " | ".join(cells) + " |", flush=True)  # fmt: skip


def goodput(url: str, args: argparse.Namespace) -> None:
    settings = Settings(backends=[Backend(name="fake", base_url=url, cap=1024)], read_timeout=60)
    rows = [{"prompt": f"Planted {i:04d} answer", "max_tokens": 8 if i % 3 else 96} for i in range(60)]
    short = sum(r["max_tokens"] == 8 for r in rows)
    with tempfile.TemporaryDirectory() as folder:
        dataset = Path(folder) / "planted.jsonl"
        dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
        spec = BenchSpec(streams=[], rates=[4.0], num_requests=len(rows), duration_s=600, dataset=str(dataset),
                         engine_slots={"*": args.seqs}, goodput_slo_ms={"e2el": 600.0}, seed=3)  # fmt: skip
        record = anyio.run(bench, settings, spec)
    (point,) = record.sweeps[0].points
    g = point.latency.goodput
    assert g is not None
    print(f"\ngoodput, planted: {len(rows)} requests, {short} of 8 tokens (~0.12 s), {len(rows) - short} of 96 "
          f"(~1.3 s), SLO E2EL <= 600 ms: fanout counts {g.good} good of {g.requests} "
          f"({'exact' if g.good == short else 'NOT exact'}); rate {g.rate:.3f}/s")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--seqs", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    capacity = args.seqs * 1000 / (args.tokens * (A_MS + B_MS * args.seqs))
    with steplaw_process(1, A_MS, B_MS, args.seqs) as (url,):
        sweep(url, capacity, args)
        goodput(url, args)


if __name__ == "__main__":
    main()
