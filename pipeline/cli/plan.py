"""`fanout plan`: flags -> BookSpec -> the plan stage alone (book/run.py's `plan`) -> the outline as an indented
tree on stdout (or outline.json with --json), a one-line summary of its audit and cost on stderr, and the
outline.md a person edits before `fanout book --outline`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from pipeline.cli.book import add_sources_flag, prompt_of, said_when_stopped
from pipeline.cli.flags import QUIET_HELP, add_fleet_flags, add_prompt_file_flag, settings_from
from pipeline.config import parse_shape
from pipeline.errors import UsageError
from pipeline.files import output_path

if TYPE_CHECKING:
    from pipeline.records.book import PlanOutcome


def add_plan_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    plan = commands.add_parser(
        "plan", help="plan a book's outline and stop: outline.md to read or edit, then `fanout book --outline`"
    )
    plan.add_argument("prompt", nargs="?", help="what the book is about")
    add_prompt_file_flag(plan)
    plan.add_argument("--shape", default="8x12x16", metavar="PxCxS", help="parts x chapters x sections (8x12x16)")
    add_sources_flag(plan)
    plan.add_argument("--out", type=Path, metavar="DIR", help="run folder (default outputs/<slug>-<time>)")
    plan.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    plan.add_argument("--json", action="store_true", help="print the outline (outline.json) to stdout, not the tree")
    add_fleet_flags(plan, planning=True)
    return plan


def cmd_plan(args: argparse.Namespace) -> int:
    from pipeline.backends.loop import fast_loop
    from pipeline.book.run import plan
    from pipeline.records import BookSpec
    from pipeline.watch.terminal import BookProgress

    prompt = prompt_of(args)
    if prompt is None:
        raise UsageError("the prompt is empty")
    parts, chapters, sections = parse_shape(args.shape)
    shape = {"parts": parts, "chapters": chapters, "sections": sections}
    sources = [str(path) for path in args.sources or []]
    spec = BookSpec.model_validate({"prompt": prompt, **shape, "sources": sources})
    settings = settings_from(args)
    folder = args.out or output_path(spec.prompt)
    with fast_loop(), said_when_stopped(folder):
        result = anyio.run(plan, settings, spec, folder, BookProgress(enabled=not args.quiet))
    print(result.outline.model_dump_json(indent=2) if args.json else outline_tree(result))
    print(plan_summary(result), file=sys.stderr)
    print(
        f"fanout: outline: {result.folder / 'outline.md'}; edit it, then "
        f"`fanout book --outline {result.folder / 'outline.md'}` writes the book",
        file=sys.stderr,
    )
    return 0


def outline_tree(result: PlanOutcome) -> str:
    """The outline as an indented contents list: numbers, titles and key points."""
    lines = [result.outline.title]
    for p, part in enumerate(result.outline.parts, 1):
        lines.append(tree_line(1, f"{p}", part.title, part.point))
        for c, chapter in enumerate(part.chapters, 1):
            lines.append(tree_line(2, f"{p}.{c}", chapter.title, chapter.point))
            lines += [
                tree_line(3, f"{p}.{c}.{s}", section.title, section.point)
                for s, section in enumerate(chapter.sections, 1)
            ]
    return "\n".join(lines)


def tree_line(depth: int, number: str, title: str, point: str) -> str:
    return f"{'  ' * depth}{number} {title}" + (f" — {point}" if point else "")


def plan_summary(result: PlanOutcome) -> str:
    """One line: the outline-level audit (TITLE_RULES' counts and the outline's figures) and the planning cost."""
    quality, counts = result.audit.quality, result.audit.counts
    judged = {
        "similar titles": quality.similar_titles,
        "off the request": quality.off_request,
        "vague points": quality.vague_points,
        "placeholders": quality.placeholder_titles,
        "duplicate titles": counts.get("duplicate", 0) + counts.get("near_duplicate", 0),
        "coverage": quality.coverage,
    }
    figures = ", ".join(f"{name} {value}" for name, value in judged.items() if value is not None)
    return f"fanout: planned in {result.seconds} s ({result.requests} planning requests); {figures}"
