"""The command line: parse flags, call one function, turn errors into exit codes.

Exit codes: 0 ok; 1 the run failed; 2 usage or configuration error (bad flag, bad TOML, unreachable
backend, wrong model name); 3 an audit found defects the user gates on; 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any, NoReturn, Sequence

import anyio

from pipeline.errors import FanoutError, UsageError

log = logging.getLogger("fanout")
EXIT_CODES = "exit codes: 0 ok, 1 run failed, 2 usage/config error, 3 audit gate, 130 interrupted"


class Parser(argparse.ArgumentParser):
    """argparse, but its errors are one line and exit 2 through our own path."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def add_live_flags(parser: argparse.ArgumentParser) -> None:
    live = parser.add_argument_group("live page")
    live.add_argument("--live", action="store_true", help="serve a page with every stream merged into one feed")
    live.add_argument("--live-port", type=int, default=0, help="its port (default: a free one)")
    live.add_argument("--live-host", default="127.0.0.1", help="its address (loopback unless --live-public)")
    live.add_argument("--live-public", action="store_true", help="allow a non-loopback --live-host")
    live.add_argument("--live-linger", type=float, default=30.0, help="seconds the page stays up after the job")


def add_fleet_flags(parser: argparse.ArgumentParser, planning: bool = False) -> None:
    group = parser.add_argument_group("backends (none given: the embedded llama.cpp engine)")
    group.add_argument("--backend", action="append", metavar="URL[,cap=N][,model=NAME]",
                       help="an OpenAI-compatible server; repeat for a fleet (options, as in a TOML "
                            "[[backends]] table: cap, model, name, key_env or api_key_env)")
    if planning:
        group.add_argument("--planner-backend", action="append", metavar="URL[,cap=N][,model=NAME]",
                           help="send planning to these servers instead (plan on a strong model, write on many)")
        group.add_argument("--profile", help="sampling profile: greedy, small, default (default: chosen from "
                                             "the model the engines report)")
    group.add_argument("--config", type=Path, metavar="FILE.toml", help="backends and settings from a TOML file")
    add_engine_flags(group)


def add_engine_flags(group: argparse._ActionsContainer) -> None:
    group.add_argument("--slots", type=int, help="embedded engine: parallel slots (default 16)")
    group.add_argument("--threads", type=int, help="embedded engine: CPU threads (default: cores - 1)")
    group.add_argument("--ctx-per-slot", type=int, help="embedded engine: context tokens per slot (default 2048)")


