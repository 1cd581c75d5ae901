"""The run's clock (pipeline/book/timing.py) takes stats.json's times from the events it hears, and Listeners
(pipeline/watch/listeners.py) hands every event to each watcher and wants the streamed text where any watcher does."""

from __future__ import annotations

from types import SimpleNamespace

import pipeline.book.timing
from pipeline.book.timing import RunClock
from pipeline.records import SectionResult
from pipeline.watch.events import (
    BookEvent,
    FileFinished,
    FleetOpened,
    SectionDelta,
    SectionStarted,
    SectionWritten,
    WritingStarted,
)
from pipeline.watch.listeners import BookListener, Listeners


class SetClock:
    """time.monotonic as the test sets it."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


def idle_fleet() -> SimpleNamespace:
    """A fleet with no backends and nothing attempted: what RunClock reads of one."""
    pool = SimpleNamespace(stats=SimpleNamespace(attempts=[]), snapshot=lambda: [])
    return SimpleNamespace(pool=pool, backends=[], engines={}, engine_restarts=0)


def landed(section_id: str) -> SectionWritten:
    return SectionWritten(SectionResult(id=section_id, title=section_id, text="Words.", completion_tokens=3))


def clock_that_heard(monkeypatch, fleet: SimpleNamespace, *, sections: int, events: list) -> tuple[RunClock, SetClock]:
    """A clock that heard the fleet open at 0.5 s, writing start at 1.0 s, then `events` (time, event) in turn."""
    clock_time = SetClock()
    monkeypatch.setattr(pipeline.book.timing, "time", clock_time)
    clock = RunClock()
    for at, event in [(0.5, FleetOpened(fleet)), (1.0, WritingStarted(sections, 0, fleet.pool)), *events]:
        clock_time.now = at
        clock.hear(event)
    return clock, clock_time


def test_the_clock_times_the_job_from_the_events_it_hears(monkeypatch):
    fleet = idle_fleet()
    events = [(2.0, SectionStarted("s1", "One")), (3.0, SectionStarted("s2", "Two")), (5.0, landed("s1"))]
    clock, clock_time = clock_that_heard(monkeypatch, fleet, sections=2, events=[*events, (7.0, landed("s2"))])
    clock_time.now = 9.0
    tally = clock.tally(fleet, {}, asked_later=1, retry_tail_s=0.5)
    assert (tally.write_seconds, tally.generate_seconds) == (5.0, 6.0), "first sent to last landed; first request on"
    assert (tally.first_section_s, tally.drain_s) == (1.0, 4.0), "first request to first sent; last sent to last"
    assert (tally.asked_later, tally.retry_tail_s, tally.cpu is not None) == (1, 0.5, True)
    assert clock.job_seconds == 9.0


def test_the_clock_says_when_each_file_that_finishes_the_book_came_after_the_last_section(monkeypatch):
    events = [(2.0, SectionStarted("s1", "One")), (5.0, landed("s1")), (5.5, FileFinished("book.md"))]
    events += [(7.0, FileFinished("audit.json")), (8.0, FileFinished("book.pdf"))]
    clock, _ = clock_that_heard(monkeypatch, idle_fleet(), sections=1, events=events)
    stats = SimpleNamespace(tokens_written=700, model_copy=lambda update: update)
    finished = clock.finished_stats(stats, pdf="book.pdf")  # type: ignore[arg-type]
    assert finished["after_last_section"] == {"book.md": 0.5, "audit.json": 2.0, "book.pdf": 3.0}
    assert (finished["finished_seconds"], finished["finished_tok_s"]) == (7.0, 100.0), "first request to book.pdf"


def test_a_clock_that_heard_no_section_leaves_the_section_times_empty(monkeypatch):
    clock_time = SetClock()
    monkeypatch.setattr(pipeline.book.timing, "time", clock_time)
    clock = RunClock()
    fleet = idle_fleet()
    clock.hear(FleetOpened(fleet))
    clock_time.now = 2.0
    clock.hear(WritingStarted(2, 2, fleet.pool))  # a resume of a finished book: nothing is asked
    tally = clock.tally(fleet, {}, asked_later=0, retry_tail_s=None)
    assert (tally.write_seconds, tally.generate_seconds, tally.first_section_s, tally.drain_s) == (0.0, 0.0, None, None)


class Heard(BookListener):
    def __init__(self, *, wants_deltas: bool) -> None:
        self.wants_deltas = wants_deltas
        self.events: list[BookEvent] = []

    def hear(self, event: BookEvent) -> None:
        self.events.append(event)


def test_listeners_hand_every_event_to_each_watcher_in_turn():
    quiet, page = Heard(wants_deltas=False), Heard(wants_deltas=True)
    assert not Listeners(quiet).wants_deltas and Listeners(quiet, page).wants_deltas
    events = [SectionStarted("s1", "One"), SectionDelta("s1", "Wo"), landed("s1")]
    both = Listeners(quiet, page)
    for event in events:
        both.hear(event)
    assert quiet.events == page.events == events
