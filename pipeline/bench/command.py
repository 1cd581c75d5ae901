"""The `fanout bench` command's flags and its one function: flags -> BenchSpec -> run -> report.

Takes the parsed arguments and Settings; writes the run folder (bench.json, report.md, report.html,
charts/, the embedded engine's log) and prints the ladder tables (or, with --json, the record) to stdout.
Bad flags raise UsageError. Kept apart from pipeline/cli.py so the CLI only gains a subparser and a call.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
from pathlib import Path

from pydantic import ValidationError

from pipeline.errors import UsageError


def add_bench_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--streams", default="1,4,8,16,32", metavar="N,N,...",
                        help="stream levels per backend (default 1,4,8,16,32); each must fit the backend's cap "
                             "and its engine's slots")
    parser.add_argument("--window", type=float, default=40.0, metavar="S", help="measured seconds per level (40)")
    parser.add_argument("--warmup", type=float, default=3.0, metavar="S",
                        help="least seconds before each window, which also waits for full occupancy (3)")
    parser.add_argument("--max-tokens", type=int, default=512, help="cap on each answer (512)")
    parser.add_argument("--prompt-tokens", type=int, metavar="N",
                        help="prompts of N tokens as the engine counts them (its /tokenize; else tiktoken offline)")
    parser.add_argument("--label", default=None, help="name of this run in the report (default: the engine kind)")
    parser.add_argument("--compare", action="store_true",
                        help="measure each backend alone, one after another, side by side with a ratio column "
                             "(default: all backends at once, summed)")
    parser.add_argument("--engine-slots", action="append", metavar="[NAME=]N",
                        help="sequences the engine runs at once, for engines that cannot report it (vLLM, SGLang, "
                             "TGI); NAME is a backend name, none means every backend")
    parser.add_argument("--no-ignore-eos", action="store_true", help="let answers stop at end of sequence")
    parser.add_argument("--out", type=Path, metavar="DIR", help="run folder (default outputs/bench-<label>-<time>)")
    parser.add_argument("--json", action="store_true", help="print bench.json to stdout instead of the tables")
    ceiling = parser.add_argument_group("client ceiling (--ceiling: no engine; python -m pipeline.bench.ceiling -h)")
    ceiling.add_argument("--ceiling", action="store_true",
                         help="measure the client's own ingest ceiling against a local SSE source: ours beside "
                              "aiohttp and the naive openai SDK loop (--streams then defaults to 1536, --window to 6)")
    ceiling.add_argument("--ticks", default="20,10,0", metavar="MS,MS,...",
                         help="with --ceiling: source tick per event, 0 unpaced (20,10,0)")
    ceiling.add_argument("--workers", default="1", metavar="N,N,...",
                         help="with --ceiling: client processes, streams sharded over them (1; 1,2 side by side)")


def parse_levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"--streams {text!r}: expected whole numbers separated by commas, e.g. 1,4,8,16") from None
    if not levels or min(levels) <= 0:
        raise UsageError(f"--streams {text!r}: every level must be a positive whole number")
    return levels


def parse_engine_slots(specs: list[str] | None) -> dict[str, int]:
    slots: dict[str, int] = {}
    for spec in specs or []:
        name, sep, count = spec.rpartition("=")
        if not re.fullmatch(r"\d+", count.strip()) or int(count) <= 0:
            raise UsageError(f"--engine-slots {spec!r}: expected [NAME=]N with N a positive whole number")
        slots[name.strip() if sep else "*"] = int(count)
    return slots


def spec_from_args(args: argparse.Namespace):
    from pipeline.bench.ladder import check_spec
    from pipeline.bench.records import BenchSpec

    for name in ("max_tokens", "prompt_tokens"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be positive")
    if args.warmup < 0:
        raise UsageError("--warmup must not be negative")
    try:
        spec = BenchSpec(streams=parse_levels(args.streams), window_s=args.window, warmup_s=args.warmup,
                         max_tokens=args.max_tokens, prompt_tokens=args.prompt_tokens, label=args.label or "bench",
                         compare=args.compare, engine_slots=parse_engine_slots(args.engine_slots),
                         ignore_eos=not args.no_ignore_eos)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"bench: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    check_spec(spec)
    return spec


def default_folder(label: str) -> Path:
    slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-") or "bench"
    return Path("outputs") / f"bench-{slug}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


def progress_line(label: str, level) -> None:
    point = level.total
    print(f"fanout: bench {label}: {point.streams} streams: {point.sustained:,.1f} tok/s sustained, best second "
          f"{point.best_second:,.1f}, step {point.step_ms or 0:.2f} ms, TTFT p50 {point.ttft_p50_ms or 0:,.0f} ms",
          file=sys.stderr, flush=True)


def run_ceiling_command(args: argparse.Namespace, parser_defaults: dict) -> int:
    from pipeline.bench.ceiling import run_from_args

    def given(name: str, fallback):
        value = getattr(args, name)
        return fallback if value == parser_defaults.get(name) else value

    return run_from_args("ours,aiohttp,sdk,floor", args.ticks, str(given("streams", "1536")), args.workers,
                         args.max_tokens, 3.0, float(given("window", 6.0)), args.out)


def run_live(args: argparse.Namespace, settings, spec, engine_log: Path, argv: list[str]):
    """The ladder with the live page up (it stays up --live-linger seconds with the ladder table)."""
    import anyio

    from pipeline.bench.ladder import bench
    from pipeline.live import LiveFeed, serve_during

    feed = LiveFeed(args.live_host, args.live_port, args.live_public)
    return anyio.run(serve_during, feed, lambda page: bench(settings, spec, engine_log, argv, progress_line, page),
                     args.live_linger)


def run_command(args: argparse.Namespace, settings, argv: list[str]) -> int:
    from pipeline.bench.ladder import run_bench
    from pipeline.bench.report import text_report, write_report

    spec = spec_from_args(args)
    label_given = args.label is not None
    folder = args.out or default_folder(spec.label if label_given else "run")
    folder.mkdir(parents=True, exist_ok=True)
    if args.live:
        record = run_live(args, settings, spec, folder / "llama-server.log", argv)
    else:
        record = run_bench(settings, spec, folder / "llama-server.log", argv, progress_line)
    if not label_given and not spec.compare:
        engines = sorted({b.engine for b in record.provenance.backends})
        record.spec.label = record.series[0].label = "+".join(engines)
    paths = write_report(record, folder)
    print(record.model_dump_json(indent=1) if args.json else text_report(record))
    print(f"fanout: bench record: {paths['record']}\nfanout: report: {paths['html']} and {paths['markdown']}",
          file=sys.stderr)
    return 0