def build_parser() -> Parser:
    parser = Parser(prog="fanout", description="Fan one prompt out over a fleet of LLM servers into a typeset "
                                                "handbook, and measure the fleet honestly.", epilog=EXIT_CODES)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    serve = commands.add_parser("serve", help="start the embedded llama.cpp engine and serve until interrupted")
    add_engine_flags(serve)
    serve.add_argument("--port", type=int, help="port on 127.0.0.1 (default: a free one)")

    ask = commands.add_parser("ask", help="stream one answer (or N at once, with throughput figures)")
    ask.add_argument("prompt")
    ask.add_argument("--streams", type=int, default=1, help="send N numbered copies at once and report tok/s")
    ask.add_argument("--max-tokens", type=int, default=256)
    ask.add_argument("--ignore-eos", action="store_true", help="run every answer to --max-tokens (llama.cpp, vLLM)")
    add_fleet_flags(ask)

    book = commands.add_parser("book", help="one prompt -> outline -> sections -> book.md and book.pdf")
    book.add_argument("prompt", nargs="?", help="what the book is about (not needed with --resume)")
    book.add_argument("--shape", default="8x12x16", metavar="PxCxS", help="parts x chapters x sections (8x12x16)")
    book.add_argument("--words", type=int, default=250, help="words asked for per section (250)")
    book.add_argument("--max-tokens", type=int, help="cap on each section's answer (default: the word budget "
                                                     "x 1.4 tokens a word x 1.5 headroom; 525 for 250 words)")
    book.add_argument("--out", type=Path, metavar="DIR", help="run folder (default outputs/<slug>-<time>)")
    book.add_argument("--resume", type=Path, metavar="DIR", help="finish an interrupted run; asks nothing again")
    book.add_argument("--quiet", action="store_true", help="no live progress")
    book.add_argument("--json", action="store_true", help="print stats.json to stdout")
    book.add_argument("--repair", action="store_true", help="after writing, repair what the audit finds")
    book.add_argument("--barrier", action="store_true",
                      help="plan level by level before writing anything (seed 003's schedule; default: pipelined)")
    book.add_argument("--fail-on", metavar="GATES", help="exit 3 if the audit finds any of these rules or a quality "
                                                         "figure crosses its threshold (comma list: RULE, NAME>VALUE, "
                                                         "NAME<VALUE)")
    add_live_flags(book)
    add_fleet_flags(book, planning=True)

    audit = commands.add_parser("audit", help="find truncated, duplicate, empty, failed and looping sections")
    audit.add_argument("source", type=Path, metavar="RUN_DIR|BOOK.md")
    audit.add_argument("--json", action="store_true", help="print audit.json to stdout")
    audit.add_argument("--rule", metavar="RULES", help="only these rules (comma list)")
    audit.add_argument("--skip-rule", metavar="RULES", help="all rules but these (comma list)")
    audit.add_argument("--fail-on", metavar="GATES", help="exit 3 if any of these rules finds a defect or a quality "
                                                          "figure crosses its threshold (comma list: RULE, "
                                                          "NAME>VALUE, NAME<VALUE)")

    repair = commands.add_parser("repair", help="re-ask truncated, duplicate, empty and failed sections of a run")
    repair.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    repair.add_argument("--quiet", action="store_true", help="no live progress")
    add_fleet_flags(repair, planning=True)

    probe = commands.add_parser("probe", help="detect the engine behind each backend")
    add_fleet_flags(probe)

    typeset = commands.add_parser("typeset", help="typeset a run folder or a Markdown book: book.pdf, book.html, book.epub")
    typeset.add_argument("source", nargs="?", type=Path, metavar="RUN_DIR|BOOK.md")
    typeset.add_argument("--out", type=Path, metavar="DIR", help="where the editions go (default: beside it)")
    typeset.add_argument("--workers", type=int, help="render processes (default: one a core, at most 4)")
    typeset.add_argument("--bench", action="store_true", help="benchmark on a synthetic 8x12x16 book instead "
                                                             "(python -m pipeline.typeset_bench --help)")

    from pipeline.bench.command import add_bench_flags

    bench = commands.add_parser("bench", help="throughput ladder: N closed-loop streams per backend (seed 003)")
    add_bench_flags(bench)
    add_live_flags(bench)
    add_fleet_flags(bench)

    sweep = commands.add_parser("sweep", help="concurrency sweep with repetitions and a coherence gate (seed 001)")
    sweep.add_argument("--levels", default="1,2,4,8", help="concurrent users per level (1,2,4,8)")
    sweep.add_argument("--repetitions", type=int, default=5, help="runs per level, fresh nonces each (5)")
    sweep.add_argument("--prompt-tokens", type=int, default=128, help="prompt length as the engine counts it")
    sweep.add_argument("--max-tokens", type=int, default=256, help="output length, ignore_eos where possible")
    sweep.add_argument("--batch", type=int, default=200, help="questions in the batch-time table (200)")
    sweep.add_argument("--engine-slots", type=int, help="the server's slot count, for engines that cannot report it")
    sweep.add_argument("--skip-gate", action="store_true", help="measure even if the coherence gate fails (recorded)")
    add_record_flags(sweep)
    add_fleet_flags(sweep)

    efficiency = commands.add_parser("efficiency", help="a book job's tok/s against what the backends sustain")
    efficiency.add_argument("--shape", default="8x12x16", metavar="PxCxS")
    efficiency.add_argument("--max-tokens", type=int, default=520, help="seed 003's section cap (520)")
    efficiency.add_argument("--window", type=float, default=30.0, help="seconds of the sustained-rate window")
    efficiency.add_argument("--prompt", default="Write a complete software engineering handbook. Every topic, "
                                                "with examples.")
    efficiency.add_argument("--profile", default="greedy", help="sampling profile (greedy: seed 003's "
                                                                "temperature 0, so the figures stay comparable)")
    add_record_flags(efficiency)
    add_fleet_flags(efficiency)

    quality = commands.add_parser("quality", help="books from a list of prompts and their quality figures, "
                                                   "side by side")
    quality.add_argument("--prompts", type=Path, metavar="FILE", help="one prompt a line (default: five built in: "
                                                                    "the demo's, code, history, craft, science)")
    quality.add_argument("--shape", default="2x3x4", metavar="PxCxS", help="each book's shape (2x3x4)")
    quality.add_argument("--words", type=int, default=250, help="words asked for per section (250)")
    quality.add_argument("--max-tokens", type=int, help="cap on each section (default: from --words)")
    quality.add_argument("--score", type=Path, nargs="+", metavar="RUN_DIR",
                         help="score these finished run folders instead of writing books")
    quality.add_argument("--baseline", type=Path, metavar="QUALITY.json", help="an earlier record: show before -> after")
    quality.add_argument("--quiet", action="store_true", help="no live progress")
    add_record_flags(quality)
    add_fleet_flags(quality, planning=True)

    identity = commands.add_parser("identity", help="answers under load against a single-user oracle (seed 000)")
    identity.add_argument("--levels", default="1,2,4,8", help="concurrent users per level (1,2,4,8)")
    identity.add_argument("--mode", default="concurrency", choices=["concurrency", "same", "servers"],
                          help="levels of users; one question N times at once; two fresh servers")
    identity.add_argument("--max-tokens", type=int, default=96)
    identity.add_argument("--prompts", type=Path, metavar="FILE", help="one prompt a line (default: 12 built in)")
    add_record_flags(identity)
    add_fleet_flags(identity)
    return parser


