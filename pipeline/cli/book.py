"""`fanout book`, `fanout repair`, `fanout audit` and `fanout typeset`: flags -> BookSpec / Settings -> the stage
-> tables on stderr and an exit code (3 when an audit gate fails). `fanout plan` is cli/plan.py, which takes the
prompt, --sources and the stopped-run line from here."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from pipeline.cli.flags import (
    QUIET_HELP,
    add_embeddings_flag,
    add_endpoint_flag,
    add_fleet_flags,
    add_judge_flag,
    add_live_flags,
    add_pdf_engine_flag,
    add_prompt_file_flag,
    checked_prompt,
    prompt_from_file,
    require_positive,
    settings_from,
)
from pipeline.config import parse_shape
from pipeline.errors import FanoutError, Interrupted, Terminated, UsageError, disk_error_in, disk_words
from pipeline.files import output_path
from pipeline.records import BOOK_SCHEDULE, Endpoint, PlanSchedule

if TYPE_CHECKING:
    from pipeline.book.outlinefile import EditedOutline
    from pipeline.records.book import BookOutcome


def prompt_of(args: argparse.Namespace) -> str | None:
    """The prompt: the argument, or the text of --prompt-file (`-`: standard input); None when neither is given."""
    if args.prompt is not None and args.prompt_file is not None:
        raise UsageError("give the prompt or --prompt-file, not both")
    if args.prompt_file is not None:
        return prompt_from_file(args.prompt_file)
    return None if args.prompt is None else checked_prompt(args.prompt)


def book_spec(args: argparse.Namespace, edited: EditedOutline | None = None):
    """The BookSpec of a new book (None for --resume): the prompt (or the outline's request), the shape (the
    outline's counts, then --shape's for the levels it leaves out)."""
    from pipeline.records import BookSpec

    if args.resume is not None:
        if args.prompt or args.prompt_file or args.outline or args.sources:
            raise UsageError(
                "--resume takes the prompt, shape, outline and sources from the run folder; give none of them"
            )
        return None
    prompt = prompt_of(args) or (edited.asked() if edited is not None else None)
    if not prompt:
        if edited is not None:
            raise UsageError(f"--outline {args.outline}: it has no request and no title; give the prompt")
        raise UsageError("the prompt is empty")
    require_positive(args, "words")
    if args.max_tokens is not None:
        require_positive(args, "max_tokens")
    shape = parse_shape(args.shape)
    parts, chapters, sections = shape if edited is None else edited.shape(shape)
    return BookSpec(
        prompt=checked_prompt(prompt),
        parts=parts,
        chapters=chapters,
        sections=sections,
        words=args.words,
        max_tokens=args.max_tokens,
        section_template=read_section_template(args.section_template),
        sources=[str(path) for path in args.sources or []],
    )


def add_sources_flag(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--sources",
        type=Path,
        nargs="+",
        metavar="PATH",
        help="write from your own documents (files or folders: Markdown, text, HTML, PDF): each section is given "
        "the passages nearest it and cites them [n]; put it after the prompt",
    )


def read_section_template(path: Path | None) -> str | None:
    """--section-template FILE: its text, checked (templating.section_template); None: the shipped one."""
    from pipeline.templating import section_template

    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--section-template {path}: cannot read it ({exc})") from None
    return section_template(text, str(path))


@contextmanager
def said_when_stopped(folder: Path) -> Iterator[None]:
    """A run in `folder` stopped by a signal or a full disk ends in one line: what stopped it, the sections
    kept and the command that finishes the book (exit 130 or 143 for a signal, 1 for the disk)."""
    from pipeline.book.folder import stopped_note

    try:
        yield
    except KeyboardInterrupt as stop:
        terminated = isinstance(stop, Terminated)
        raise Interrupted(
            f"{'terminated' if terminated else 'interrupted'}; {stopped_note(folder)}",
            signal_number=signal.SIGTERM if terminated else signal.SIGINT,
        ) from None
    except (OSError, BaseExceptionGroup) as caught:
        if (disk := disk_error_in(caught)) is None:
            raise
        raise FanoutError(f"{disk_words(disk)}; {stopped_note(folder)}") from None


def cmd_book(args: argparse.Namespace) -> int:
    from rich.console import Console

    from pipeline.audit.quality import quality_table
    from pipeline.audit.report import audit_table, parse_fail_on
    from pipeline.backends.loop import fast_loop
    from pipeline.book.outlinefile import read_outline_file
    from pipeline.book.run import RunOptions, book
    from pipeline.book.stats import after_last_section, stats_table
    from pipeline.watch.terminal import BookProgress

    if args.endpoint != Endpoint.CHAT:
        raise UsageError(
            "fanout book sends chat completions only: its prompts carry roles and worked examples "
            "(--endpoint completions is for bench, sweep, identity, ask and probe)"
        )

    edited = read_outline_file(args.outline) if args.outline is not None and args.resume is None else None
    spec = book_spec(args, edited)
    parse_fail_on(args.fail_on)  # a bad gate is a usage error before any work
    settings = settings_from(args)
    folder = args.resume or args.out or output_path(spec.prompt)
    outline = None if edited is None else edited.outline
    progress = BookProgress(enabled=not args.quiet)

    async def job(listener=progress):
        schedule = PlanSchedule.BARRIER if args.barrier else PlanSchedule(args.schedule)
        options = RunOptions(repair=args.repair, schedule=schedule)
        out = None if args.resume else folder
        return await book(settings, spec, out, args.resume, listener, options=options, edited=outline)

    with fast_loop(), said_when_stopped(folder):
        if args.live:
            from pipeline.watch.listeners import Listeners
            from pipeline.watch.live import LiveFeed, serve_during

            feed = LiveFeed(args.live_host, args.live_port, allow_public=args.live_public)
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
    if result.stats.after_last_section:
        print(f"fanout: after the last section: {after_last_section(result.stats.after_last_section)}", file=sys.stderr)
    if result.repair is None and result.stats.complete:
        print_repairable(result)
    if not result.stats.complete:
        print(
            f"fanout: error: {result.stats.failed_sections} sections failed; "
            f"`fanout book --resume {result.folder}` asks them again",
            file=sys.stderr,
        )
        return 1
    return gate_exit(result.audit, args.fail_on)


def print_repairable(result: BookOutcome) -> None:
    """Say what the audit flags, rule by rule, and whether `fanout repair` would act on any of it, in a book written
    without --repair (repair stays opt-in: docs/commands.md)."""
    from pipeline.audit.report import flagged
    from pipeline.book.repair import plan_actions

    said = flagged(result.audit)
    if not said:
        return
    repairable = plan_actions(result.audit, {defect.section_id for defect in result.audit.defects})
    chapters = result.audit.meaning.off_request_ids if result.audit.meaning is not None else []
    then = f"; `fanout repair {result.folder}` fixes what it can" if repairable or chapters else ""
    print(f"fanout: the audit flags {', '.join(said)}{then}", file=sys.stderr)


def print_repair(summary) -> None:
    if summary is None:
        return
    changed = ", ".join(
        f"{rule} {summary.before[rule]} -> {summary.after.get(rule, 0)}"
        for rule in summary.before
        if summary.before[rule] or summary.after.get(rule)
    )
    print(
        f"fanout: repaired {sum(summary.actions.values())} sections {summary.actions} in {summary.seconds:.1f} s; "
        f"defects before -> after: {changed or 'none'}",
        file=sys.stderr,
    )
    for chapter_id, (old, new) in summary.replanned.items():
        print(f"fanout: {chapter_id} was off the request: {old!r} planned again as {new!r}", file=sys.stderr)


def gate_exit(report, fail_on: str | None) -> int:
    from pipeline.audit.report import gate

    failing = gate(report, fail_on)
    if failing:
        print(f"fanout: audit gate: {', '.join(failing)}", file=sys.stderr)
        return 3
    return 0


def parse_rule_list(text: str | None) -> list[str] | None:
    from pipeline.audit.report import parse_rule_list as split
    from pipeline.audit.rules import choose_rules

    rules = split(text)
    choose_rules(rules, None)  # unknown names are a usage error before any work
    return rules


def cmd_audit(args: argparse.Namespace) -> int:
    from rich.console import Console

    from pipeline.audit.book import load_book
    from pipeline.audit.quality import quality_table
    from pipeline.audit.report import audit, audit_path, audit_table, parse_fail_on
    from pipeline.config import load_settings
    from pipeline.files import write_atomic
    from pipeline.meaning.embed import open_embedder
    from pipeline.records import Author

    parse_fail_on(args.fail_on)
    settings = load_settings({"embeddings": args.embeddings, "judge": args.judge})
    rules, skipped = parse_rule_list(args.rule), parse_rule_list(args.skip_rule)
    book = load_book(args.source)
    if (asked := prompt_of(args)) is not None:
        book.prompt = asked
    if args.author is not None:
        book.author = Author(args.author)
    embedder = open_embedder(settings.embeddings)
    if args.sources:
        from pipeline.audit.citations import resolve_sources
        from pipeline.cli.sources import named_sources

        found, _ = named_sources(list(args.sources), embedder)
        missing = resolve_sources(book, found.index.passages)
        if missing:
            print(f"fanout: {missing} cited sources are not in the sources given: not judged", file=sys.stderr)
    report = audit(book, rules, skipped, embedder, settings.judge)
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

    from pipeline.audit.quality import quality_table
    from pipeline.audit.report import audit_table
    from pipeline.book.run import RunOptions, book
    from pipeline.watch.terminal import BookProgress

    async def repair_run() -> BookOutcome:
        progress = BookProgress(enabled=not args.quiet)
        options = RunOptions(repair=True, keep_stats=True)
        return await book(settings_from(args), None, None, args.run_dir, progress, options=options)

    with said_when_stopped(args.run_dir):
        result = anyio.run(repair_run)
    if not args.quiet:
        console = Console(stderr=True)
        console.print(audit_table(result.audit))
        console.print(quality_table(result.audit.quality))
    print_repair(result.repair)
    return 0


def cmd_typeset(args: argparse.Namespace) -> int:
    if args.bench:
        from pipeline.bench.studies.typeset import main as bench_main

        return bench_main([] if args.workers is None else ["--workers", str(args.workers)])
    from pipeline.typeset.book import typeset_book

    if args.source is None:
        raise UsageError("typeset needs a run folder or a Markdown file")
    if args.workers is not None and args.workers < 0:
        raise UsageError("--workers must be 0 or more")
    from pipeline.config import load_settings

    engine = load_settings({"pdf_engine": args.pdf_engine}, args.config).pdf_engine
    result, html_path, epub_path = typeset_book(args.source, args.out, args.workers, engine=engine)
    print(
        f"fanout: PDF:  {result.path} ({result.pages:,} pages, {result.seconds:.1f} s)\n"
        f"fanout: HTML: {html_path}\nfanout: EPUB: {epub_path}",
        file=sys.stderr,
    )
    return 0


def add_book_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    book = commands.add_parser("book", help="one prompt -> outline -> sections -> book.md and book.pdf")
    book.add_argument("prompt", nargs="?", help="what the book is about (not needed with --resume)")
    add_prompt_file_flag(book)
    book.add_argument(
        "--outline",
        type=Path,
        metavar="FILE",
        help="write the book from this outline (outline.md as `fanout plan` writes it, or an outline.json): its "
        "titles and points kept verbatim, the levels it leaves out planned under them; the shape is the file's",
    )
    book.add_argument("--shape", default="8x12x16", metavar="PxCxS", help="parts x chapters x sections (8x12x16)")
    book.add_argument("--words", type=int, default=250, help="words asked for per section (250)")
    add_sources_flag(book)
    add_endpoint_flag(book)
    book.add_argument(
        "--max-tokens",
        type=int,
        help="cap on each section's answer (default: the word budget "
        "x 1.4 tokens a word x 1.3 headroom; 455 for 250 words)",
    )
    book.add_argument(
        "--section-template",
        type=Path,
        metavar="FILE",
        help="your own section prompt ($book_title, $chapter_title, $style, $section_title, $section_point, "
        "$paragraphs, $words; default templates/section.md)",
    )
    book.add_argument("--out", type=Path, metavar="DIR", help="run folder (default outputs/<slug>-<time>)")
    book.add_argument("--resume", type=Path, metavar="DIR", help="finish an interrupted run; asks nothing again")
    book.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    book.add_argument("--json", action="store_true", help="print stats.json to stdout")
    book.add_argument("--repair", action="store_true", help="after writing, repair what the audit finds")
    book.add_argument(
        "--workers",
        dest="book_workers",
        type=int,
        metavar="N",
        help="client processes that read the answers' streams, each with its share of every cap (1)",
    )
    book.add_argument(
        "--ray",
        dest="book_ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="with --workers N: the workers as Ray actors on the cluster at ADDRESS (or RAY_ADDRESS), else on a "
        "local Ray instance (pip install 'fanout[ray]')",
    )
    book.add_argument(
        "--schedule",
        choices=[schedule.value for schedule in PlanSchedule],
        default=BOOK_SCHEDULE.value,
        help="when a planned section is written: streamed (the moment its line is planned, scored once its "
        "chapter is whole), pipelined (once its chapter is whole) or barrier (once the whole outline is planned) "
        "(default: %(default)s)",
    )
    book.add_argument(
        "--barrier",
        action="store_true",
        help="the same as --schedule barrier: plan level by level before writing anything",
    )
    book.add_argument(
        "--fail-on",
        metavar="GATES",
        help="exit 3 if the audit finds any of these rules or a quality "
        "figure crosses its threshold (comma list: RULE, NAME>VALUE, "
        "NAME<VALUE)",
    )
    add_live_flags(book)
    add_fleet_flags(book, planning=True)
    return book


def add_audit_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    audit = commands.add_parser("audit", help="find truncated, duplicate, empty, failed and looping sections")
    audit.add_argument("source", type=Path, metavar="RUN_DIR|BOOK.md")
    audit.add_argument(
        "--prompt",
        metavar="TEXT",
        help="the request the book answers: its sections are judged on its subject (a Markdown file has none of "
        "its own; a run folder's is its spec's)",
    )
    add_prompt_file_flag(audit)
    audit.add_argument(
        "--author",
        choices=["small", "capable"],
        help="who wrote the book: a small model or a capable author (a larger model, or a person); each rule judges "
        "as a defect only what it is shown to judge well in that kind of book, the rest is a figure (default: a run "
        "folder's sampling profile says; a Markdown file is a capable author's)",
    )
    audit.add_argument(
        "--sources",
        type=Path,
        nargs="+",
        metavar="PATH",
        help="the documents a Markdown book cites (its sections' Sources lists): each cited sentence is judged "
        "against the passage it cites",
    )
    audit.add_argument("--json", action="store_true", help="print audit.json to stdout")
    audit.add_argument("--rule", metavar="RULES", help="only these rules (comma list)")
    audit.add_argument("--skip-rule", metavar="RULES", help="all rules but these (comma list)")
    audit.add_argument(
        "--fail-on",
        metavar="GATES",
        help="exit 3 if any of these rules finds a defect or a quality "
        "figure crosses its threshold (comma list: RULE, "
        "NAME>VALUE, NAME<VALUE)",
    )
    add_embeddings_flag(audit)
    add_judge_flag(audit)
    return audit


def add_repair_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    repair = commands.add_parser("repair", help="re-ask truncated, duplicate, empty and failed sections of a run")
    repair.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    repair.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    add_fleet_flags(repair, planning=True)
    return repair


def add_typeset_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    typeset = commands.add_parser(
        "typeset", help="typeset a run folder or a Markdown book: book.pdf, book.html, book.epub"
    )
    typeset.add_argument("source", nargs="?", type=Path, metavar="RUN_DIR|BOOK.md")
    typeset.add_argument("--out", type=Path, metavar="DIR", help="where the editions go (default: beside it)")
    typeset.add_argument("--workers", type=int, help="weasyprint's render processes (default: one a core, at most 4)")
    add_pdf_engine_flag(typeset)
    typeset.add_argument("--config", type=Path, metavar="FILE.toml", help="settings (pdf_engine) from a TOML file")
    typeset.add_argument(
        "--bench",
        action="store_true",
        help="benchmark on a synthetic 8x12x16 book instead (python -m pipeline.bench.studies.typeset --help)",
    )
    return typeset
