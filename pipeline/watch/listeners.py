"""What a book run and a bench run tell their watchers: the listener interfaces, and the fan-out to several.

BookListener is what the book run calls as planning levels and sections progress; BenchListener what the
bench's load calls as levels start and requests stream. Each method does nothing unless a watcher overrides
it. Listeners fans one book run out to several watchers (the terminal display and the live page, both in
this folder). This module names only records and backends, so book and bench both sit above it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.backends.pool import BackendPool
from pipeline.records import BookSpec, Outline, SectionResult

if TYPE_CHECKING:
    from pipeline.backends.fleet import Fleet
    from pipeline.records.bench import BenchRecord, LevelResult, RatePoint, RequestSample
    from pipeline.records.book import BookOutcome


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
    def rate_done(self, label: str, point: RatePoint) -> None: ...
    def request_started(self, backend: str, number: int) -> None: ...
    def section_delta(self, section_id: str, text: str) -> None: ...  # section_id: request_id(number)
    def request_done(self, sample: RequestSample) -> None: ...
    def level_done(self, label: str, result: LevelResult) -> None: ...
    def bench_finished(self, record: BenchRecord) -> None: ...


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
