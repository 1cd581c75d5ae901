"""Load benchmark: `fanout book` as a real process against FAKE engines, each in its own process
on 127.0.0.1, and the figures that say whether the client held up.

    python -m tests.fakes.load_bench --streams 1536 --engines 6 --shape 10x25x40
    python -m tests.fakes.load_bench --streams 256 --engines 2 --shape 1x8x32 --nofile 256      # the limit raised
    python -m tests.fakes.load_bench --streams 256 --engines 2 --shape 1x8x32 --nofile 300:300  # caps lowered

Caps are streams / engines each. `--nofile SOFT[:HARD]` starts fanout under that open-file limit (set with
`resource.setrlimit` in the child, as `prlimit` would), to see it raise the soft limit or lower the caps and
warn. While the job runs, every fake's in-flight count, fanout's resident memory, open descriptors and
open-file limit are sampled; at the end fanout's own peak memory comes from wait4 (ru_maxrss).
Peak concurrent streams is the largest sampled sum of in-flight requests over the fakes at one moment.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from tests.environ import isolated_env
from tests.fakes.fake_engine import fake_process
from tests.fakes.fake_prompts import letters

SAMPLE_S = 0.1


def fake_counters(url: str) -> dict:
    with urllib.request.urlopen(url[: -len("/v1")] + "/fake/stats", timeout=30) as response:
        return json.load(response)


def proc_value(pid: int, name: str, field: str) -> int | None:
    """A number from /proc/PID/status or /proc/PID/limits; None once the process is gone."""
    try:
        text = Path(f"/proc/{pid}/{name}").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(field):
            return int(line[len(field) :].split()[0])
    return None


def open_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


class Sampler(threading.Thread):
    """Polls the fakes and the fanout process until stopped."""

    def __init__(self, pid: int, urls: list[str]):
        super().__init__(daemon=True)
        self.pid, self.urls = pid, urls
        self.stop = threading.Event()
        self.peak_streams = 0
        self.peak_rss_kb = 0
        self.peak_fds = 0
        self.fd_soft_limit: int | None = None

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.peak_streams = max(self.peak_streams, sum(fake_counters(u)["in_flight"] for u in self.urls))
            except OSError:
                pass
            self.peak_rss_kb = max(self.peak_rss_kb, proc_value(self.pid, "status", "VmRSS:") or 0)
            self.peak_fds = max(self.peak_fds, open_fds(self.pid) or 0)
            self.fd_soft_limit = proc_value(self.pid, "limits", "Max open files") or self.fd_soft_limit
            self.stop.wait(SAMPLE_S)


def parse_nofile(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    soft, _, hard = text.partition(":")
    return int(soft), int(hard) if hard else resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def run_load(
    streams: int,
    engines: int,
    shape: str,
    nofile: tuple[int, int] | None = None,
    token_delay: float = 0.2,
    out: Path | None = None,
    timeout: float = 3600,
    section_pause: float = 0.0,
) -> dict:
    """Start the fakes, run one book over them, return the figures. `section_pause` holds each section
    before its first byte, so sections started as their titles stream in are all open at one moment."""
    cap = streams // engines
    fakes = [
        # prefixes differ by a word, not a number: numbers are not content words, so "Load 0 topic b" and
        # "Load 1 topic b" would be near-duplicate titles, refused and re-asked
        fake_process(
            token_delay,
            0.0,
            "--title-prefix",
            f"Load engine{letters(i + 1)} topic",
            "--section-pause",
            str(section_pause),
        )
        for i in range(engines)
    ]
    urls = [url for _, url in fakes]
    out = out or Path(tempfile.mkdtemp(prefix="fanout-load-")) / "run"
    argv = [
        sys.executable,
        "-m",
        "pipeline",
        "book",
        "A handbook written under load",
        "--shape",
        shape,
        "--out",
        str(out),
        "--quiet",
        "--json",
        # every section at once: this measures how many streams the client holds, not the cache (warm) nor
        # sections sent one by one as planned beside the slot kept for planning (streamed)
        "--warm",
        "off",
        "--schedule",
        "pipelined",
        *[a for u in urls for a in ("--backend", f"{u},cap={cap}")],
    ]
    env = isolated_env()
    limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, nofile)) if nofile else None
    started = time.monotonic()
    try:
        with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
            job = subprocess.Popen(argv, stdout=stdout, stderr=stderr, env=env, preexec_fn=limit, text=True)
            sampler = Sampler(job.pid, urls)
            sampler.start()
            watchdog = threading.Timer(timeout, job.kill)  # a hung job is killed, and shows as a failed one
            watchdog.start()
            try:
                _, status, usage = os.wait4(job.pid, 0)  # blocks; the sampler runs meanwhile
            finally:
                watchdog.cancel()
                sampler.stop.set()
                sampler.join()
            job.returncode = os.waitstatus_to_exitcode(status)
            stdout.seek(0), stderr.seek(0)
            stats_text, log = stdout.read(), stderr.read()
        per_fake = [fake_counters(u) for u in urls]
    finally:
        for process, _ in fakes:
            process.kill()
            process.wait()
    stats = json.loads(stats_text) if stats_text.strip() else {}
    return {
        "exit_code": job.returncode,
        "streams_asked": streams,
        "caps_in_force": [b["cap"] for b in stats.get("backends", [])],
        "peak_concurrent_streams": sampler.peak_streams,
        "peak_in_flight_per_fake": [f["peak_in_flight"] for f in per_fake],
        "sections": stats.get("sections"),
        "sections_ok": stats.get("sections_ok"),
        "client_errors": (
            stats.get("request_errors", 0) + stats.get("failed_sections", 0) + stats.get("empty_sections", 0)
        )
        if stats
        else None,
        "request_errors": stats.get("request_errors"),
        "failed_sections": stats.get("failed_sections"),
        "empty_sections": stats.get("empty_sections"),
        "reissued_before_first_byte": stats.get("reissued_before_first_byte"),
        "requests_served_by_fakes": sum(f["requests"] for f in per_fake),
        "nofile_at_start": list(nofile) if nofile else list(resource.getrlimit(resource.RLIMIT_NOFILE)),
        "nofile_soft_in_force": sampler.fd_soft_limit,
        "peak_open_fds": sampler.peak_fds,
        "caps_lowered_warning": next((line for line in log.splitlines() if "caps lowered" in line), None),
        "client_peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "client_peak_rss_sampled_mb": round(sampler.peak_rss_kb / 1024, 1),
        "write_seconds": stats.get("write_seconds"),
        "write_tok_s": stats.get("write_tok_s"),
        "tokens_written": stats.get("tokens_written"),
        "typeset_seconds": stats.get("typeset_seconds"),
        "pdf_pages": stats.get("pdf_pages"),
        "job_seconds": stats.get("job_seconds"),
        "wall_seconds": round(time.monotonic() - started, 1),
        "out": str(out),
        "stderr_tail": log[-2000:] if job.returncode else "",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.load_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=1536, help="requests in flight at once, over all engines")
    parser.add_argument("--engines", type=int, default=6, help="FAKE engine processes (cap = streams / engines)")
    parser.add_argument("--shape", default="10x25x40", help="the book: parts x chapters x sections")
    parser.add_argument("--sections", type=int, help="a check: the shape must give this many sections")
    parser.add_argument("--nofile", metavar="SOFT[:HARD]", help="start fanout under this open-file limit")
    parser.add_argument(
        "--token-delay",
        type=float,
        default=0.2,
        help="the fakes' seconds between tokens (0.2: a stream lasts ~13 s, so 1,536 streams are in "
        "flight at once even when the client's CPU, not the fakes, sets the pace)",
    )
    parser.add_argument("--out", type=Path, help="run folder (default: a temporary one)")
    parser.add_argument("--timeout", type=float, default=3600, help="kill fanout after this many seconds")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    p, c, s = (int(n) for n in args.shape.split("x"))
    if args.sections is not None and p * c * s != args.sections:
        parser.error(f"--shape {args.shape} gives {p * c * s} sections, not {args.sections}")
    figures = run_load(
        args.streams, args.engines, args.shape, parse_nofile(args.nofile), args.token_delay, args.out, args.timeout
    )
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for key, value in figures.items():
            if value not in ("", None) or key == "caps_lowered_warning":
                print(f"{key:30} {value}")
    ok = figures["exit_code"] == 0 and figures["client_errors"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
