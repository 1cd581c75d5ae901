"""What a book run tells its watchers, and the terminal watcher.

BookListener is the protocol: the run calls it as planning levels and sections progress; each method does
nothing unless a watcher overrides it. BookProgress draws live progress on stderr (rich): one bar per
planning level, the writing bar with tokens and rate (server usage counts over the client clock), and
each backend's requests in flight against its cap; `BookProgress(enabled=False)` (--quiet) shows nothing.
Listeners fans one run out to several watchers (the terminal and the live page)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from pipeline.backends.pool import BackendPool
from pipeline.records import BookSpec, Outline, SectionResult

if TYPE_CHECKING:
    from pipeline.backends.fleet import Fleet
    from pipeline.bench.records import BenchRecord, LevelResult, RatePoint, RequestSample
    from pipeline.book.run import BookOutcome


class BookListener:
    wants_deltas = False  # only then does the writer pass every streamed piece of text on

    def __enter__(self) -> BookListener:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def fleet_opened(self, fleet: Fleet) -> None: ...
    def planning(self, spec: BookSpec) -> None: ...
    def planned(self, level: str) -> None: ...
    def outline_ready(self, outline: Outline) -> None: ...
    def writing(self, total: int, done: int, pool: BackendPool) -> None: ...
    def section_started(self, section_id: str, title: str) -> None: ...
    def section_restarted(self, section_id: str) -> None: ...  # an attempt cut mid-stream is asked again
    def section_delta(self, section_id: str, text: str) -> None: ...
    def written(self, result: SectionResult) -> None: ...
    def typesetting(self) -> None: ...
    def finished(self, outcome: BookOutcome) -> None: ...


class BenchListener:
    """What a bench run tells its watcher (the live page): levels, and every request as it streams."""

    wants_deltas = False

    def fleet_opened(self, fleet: Fleet) -> None: ...
    def level_started(self, label: str, streams: int, backends: list[str], levels: int) -> None: ...
    def rate_started(self, label: str, rate: float, slots: dict[str, int], levels: int) -> None: ...
    def rate_done(self, label: str, point: RatePoint) -> None: ...  # a bench.records.RatePoint
    def request_started(self, backend: str, number: int) -> None: ...
    def section_delta(self, section_id: str, text: str) -> None: ...  # section_id: request_id(number)
    def request_done(self, sample: RequestSample) -> None: ...  # a bench.records.RequestSample
    def level_done(self, label: str, result: LevelResult) -> None: ...  # a bench.records.LevelResult
    def bench_finished(self, record: BenchRecord) -> None: ...  # the BenchRecord


def request_id(number: int) -> str:
    return f"r{number}"


class Listeners(BookListener):
    """Every call goes to each watcher in turn."""

    def __init__(self, *watchers: BookListener):
        self.watchers = watchers
        self.wants_deltas = any(w.wants_deltas for w in watchers)

    def __enter__(self) -> Listeners:
        for watcher in self.watchers:
            watcher.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        for watcher in self.watchers:
            watcher.__exit__(*exc_info)

    def fleet_opened(self, fleet: Fleet) -> None:
        for watcher in self.watchers:
            watcher.fleet_opened(fleet)

    def planning(self, spec: BookSpec) -> None:
        for watcher in self.watchers:
            watcher.planning(spec)

    def planned(self, level: str) -> None:
        for watcher in self.watchers:
            watcher.planned(level)

    def outline_ready(self, outline: Outline) -> None:
        for watcher in self.watchers:
            watcher.outline_ready(outline)

    def writing(self, total: int, done: int, pool: BackendPool) -> None:
        for watcher in self.watchers:
            watcher.writing(total, done, pool)

    def section_started(self, section_id: str, title: str) -> None:
        for watcher in self.watchers:
            watcher.section_started(section_id, title)

    def section_restarted(self, section_id: str) -> None:
        for watcher in self.watchers:
            watcher.section_restarted(section_id)

    def section_delta(self, section_id: str, text: str) -> None:
        for watcher in self.watchers:
            watcher.section_delta(section_id, text)

    def written(self, result: SectionResult) -> None:
        for watcher in self.watchers:
            watcher.written(result)

    def typesetting(self) -> None:
        for watcher in self.watchers:
            watcher.typesetting()

    def finished(self, outcome: BookOutcome) -> None:
        for watcher in self.watchers:
            watcher.finished(outcome)


class BookProgress(BookListener):
    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[note]}"),
            console=Console(stderr=True),
            disable=not enabled,
            refresh_per_second=4,
        )
        self.tasks: dict[str, TaskID] = {}
        self.pool: BackendPool | None = None
        self.tokens = 0
        self.write_started = 0.0
        self.started = False

    def __enter__(self) -> BookProgress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.started:
            self.bars.stop()

    def _add(self, description: str, total: int | None, note: str, completed: int = 0) -> TaskID:
        """Bars appear with the first task, so a run that fails at start prints only its error line."""
        if not self.started:
            self.bars.start()
            self.started = True
        return self.bars.add_task(description, total=total, completed=completed, note=note)

    def planning(self, spec: BookSpec) -> None:
        totals = {"parts": 1, "chapters": spec.parts, "sections": spec.parts * spec.chapters}
        for level, total in totals.items():
            self.tasks[level] = self._add(f"plan {level:<8}", total, "")

    def planned(self, level: str) -> None:
        self.bars.advance(self.tasks[level])

    def writing(self, total: int, done: int, pool: BackendPool) -> None:
        self.pool = pool
        self.write_started = time.monotonic()
        self.tasks["write"] = self._add("write sections", total, "", completed=done)
        for state in pool.states:
            self.tasks[state.backend.name] = self._add(f"  {state.backend.name:<12}", state.cap, "in flight / cap")

    def written(self, result: SectionResult) -> None:
        self.tokens += result.completion_tokens or 0
        elapsed = max(time.monotonic() - self.write_started, 1e-6)
        note = f"{self.tokens:,} tokens, {self.tokens / elapsed:,.1f} tok/s (usage / client clock)"
        self.bars.update(self.tasks["write"], advance=1, note=note)
        for state in self.pool.states if self.pool is not None else []:
            self.bars.update(
                self.tasks[state.backend.name],
                completed=state.in_flight,
                note=f"in flight / cap; {state.succeeded} done, {state.failed} failed",
            )

    def typesetting(self) -> None:
        self.tasks["typeset"] = self._add("typeset PDF", None, "")
