"""What a book run tells its watchers, one frozen record an event.

The run's stages emit them (pipeline/book/: the run, its plan and write stages, the writer, the typesetting);
every watcher hears each in turn through BookListener.hear (listeners.py): the terminal display (terminal.py), the
live page (live.py) and the run's clock, whose times fill stats.json (pipeline/book/timing.py); levels_planned
says how many LevelPlanned events each level of a book sends. This module names only records and backends, so the
book sits above it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.backends.fleet import Fleet
    from pipeline.backends.pool import BackendPool
    from pipeline.records import BookSpec, Outline, SectionResult
    from pipeline.records.book import BookOutcome


@dataclass(frozen=True, slots=True)
class FleetOpened:
    """The fleet answered: its backends are open and their engines known."""

    fleet: Fleet


@dataclass(frozen=True, slots=True)
class PlanningStarted:
    """Planning asks its first question (a complete outline.json plans nothing and says nothing)."""

    spec: BookSpec


@dataclass(frozen=True, slots=True)
class LevelPlanned:
    """One node's children planned: `level` is "parts" (the book's), "chapters" (a part's) or "sections"."""

    level: str


def levels_planned(spec: BookSpec) -> dict[str, int]:
    """How many LevelPlanned events each level sends in planning `spec`'s book: one a node whose children it plans
    (the book's parts, each part's chapters, each chapter's sections)."""
    return {"parts": 1, "chapters": spec.parts, "sections": spec.parts * spec.chapters}


@dataclass(frozen=True, slots=True)
class OutlineReady:
    """The outline as saved while planning goes on, and once more after the last section is written."""

    outline: Outline


@dataclass(frozen=True, slots=True)
class WritingStarted:
    """The write stage opened: `total` sections in the book, `done` of them already in the journal."""

    total: int
    done: int
    pool: BackendPool


@dataclass(frozen=True, slots=True)
class SectionStarted:
    """A section handed to the pool."""

    section_id: str
    title: str


@dataclass(frozen=True, slots=True)
class SectionRestarted:
    """A section's streamed text starts again: an attempt cut mid-stream is asked again, or another candidate
    than the streamed one was kept."""

    section_id: str


@dataclass(frozen=True, slots=True)
class SectionDelta:
    """A piece of a section's streamed text; sent only to watchers that want it (BookListener.wants_deltas)."""

    section_id: str
    text: str


@dataclass(frozen=True, slots=True)
class SectionWritten:
    """A section landed in the journal (failed ones too: `result.error` is set)."""

    result: SectionResult


@dataclass(frozen=True, slots=True)
class TypesettingStarted:
    """The PDF, HTML and EPUB are being made."""


@dataclass(frozen=True, slots=True)
class FileFinished:
    """One of the files that finish a book is written: book.md, audit.json or book.pdf."""

    name: str


@dataclass(frozen=True, slots=True)
class BookFinished:
    """stats.json is written (unless a repair keeps the earlier one): the run is over."""

    outcome: BookOutcome


BookEvent = (
    FleetOpened
    | PlanningStarted
    | LevelPlanned
    | OutlineReady
    | WritingStarted
    | SectionStarted
    | SectionRestarted
    | SectionDelta
    | SectionWritten
    | TypesettingStarted
    | FileFinished
    | BookFinished
)
