"""What a book run and a bench run tell their watchers: the listener interfaces, and the fan-out to several.

BookListener hears the events a book run emits (events.py) as planning levels and sections progress;
BenchListener is what the bench's load calls as levels start and requests stream. Each does nothing unless a
watcher overrides it. Listeners fans one book run out to several watchers (the terminal display and the live
page, both in this folder, and the run's clock, pipeline/book/timing.py). This module names only records,
backends and events, so book and bench both sit above it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.backends.fleet import Fleet
    from pipeline.records.bench import BenchRecord, LevelResult, RatePoint, RequestSample
    from pipeline.watch.events import BookEvent


class BookListener:
    """A watcher of a book run: it hears every event the run emits (events.py); this one ignores them all."""

    wants_deltas = False  # only then does the writer pass every streamed piece of text on

    def __enter__(self) -> BookListener:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def hear(self, event: BookEvent) -> None: ...


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
    """Every event goes to each watcher in turn."""

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

    def hear(self, event: BookEvent) -> None:
        for watcher in self.watchers:
            watcher.hear(event)
