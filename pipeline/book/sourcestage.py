"""The sources stage: the spec's sources (the user's documents, `--sources`) -> their index and what the planner sees
of them (BookSources), or None for a book without sources.

The files are read, cut into passages and indexed by pipeline/sources/collect.py, again only when one of them changed
(the index is reused from the cache otherwise); each file skipped is said in one line, and what was read in one more.
No readable source at all is a UsageError. A run opens its sources before its run folder is made, so a book whose
sources cannot be read leaves no folder behind; the plan stage (pipeline/sources/places.py's PlanSources) and the
write stage (pipeline/book/cite.py's Citing) read what this stage hands on through RunContext.sources.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from pipeline.meaning.embed import Embedder
from pipeline.records import BookSpec
from pipeline.records.sources import SourceReport
from pipeline.sources.collect import open_sources, skipped_lines
from pipeline.sources.index import SourceIndex
from pipeline.sources.places import PlanSources

log = logging.getLogger("fanout")


@dataclass(frozen=True)
class BookSources:
    """The user's documents for one book: their index, what was read and skipped, and what the planner sees of
    them."""

    index: SourceIndex
    report: SourceReport
    planning: PlanSources


def open_book_sources(spec: BookSpec, embedder: Embedder) -> BookSources | None:
    """The spec's sources indexed (read again only when their files changed), each file skipped said in one line;
    None without sources. No readable source at all is a UsageError."""
    if not spec.sources:
        return None
    found = open_sources([Path(path) for path in spec.sources], embedder)
    for line in skipped_lines(found.report.skipped):
        log.warning("%s", line)
    how = "index reused" if found.report.reused else "indexed"
    log.info("sources: %d files, %d passages (%s)", len(found.report.read), found.report.passages, how)
    return BookSources(found.index, found.report, PlanSources(found.index, spec.prompt))
