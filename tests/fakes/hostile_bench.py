"""The hostile-fleet goal, measured: `fanout book` as a real process over two backends that fail a share of
their requests in every way a server can (tests/fakes/hostile_fleet.py), one that answers only HTML error
pages, and one healthy FAKE engine, for each seed and shape; one line each: exit code, sections written,
job seconds, requests asked again later, and the failed attempts by kind as stats.json counts them.

    python -m tests.fakes.hostile_bench --seeds 1,2,3,4,5 --shapes 2x4x6,8x12x16 [--share 0.3] [--cap 16]

Runs one book at a time; the fakes serve from a thread of this process. Read timeout 2 s (a stalled
attempt costs that much).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.environ import isolated_env
from tests.fakes.fake_engine import BookReplies, FakeEngine, FakeEngineThread
from tests.fakes.hostile_fleet import hostile_trio


def one_book(seed: int, shape: str, share: float, cap: int, root: Path) -> dict:
    replies = BookReplies(title_prefix=f"Seed {seed} topic")
    fleet = [*hostile_trio(replies, seed, share), FakeEngine(reply=replies)]
    out = root / f"{shape}-seed-{seed}"
    env = isolated_env()
    env.update({"FANOUT_READ_TIMEOUT": "2"})
    started = time.monotonic()
    with FakeEngineThread(*fleet):  # ports are known once they serve
        backends = [arg for engine in fleet for arg in ("--backend", f"{engine.url},cap={cap}")]
        argv = [sys.executable, "-m", "pipeline", "book", "A handbook about faults", "--shape", shape, "--out",
                str(out), "--quiet", "--json", *backends]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=3600)
    stats = json.loads((out / "stats.json").read_text()) if (out / "stats.json").exists() else {}
    drawn = sum(fault != "ok" for engine in fleet[:3] for fault in engine.drawn)
    return {
        "seed": seed,
        "shape": shape,
        "exit": done.returncode,
        "traceback": "Traceback" in done.stderr,
        "sections": f"{stats.get('sections_ok', 0)}/{stats.get('sections', '?')}",
        "seconds": round(time.monotonic() - started, 1),
        "faults_served": drawn,
        "asked_later": stats.get("asked_later"),
        "failed_attempts": stats.get("failed_attempts_by_kind"),
        "last_stderr": "" if done.returncode == 0 else done.stderr.strip().splitlines()[-1:],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.hostile_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--shapes", default="2x4x6,8x12x16")
    parser.add_argument("--share", type=float, default=0.3, help="the share of requests a hostile backend fails")
    parser.add_argument("--cap", type=int, default=16, help="each backend's cap")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fanout-hostile-") as root:
        for shape in args.shapes.split(","):
            for seed in map(int, args.seeds.split(",")):
                print(json.dumps(one_book(seed, shape, args.share, args.cap, Path(root))), flush=True)


if __name__ == "__main__":
    main()