def add_record_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, metavar="DIR", help="where the record goes (default outputs/<kind>-<time>)")
    parser.add_argument("--json", action="store_true", help="print the record (JSON) to stdout")


def require_positive(args: argparse.Namespace, *names: str) -> None:
    for name in names:
        if getattr(args, name) <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be positive")


def settings_from(args: argparse.Namespace):
    from pipeline.config import load_settings, parse_backend_spec

    backends = [parse_backend_spec(spec, i, source="--backend") for i, spec in enumerate(args.backend or [])] or None
    planners = [parse_backend_spec(spec, i, planner=True, source="--planner-backend")
                for i, spec in enumerate(getattr(args, "planner_backend", None) or [])] or None
    flags: dict[str, Any] = {"backends": backends, "planner_backends": planners, "slots": args.slots,
                             "threads": args.threads, "ctx_per_slot": args.ctx_per_slot,
                             "profile": getattr(args, "profile", None)}
    return load_settings(flags, args.config)


def cmd_serve(args: argparse.Namespace) -> int:
    from pipeline.backends.embedded import EmbeddedEngine, EngineSettings, default_threads

    settings = EngineSettings(slots=args.slots or 16, threads=args.threads or default_threads(),
                              ctx_per_slot=args.ctx_per_slot or 2048, port=args.port)
    with EmbeddedEngine(settings) as engine:
        print(engine.backend.base_url, flush=True)
        log.info("serving %s (%d slots, %d threads); Ctrl-C stops", engine.assets.model_name, settings.slots,
                 settings.threads)
        while engine.process is not None and engine.process.poll() is None:
            time.sleep(0.5)
        raise FanoutError("llama-server exited on its own")


def cmd_ask(args: argparse.Namespace) -> int:
    from pipeline.ask import AskSpec, ask

    require_positive(args, "streams", "max_tokens")
    if not args.prompt.strip():
        raise UsageError("the prompt is empty")
    spec = AskSpec(prompt=args.prompt, streams=args.streams, max_tokens=args.max_tokens, ignore_eos=args.ignore_eos)
    echo = (lambda text: print(text, end="", flush=True)) if spec.streams == 1 else None
    report = anyio.run(ask, settings_from(args), spec, echo)
    if spec.streams == 1:
        print()
    print_ask_report(report)
    return 0


def print_ask_report(report) -> None:
    ttfts = sorted(c.ttft for c in report.completions if c.ttft is not None)
    server = "n/a" if report.server_tokens is None else f"{report.server_tokens:.0f}"
    print(f"streams {len(report.completions)} | wall {report.wall_s:.2f} s | tokens (client usage) "
          f"{report.client_tokens} | tokens (server counter) {server} | aggregate {report.client_rate:.1f} tok/s "
          f"(client usage / wall) | TTFT median {ttfts[len(ttfts) // 2]:.2f} s" if ttfts else "no answers",
          file=sys.stderr)


