"""The terminal display of a book run, a BookListener drawing live progress on stderr with rich as it hears
the run's events (events.py).

One bar per planning level, the writing bar with tokens and rate (server usage counts over the client
clock), and each backend's requests in flight against its cap; `BookProgress(enabled=False)` (--quiet)
shows nothing."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from pipeline.backends.pool import BackendPool
from pipeline.records import BookSpec, SectionResult
from pipeline.watch.events import (
    BookEvent,
    LevelPlanned,
    PlanningStarted,
    SectionWritten,
    TypesettingStarted,
    WritingStarted,
    levels_planned,
)
from pipeline.watch.listeners import BookListener


class BookProgress(BookListener):
    def __init__(self, *, enabled: bool = True):
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

    def hear(self, event: BookEvent) -> None:
        match event:
            case SectionWritten(result=result):
                self.written(result)
            case LevelPlanned(level=level):
                self.planned(level)
            case PlanningStarted(spec=spec):
                self.planning(spec)
            case WritingStarted(total=total, done=done, pool=pool):
                self.writing(total, done, pool)
            case TypesettingStarted():
                self.typesetting()

    def planning(self, spec: BookSpec) -> None:
        for level, total in levels_planned(spec).items():
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
