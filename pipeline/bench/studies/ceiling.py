"""The client-ceiling benchmark: how many tokens a second one client process can take in, and at what CPU cost.

`python -m pipeline.bench.studies.ceiling [--streams 1536] [--ticks 20,10,0] [--clients ours,sdk] [--workers 1,2]`
(also `fanout bench --ceiling ...`). A local SSE source (pipeline/bench/studies/sse_source.py) runs in its own
process and feeds N closed-loop streams, paced (one event per stream per tick, so each read carries one
event) or unpaced (tick 0). The client under test runs in worker processes (ceiling_worker.py, which holds
the clients), streams sharded over them:
`ours` is the real path (BackendPool.complete -> wire.stream_chat, on_delta counting), `aiohttp` the same
SSE reader over aiohttp (the path wire.py replaced), `sdk` a naive loop over AsyncOpenAI streaming on the
stock asyncio loop, `floor` a Protocol that only counts `data:` lines (the cost of a read itself, kernel
and event loop, below which no client can go on this machine). Each worker counts events and its own CPU time
(time.process_time) over the same wall-clock window; the parent merges them into one row: tokens/s, client
CPU (core-seconds per second), CPU µs per event, server CPU, streams actually receiving. Every completed
answer is checked exactly (text, event count == usage.completion_tokens == max_tokens, finish_reason).
A row says `client` when the client was the limit: delivered < 97% of offered or a worker at >= 0.95 of a
core while the source was not saturated. Prints a table; writes a JSON record.

`--runners processes,ray` runs the same workers as Ray actors as well (a local Ray instance: the source is
on this machine), side by side: each actor runs the worker's own code on its own uvloop in its own process,
so the difference is Ray's (its core worker's threads count in the actor's CPU time).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipeline.bench.studies.ceiling_worker import CeilingActor

CLIENT_BOUND_CPU = 0.95
WORKER_GRACE_S = 30.0  # a worker whose loop is this late past the window's end is killed and counted stuck
DELIVERED_SHARE = 0.97


@dataclass(frozen=True)
class Timing:
    """Every case's answer length and clock: events per answer, seconds before the window, the window."""

    max_tokens: int
    ramp_s: float
    window_s: float


@dataclass
class Case:
    client: str  # ours | sdk
    tick_ms: float  # 0: unpaced
    streams: int
    workers: int
    max_tokens: int
    ramp_s: float
    window_s: float
    runner: str = "processes"  # processes | ray


@dataclass
class Row:
    case: Case
    offered_tps: float | None  # None when unpaced
    tokens_per_s: float
    client_cpu: float  # core-seconds per second, all workers together
    worker_cpu_max: float
    us_per_event: float
    sys_share: float  # of the client's CPU, the part spent in the kernel (socket reads)
    events_per_read: float | None  # events / read(2) calls in the window: 1.0 is the engine-like case; None
    # for a client that reads with recv(2) (httpx), which /proc/self/io does not count
    server_cpu: float
    events: int
    receiving: int  # streams that got at least one event in the window
    completed: int
    exact: int
    mismatches: list[str] = field(default_factory=list)
    errors: int = 0
    limit: str = ""
    source_tps: float = 0.0  # events the source wrote a second
    late_s: float = 0.0  # how late a busy worker loop started its window (its rates use its own window)


class SourceProcess:
    def __init__(self, tick_ms: float):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pipeline.bench.studies.sse_source", "--tick-ms", str(tick_ms)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None  # stdout=PIPE
        self.port = int(self.process.stdout.readline())

    def stats(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=10) as response:
            return json.loads(response.read())

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def shards(streams: int, workers: int) -> list[tuple[int, int]]:
    """(offset, count) of each worker's streams."""
    base, extra = divmod(streams, workers)
    out, offset = [], 0
    for index in range(workers):
        count = base + (1 if index < extra else 0)
        out.append((offset, count))
        offset += count
    return [s for s in out if s[1] > 0]