def cmd_probe(args: argparse.Namespace) -> int:
    from pipeline.backends.fleet import open_fleet

    async def probe() -> None:
        async with open_fleet(settings_from(args)) as fleet:
            for backend in fleet.backends:
                info = fleet.engines[backend.name]
                print(f"{backend.name}\t{backend.base_url}\tcap={backend.cap}\tmodel={backend.model}\t"
                      f"engine={info.kind.value}\tversion={info.version}\tslots={info.slots}\t"
                      f"metrics={info.has_metrics}")

    anyio.run(probe)
    return 0


MAX_PROMPT_CHARS = 10_000
MAX_PER_LEVEL = 200
MAX_SECTIONS = 100_000


def parse_shape(text: str) -> tuple[int, int, int]:
    match = re.fullmatch(r"(\d+)x(\d+)x(\d+)", text.strip().lower())
    if not match:
        raise UsageError(f"--shape {text!r}: expected PxCxS, for example 8x12x16")
    sizes = (int(match[1]), int(match[2]), int(match[3]))
    if min(sizes) < 1 or max(sizes) > MAX_PER_LEVEL or sizes[0] * sizes[1] * sizes[2] > MAX_SECTIONS:
        raise UsageError(f"--shape {text!r}: each size must be 1..{MAX_PER_LEVEL} and the book at most "
                         f"{MAX_SECTIONS:,} sections")
    return sizes


def book_spec(args: argparse.Namespace):
    from pipeline.records import BookSpec

    if args.resume is not None:
        if args.prompt:
            raise UsageError("--resume takes the prompt and shape from the run folder; give no prompt")
        return None
    if not args.prompt or not args.prompt.strip():
        raise UsageError("the prompt is empty")
    if len(args.prompt) > MAX_PROMPT_CHARS:
        raise UsageError(f"the prompt is {len(args.prompt):,} characters; at most {MAX_PROMPT_CHARS:,}")
    from pipeline.trim import token_cap

    require_positive(args, "words")
    if args.max_tokens is not None:
        require_positive(args, "max_tokens")
    parts, chapters, sections = parse_shape(args.shape)
    return BookSpec(prompt=args.prompt.strip(), parts=parts, chapters=chapters, sections=sections,
                    words=args.words, max_tokens=args.max_tokens or token_cap(args.words))


def cmd_book(args: argparse.Namespace) -> int:
    from rich.console import Console

    from pipeline.audit import audit_table, parse_fail_on
    from pipeline.backends.client import fast_loop
    from pipeline.progress import BookProgress
    from pipeline.quality import quality_table
    from pipeline.run import book
    from pipeline.stats import stats_table

    spec = book_spec(args)
    parse_fail_on(args.fail_on)  # a bad gate is a usage error before any work
    settings = settings_from(args)
    progress = BookProgress(enabled=not args.quiet)

    async def job(listener=progress):
        return await book(settings, spec, args.out, args.resume, listener, args.repair, barrier=args.barrier)

    with fast_loop():
        if args.live:
            from pipeline.live import LiveFeed, serve_during
            from pipeline.progress import Listeners

            feed = LiveFeed(args.live_host, args.live_port, args.live_public)
            result = anyio.run(serve_during, feed, lambda page: job(Listeners(progress, page)), args.live_linger)
        else:
            result = anyio.run(job)
    if args.json:
        print(result.stats.model_dump_json(indent=2))
    if not args.quiet:
        console = Console(stderr=True)
        console.print(stats_table(result.stats))
        console.print(audit_table(result.audit))
        console.print(quality_table(result.audit.quality))
    print_repair(result.repair)
    print(f"fanout: book: {result.folder / 'book.md'}\nfanout: PDF:  {result.folder / 'book.pdf'}", file=sys.stderr)
    if not result.stats.complete:
        print(f"fanout: error: {result.stats.failed_sections} sections failed; "
              f"`fanout book --resume {result.folder}` asks them again", file=sys.stderr)
        return 1
    return gate_exit(result.audit, args.fail_on)


