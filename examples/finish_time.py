"""When a fleet-sized book is finished: `fanout book` at 8x12x16 (1,536 sections) on six capable FAKE step-law engines,
and the seconds from its last section's arrival to book.md, audit.json and book.pdf on disk, with the fanout
process's peak memory.

    PYTHONPATH=. .venv/bin/python examples/finish_time.py --out DIR [--code ROOT] [--shape 8x12x16]

The engines are tests/fakes/fake_steplaw.py in their own process (six, answering as a capable model would), each
`--backend URL,cap=256`; `fanout book` runs as a process with FANOUT_THREADS=1 from the checkout at --code (this one
unless given: an older checkout, for a before-and-after). The times are the files' modification times against the
latest `t_done` in the journal (so a checkout whose stats.json has no such figure is measured the same way), and
stats.json's own `after_last_section`, `finished_seconds` and `finished_tok_s` where it has them. Peak memory is the
largest resident set of the fanout process (getrusage of the waited child).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.fake_steplaw import steplaw_process  # noqa: E402

PROMPT = "Write a practical handbook on home beekeeping: hives, bees, seasons, honey, and pests."
FINISHING = ("book.md", "audit.json", "book.pdf", "stats.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the run folder to write (must not exist)")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose fanout writes the book")
    parser.add_argument("--shape", default="8x12x16")
    args = parser.parse_args()
    with steplaw_process(6, capable=True) as urls:
        command = [sys.executable, "-m", "pipeline", "book", PROMPT, "--shape", args.shape, "--out", str(args.out)]
        command += ["--quiet", *[flag for url in urls for flag in ("--backend", f"{url},cap=256")]]
        environ = {**os.environ, "PYTHONPATH": str(args.code), "FANOUT_THREADS": "1"}
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, env=environ, cwd=args.code)
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr}")
    journal = (args.out / "sections.jsonl").read_text().splitlines()
    last = max(json.loads(line)["t_done"] or 0.0 for line in journal)
    print(f"{args.code}: {args.shape} in {time.monotonic() - started:.1f} s, peak memory {peak_mib:,.0f} MiB")
    for name in FINISHING:
        print(f"  {name}: {(args.out / name).stat().st_mtime - last:.1f} s after the last section (file time)")
    stats = json.loads((args.out / "stats.json").read_text())
    figures = ("after_last_section", "finished_seconds", "finished_tok_s", "generate_seconds", "generate_tok_s")
    print("  stats.json:", {name: stats.get(name) for name in figures})


if __name__ == "__main__":
    main()
