"""`fanout sources PATH...`: the documents read and indexed alone, and what was read (files, passages, what was
skipped and why); with `--query`, the passages a section of that title would be given."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.cli.flags import add_embeddings_flag

if TYPE_CHECKING:
    from pipeline.meaning.embed import Embedder
    from pipeline.sources.collect import Sources

SNIPPET_WORDS = 30


def add_sources_command(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    sources = commands.add_parser(
        "sources",
        help="read and index documents for a book (Markdown, text, HTML, PDF): what was read, what was skipped",
    )
    sources.add_argument("paths", type=Path, nargs="+", metavar="PATH", help="files or folders")
    sources.add_argument("--query", metavar="TITLE", help="show the passages a section of this title is given")
    sources.add_argument("--under", metavar="TITLE", default="", help="with --query: the chapter it is under")
    sources.add_argument("--top", type=int, default=5, metavar="K", help="with --query: how many passages (5)")
    sources.add_argument("--json", action="store_true", help="print what was read (and found) as JSON")
    add_embeddings_flag(sources)
    return sources


def named_sources(paths: list[Path], embedder: Embedder) -> tuple[Sources, float]:
    """The sources named on a command line, indexed (reused when saved before), and the seconds it took: the one way
    the commands open them (`fanout sources`, `fanout audit --sources`; a book run's is book/sourcestage.py)."""
    from pipeline.sources.collect import open_sources

    start = time.perf_counter()
    found = open_sources(paths, embedder)
    return found, time.perf_counter() - start


def cmd_sources(args: argparse.Namespace) -> int:
    from pipeline.config import load_settings
    from pipeline.meaning.embed import open_embedder
    from pipeline.records.sources import Query
    from pipeline.sources.collect import skipped_lines

    settings = load_settings({"embeddings": args.embeddings})
    found, seconds = named_sources(list(args.paths), open_embedder(settings.embeddings))
    hits = found.index.search(Query(args.query, args.under), args.top) if args.query else []
    if args.json:
        print(json.dumps(_as_json(found.report, hits), indent=2))
        return 0
    report = found.report
    for line in skipped_lines(report.skipped):
        print(f"fanout: {line}", file=sys.stderr)
    for file in report.read:
        pages = f", {file.pages} pages" if file.pages else ""
        print(f"{file.file}: {file.kind}, {file.passages} passages{pages}")
    how = "index reused" if report.reused else f"indexed in {seconds:.1f} s"
    print(f"{len(report.read)} files, {report.passages} passages, {len(report.skipped)} skipped; {how}")
    for rank, hit in enumerate(hits, 1):
        words = hit.passage.text.split()
        snippet = " ".join(words[:SNIPPET_WORDS]) + (" ..." if len(words) > SNIPPET_WORDS else "")
        print(f"[{rank}] {hit.passage.place()} ({hit.score:.2f})\n    {snippet}")
    return 0


def _as_json(report, hits: list) -> dict:
    from dataclasses import asdict

    return {
        "read": [asdict(file) for file in report.read],
        "skipped": [asdict(item) for item in report.skipped],
        "passages": report.passages,
        "reused": report.reused,
        "hits": [{"place": hit.passage.place(), "score": hit.score, **asdict(hit.passage)} for hit in hits],
    }