def print_repair(summary) -> None:
    if summary is None:
        return
    changed = ", ".join(f"{rule} {summary.before[rule]} -> {summary.after.get(rule, 0)}" for rule in summary.before
                        if summary.before[rule] or summary.after.get(rule))
    print(f"fanout: repaired {sum(summary.actions.values())} sections {summary.actions} in {summary.seconds:.1f} s; "
          f"defects before -> after: {changed or 'none'}", file=sys.stderr)


def gate_exit(report, fail_on: str | None) -> int:
    from pipeline.audit import gate

    failing = gate(report, fail_on)
    if failing:
        print(f"fanout: audit gate: {', '.join(failing)}", file=sys.stderr)
        return 3
    return 0


def parse_rule_list(text: str | None) -> list[str] | None:
    from pipeline.audit import choose_rules, parse_rule_list as split

    rules = split(text)
    choose_rules(rules, None)  # unknown names are a usage error before any work
    return rules


def cmd_audit(args: argparse.Namespace) -> int:
    from rich.console import Console

    from pipeline.audit import audit, audit_path, audit_table, load_book, parse_fail_on
    from pipeline.quality import quality_table
    from pipeline.run import write_atomic

    parse_fail_on(args.fail_on)
    report = audit(load_book(args.source), parse_rule_list(args.rule), parse_rule_list(args.skip_rule))
    write_atomic(audit_path(args.source), report.model_dump_json(indent=2))
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        console = Console()
        console.print(audit_table(report))
        console.print(quality_table(report.quality))
    return gate_exit(report, args.fail_on)


def cmd_repair(args: argparse.Namespace) -> int:
    from rich.console import Console

    from pipeline.audit import audit_table
    from pipeline.progress import BookProgress
    from pipeline.quality import quality_table
    from pipeline.run import book

    result = anyio.run(book, settings_from(args), None, None, args.run_dir, BookProgress(enabled=not args.quiet),
                       True, True)
    if not args.quiet:
        console = Console(stderr=True)
        console.print(audit_table(result.audit))
        console.print(quality_table(result.audit.quality))
    print_repair(result.repair)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from pipeline.backends.client import fast_loop
    from pipeline.bench.command import add_bench_flags, run_ceiling_command, run_command, spec_from_args

    if args.live:
        from pipeline.live import check_bind

        if args.ceiling:
            raise UsageError("--live shows an engine ladder; --ceiling runs no engine")
        check_bind(args.live_host, args.live_public)
    if args.ceiling:
        defaults = argparse.ArgumentParser()
        add_bench_flags(defaults)
        return run_ceiling_command(args, vars(defaults.parse_args([])))
    if args.workers != "1" or args.ticks != "20,10,0":
        raise UsageError("--workers and --ticks belong to --ceiling; the engine ladder runs in one process")
    spec_from_args(args)  # bad flags fail before any engine starts
    with fast_loop():
        return run_command(args, settings_from(args), ["fanout", *sys.argv[1:]])


def cmd_typeset(args: argparse.Namespace) -> int:
    if args.bench:
        from pipeline.typeset_bench import main as bench_main

        return bench_main([] if args.workers is None else ["--workers", str(args.workers)])
    from pipeline.typeset import typeset_book

    if args.source is None:
        raise UsageError("typeset needs a run folder or a Markdown file")
    if args.workers is not None and args.workers < 0:
        raise UsageError("--workers must be 0 or more")
    result, html_path, epub_path = typeset_book(args.source, args.out, args.workers)
    print(f"fanout: PDF:  {result.path} ({result.pages:,} pages, {result.seconds:.1f} s)\n"
          f"fanout: HTML: {html_path}\nfanout: EPUB: {epub_path}", file=sys.stderr)
    return 0


def parse_levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"--levels {text!r}: expected numbers like 1,2,4,8") from None
    if not levels or min(levels) < 1:
        raise UsageError(f"--levels {text!r}: every level must be at least 1")
    return levels


def save_record(kind: str, record, markdown: str, out: Path | None, as_json: bool) -> None:
    from datetime import datetime

    from pipeline.run import write_atomic

    folder = out or Path("outputs") / f"{kind}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / f"{kind}.json", record.model_dump_json(indent=2))
    write_atomic(folder / f"{kind}.md", markdown)
    print(record.model_dump_json(indent=2) if as_json else markdown)
    print(f"fanout: {kind} record: {folder / (kind + '.json')}", file=sys.stderr)


