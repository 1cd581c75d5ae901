"""`fanout bench`, `sweep`, `identity`, `efficiency` and `quality`: flags -> spec -> run -> record and report.

The ladder (`fanout bench`): takes the parsed arguments and Settings; writes the run folder (bench.json,
report.md, report.html, charts/, the embedded engine's log) and prints the ladder tables (or, with --json,
the record) to stdout; `--ceiling` runs the client-ceiling bench instead. The others save their record with
`save_record` (outputs/<kind>-<time>/). Bad flags raise UsageError.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

import anyio
from pydantic import ValidationError

from pipeline.cli.flags import (
    add_endpoint_flag,
    add_fleet_flags,
    add_live_flags,
    add_record_flags,
    require_positive,
    save_record,
    settings_from,
)
from pipeline.config import parse_levels, parse_shape
from pipeline.errors import UsageError
from pipeline.files import output_path
from pipeline.records import Endpoint


def add_bench_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--streams",
        metavar="N,N,...",
        help="closed-loop stream levels per backend (default 1,4,8,16,32, none when --rate or --workload is "
        "given alone); each must fit the backend's cap and its engine's slots",
    )
    parser.add_argument("--window", type=float, default=40.0, metavar="S", help="measured seconds per level (40)")
    parser.add_argument(
        "--warmup",
        type=float,
        default=3.0,
        metavar="S",
        help="least seconds before each window, which also waits for full occupancy (3)",
    )
    parser.add_argument("--max-tokens", type=int, default=512, help="cap on each answer (512)")
    parser.add_argument(
        "--prompt-tokens",
        type=int,
        metavar="N",
        help="prompts of N tokens as the engine counts them (its /tokenize; else tiktoken offline)",
    )
    parser.add_argument("--label", default=None, help="name of this run in the report (default: the engine kind)")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="measure each backend alone, one after another, side by side with a ratio column "
        "(default: all backends at once, summed)",
    )
    parser.add_argument(
        "--engine-slots",
        action="append",
        metavar="[NAME=]N",
        help="sequences the engine runs at once, for engines that cannot report it (vLLM, SGLang, "
        "TGI); NAME is a backend name, none means every backend",
    )
    parser.add_argument("--no-ignore-eos", action="store_true", help="let answers stop at end of sequence")
    parser.add_argument(
        "--audit-answers",
        action="store_true",
        help="keep every answer and report per level the share capped mid-sentence, looping, empty or "
        "duplicated (turns ignore_eos off, so answers end where the model ends them)",
    )
    add_latency_flags(parser)
    add_open_loop_flags(parser)
    add_cache_flags(parser)
    parser.add_argument("--out", type=Path, metavar="DIR", help="run folder (default outputs/bench-<label>-<time>)")
    parser.add_argument("--json", action="store_true", help="print bench.json to stdout instead of the tables")
    ceiling = parser.add_argument_group(
        "client ceiling (--ceiling: no engine; python -m pipeline.bench.studies.ceiling -h)"
    )
    ceiling.add_argument(
        "--ceiling",
        action="store_true",
        help="measure the client's own ingest ceiling against a local SSE source: ours beside "
        "aiohttp and the naive openai SDK loop (--streams then defaults to 1536, --window to 6)",
    )
    ceiling.add_argument(
        "--ticks",
        default="20,10,0",
        metavar="MS,MS,...",
        help="with --ceiling: source tick per event, 0 unpaced (20,10,0)",
    )
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="run the --workers as Ray actors: on the cluster at ADDRESS (or RAY_ADDRESS), else on a local Ray "
        "instance started for the run (pip install 'fanout[ray]')",
    )
    parser.add_argument(
        "--workers",
        default="1",
        metavar="N",
        help="client processes the load is sharded over, each with its share of every cap (1); with "
        "--ceiling a list, side by side (1,2)",
    )


def add_latency_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("latency, goodput and per-request records (closed and open loop)")
    group.add_argument(
        "--percentiles", default="50,90,99", metavar="Q,Q,...", help="latency percentiles reported (50,90,99)"
    )
    group.add_argument(
        "--goodput",
        metavar="ttft:MS,tpot:MS,e2e:MS",
        help="SLOs in milliseconds (any of them): the share and rate of requests meeting every one",
    )
    group.add_argument(
        "--save-requests", action="store_true", help="write requests.jsonl and requests.csv: one row a request"
    )


def add_open_loop_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("open loop (arrivals independent of completions, as vllm bench serve)")
    group.add_argument("--rate", metavar="R,R,...", help="request rates to sweep, requests per second")
    group.add_argument(
        "--burstiness", type=float, default=1.0, help="gamma shape of the arrivals: 1 Poisson, <1 burstier (1)"
    )
    group.add_argument("--duration", type=float, default=30.0, metavar="S", help="seconds of arrivals per rate (30)")
    group.add_argument("--num-requests", type=int, metavar="N", help="stop each rate after N arrivals")
    group.add_argument(
        "--max-concurrency", type=int, metavar="N", help="at most N requests in flight; later arrivals queue here"
    )
    group.add_argument("--seed", type=int, default=0, help="seed of the arrivals and length draws (0)")
    group.add_argument(
        "--input-len", metavar="N|LO-HI", help="synthetic prompts of N tokens (or uniform in LO-HI), engine-counted"
    )
    group.add_argument(
        "--output-len", metavar="N|LO-HI", help="answer caps (ignore_eos), N or uniform in LO-HI (--max-tokens)"
    )
    group.add_argument(
        "--dataset", type=Path, metavar="FILE", help='JSONL of {"prompt", "max_tokens"} or ShareGPT-style JSON'
    )
    group.add_argument(
        "--workload", type=Path, metavar="RUN_DIR", help="replay a fanout book run's requests (its requests.jsonl)"
    )
    group.add_argument(
        "--replay-speed",
        type=float,
        default=1.0,
        metavar="F",
        help="replay at the original times divided by F (1); 0: all at once, as fast as the caps allow",
    )


def add_cache_flags(parser: argparse.ArgumentParser, *, sweep: bool = False) -> None:
    group = parser.add_argument_group("prefix cache")
    group.add_argument(
        "--prefix-len",
        type=int,
        metavar="N",
        help="a shared prefix of N tokens (engine-counted) before every synthetic prompt, in addition to its length",
    )
    group.add_argument(
        "--prefix-groups", type=int, default=1, metavar="G", help="G distinct shared prefixes, taken in turn (1)"
    )
    group.add_argument(
        "--reset-cache",
        action="store_true",
        help="empty every engine's prefix cache before each "
        + ("repetition" if sweep else "level")
        + " where it offers a way (recorded either way)",
    )
    if sweep:
        return
    group.add_argument(
        "--multi-turn",
        action="store_true",
        help="with a ShareGPT --dataset and --rate: each conversation turn by turn, the history resent",
    )
    group.add_argument(
        "--stop-when-saturated",
        action="store_true",
        help="open loop: stop a rate, and the rates above it, once requests in flight and TTFT keep rising "
        "(guidellm's over-saturation rule)",
    )


def parse_rates(text: str | None) -> list[float]:
    if not text:
        return []
    try:
        return [float(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise UsageError(f"--rate {text!r}: expected request rates like 1,2,4") from None


def parse_workers(text: str) -> int:
    if not re.fullmatch(r"\d+", text.strip()) or int(text) <= 0:
        raise UsageError(f"--workers {text!r}: one positive whole number (a list is for --ceiling)")
    return int(text)


def parse_percentiles(text: str) -> list[float]:
    try:
        return [float(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise UsageError(f"--percentiles {text!r}: expected numbers like 50,90,99") from None


def parse_engine_slots(specs: list[str] | None) -> dict[str, int]:
    slots: dict[str, int] = {}
    for spec in specs or []:
        name, sep, count = spec.rpartition("=")
        if not re.fullmatch(r"\d+", count.strip()) or int(count) <= 0:
            raise UsageError(f"--engine-slots {spec!r}: expected [NAME=]N with N a positive whole number")
        slots[name.strip() if sep else "*"] = int(count)
    return slots


def stream_levels(args: argparse.Namespace) -> list[int]:
    if args.streams is not None:
        return parse_levels(args.streams, "streams")
    return [] if args.rate or args.workload else [1, 4, 8, 16, 32]


def spec_from_args(args: argparse.Namespace):
    from pipeline.bench.report.latency import parse_goodput
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
            streams=stream_levels(args),
            window_s=args.window,
            warmup_s=args.warmup,
            max_tokens=args.max_tokens,
            prompt_tokens=args.prompt_tokens,
            label=args.label or "bench",
            compare=args.compare,
            engine_slots=parse_engine_slots(args.engine_slots),
            ignore_eos=not (args.no_ignore_eos or args.audit_answers),
            percentiles=parse_percentiles(args.percentiles),
            goodput_slo_ms=parse_goodput(args.goodput) if args.goodput else {},
            save_requests=args.save_requests,
            rates=parse_rates(args.rate),
            burstiness=args.burstiness,
            duration_s=args.duration,
            num_requests=args.num_requests,
            max_concurrency=args.max_concurrency,
            seed=args.seed,
            input_len=args.input_len,
            output_len=args.output_len,
            dataset=str(args.dataset) if args.dataset else None,
            workload=str(args.workload) if args.workload else None,
            replay_speed=args.replay_speed,
            workers=parse_workers(args.workers),
            prefix_len=args.prefix_len,
            prefix_groups=args.prefix_groups,
            multi_turn=args.multi_turn,
            endpoint=Endpoint(args.endpoint),
            reset_cache=args.reset_cache,
            stop_when_saturated=args.stop_when_saturated,
            audit_answers=args.audit_answers,
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
    add_bench_flags(bench)
    add_endpoint_flag(bench)
    add_live_flags(bench)
    add_fleet_flags(bench)
    return bench


def add_report_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    report = commands.add_parser("report", help="one bench report from one or several saved bench runs")
    report.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="bench run folders (bench.json)")
    report.add_argument("--out", type=Path, metavar="DIR", help="where the report goes (default outputs/report-<time>)")
    report.add_argument("--json", action="store_true", help="print the merged record to stdout instead of the tables")
    report.add_argument(
        "--format",
        choices=REPORT_FORMATS,
        default=REPORT_FORMATS[0],
        help="report: bench.json, report.md and .html with charts; vllm: one `vllm bench serve --save-result` "
        "JSON file a ladder level and open-loop rate; csv: bench.csv, one row a level or rate (default: report)",
    )
    return report


REPORT_FORMATS = ("report", "vllm", "csv")


def cmd_report(args: argparse.Namespace) -> int:
    from pipeline.bench.report.report import load_run, merge_runs, text_report, write_report
    from pipeline.bench.report.vllmformat import write_csv, write_vllm

    one = len(args.runs) == 1 and args.format != "report"  # its labels stay its request rows' labels
    record = load_run(args.runs[0]) if one else merge_runs(args.runs)
    folder = args.out or output_path("report")
    rows_from = args.runs[0] if one else None
    if args.format == "vllm":
        written = write_vllm(record, folder, rows_from)
        print(f"fanout: {len(written)} vLLM result files in {folder}", file=sys.stderr)
        return 0
    if args.format == "csv":
        print(f"fanout: {write_csv(record, folder, rows_from)}", file=sys.stderr)
        return 0
    paths = write_report(record, folder)
    print(record.model_dump_json(indent=1) if args.json else text_report(record))
    print(f"fanout: report: {paths['html']} and {paths['markdown']}", file=sys.stderr)
    return 0


def add_sweep_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    sweep = commands.add_parser("sweep", help="concurrency sweep with repetitions and a coherence gate")
    sweep.add_argument("--levels", default="1,2,4,8", help="concurrent users per level (1,2,4,8)")
    sweep.add_argument("--repetitions", type=int, default=5, help="runs per level, fresh nonces each (5)")
    sweep.add_argument("--prompt-tokens", type=int, default=128, help="prompt length as the engine counts it")
    sweep.add_argument("--max-tokens", type=int, default=256, help="output length, ignore_eos where possible")
    sweep.add_argument("--batch", type=int, default=200, help="questions in the batch-time table (200)")
    sweep.add_argument("--engine-slots", type=int, help="the server's slot count, for engines that cannot report it")
    sweep.add_argument("--skip-gate", action="store_true", help="measure even if the coherence gate fails (recorded)")
    add_cache_flags(sweep, sweep=True)
    add_endpoint_flag(sweep)
    add_record_flags(sweep)
    add_fleet_flags(sweep)
    return sweep


def add_efficiency_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    efficiency = commands.add_parser("efficiency", help="a book job's tok/s against what the backends sustain")
    efficiency.add_argument(
        "--workload",
        type=Path,
        metavar="RUN_DIR",
        help="instead: a finished book run against its own requests replayed at once on the same fleet",
    )
    efficiency.add_argument("--shape", default="8x12x16", metavar="PxCxS")
    efficiency.add_argument("--max-tokens", type=int, default=520, help="each section's token cap (520)")
    efficiency.add_argument("--window", type=float, default=30.0, help="seconds of the sustained-rate window")
    efficiency.add_argument(
        "--prompt", default="Write a complete software engineering handbook. Every topic, with examples."
    )
    efficiency.add_argument(
        "--profile",
        default="greedy",
        help="sampling profile (greedy: temperature 0, as the first efficiency figures, so they stay comparable)",
    )
    add_record_flags(efficiency)
    add_fleet_flags(efficiency)
    return efficiency


def add_quality_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    quality = commands.add_parser(
        "quality", help="books from a list of prompts and their quality figures, side by side"
    )
    quality.add_argument(
        "--prompts",
        type=Path,
        metavar="FILE",
        help="one prompt a line (default: five built in: the demo's, code, history, craft, science)",
    )
    quality.add_argument("--shape", default="2x3x4", metavar="PxCxS", help="each book's shape (2x3x4)")
    quality.add_argument("--words", type=int, default=250, help="words asked for per section (250)")
    quality.add_argument("--max-tokens", type=int, help="cap on each section (default: from --words)")
    quality.add_argument(
        "--score",
        type=Path,
        nargs="+",
        metavar="RUN_DIR",
        help="score these finished run folders instead of writing books",
    )
    quality.add_argument(
        "--baseline", type=Path, metavar="QUALITY.json", help="an earlier record: show before -> after"
    )
    quality.add_argument("--quiet", action="store_true", help="no live progress")
    add_record_flags(quality)
    add_fleet_flags(quality, planning=True)
    return quality


def add_frontier_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    frontier = commands.add_parser(
        "frontier", help="one book under several settings: quality against tok/s, the Pareto front marked"
    )
    frontier.add_argument(
        "prompt",
        nargs="?",
        default="Write a short handbook on keeping a sourdough starter alive. Practical, with examples.",
        help="what the books are about (default: the demo's prompt)",
    )
    frontier.add_argument("--profiles", default="greedy,small,default", help="sampling profiles (greedy,small,default)")
    frontier.add_argument("--best-of", dest="best_ofs", default="1,2", metavar="K,K", help="candidates a section (1,2)")
    frontier.add_argument("--shape", default="2x3x4", metavar="PxCxS", help="each book's shape (2x3x4)")
    frontier.add_argument("--words", type=int, default=250, help="words asked for per section (250)")
    frontier.add_argument(
        "--figure", default="on_point", help="the quality figure ranked against tok/s (on_point; any audit figure)"
    )
    frontier.add_argument("--quiet", action="store_true", help="no live progress")
    frontier.add_argument(
        "--section-templates",
        metavar="FILE,FILE",
        help="section prompt variants to cross (each as `fanout book --section-template` takes it; "
        "'shipped' names templates/section.md)",
    )
    frontier.add_argument(
        "--planner-backend",
        action="append",
        metavar="URL[,cap=N][,model=NAME]",
        help="also write each setting with planning on these servers (the planner-apart axis)",
    )
    add_record_flags(frontier)
    add_fleet_flags(frontier)
    return frontier


def add_identity_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    identity = commands.add_parser("identity", help="answers under load against a single-user oracle")
    identity.add_argument(
        "--levels", default=None, help="concurrent users per level (1,2,4,8; with --book: none unless given)"
    )
    identity.add_argument(
        "--mode",
        default="concurrency",
        choices=["concurrency", "same", "servers"],
        help="levels of users; one question N times at once; two fresh servers",
    )
    identity.add_argument("--max-tokens", type=int, default=96)
    identity.add_argument("--prompts", type=Path, metavar="FILE", help="one prompt a line (default: 12 built in)")
    identity.add_argument(
        "--book",
        type=Path,
        metavar="RUN_DIR",
        help="a finished book run: each section request asked again alone and compared with what the book got "
        "under its own load (--levels: also at N in flight; default none)",
    )
    add_endpoint_flag(identity)
    add_record_flags(identity)
    add_fleet_flags(identity)
    return identity


def cmd_bench(args: argparse.Namespace) -> int:
    from pipeline.backends.loop import fast_loop

    if args.live:
        from pipeline.watch.live import check_bind

        if args.ceiling:
            raise UsageError("--live shows an engine ladder; --ceiling runs no engine")
        check_bind(args.live_host, allow_public=args.live_public)
    if args.ceiling:
        defaults = argparse.ArgumentParser()
        add_bench_flags(defaults)
        return run_ceiling_command(args, vars(defaults.parse_args([])))
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
    spec = SweepSpec(
        levels=parse_levels(args.levels),
        repetitions=args.repetitions,
        prompt_tokens=args.prompt_tokens,
        max_tokens=args.max_tokens,
        batch=args.batch,
        slots=args.engine_slots,
        skip_gate=args.skip_gate,
        prefix_len=args.prefix_len,
        prefix_groups=args.prefix_groups,
        reset_cache=args.reset_cache,
        endpoint=Endpoint(args.endpoint),
    )
    record = anyio.run(run_sweep, settings_from(args), spec)
    save_record("sweep", record, sweep_markdown(record), args.out, as_json=args.json)
    return 1 if any(level.failed for level in record.levels) else 0


def cmd_identity(args: argparse.Namespace) -> int:
    from pipeline.bench.studies.identity import IdentitySpec, identity_markdown, run_identity

    require_positive(args, "max_tokens")
    if args.book is not None:
        return book_identity(args)
    spec = IdentitySpec(
        levels=parse_levels(args.levels or "1,2,4,8"),
        mode=args.mode,
        max_tokens=args.max_tokens,
        endpoint=Endpoint(args.endpoint),
    )
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
    prompts = read_prompts(args.prompts)
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
