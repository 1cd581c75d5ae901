"""What every command family shares: the parser class, the fleet, engine, live-page and record flags, the
Settings built from them, and the one place that turns a setting's name into its flag word.

Stage code names settings in its errors (`setting 'engine_slots'`); `flag_words` rewrites them as the flags
that set them (`--engine-slots`) before the CLI prints the error.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

from pipeline.errors import UsageError
from pipeline.records import Endpoint, PdfEngine, PlanMode, WarmSchedule

SETTING = re.compile(r"setting '([a-z_]+)'")
FLAG_OF = {  # where a flag is not --NAME
    "backends": "--backend",
    "planner_backends": "--planner-backend",
    "rates": "--rate",
    "headers": "--header",
    "goodput_slo_ms": "--goodput",
}


def flag_words(message: str) -> str:
    """`setting 'live_host'` -> `--live-host`: the flag the user gives for each setting a message names."""
    return SETTING.sub(lambda m: FLAG_OF.get(m.group(1), "--" + m.group(1).replace("_", "-")), message)


class Parser(argparse.ArgumentParser):
    """argparse, but its errors are one line and exit 2 through our own path."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


MAX_PROMPT_CHARS = 10_000


def add_prompt_file_flag(parser: argparse.ArgumentParser, *, many: bool = False) -> None:
    parser.add_argument(
        "--prompt-file",
        type=Path,
        action="append" if many else "store",
        metavar="FILE",
        help="the prompt from a file, its whole text (a brief of several lines); - reads standard input"
        + ("; repeat for more prompts" if many else ""),
    )


def prompt_from_file(path: Path) -> str:
    """A prompt file's whole text (`-`: standard input), stripped; UsageError when it is unreadable or empty."""
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"--prompt-file {path}: cannot read it ({error})") from None
    if not text.strip():
        raise UsageError(f"--prompt-file {path}: it is empty")
    return checked_prompt(text)


def checked_prompt(text: str) -> str:
    """The prompt stripped; UsageError when it is empty or longer than MAX_PROMPT_CHARS."""
    if not text.strip():
        raise UsageError("the prompt is empty")
    if len(text) > MAX_PROMPT_CHARS:
        raise UsageError(f"the prompt is {len(text):,} characters; at most {MAX_PROMPT_CHARS:,}")
    return text.strip()


def add_live_flags(parser: argparse.ArgumentParser) -> None:
    live = parser.add_argument_group("live page")
    live.add_argument("--live", action="store_true", help="serve a page with every stream merged into one feed")
    live.add_argument("--live-port", type=int, default=0, help="its port (default: a free one)")
    live.add_argument("--live-host", default="127.0.0.1", help="its address (loopback unless --live-public)")
    live.add_argument("--live-public", action="store_true", help="allow a non-loopback --live-host")
    live.add_argument("--live-linger", type=float, default=30.0, help="seconds the page stays up after the job")


def add_fleet_flags(parser: argparse.ArgumentParser, *, planning: bool = False) -> None:
    group = parser.add_argument_group("backends (none given: the embedded llama.cpp engine)")
    group.add_argument(
        "--backend",
        action="append",
        metavar="URL[,cap=N][,model=NAME]",
        help="an OpenAI-compatible server; repeat for a fleet (options, as in a TOML "
        "[[backends]] table: cap, model, name, key_env or api_key_env)",
    )
    group.add_argument(
        "--planning-lane",
        type=int,
        metavar="N",
        help="while a book is planned beside its writing, the first backend takes at most N writing requests and "
        "planning goes there first, so planning's tokens come at a small batch's pace (a fleet of two or more; "
        "default 0: no lane)",
    )
    if planning:
        group.add_argument(
            "--planner-backend",
            action="append",
            metavar="URL[,cap=N][,model=NAME]",
            help="send planning to these servers instead (plan on a strong model, write on many)",
        )
        add_planning_flag(group)
        group.add_argument(
            "--profile",
            help="sampling profile: greedy, small, default (default: chosen from the model the engines report)",
        )
        add_writing_flags(group)
        add_pdf_engine_flag(group)
    group.add_argument("--config", type=Path, metavar="FILE.toml", help="backends and settings from a TOML file")
    add_engine_flags(group)
    add_request_flags(group)


def add_writing_flags(group: argparse._ActionsContainer) -> None:
    group.add_argument(
        "--best-of",
        type=int,
        metavar="K",
        help="write K candidates a section and keep the one nearest its own point (default: as many as the "
        "fleet's slots hold for every section at once, at most 4; 1 on the embedded engine)",
    )
    group.add_argument(
        "--off-point-retries",
        type=int,
        metavar="N",
        help="ask a section up to N more times while it is nearer a sibling's point than its own (default 1)",
    )
    group.add_argument(
        "--hedge",
        action="store_true",
        default=None,
        help="while the fleet has slots no request waits for, send a second copy of each section whose answer, "
        "at its own pace so far, would end more than twice as late as a copy sent now; the first that passes is "
        "kept, the other cancelled (default off: docs/measurements.md)",
    )
    group.add_argument(
        "--warm",
        choices=[schedule.value for schedule in WarmSchedule],
        help="when a chapter's sections follow the one sent first, to the same backend: once its answer is in "
        "(answer: llama.cpp keeps a prompt in the slot that computed it), once its first token is in "
        "(first-token: vLLM and SGLang share computed blocks), as the first one's engine needs (auto, the "
        "default), or all at once (off)",
    )
    add_embeddings_flag(group)
    add_judge_flag(group)