def cmd_sweep(args: argparse.Namespace) -> int:
    from pipeline.bench.sweep import SweepSpec, run_sweep, sweep_markdown

    require_positive(args, "repetitions", "prompt_tokens", "max_tokens", "batch")
    spec = SweepSpec(levels=parse_levels(args.levels), repetitions=args.repetitions, prompt_tokens=args.prompt_tokens,
                     max_tokens=args.max_tokens, batch=args.batch, slots=args.engine_slots, skip_gate=args.skip_gate)
    record = anyio.run(run_sweep, settings_from(args), spec)
    save_record("sweep", record, sweep_markdown(record), args.out, args.json)
    return 1 if any(level.failed for level in record.levels) else 0


def cmd_identity(args: argparse.Namespace) -> int:
    from pipeline.bench.identity import IdentitySpec, identity_markdown, run_identity

    require_positive(args, "max_tokens")
    spec = IdentitySpec(levels=parse_levels(args.levels), mode=args.mode, max_tokens=args.max_tokens)
    if args.prompts is not None:
        try:
            spec.prompts = [line.strip() for line in args.prompts.read_text().splitlines() if line.strip()]
        except OSError as exc:
            raise UsageError(f"--prompts {args.prompts}: {exc}") from None
        if not spec.prompts:
            raise UsageError(f"--prompts {args.prompts}: no prompts in it")
    record = anyio.run(run_identity, settings_from(args), spec)
    save_record("identity", record, identity_markdown(record), args.out, args.json)
    return 0


def cmd_efficiency(args: argparse.Namespace) -> int:
    from pipeline.backends.client import fast_loop
    from pipeline.bench.efficiency import efficiency_markdown, job_efficiency
    from pipeline.records import BookSpec

    parts, chapters, sections = parse_shape(args.shape)
    require_positive(args, "max_tokens", "window")
    spec = BookSpec(prompt=args.prompt, parts=parts, chapters=chapters, sections=sections, max_tokens=args.max_tokens)
    with fast_loop():
        record = anyio.run(job_efficiency, settings_from(args), spec, args.window)
    save_record("efficiency", record, efficiency_markdown(record), args.out, args.json)
    return 0


def cmd_quality(args: argparse.Namespace) -> int:
    from datetime import datetime

    from pipeline.backends.client import fast_loop
    from pipeline.bench.quality import (load_record, quality_markdown, read_prompts, run_quality, score_runs)
    from pipeline.progress import BookProgress
    from pipeline.trim import token_cap

    baseline = load_record(args.baseline) if args.baseline else None
    if args.score:
        record = score_runs(args.score)
        save_record("quality", record, quality_markdown(record, baseline), args.out, args.json)
        return 0
    require_positive(args, "words")
    shape = parse_shape(args.shape)
    prompts = read_prompts(args.prompts)
    folder = args.out or Path("outputs") / f"quality-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    with fast_loop():
        record = anyio.run(run_quality, settings_from(args), prompts, shape, args.words,
                           args.max_tokens or token_cap(args.words), folder, BookProgress(enabled=not args.quiet))
    save_record("quality", record, quality_markdown(record, baseline), folder, args.json)
    return 0


COMMANDS = {"serve": cmd_serve, "ask": cmd_ask, "book": cmd_book, "audit": cmd_audit, "repair": cmd_repair,
            "probe": cmd_probe, "bench": cmd_bench, "typeset": cmd_typeset, "sweep": cmd_sweep,
            "identity": cmd_identity, "efficiency": cmd_efficiency, "quality": cmd_quality}


def configure_logging(verbose: bool) -> None:
    """Our own logger only: libraries' INFO chatter (fontTools, WeasyPrint) stays out of the terminal."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("fanout: %(message)s"))
    handler.setLevel(logging.DEBUG if verbose else logging.INFO)
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)  # run.log keeps the details the terminal leaves out
    log.propagate = False


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupt)  # so SIGTERM unwinds like Ctrl-C and stops child engines
    try:
        args = build_parser().parse_args(argv)
        configure_logging(args.verbose)
        return COMMANDS[args.command](args)
    except FanoutError as error:
        print(f"fanout: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("fanout: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
