"""The run's clock: a watcher of a book run whose times, with the fleet's counters, fill stats.json.

It starts with the run and hears its events (pipeline/watch/events.py): the fleet opened (the CPU meter's first
reading, pipeline/cpu.py), writing started (the job's first request: planning and writing start together),
each section sent to the pool and each landed, and each file that finishes the book written. Times are client
wall-clock (time.monotonic)."""

from __future__ import annotations

import time

from pipeline.backends.fleet import Fleet
from pipeline.book.plan.rounds import PlanStats
from pipeline.book.stats import JobTally, backend_lines, book_stats
from pipeline.cpu import CpuMeter, CpuSnapshot, cpu_use
from pipeline.records import SectionResult
from pipeline.records.book import BookStats
from pipeline.watch.events import (
    BookEvent,
    FileFinished,
    FleetOpened,
    SectionStarted,
    SectionWritten,
    WritingStarted,
)
from pipeline.watch.listeners import BookListener


class RunClock(BookListener):
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.requests_started: float | None = None
        self.first_sent: float | None = None
        self.last_sent: float | None = None  # the last section handed to the pool: the tail drains from here
        self.last_done: float | None = None
        self.meter: CpuMeter | None = None
        self.cpu_before: CpuSnapshot | None = None
        self.finished: dict[str, float] = {}  # a file that finishes the book -> when it was written

    def hear(self, event: BookEvent) -> None:
        match event:
            case SectionStarted():
                self.first_sent = self.first_sent or time.monotonic()
                self.last_sent = time.monotonic()
            case SectionWritten():
                self.last_done = time.monotonic()
            case WritingStarted():
                self.requests_started = time.monotonic()
            case FileFinished(name=name):
                self.finished[name] = time.monotonic()
            case FleetOpened(fleet=fleet):
                self.meter = CpuMeter({backend.name: backend.base_url for backend in fleet.backends})
                self.cpu_before = self.meter.snapshot()

    @property
    def job_seconds(self) -> float:
        return time.monotonic() - self.started

    @property
    def write_seconds(self) -> float:
        """The first section sent to the last one landed."""
        return 0.0 if self.first_sent is None else (self.last_done or self.first_sent) - self.first_sent

    def tally(
        self,
        fleet: Fleet,
        written: dict[str, SectionResult],
        *,
        asked_later: int,
        retry_tail_s: float | None,
        hedges: tuple[int, int] = (0, 0),
    ) -> JobTally:
        """What the fleet did this run, taken before it closes: `written` this run's sections, `asked_later` the
        section and repair requests asked again later, `retry_tail_s` the writer's (SectionWriter)."""
        started = self.requests_started
        assert started is not None and self.meter is not None, "the run opened the fleet and started writing"
        assert self.cpu_before is not None
        return JobTally(
            written=written,
            write_seconds=self.write_seconds,
            generate_seconds=(self.last_done or started) - started,
            attempts=fleet.pool.stats.attempts,
            backends=backend_lines(
                fleet.pool.snapshot(),
                {b.name: b.base_url for b in fleet.backends},
                {b.name: b.model for b in fleet.backends},
                fleet.engines,
            ),
            asked_later=asked_later,
            engine_restarts=fleet.engine_restarts,
            cpu=cpu_use(self.cpu_before, self.meter.snapshot()),
            first_section_s=None if self.first_sent is None else self.first_sent - started,
            drain_s=None if self.last_sent is None else (self.last_done or self.last_sent) - self.last_sent,
            retry_tail_s=retry_tail_s,
            hedges=hedges[0],
            hedges_kept=hedges[1],
        )

    def stats(
        self, plan: PlanStats, tally: JobTally, journal: dict[str, SectionResult], *, section_total: int, resumed: bool
    ) -> BookStats:
        """stats.json's figures so far (the audit's quality and the typesetting's come after)."""
        stats = book_stats(
            plan, tally, journal, section_total=section_total, job_seconds=self.job_seconds, resumed=resumed
        )
        generate_seconds = tally.generate_seconds
        stats.generate_seconds = round(generate_seconds, 2)
        stats.generate_tok_s = round(stats.tokens_written / generate_seconds, 1) if generate_seconds > 0 else 0.0
        return stats

    def finished_stats(self, stats: BookStats, *, pdf: str) -> BookStats:
        """The stats with the book's finish: each finishing file's seconds after the last section landed, and the
        job from its first request to `pdf` (the file the user waits for), with its rate."""
        after = {} if self.last_done is None else {n: round(t - self.last_done, 2) for n, t in self.finished.items()}
        start, end = self.requests_started, self.finished.get(pdf)
        seconds = None if start is None or end is None else end - start
        return stats.model_copy(
            update={
                "after_last_section": after,
                "finished_seconds": None if seconds is None else round(seconds, 2),
                "finished_tok_s": round(stats.tokens_written / seconds, 1) if seconds else None,
            }
        )
