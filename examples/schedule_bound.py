"""How fast a finished book's schedule could have been on a step-law fleet, and what a faster plan is worth.

    PYTHONPATH=. .venv/bin/python examples/schedule_bound.py RUN_DIR [--a-ms 12.94] [--b-ms 0.2451] [--caps 256x6]

Reads the run's requests.jsonl: each section's first request, when it was sent (from the job's first request)
and how many tokens its answer had. Simulates them on engines that keep the step law (a + b·n ms a step of n
streams; the defaults are the FAKE step-law engines of `fanout efficiency`'s figures) with
pipeline/bench/studies/fleetsim.py, and prints beside the run's own time:
- the makespan its own sends allow (each section sent when the book sent it);
- the ideal: the same tokens at the fleet's sustained rate, every engine full from the first request;
- the makespan with every send moved earlier by a factor (planning that many times faster).
Planning's own requests and the off-point retries are left out (retries are sent when their first answer is
scored, which the simulation moves), so the run's own time can be longer than the first row by its retry tail.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pipeline.bench.studies.fleetsim import StepLaw, first_section_sends, makespan
from pipeline.book.requestlog import REQUEST_LOG

FACTORS = (1.0, 0.75, 0.5, 0.25, 0.1)


def own_seconds(request_log: Path) -> float:
    """The run's own time: its first request to its last answer."""
    rows = [json.loads(line) for line in request_log.read_text().splitlines() if line.strip()]
    return max(row["t_done"] for row in rows) - min(row["t_asked"] for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--a-ms", type=float, default=12.94)
    parser.add_argument("--b-ms", type=float, default=0.2451)
    parser.add_argument("--caps", default="256x6", metavar="CAPxENGINES")
    args = parser.parse_args()
    cap, engines = (int(n) for n in args.caps.split("x"))
    law = StepLaw(a_s=args.a_ms / 1000, b_s=args.b_ms / 1000)
    sends, tokens = first_section_sends(args.run_dir / REQUEST_LOG)
    own = own_seconds(args.run_dir / REQUEST_LOG)
    ideal = sum(tokens) / (engines * law.sustained(cap))
    print(f"{len(sends)} sections, {sum(tokens):,} tokens; the last sent at {max(sends):.2f} s")
    print(f"the run: {own:.2f} s (whole ÷ ideal {ideal / own:.3f}); ideal at the sustained rate: {ideal:.2f} s")
    print("| sends × | last sent s | makespan s | ideal ÷ makespan |")
    print("|---|---|---|---|")
    for factor in FACTORS:
        moved = [at * factor for at in sends]
        end = makespan(moved, tokens, caps=[cap] * engines, law=law)
        print(f"| {factor:g} | {max(moved):.2f} | {end:.2f} | {ideal / end:.3f} |")


if __name__ == "__main__":
    main()