# --quiet (book, plan, repair, quality, frontier); cli/main.py raises the terminal's log level to WARNING for it
QUIET_HELP = "no live progress and no INFO lines: warnings, errors and the result only (run.log keeps every line)"

ENDPOINT_OPTIONS: dict[str, Any] = {
    "choices": [endpoint.value for endpoint in Endpoint],
    "default": Endpoint.CHAT.value,
    "help": "chat: /v1/chat/completions (the engine applies the model's chat template); completions: "
    "/v1/completions, the prompt sent as it is (base models; no template tokens) (default: chat)",
}


def add_endpoint_flag(group: argparse._ActionsContainer) -> None:
    group.add_argument("--endpoint", **ENDPOINT_OPTIONS)


def add_pdf_engine_flag(group: argparse._ActionsContainer) -> None:
    group.add_argument(
        "--pdf-engine",
        choices=[engine.value for engine in PdfEngine],
        help="what typesets the PDF: typst (default; one compile in seconds) or weasyprint (parts in a process "
        "pool, merged)",
    )


def add_embeddings_flag(group: argparse._ActionsContainer) -> None:
    group.add_argument(
        "--embeddings",
        metavar="URL[,model=NAME]",
        help="the meaning model: an OpenAI-compatible /v1/embeddings server (default: the built-in static model, "
        "wordllama)",
    )


def add_planning_flag(group: argparse._ActionsContainer) -> None:
    group.add_argument(
        "--planning",
        choices=[mode.value for mode in PlanMode],
        help="how titles are planned: given (the model phrases a title for each facet a book of the request's "
        "kind covers, or each concern it names), open (the model lists each node's children, the planner "
        "chooses), or auto (the default: given for a small model, open for the rest)",
    )


def add_judge_flag(group: argparse._ActionsContainer) -> None:
    group.add_argument(
        "--judge",
        choices=["minilm", "none"],
        help="what judges each part and chapter on or off the request: minilm (default; a sentence encoder "
        "from its wheel; the planner refuses an off-request title) or none",
    )


def add_request_flags(group: argparse._ActionsContainer) -> None:
    group.add_argument(
        "--client",
        choices=["fast", "sdk"],
        help="HTTP client: fast (default; no proxies) or sdk (the openai SDK over httpx: HTTPS_PROXY, "
        "NO_PROXY, SSL_CERT_FILE; slower)",
    )
    group.add_argument(
        "--header", action="append", metavar="NAME:VALUE", help="an HTTP header for every request (repeat)"
    )
    group.add_argument(
        "--extra-body", metavar="JSON", help="fields merged into every request body, e.g. '{\"top_k\": 20}'"
    )


def parse_headers(items: list[str] | None) -> dict[str, str] | None:
    if not items:
        return None
    headers = {}
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or not name.strip() or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name.strip()):
            raise UsageError(f"--header {item!r}: expected NAME:VALUE")
        headers[name.strip()] = value.strip()
    return headers


def parse_extra_body(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--extra-body: not JSON ({exc.msg})") from None
    if not isinstance(body, dict):
        raise UsageError("--extra-body: expected a JSON object")
    return body


def add_engine_flags(group: argparse._ActionsContainer) -> None:
    group.add_argument("--slots", type=int, help="embedded engine: parallel slots (default 16)")
    group.add_argument(
        "--threads", type=int, help="embedded engine: CPU threads (default: every core; cores - 1 with WeasyPrint)"
    )
    group.add_argument("--ctx-per-slot", type=int, help="embedded engine: context tokens per slot (default 2048)")


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
    planners = [
        parse_backend_spec(spec, i, planner=True, source="--planner-backend")
        for i, spec in enumerate(getattr(args, "planner_backend", None) or [])
    ] or None
    flags: dict[str, Any] = {
        "backends": backends,
        "planner_backends": planners,
        "slots": args.slots,
        "threads": args.threads,
        "ctx_per_slot": args.ctx_per_slot,
        "profile": getattr(args, "profile", None),
        "client": getattr(args, "client", None),
        "workers": getattr(args, "book_workers", None),
        "ray_address": getattr(args, "book_ray", None),
        "headers": parse_headers(getattr(args, "header", None)),
        "extra_body": parse_extra_body(getattr(args, "extra_body", None)),
        "embeddings": getattr(args, "embeddings", None),
        "judge": getattr(args, "judge", None),
        "best_of": getattr(args, "best_of", None),
        "off_point_retries": getattr(args, "off_point_retries", None),
        "hedge": getattr(args, "hedge", None),
        "pdf_engine": getattr(args, "pdf_engine", None),
        "warm": getattr(args, "warm", None),
        "planning_lane": getattr(args, "planning_lane", None),
        "planning": getattr(args, "planning", None),
    }
    return load_settings(flags, args.config)


def save_record(kind: str, record, markdown: str, out: Path | None, *, as_json: bool) -> None:
    from pipeline.files import output_path, write_atomic

    folder = out or output_path(kind)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / f"{kind}.json", record.model_dump_json(indent=2))
    write_atomic(folder / f"{kind}.md", markdown)
    print(record.model_dump_json(indent=2) if as_json else markdown)
    print(f"fanout: {kind} record: {folder / (kind + '.json')}", file=sys.stderr)