def merge(case: Case, parts: list[dict], server_cpu: float, server_events: int) -> Row:
    events = sum(p["events"] for p in parts)
    cpu = sum(p["cpu_s"] for p in parts)
    offered = case.streams * 1000 / case.tick_ms if case.tick_ms > 0 else None
    rate = sum(p["events"] / p.get("seconds", case.window_s) for p in parts)
    row = Row(
        case=case,
        offered_tps=offered,
        tokens_per_s=rate,
        client_cpu=sum(p["cpu_s"] / p.get("seconds", case.window_s) for p in parts),
        worker_cpu_max=max(p["cpu_s"] / p.get("seconds", case.window_s) for p in parts),
        us_per_event=cpu / events * 1e6 if events else float("inf"),
        sys_share=sum(p["sys_s"] for p in parts) / cpu if cpu else 0.0,
        server_cpu=server_cpu / case.window_s,
        events_per_read=events / reads if (reads := sum(p.get("reads", 0) for p in parts)) else None,
        events=events,
        receiving=sum(p["receiving"] for p in parts),
        completed=sum(p["completed"] for p in parts),
        exact=sum(p["exact"] for p in parts),
        mismatches=[m for p in parts for m in p["mismatches"]],
        errors=sum(p["errors"] for p in parts),
        late_s=max(p.get("late_s", 0.0) for p in parts),
    )
    short = offered is None or row.tokens_per_s < DELIVERED_SHARE * offered  # unpaced: someone is the limit
    busy = row.worker_cpu_max >= CLIENT_BOUND_CPU
    server_busy = row.server_cpu >= CLIENT_BOUND_CPU
    source_short = offered is not None and server_events / case.window_s < DELIVERED_SHARE * offered
    row.source_tps = server_events / case.window_s
    if server_busy:
        row.limit = "source"
    elif busy or (short and not source_short):
        row.limit = "client"
    elif short:
        row.limit = "machine (neither at a full core: CPU contention)"
    else:
        row.limit = "offered"
    if any(p.get("stuck") for p in parts):
        row.limit = "client (a worker's loop never reached the window)"
    if row.receiving < case.streams:
        row.limit += f" ({case.streams - row.receiving} streams starved)"
    return row


def run_case_on_ray(source: SourceProcess, case: Case) -> Row:
    """The case's workers as Ray actors on a local instance, on the same wall-clock window as processes."""
    from pipeline.backends.raycluster import connect

    ray = connect(None, case.workers)
    remote = ray.remote(num_cpus=1)(CeilingActor)
    actors = [remote.remote() for _ in shards(case.streams, case.workers)]
    ray.get([a.__ray_ready__.remote() for a in actors])  # started before the clock runs
    t0 = time.time() + 0.5
    start_at, end_at = t0 + case.ramp_s, t0 + case.ramp_s + case.window_s
    refs = [
        actor.run.remote(case.client, source.port, count, offset, case.streams, case.max_tokens, start_at, end_at)
        for actor, (offset, count) in zip(actors, shards(case.streams, case.workers))
    ]
    time.sleep(max(start_at - time.time(), 0))
    before = source.stats()
    time.sleep(max(end_at - time.time(), 0))
    after = source.stats()
    parts = ray.get(refs, timeout=case.window_s + WORKER_GRACE_S)
    for actor in actors:
        ray.kill(actor)
    return merge(case, parts, after["cpu_s"] - before["cpu_s"], after["events"] - before["events"])


