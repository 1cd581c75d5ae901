"""`fanout bench`, `sweep`, `identity`, `efficiency` and `quality`: flags -> spec -> run -> record and report.

The ladder (`fanout bench`): takes the parsed arguments and Settings; writes the run folder (bench.json,
report.md, report.html, charts/, the embedded engine's log) and prints the ladder tables (or, with --json,
the record) to stdout; `--ceiling` runs the client-ceiling bench instead. The others save their record with
`save_record` (outputs/<kind>-<time>/). Bad flags raise UsageError. Each command's own flags, and the spec
fields they fill, are declared once in cli/benchflags.py.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import anyio
from pydantic import ValidationError

from pipeline.cli.benchflags import (
    BENCH,
    EFFICIENCY,
    FRONTIER,
    IDENTITY,
    QUALITY,
    REPORT,
    SWEEP,
    add_flags,
    defaults_of,
    spec_fields,
)
from pipeline.cli.flags import (
    add_fleet_flags,
    add_live_flags,
    add_planning_flag,
    add_prompt_file_flag,
    add_record_flags,
    prompt_from_file,
    require_positive,
    save_record,
    settings_from,
)
from pipeline.config import parse_levels, parse_shape
from pipeline.errors import UsageError
from pipeline.files import output_path
from pipeline.records import Endpoint


def stream_levels(args: argparse.Namespace) -> list[int]:
    if args.streams is not None:
        return parse_levels(args.streams, "streams")
    return [] if args.rate or args.workload else [1, 4, 8, 16, 32]


def spec_from_args(args: argparse.Namespace):
    from pipeline.bench.studies.ladder import check_spec
    from pipeline.records.bench import BenchSpec

    for name in ("max_tokens", "prompt_tokens", "num_requests", "max_concurrency", "prefix_len", "prefix_groups"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be positive")
    if args.warmup < 0:
        raise UsageError("--warmup must not be negative")
    try:
        spec = BenchSpec(
            **spec_fields(args, BENCH),
            streams=stream_levels(args),
            label=args.label or "bench",
            ignore_eos=not (args.no_ignore_eos or args.audit_answers),
            ray=args.ray is not None,
            ray_address=args.ray or None,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"bench: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    check_spec(spec)
    return spec


def default_folder(label: str) -> Path:
    return output_path(f"bench {label}", limit=None)


def progress_line(label: str, level) -> None:
    if hasattr(level, "rate"):  # an open-loop RatePoint
        rate_line(label, level)
        return
    point = level.total
    print(
        f"fanout: bench {label}: {point.streams} streams: {point.sustained:,.1f} tok/s sustained, best second "
        f"{point.best_second:,.1f}, step {point.step_ms or 0:.2f} ms, TTFT p50 {point.ttft_p50_ms or 0:,.0f} ms",
        file=sys.stderr,
        flush=True,
    )


def rate_line(label: str, point) -> None:
    latency = point.latency
    print(
        f"fanout: bench {label}: {point.rate:g} req/s offered: served {point.completion_rate or 0:,.2f} req/s, "
        f"{point.output_throughput or 0:,.1f} tok/s, TTFT p50 {latency.ttft.median_ms or 0:,.0f} ms, "
        f"TPOT p50 {latency.tpot.median_ms or 0:,.1f} ms, {point.completed} done, {point.failed} failed"
        + (", KNEE" if point.knee else "")
        + (", queueing" if point.queueing else ""),
        file=sys.stderr,
        flush=True,
    )


CEILING_RAMP_S = 3.0  # --ceiling: seconds for every stream to start before the window
CEILING_WINDOW_S = 6.0  # --ceiling: measured seconds when --window is left at the ladder's default


def run_ceiling_command(args: argparse.Namespace, parser_defaults: dict) -> int:
    from pipeline.bench.studies.ceiling import Timing, run_from_args

    def given(name: str, fallback):
        value = getattr(args, name)
        return fallback if value == parser_defaults.get(name) else value

    return run_from_args(
        "ours,aiohttp,sdk,floor",
        args.ticks,
        str(given("streams", "1536")),
        args.workers,
        timing=Timing(args.max_tokens, CEILING_RAMP_S, float(given("window", CEILING_WINDOW_S))),
        out=args.out,
    )


def run_live(args: argparse.Namespace, settings, spec, engine_log: Path, argv: list[str]):
    """The ladder with the live page up (it stays up --live-linger seconds with the ladder table)."""
    import anyio

    from pipeline.bench.studies.ladder import bench
    from pipeline.watch.live import LiveFeed, serve_during

    feed = LiveFeed(args.live_host, args.live_port, allow_public=args.live_public)
    return anyio.run(
        serve_during,
        feed,
        lambda page: bench(settings, spec, engine_log=engine_log, command=argv, on_level=progress_line, watcher=page),
        args.live_linger,
    )


def run_command(args: argparse.Namespace, settings, argv: list[str]) -> int:
    from pipeline.bench.report.report import text_report, write_report
    from pipeline.bench.studies.ladder import run_bench

    spec = spec_from_args(args)
    label_given = args.label is not None
    folder = args.out or default_folder(spec.label if label_given else "run")
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        if args.live:
            record = run_live(args, settings, spec, folder / "llama-server.log", argv)
        else:
            log = folder / "llama-server.log"
            record = run_bench(settings, spec, engine_log=log, command=argv, on_level=progress_line)
    except UsageError:
        if made:  # refused before any work (an unreachable backend, say): leave no folder behind
            shutil.rmtree(folder, ignore_errors=True)
        raise
    if not label_given and not spec.compare:
        engines = "+".join(sorted({b.engine for b in record.provenance.backends}))
        record.spec.label = engines
        for named in [*record.series, *record.sweeps]:
            named.label = engines
        for row in record.request_rows:
            row["series"] = engines if row["series"] == "bench" else row["series"]
    paths = write_report(record, folder)
    print(record.model_dump_json(indent=1) if args.json else text_report(record))
    print(
        f"fanout: bench record: {paths['record']}\nfanout: report: {paths['html']} and {paths['markdown']}",
        file=sys.stderr,
    )
    return 0


def add_bench_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    bench = commands.add_parser(
        "bench", help="throughput ladder, open-loop rate sweep, book replay; latency and goodput"
    )
    add_flags(bench, BENCH)
    add_live_flags(bench)
    add_fleet_flags(bench)
    return bench


def add_report_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    report = commands.add_parser("report", help="one bench report from one or several saved bench runs")
    add_flags(report, REPORT)
    return report


def cmd_report(args: argparse.Namespace) -> int:
    from pipeline.bench.report.report import load_run, merge_runs, text_report, write_report
    from pipeline.bench.report.vllmformat import write_csv, write_vllm

    if args.detailed and args.format != "vllm":
        raise UsageError("--detailed belongs to --format vllm")
    one = len(args.runs) == 1 and args.format != "report"  # its labels stay its request rows' labels
    record = load_run(args.runs[0]) if one else merge_runs(args.runs)
    folder = args.out or output_path("report")
    rows_from = args.runs[0] if one else None
    if args.format == "vllm":
        written = write_vllm(record, folder, rows_from, detailed=args.detailed)
        print(f"fanout: {len(written)} vLLM result files in {folder}", file=sys.stderr)
        return 0
    if args.format == "csv":
        print(f"fanout: {write_csv(record, folder, rows_from)}", file=sys.stderr)
        return 0
    paths = write_report(record, folder)
    print(record.model_dump_json(indent=1) if args.json else text_report(record))
    print(f"fanout: report: {paths['html']} and {paths['markdown']}", file=sys.stderr)
    return 0


def add_study_command(
    commands: argparse._SubParsersAction,
    name: str,
    *,
    help: str,
    prompt_files: bool = False,
    planning: bool = False,
) -> argparse.ArgumentParser:
    """A study's command: its own flags from benchflags.py's table (the table's name is the command's), then
    --prompt-file (repeatable) where it reads `prompt_files`, the record's --out and --json, and the fleet's flags
    (with the planner's backends where it plans books)."""
    parser = commands.add_parser(name, help=help)
    add_flags(parser, name)
    if prompt_files:
        add_prompt_file_flag(parser, many=True)
    add_record_flags(parser)
    add_fleet_flags(parser, planning=planning)
    return parser


def add_sweep_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    return add_study_command(commands, SWEEP, help="concurrency sweep with repetitions and a coherence gate")


def add_efficiency_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    return add_study_command(commands, EFFICIENCY, help="a book job's tok/s against what the backends sustain")


def add_quality_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    return add_study_command(
        commands,
        QUALITY,
        help="books from a list of prompts and their quality figures, side by side",
        prompt_files=True,
        planning=True,
    )


def add_frontier_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    frontier = add_study_command(
        commands, FRONTIER, help="one book under several settings: quality against tok/s, the Pareto front marked"
    )
    add_planning_flag(frontier)
    return frontier


def add_identity_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    return add_study_command(commands, IDENTITY, help="answers under load against a single-user oracle")


def cmd_bench(args: argparse.Namespace) -> int:
    from pipeline.backends.loop import fast_loop

    if args.live:
        from pipeline.watch.live import check_bind

        if args.ceiling:
            raise UsageError("--live shows an engine ladder; --ceiling runs no engine")
        check_bind(args.live_host, allow_public=args.live_public)
    if args.ceiling:
        return run_ceiling_command(args, defaults_of(BENCH))
    if args.ticks != "20,10,0":
        raise UsageError("--ticks belongs to --ceiling")
    spec_from_args(args)  # bad flags fail before any engine starts
    with fast_loop():
        return run_command(args, settings_from(args), ["fanout", *sys.argv[1:]])


def cmd_sweep(args: argparse.Namespace) -> int:
    from pipeline.bench.studies.sweep import SweepSpec, run_sweep, sweep_markdown

    require_positive(args, "repetitions", "prompt_tokens", "max_tokens", "batch", "prefix_groups")
    if args.prefix_len is not None:
        require_positive(args, "prefix_len")
    spec = SweepSpec(**spec_fields(args, SWEEP))
    record = anyio.run(run_sweep, settings_from(args), spec)
    save_record("sweep", record, sweep_markdown(record), args.out, as_json=args.json)
    return 1 if any(level.failed for level in record.levels) else 0


def cmd_identity(args: argparse.Namespace) -> int:
    from pipeline.bench.studies.identity import IdentitySpec, identity_markdown, run_identity

    require_positive(args, "max_tokens")
    if args.book is not None:
        return book_identity(args)
    spec = IdentitySpec(levels=parse_levels(args.levels or "1,2,4,8"), **spec_fields(args, IDENTITY))
    if args.prompts is not None:
        try:
            spec.prompts = [line.strip() for line in args.prompts.read_text().splitlines() if line.strip()]
        except OSError as exc:
            raise UsageError(f"--prompts {args.prompts}: {exc}") from None
        if not spec.prompts:
            raise UsageError(f"--prompts {args.prompts}: no prompts in it")
    record = anyio.run(run_identity, settings_from(args), spec)
    save_record("identity", record, identity_markdown(record), args.out, as_json=args.json)
    return 0


def book_identity(args: argparse.Namespace) -> int:
    from pipeline.bench.studies.bookidentity import book_identity_markdown, load_asked, run_book_identity

    if args.prompts is not None or args.mode != "concurrency" or args.endpoint != Endpoint.CHAT:
        raise UsageError(
            "--book asks the book's own section requests, over chat: --prompts, --mode and --endpoint do not apply"
        )
    levels = parse_levels(args.levels) if args.levels else []
    load_asked(args.book)  # a bad folder fails before any engine starts
    record = anyio.run(run_book_identity, settings_from(args), args.book, levels)
    save_record("identity", record, book_identity_markdown(record), args.out, as_json=args.json)
    return 0


def section_variants(text: str | None) -> list[tuple[str, str | None]]:
    """--section-templates a.md,shipped: (name, template text) each, read and checked before any engine."""
    from pipeline.cli.book import read_section_template

    if not text:
        return []
    named = [item.strip() for item in text.split(",") if item.strip()]
    return [
        ("templates/section.md", None) if item == "shipped" else (item, read_section_template(Path(item)))
        for item in named
    ]


def cmd_frontier(args: argparse.Namespace) -> int:
    from pipeline.backends.loop import fast_loop
    from pipeline.bench.studies.frontier import check_figure, frontier_chart, frontier_markdown, run_frontier
    from pipeline.book.profiles import PROFILES
    from pipeline.records import BookSpec
    from pipeline.watch.terminal import BookProgress

    require_positive(args, "words")
    check_figure(args.figure)
    profiles = [name.strip() for name in args.profiles.split(",") if name.strip()]
    unknown = [name for name in profiles if name not in PROFILES]
    if unknown or not profiles:
        raise UsageError(f"--profiles {args.profiles!r}: profiles are {', '.join(PROFILES)}")
    best_ofs = parse_levels(args.best_ofs, "best_of")
    variants = section_variants(args.section_templates)
    parts, chapters, sections = parse_shape(args.shape)
    fields = {"prompt": args.prompt, "parts": parts, "chapters": chapters, "sections": sections, "words": args.words}
    spec = BookSpec.model_validate(fields)  # max_tokens from the words, as `fanout book` takes it
    folder = args.out or output_path("frontier")
    with fast_loop():
        record = anyio.run(
            run_frontier,
            settings_from(args),
            spec,
            profiles,
            best_ofs,
            args.figure,
            folder,
            BookProgress(enabled=not args.quiet),
            variants,
        )
    folder.mkdir(parents=True, exist_ok=True)
    frontier_chart(record, folder / "frontier.png")
    save_record("frontier", record, frontier_markdown(record), folder, as_json=args.json)
    return 0


def cmd_efficiency(args: argparse.Namespace) -> int:
    from pipeline.backends.loop import fast_loop
    from pipeline.bench.studies.efficiency import (
        efficiency_markdown,
        job_efficiency,
        workload_efficiency,
        workload_markdown,
    )
    from pipeline.records import BookSpec

    if args.workload is not None:
        with fast_loop():
            mine = anyio.run(workload_efficiency, settings_from(args), args.workload)
        save_record("efficiency", mine, workload_markdown(mine), args.out, as_json=args.json)
        return 0
    parts, chapters, sections = parse_shape(args.shape)
    require_positive(args, "max_tokens", "window")
    spec = BookSpec(prompt=args.prompt, parts=parts, chapters=chapters, sections=sections, max_tokens=args.max_tokens)
    with fast_loop():
        record = anyio.run(job_efficiency, settings_from(args), spec, args.window)
    save_record("efficiency", record, efficiency_markdown(record), args.out, as_json=args.json)
    return 0


def cmd_quality(args: argparse.Namespace) -> int:
    from pipeline.backends.loop import fast_loop
    from pipeline.bench.studies.quality import load_record, quality_markdown, read_prompts, run_quality, score_runs
    from pipeline.watch.terminal import BookProgress

    baseline = load_record(args.baseline) if args.baseline else None
    if args.score:
        record = score_runs(args.score)
        save_record("quality", record, quality_markdown(record, baseline), args.out, as_json=args.json)
        return 0
    require_positive(args, "words")
    shape = parse_shape(args.shape)
    from_files = [prompt_from_file(path) for path in args.prompt_file or []]
    prompts = [*(read_prompts(args.prompts) if args.prompts or not from_files else []), *from_files]
    folder = args.out or output_path("quality")
    with fast_loop():
        record = anyio.run(
            run_quality,
            settings_from(args),
            prompts,
            shape,
            args.words,
            args.max_tokens,
            folder,
            BookProgress(enabled=not args.quiet),
        )
    save_record("quality", record, quality_markdown(record, baseline), folder, as_json=args.json)
    return 0
