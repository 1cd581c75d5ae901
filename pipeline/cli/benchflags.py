"""The bench family's flags in one table (`fanout bench`, `sweep`, `identity`, `efficiency`, `quality`,
`frontier`, `report`): each flag is declared once, with argparse's options, the commands that take it, its
`--help` group and the spec field it fills, so a new flag is one entry. `add_flags(parser, command)` adds a
command's flags in the table's order, each group where its first flag is; `spec_fields(args, command)` gives
the spec fields the command's flags fill, each converted from its text. The flags every command shares
(backends, engine, request options, `--out`/`--json`, `--endpoint`'s options) stay in cli/flags.py.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.cli.flags import ENDPOINT_OPTIONS, QUIET_HELP
from pipeline.config import parse_levels
from pipeline.errors import UsageError
from pipeline.records import Endpoint

BENCH, SWEEP, IDENTITY, EFFICIENCY, QUALITY, FRONTIER, REPORT = (
    "bench", "sweep", "identity", "efficiency", "quality", "frontier", "report",
)  # fmt: skip
LATENCY = "latency, goodput and per-request records (closed and open loop)"
OPEN_LOOP = "open loop (arrivals independent of completions, as vllm bench serve)"
CACHE = "prefix cache"
CEILING = "client ceiling (--ceiling: no engine; python -m pipeline.bench.studies.ceiling -h)"
REPORT_FORMATS = ("report", "vllm", "csv")


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


def parse_slo(text: str | None) -> dict[str, float]:
    from pipeline.bench.report.latency import parse_goodput

    return parse_goodput(text) if text else {}


def text_or_none(value: Path | None) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class Flag:
    """One flag: its name (a positional's has no dashes), argparse's options, the commands that take it, its
    --help group ("": the command's own options), and the spec field it fills with `convert(value)`."""

    name: str
    commands: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)
    group: str = ""
    spec: str | None = None
    convert: Callable[[Any], Any] | None = None

    @property
    def dest(self) -> str:
        return self.options.get("dest") or self.name.lstrip("-").replace("-", "_")


def _reset_cache(each: str) -> dict[str, Any]:
    return {
        "action": "store_true",
        "help": f"empty every engine's prefix cache before each {each} where it offers a way (recorded either way)",
    }


FLAGS: tuple[Flag, ...] = (
    # `fanout bench`: the ladder, the open loop, a replay
    Flag(
        "--streams",
        (BENCH,),
        {
            "metavar": "N,N,...",
            "help": "closed-loop stream levels per backend (default "
            "1,4,8,16,32, none when --rate or --workload is given alone); each must fit the backend's cap and its "
            "engine's slots",
        },
    ),
    Flag(
        "--window",
        (BENCH,),
        {"type": float, "default": 40.0, "metavar": "S", "help": "measured seconds per level (40)"},
        spec="window_s",
    ),
    Flag(
        "--warmup",
        (BENCH,),
        {
            "type": float,
            "default": 3.0,
            "metavar": "S",
            "help": "least seconds before each window, which also waits for full occupancy (3)",
        },
        spec="warmup_s",
    ),
    Flag(
        "--max-tokens", (BENCH,), {"type": int, "default": 512, "help": "cap on each answer (512)"}, spec="max_tokens"
    ),
    Flag(
        "--prompt-tokens",
        (BENCH,),
        {
            "type": int,
            "metavar": "N",
            "help": "prompts of N tokens as the engine counts them (its /tokenize; else tiktoken offline)",
        },
        spec="prompt_tokens",
    ),
    Flag("--label", (BENCH,), {"default": None, "help": "name of this run in the report (default: the engine kind)"}),
    Flag(
        "--compare",
        (BENCH,),
        {
            "action": "store_true",
            "help": "measure each backend alone, one after another, side "
            "by side with a ratio column (default: all backends at once, summed)",
        },
        spec="compare",
    ),
    Flag(
        "--engine-slots",
        (BENCH,),
        {
            "action": "append",
            "metavar": "[NAME=]N",
            "help": "sequences the engine runs at "
            "once, for engines that cannot report it (vLLM, SGLang, TGI); NAME is a backend name, none means every "
            "backend",
        },
        spec="engine_slots",
        convert=parse_engine_slots,
    ),
    Flag("--no-ignore-eos", (BENCH,), {"action": "store_true", "help": "let answers stop at end of sequence"}),
    Flag(
        "--audit-answers",
        (BENCH,),
        {
            "action": "store_true",
            "help": "keep every answer and report per level the "
            "share capped mid-sentence, looping, empty or duplicated (turns ignore_eos off, so answers end where the "
            "model ends them)",
        },
        spec="audit_answers",
    ),
    Flag(
        "--percentiles",
        (BENCH,),
        {"default": "50,90,99", "metavar": "Q,Q,...", "help": "latency percentiles reported (50,90,99)"},
        LATENCY,
        "percentiles",
        parse_percentiles,
    ),
    Flag(
        "--goodput",
        (BENCH,),
        {
            "metavar": "ttft:MS,tpot:MS,e2e:MS",
            "help": "SLOs in milliseconds (any of them): the share and rate of requests meeting every one",
        },
        LATENCY,
        "goodput_slo_ms",
        parse_slo,
    ),
    Flag(
        "--save-requests",
        (BENCH,),
        {"action": "store_true", "help": "write requests.jsonl and requests.csv: one row a request"},
        LATENCY,
        "save_requests",
    ),
    Flag(
        "--rate",
        (BENCH,),
        {"metavar": "R,R,...", "help": "request rates to sweep, requests per second"},
        OPEN_LOOP,
        "rates",
        parse_rates,
    ),
    Flag(
        "--burstiness",
        (BENCH,),
        {"type": float, "default": 1.0, "help": "gamma shape of the arrivals: 1 Poisson, <1 burstier (1)"},
        OPEN_LOOP,
        "burstiness",
    ),
    Flag(
        "--duration",
        (BENCH,),
        {"type": float, "default": 30.0, "metavar": "S", "help": "seconds of arrivals per rate (30)"},
        OPEN_LOOP,
        "duration_s",
    ),
    Flag(
        "--num-requests",
        (BENCH,),
        {"type": int, "metavar": "N", "help": "stop each rate after N arrivals"},
        OPEN_LOOP,
        "num_requests",
    ),
    Flag(
        "--max-concurrency",
        (BENCH,),
        {"type": int, "metavar": "N", "help": "at most N requests in flight; later arrivals queue here"},
        OPEN_LOOP,
        "max_concurrency",
    ),
    Flag(
        "--seed",
        (BENCH,),
        {"type": int, "default": 0, "help": "seed of the arrivals and length draws (0)"},
        OPEN_LOOP,
        "seed",
    ),
    Flag(
        "--input-len",
        (BENCH,),
        {"metavar": "N|LO-HI", "help": "synthetic prompts of N tokens (or uniform in LO-HI), engine-counted"},
        OPEN_LOOP,
        "input_len",
    ),
    Flag(
        "--output-len",
        (BENCH,),
        {"metavar": "N|LO-HI", "help": "answer caps (ignore_eos), N or uniform in LO-HI (--max-tokens)"},
        OPEN_LOOP,
        "output_len",
    ),
    Flag(
        "--dataset",
        (BENCH,),
        {"type": Path, "metavar": "FILE", "help": 'JSONL of {"prompt", "max_tokens"} or ShareGPT-style JSON'},
        OPEN_LOOP,
        "dataset",
        text_or_none,
    ),
    Flag(
        "--workload",
        (BENCH,),
        {"type": Path, "metavar": "RUN_DIR", "help": "replay a fanout book run's requests (its requests.jsonl)"},
        OPEN_LOOP,
        "workload",
        text_or_none,
    ),
    Flag(
        "--replay-speed",
        (BENCH,),
        {
            "type": float,
            "default": 1.0,
            "metavar": "F",
            "help": "replay at the original times divided by F (1); 0: all at once, as fast as the caps allow",
        },
        OPEN_LOOP,
        "replay_speed",
    ),
    # the prefix cache: the ladder's and the open loop's, and the sweep's
    Flag(
        "--prefix-len",
        (BENCH, SWEEP),
        {
            "type": int,
            "metavar": "N",
            "help": "a shared prefix of N tokens "
            "(engine-counted) before every synthetic prompt, in addition to its length",
        },
        CACHE,
        "prefix_len",
    ),
    Flag(
        "--prefix-groups",
        (BENCH, SWEEP),
        {"type": int, "default": 1, "metavar": "G", "help": "G distinct shared prefixes, taken in turn (1)"},
        CACHE,
        "prefix_groups",
    ),
    Flag("--reset-cache", (BENCH,), _reset_cache("level"), CACHE, "reset_cache"),
    Flag(
        "--multi-turn",
        (BENCH,),
        {
            "action": "store_true",
            "help": "with a ShareGPT --dataset and --rate: each conversation turn by turn, the history resent",
        },
        CACHE,
        "multi_turn",
    ),
    Flag(
        "--stop-when-saturated",
        (BENCH,),
        {
            "action": "store_true",
            "help": "open loop: stop a rate, and the rates "
            "above it, once requests in flight and TTFT keep rising (guidellm's over-saturation rule)",
        },
        CACHE,
        "stop_when_saturated",
    ),
    Flag(
        "--out", (BENCH,), {"type": Path, "metavar": "DIR", "help": "run folder (default outputs/bench-<label>-<time>)"}
    ),
    Flag("--json", (BENCH,), {"action": "store_true", "help": "print bench.json to stdout instead of the tables"}),
    Flag(
        "--ceiling",
        (BENCH,),
        {
            "action": "store_true",
            "help": "measure the client's own ingest ceiling against a "
            "local SSE source: ours beside aiohttp and the naive openai SDK loop (--streams then defaults to 1536, "
            "--window to 6)",
        },
        CEILING,
    ),
    Flag(
        "--ticks",
        (BENCH,),
        {
            "default": "20,10,0",
            "metavar": "MS,MS,...",
            "help": "with --ceiling: source tick per event, 0 unpaced (20,10,0)",
        },
        CEILING,
    ),
    Flag(
        "--ray",
        (BENCH,),
        {
            "nargs": "?",
            "const": "",
            "metavar": "ADDRESS",
            "help": "run the --workers as Ray "
            "actors: on the cluster at ADDRESS (or RAY_ADDRESS), else on a local Ray instance started for the run "
            "(pip install 'fanout[ray]')",
        },
    ),
    Flag(
        "--workers",
        (BENCH,),
        {
            "default": "1",
            "metavar": "N",
            "help": "client processes the load is sharded over, "
            "each with its share of every cap (1); with --ceiling a list, side by side (1,2)",
        },
        spec="workers",
        convert=parse_workers,
    ),
    # `fanout sweep`: seed 001's concurrency sweep
    Flag(
        "--levels",
        (SWEEP,),
        {"default": "1,2,4,8", "help": "concurrent users per level (1,2,4,8)"},
        spec="levels",
        convert=parse_levels,
    ),
    Flag(
        "--repetitions",
        (SWEEP,),
        {"type": int, "default": 5, "help": "runs per level, fresh nonces each (5)"},
        spec="repetitions",
    ),
    Flag(
        "--prompt-tokens",
        (SWEEP,),
        {"type": int, "default": 128, "help": "prompt length as the engine counts it"},
        spec="prompt_tokens",
    ),
    Flag(
        "--max-tokens",
        (SWEEP,),
        {"type": int, "default": 256, "help": "output length, ignore_eos where possible"},
        spec="max_tokens",
    ),
    Flag(
        "--batch",
        (SWEEP,),
        {"type": int, "default": 200, "help": "questions in the batch-time table (200)"},
        spec="batch",
    ),
    Flag(
        "--engine-slots",
        (SWEEP,),
        {"type": int, "help": "the server's slot count, for engines that cannot report it"},
        spec="slots",
    ),
    Flag(
        "--skip-gate",
        (SWEEP,),
        {"action": "store_true", "help": "measure even if the coherence gate fails (recorded)"},
        spec="skip_gate",
    ),
    Flag("--reset-cache", (SWEEP,), _reset_cache("repetition"), CACHE, "reset_cache"),
    # `fanout identity`: answers under load against a single-user oracle
    Flag(
        "--levels",
        (IDENTITY,),
        {"default": None, "help": "concurrent users per level (1,2,4,8; with --book: none unless given)"},
    ),
    Flag(
        "--mode",
        (IDENTITY,),
        {
            "default": "concurrency",
            "choices": ["concurrency", "same", "servers"],
            "help": "levels of users; one question N times at once; two fresh servers",
        },
        spec="mode",
    ),
    Flag("--max-tokens", (IDENTITY,), {"type": int, "default": 96}, spec="max_tokens"),
    Flag(
        "--prompts", (IDENTITY,), {"type": Path, "metavar": "FILE", "help": "one prompt a line (default: 12 built in)"}
    ),
    Flag(
        "--book",
        (IDENTITY,),
        {
            "type": Path,
            "metavar": "RUN_DIR",
            "help": "a finished book run: each section request "
            "asked again alone and compared with what the book got under its own load (--levels: also at N in flight; "
            "default none)",
        },
    ),
    # the endpoint, for the commands that send requests of their own making
    Flag("--endpoint", (BENCH, SWEEP, IDENTITY), ENDPOINT_OPTIONS, spec="endpoint", convert=Endpoint),
    # `fanout efficiency`: a book job's tok/s against what the backends sustain
    Flag(
        "--workload",
        (EFFICIENCY,),
        {
            "type": Path,
            "metavar": "RUN_DIR",
            "help": "instead: a finished book run against its own requests replayed at once on the same fleet",
        },
    ),
    Flag("--shape", (EFFICIENCY,), {"default": "8x12x16", "metavar": "PxCxS"}),
    Flag("--max-tokens", (EFFICIENCY,), {"type": int, "default": 520, "help": "each section's token cap (520)"}),
    Flag("--window", (EFFICIENCY,), {"type": float, "default": 30.0, "help": "seconds of the sustained-rate window"}),
    Flag(
        "--prompt",
        (EFFICIENCY,),
        {"default": "Write a complete software engineering handbook. Every topic, with examples."},
    ),
    Flag(
        "--profile",
        (EFFICIENCY,),
        {
            "default": "greedy",
            "help": "sampling profile (greedy: temperature 0, as the "
            "first efficiency figures, so they stay comparable)",
        },
    ),
    # `fanout quality`: books from a list of prompts, their quality figures side by side
    Flag(
        "--prompts",
        (QUALITY,),
        {
            "type": Path,
            "metavar": "FILE",
            "help": "one prompt a line (default: five built in: the demo's, code, history, craft, science)",
        },
    ),
    # `fanout frontier`: one book under several settings, the Pareto front marked
    Flag(
        "prompt",
        (FRONTIER,),
        {
            "nargs": "?",
            "default": "Write a short handbook on keeping a sourdough starter alive. Practical, with examples.",
            "help": "what the books are about (default: the demo's prompt)",
        },
    ),
    Flag(
        "--profiles",
        (FRONTIER,),
        {"default": "greedy,small,default", "help": "sampling profiles (greedy,small,default)"},
    ),
    Flag(
        "--best-of",
        (FRONTIER,),
        {"dest": "best_ofs", "default": "1,2", "metavar": "K,K", "help": "candidates a section (1,2)"},
    ),
    Flag("--shape", (QUALITY, FRONTIER), {"default": "2x3x4", "metavar": "PxCxS", "help": "each book's shape (2x3x4)"}),
    Flag("--words", (QUALITY, FRONTIER), {"type": int, "default": 250, "help": "words asked for per section (250)"}),
    Flag("--max-tokens", (QUALITY,), {"type": int, "help": "cap on each section (default: from --words)"}),
    Flag(
        "--score",
        (QUALITY,),
        {
            "type": Path,
            "nargs": "+",
            "metavar": "RUN_DIR",
            "help": "score these finished run folders instead of writing books",
        },
    ),
    Flag(
        "--baseline",
        (QUALITY,),
        {"type": Path, "metavar": "QUALITY.json", "help": "an earlier record: show before -> after"},
    ),
    Flag(
        "--figure",
        (FRONTIER,),
        {"default": "on_point", "help": "the quality figure ranked against tok/s (on_point; any audit figure)"},
    ),
    Flag("--quiet", (QUALITY, FRONTIER), {"action": "store_true", "help": QUIET_HELP}),
    Flag(
        "--section-templates",
        (FRONTIER,),
        {
            "metavar": "FILE,FILE",
            "help": "section prompt variants to cross (each "
            "as `fanout book --section-template` takes it; 'shipped' names templates/section.md)",
        },
    ),
    Flag(
        "--planner-backend",
        (FRONTIER,),
        {
            "action": "append",
            "metavar": "URL[,cap=N][,model=NAME]",
            "help": "also write each setting with planning on these servers (the planner-apart axis)",
        },
    ),
    # `fanout report`: saved bench runs as one report, or in other tools' shapes
    Flag(
        "runs", (REPORT,), {"nargs": "+", "type": Path, "metavar": "RUN_DIR", "help": "bench run folders (bench.json)"}
    ),
    Flag(
        "--out",
        (REPORT,),
        {"type": Path, "metavar": "DIR", "help": "where the report goes (default outputs/report-<time>)"},
    ),
    Flag(
        "--json", (REPORT,), {"action": "store_true", "help": "print the merged record to stdout instead of the tables"}
    ),
    Flag(
        "--format",
        (REPORT,),
        {
            "choices": REPORT_FORMATS,
            "default": REPORT_FORMATS[0],
            "help": "report: bench.json, "
            "report.md and .html with charts; vllm: one `vllm bench serve --save-result` JSON file a ladder level and "
            "open-loop rate; csv: bench.csv, one row a level or rate (default: report)",
        },
    ),
    Flag(
        "--detailed",
        (REPORT,),
        {
            "action": "store_true",
            "help": "with --format vllm: the per-request lists `--save-detailed` adds (input_lens, output_lens, ttfts, "
            "itls, start_times, generated_texts, errors), from a run that kept its request rows (--save-requests)",
        },
    ),
)


def flags_of(command: str) -> list[Flag]:
    return [flag for flag in FLAGS if command in flag.commands]


def add_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """The command's flags from the table, in its order; a group is made where its first flag is."""
    groups: dict[str, argparse._ActionsContainer] = {"": parser}
    for flag in flags_of(command):
        if flag.group not in groups:
            groups[flag.group] = parser.add_argument_group(flag.group)
        groups[flag.group].add_argument(flag.name, **flag.options)


def spec_fields(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """The spec fields the command's flags fill: each flag's value, converted where the table says how."""
    fields = {}
    for flag in flags_of(command):
        if flag.spec is not None:
            value = getattr(args, flag.dest)
            fields[flag.spec] = flag.convert(value) if flag.convert is not None else value
    return fields


def defaults_of(command: str) -> dict[str, Any]:
    """Each of the command's flags' default as argparse gives it (False for a switch), by destination."""
    parser = argparse.ArgumentParser(add_help=False)
    add_flags(parser, command)
    return {action.dest: action.default for action in parser._actions}