def run_case(source: SourceProcess, case: Case) -> Row:
    if case.runner == "ray":
        return run_case_on_ray(source, case)
    children = []
    for offset, count in shards(case.streams, case.workers):
        argv = [
            sys.executable,
            "-m",
            "pipeline.bench.studies.ceiling_worker",
            "--client",
            case.client,
            "--port",
            str(source.port),
            "--streams",
            str(count),
            "--offset",
            str(offset),
            "--total",
            str(case.streams),
            "--max-tokens",
            str(case.max_tokens),
            "--ramp",
            str(case.ramp_s),
            "--window",
            str(case.window_s),
        ]
        children.append(subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    for child in children:
        assert child.stdout is not None and child.stdin is not None  # both are PIPEs
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("a ceiling worker failed to start")
    t0 = time.time() + 0.05
    for child in children:
        assert child.stdin is not None
        child.stdin.write(f"{t0!r}\n")
        child.stdin.flush()
    time.sleep(max(t0 + case.ramp_s - time.time(), 0))
    before = source.stats()
    time.sleep(max(t0 + case.ramp_s + case.window_s - time.time(), 0))
    after = source.stats()
    parts = []
    for child in children:
        try:
            out, _ = child.communicate(timeout=case.window_s + WORKER_GRACE_S)
        except subprocess.TimeoutExpired:  # its loop never got to the window: the client was the limit
            child.kill()
            child.communicate()
            parts.append(
                {
                    "events": 0,
                    "cpu_s": 0.0,
                    "sys_s": 0.0,
                    "reads": 0,
                    "receiving": 0,
                    "completed": 0,
                    "exact": 0,
                    "errors": 0,
                    "mismatches": ["worker loop never reached its window"],
                    "stuck": True,
                }
            )
            continue
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if child.returncode != 0 or not lines:
            raise RuntimeError(f"a ceiling worker failed (exit {child.returncode})")
        parts.append(json.loads(lines[-1]))
    return merge(case, parts, after["cpu_s"] - before["cpu_s"], after["events"] - before["events"])


def case_of(client: str, tick: float, streams: int, workers: int, timing: Timing, runner: str) -> Case:
    return Case(client, tick, streams, workers, timing.max_tokens, timing.ramp_s, timing.window_s, runner)


def run_ceiling(
    clients: list[str],
    ticks: list[float],
    streams: list[int],
    workers: list[int],
    *,
    timing: Timing,
    echo=print,
    runners: tuple[str, ...] = ("processes",),
) -> list[Row]:
    rows = []
    try:
        for tick in ticks:
            source = SourceProcess(tick)
            try:
                for count in streams:
                    for client in clients:
                        for n in workers:
                            for runner in runners:
                                rows.append(run_case(source, case_of(client, tick, count, n, timing, runner)))
                                echo(format_row(rows[-1]))
            finally:
                source.close()
    finally:
        if "ray" in runners:
            import ray

            ray.shutdown()
    return rows


HEADER = (
    "| client | pacing | streams | workers | offered tok/s | received tok/s | client CPU (sys) | µs/event "
    "| events/read | source CPU | receiving | exact / completed | limit |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def format_row(row: Row) -> str:
    c = row.case
    pacing = f"{c.tick_ms:g} ms tick" if c.tick_ms > 0 else "unpaced"
    offered = f"{row.offered_tps:,.0f}" if row.offered_tps else "–"
    exact = f"{row.exact:,} / {row.completed:,}" + (f", {row.errors} failed" if row.errors else "")
    implausible = row.events_per_read is None or row.events_per_read > c.max_tokens + 4  # recv(2) readers
    per_read = "–" if implausible else f"{row.events_per_read:.2f}"
    return (
        f"| {c.client} | {pacing} | {c.streams:,} | {c.workers}{' (Ray)' if c.runner == 'ray' else ''} "
        f"| {offered} | {row.tokens_per_s:,.0f} "
        f"| {row.client_cpu:.2f} ({row.sys_share:.0%}) | {row.us_per_event:.1f} | {per_read} "
        f"| {row.server_cpu:.2f} | {row.receiving:,} | {exact} "
        f"| {row.limit} |"
    )


def table(rows: list[Row]) -> str:
    return "\n".join([HEADER, *(format_row(r) for r in rows)])


def ratios(rows: list[Row]) -> list[str]:
    """Ours against every other client measured in the same case."""
    lines = []
    for row in rows:
        if row.case.client != "ours":
            continue
        for other in rows:
            c, o = row.case, other.case
            if (
                o.client != "ours"
                and (o.tick_ms, o.streams, o.workers, o.runner) == (c.tick_ms, c.streams, c.workers, c.runner)
                and row.us_per_event > 0
                and other.events > 0
            ):
                pacing = f"{c.tick_ms:g} ms tick" if c.tick_ms > 0 else "unpaced"
                lines.append(
                    f"ours vs {o.client}, {pacing}, {c.streams} streams, {c.workers} worker(s): "
                    f"{row.us_per_event:.1f} µs of CPU an event against {other.us_per_event:.1f} "
                    f"({row.us_per_event / other.us_per_event:.2f}x {o.client}'s), "
                    f"{row.tokens_per_s / max(other.tokens_per_s, 1):.1f}x the tokens/s"
                )
    return lines + runner_ratios(rows)


def runner_ratios(rows: list[Row]) -> list[str]:
    """Each Ray row against the process row of the same case."""
    lines = []
    for row in rows:
        c = row.case
        twin = next((r for r in rows if r.case.runner == "processes" and asdict(r.case) == {**asdict(c),
                     "runner": "processes"}), None)  # fmt: skip
        if c.runner == "ray" and twin is not None and twin.tokens_per_s > 0:
            pacing = f"{c.tick_ms:g} ms tick" if c.tick_ms > 0 else "unpaced"
            lines.append(
                f"{c.client}, {pacing}, {c.streams} streams, {c.workers} worker(s): Ray actors take in "
                f"{row.tokens_per_s / twin.tokens_per_s:.3f} of what worker processes do "
                f"({row.exact:,}/{row.completed:,} exact)"
            )
    return lines


def add_ceiling_flags(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    parser.add_argument(
        f"--{prefix}clients",
        default="ours,sdk",
        help="ours (wire.py), aiohttp (the path it replaced), sdk (the naive openai loop), floor (reads and "
        "counts, no parsing: the machine's own cost an event); default ours,sdk",
    )
    parser.add_argument(
        f"--{prefix}ticks",
        default="20,10,0",
        metavar="MS,MS,...",
        help="server tick in ms, one event per stream per tick; 0 is unpaced (20,10,0)",
    )
    parser.add_argument(f"--{prefix}streams", default="1536", metavar="N,N,...", help="streams (1536; try 64,256)")
    parser.add_argument(
        f"--{prefix}workers",
        default="1",
        metavar="N,N,...",
        help="client processes, streams sharded over them (1; 1,2 prints both side by side)",
    )
    parser.add_argument(
        f"--{prefix}runners",
        default="processes",
        metavar="processes,ray",
        help="how the workers run: processes, Ray actors on a local instance, or both side by side (processes)",
    )
    parser.add_argument(f"--{prefix}max-tokens", type=int, default=512, help="events per answer (512)")
    parser.add_argument(f"--{prefix}ramp", type=float, default=3.0, help="seconds before the window (3)")
    parser.add_argument(f"--{prefix}window", type=float, default=6.0, help="measured seconds (6)")
    parser.add_argument(f"--{prefix}out", type=Path, default=None, help="JSON record (outputs/ceiling-<time>.json)")


def _numbers(text: str, kind=int) -> list:
    return [kind(part) for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.bench.studies.ceiling", description=__doc__.split("\n")[0]
    )
    add_ceiling_flags(parser)
    args = parser.parse_args(argv)
    return run_from_args(
        args.clients,
        args.ticks,
        args.streams,
        args.workers,
        timing=Timing(args.max_tokens, args.ramp, args.window),
        out=args.out,
        runners=args.runners,
    )


def run_from_args(
    clients: str, ticks: str, streams: str, workers: str, *, timing: Timing, out: Path | None,
    runners: str = "processes",
) -> int:  # fmt: skip
    from pipeline.errors import UsageError
    from pipeline.files import output_path

    chosen = tuple(_numbers(runners, str))
    if not chosen or set(chosen) - {"processes", "ray"}:
        raise UsageError(f"--runners {runners!r}: processes, ray or both")

    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    print(f"load average before: {' '.join(load)}; {os.cpu_count()} cores", file=sys.stderr)
    rows = run_ceiling(
        _numbers(clients, str),
        _numbers(ticks, float),
        _numbers(streams),
        _numbers(workers),
        timing=timing,
        echo=lambda line: print(line, file=sys.stderr, flush=True),
        runners=chosen,
    )
    print(table(rows))
    for line in ratios(rows):
        print(line)
    out = out or output_path("ceiling", ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"load_before": load, "cores": os.cpu_count(), "rows": [asdict(r) for r in rows]}, indent=1)
    )
    print(f"ceiling record: {out}", file=sys.stderr)
    return (
        0
        if all(
            r.exact == r.completed and not r.errors and not any(m.startswith("asked") for m in r.mismatches)
            for r in rows
        )
        else 1
    )


if __name__ == "__main__":
    sys.exit(main())
