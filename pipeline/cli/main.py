"""The command line: parse flags, call one function, turn errors into exit codes.

The parser is wired here from one module per command family (cli.book, cli.plan, cli.bench, cli.serve,
cli.sources; cli.flags holds what they share); an error's setting names become flag words here
(`flags.flag_words`), in one place.

Exit codes: 0 ok; 1 the run failed; 2 usage or configuration error (bad flag, bad TOML, unreachable
backend, wrong model name); 3 an audit found defects the user gates on; 130 interrupted (Ctrl-C, SIGINT);
143 terminated (SIGTERM). A full disk, a quota, a read-only file system or a permission error ends a run in
one line naming the file (exit 1); `fanout book` adds what it kept and the command that finishes it.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

from pipeline.cli.bench import (
    add_bench_command,
    add_efficiency_command,
    add_frontier_command,
    add_identity_command,
    add_quality_command,
    add_report_command,
    add_sweep_command,
    cmd_bench,
    cmd_efficiency,
    cmd_frontier,
    cmd_identity,
    cmd_quality,
    cmd_report,
    cmd_sweep,
)
from pipeline.cli.book import (
    add_audit_command,
    add_book_command,
    add_repair_command,
    add_typeset_command,
    cmd_audit,
    cmd_book,
    cmd_repair,
    cmd_typeset,
)
from pipeline.cli.flags import Parser, flag_words
from pipeline.cli.plan import add_plan_command, cmd_plan
from pipeline.cli.serve import (
    add_ask_command,
    add_install_command,
    add_probe_command,
    add_serve_command,
    cmd_ask,
    cmd_install,
    cmd_probe,
    cmd_serve,
)
from pipeline.cli.sources import add_sources_command, cmd_sources
from pipeline.cpu import one_blas_thread
from pipeline.errors import FanoutError, Terminated, disk_error_in, disk_words, fanout_error_in
from pipeline.version import installed_version

log = logging.getLogger("fanout")
# The one registry of commands: how each adds its flags, and what runs it; `fanout -h` lists them in this order.
COMMANDS: tuple[tuple[Callable[[Any], argparse.ArgumentParser], Callable[[argparse.Namespace], int]], ...] = (
    (add_install_command, cmd_install),
    (add_serve_command, cmd_serve),
    (add_ask_command, cmd_ask),
    (add_sources_command, cmd_sources),
    (add_plan_command, cmd_plan),
    (add_book_command, cmd_book),
    (add_audit_command, cmd_audit),
    (add_repair_command, cmd_repair),
    (add_probe_command, cmd_probe),
    (add_typeset_command, cmd_typeset),
    (add_bench_command, cmd_bench),
    (add_report_command, cmd_report),
    (add_sweep_command, cmd_sweep),
    (add_efficiency_command, cmd_efficiency),
    (add_quality_command, cmd_quality),
    (add_frontier_command, cmd_frontier),
    (add_identity_command, cmd_identity),
)
EXIT_CODES = "exit codes: 0 ok, 1 run failed, 2 usage/config error, 3 audit gate, 130 interrupted, 143 terminated"


def build_parser() -> Parser:
    parser = Parser(
        prog="fanout",
        description="Fan one prompt out over a fleet of LLM servers into a typeset "
        "handbook, and measure the fleet honestly.",
        epilog=EXIT_CODES,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    version = installed_version(missing="(not installed: running from a source tree)")
    parser.add_argument("--version", action="version", version=f"fanout {version}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for add, run in COMMANDS:
        add(commands).set_defaults(run=run)
    return parser


TERMINAL_HANDLER = "fanout-terminal"


def configure_logging(*, verbose: bool, quiet: bool = False) -> None:
    """Our own logger only: libraries' INFO chatter (fontTools, WeasyPrint) stays out of the terminal. The
    terminal gets INFO and up; DEBUG with --verbose; warnings and errors only with a command's --quiet (its
    result lines are printed, not logged). A second call (tests run `main` many times) replaces the first's
    terminal handler."""
    for old in [handler for handler in log.handlers if handler.get_name() == TERMINAL_HANDLER]:
        log.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(TERMINAL_HANDLER)
    handler.setFormatter(logging.Formatter("fanout: %(message)s"))
    handler.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)  # run.log keeps the details the terminal leaves out
    log.propagate = False


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _terminate)  # so SIGTERM unwinds like Ctrl-C and stops child engines
    one_blas_thread()
    try:
        args = build_parser().parse_args(argv)
        configure_logging(verbose=args.verbose, quiet=getattr(args, "quiet", False))  # only some commands have --quiet
        return args.run(args)
    except (FanoutError, OSError, BaseExceptionGroup) as caught:
        if (error := fanout_error_in(caught)) is not None:
            print(f"fanout: error: {flag_words(str(error))}", file=sys.stderr)
            return error.exit_code
        if (disk := disk_error_in(caught)) is not None:
            print(f"fanout: error: {disk_words(disk)}", file=sys.stderr)
            return 1
        raise
    except KeyboardInterrupt as stop:
        terminated = isinstance(stop, Terminated)
        print(f"fanout: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return 128 + (signal.SIGTERM if terminated else signal.SIGINT)


if __name__ == "__main__":
    raise SystemExit(main())
