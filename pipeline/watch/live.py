"""The live page: every stream of a book merged into one scrolling feed, with honest rates.

A BookListener hearing a book run's events (events.py), and a BenchListener, that serves templates/live.html and a
Server-Sent Events stream on loopback. Four times a second it sends what changed: planning levels (or the bench
ladder's levels), sections (or bench requests) started and their text so far, those done, each backend's load,
tokens and the live rate. The rate comes from the engine's own generated-token counter where the engine counts every
step (vLLM), otherwise from the client's token arrival times in this process — never from the browser's arrival
times (a browser's clock batches SSE deliveries: rates from it read about 9% high); the page shows which. Model text
travels as JSON and is put on the page as text, never as HTML. The page works offline: no external assets. After the
run the final stats stay on the page until the command exits.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import sys
import time
from collections import deque
from typing import Any

from aiohttp import web

from pipeline.backends.fleet import Fleet, generated_tokens
from pipeline.errors import UsageError
from pipeline.records import SectionResult
from pipeline.templating import template_path
from pipeline.watch.events import (
    BookEvent,
    BookFinished,
    FleetOpened,
    LevelPlanned,
    OutlineReady,
    PlanningStarted,
    SectionDelta,
    SectionRestarted,
    SectionStarted,
    SectionWritten,
    WritingStarted,
    levels_planned,
)
from pipeline.watch.listeners import BenchListener, BookListener, request_id

log = logging.getLogger("fanout")
TICK_S = 0.25
RATE_WINDOW_S = 5.0
TEXT_CAP = 6000  # characters of a section kept for the page; the book itself is not affected


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, *, allow_public: bool) -> None:
    if not is_loopback(host) and not allow_public:
        raise UsageError(
            f"setting 'live_host' {host} is not a loopback address; add setting 'live_public' to serve it anyway"
        )


class LiveFeed(BookListener, BenchListener):
    """The page's state, fed by a book run (BookListener) or a bench run (BenchListener)."""

    wants_deltas = True

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, allow_public: bool = False):
        check_bind(host, allow_public=allow_public)
        self.host, self.port = host, port
        self.state: dict[str, Any] = {
            "title": "",
            "unit": "sections",
            "levels": {},
            "total": 0,
            "done": 0,
            "tokens": 0,
            "backends": [],
            "rate": None,
            "rate_source": "",
            "final": None,
        }
        self.sections: dict[str, dict[str, Any]] = {}
        self.changed: set[str] = set()
        self.arrivals: deque[float] = deque()
        self.fleet: Fleet | None = None
        self.pool = None
        self.in_flight: dict[str, dict[str, Any]] = {}  # bench: per backend, as the pool's snapshot has it
        self.ladder: list[list[str]] = []
        self.clients: list[asyncio.Queue] = []
        self.runner: web.AppRunner | None = None
        self.tasks: list[asyncio.Task] = []
        self.url = ""

    async def start(self) -> str:
        app = web.Application()
        app.router.add_get("/", self._page)
        app.router.add_get("/events", self._events)
        self.runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, self.host, self.port)
        await site.start()
        self.port = self.runner.addresses[0][1]  # the bound port, where port 0 asked for any
        self.url = f"http://{self.host}:{self.port}/"
        self.tasks = [asyncio.create_task(self._tick_forever())]
        return self.url

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for queue in self.clients:
            queue.put_nowait(None)
        if self.runner is not None:
            await self.runner.cleanup()

    # ------------------------------------------------------------ listener

    def hear(self, event: BookEvent) -> None:
        match event:
            case SectionDelta(section_id=section_id, text=text):
                self.section_delta(section_id, text)
            case SectionStarted(section_id=section_id, title=title):
                self.section_started(section_id, title)
            case SectionWritten(result=result):
                self.written(result)
            case SectionRestarted(section_id=section_id):
                self.section_restarted(section_id)
            case _:
                self._hear_run(event)

    def _hear_run(self, event: BookEvent) -> None:
        """The events of the run as a whole, beside the sections' (hear)."""
        match event:
            case LevelPlanned(level=level):
                self.planned(level)
            case OutlineReady(outline=outline):
                self.outline_ready(outline)
            case WritingStarted(total=total, done=done, pool=pool):
                self.writing(total, done, pool)
            case PlanningStarted(spec=spec):
                self.planning(spec)
            case FleetOpened(fleet=fleet):
                self.fleet_opened(fleet)
            case BookFinished(outcome=outcome):
                self.finished(outcome)

    def fleet_opened(self, fleet) -> None:
        self.fleet = fleet
        self.tasks.append(asyncio.create_task(self._count_server_tokens()))

    def planning(self, spec) -> None:
        self.state["levels"] = {f"plan {level}": [0, total] for level, total in levels_planned(spec).items()}

    def planned(self, level: str) -> None:
        self.state["levels"][f"plan {level}"][0] += 1

    def outline_ready(self, outline) -> None:
        self.state["title"] = outline.title

    def writing(self, total: int, done: int, pool) -> None:
        self.state["total"], self.state["done"] = total, done
        self.pool = pool

    def section_started(self, section_id: str, title: str) -> None:
        self.sections[section_id] = {"id": section_id, "title": title, "text": "", "state": "writing", "sent": 0}
        self.changed.add(section_id)

    def section_restarted(self, section_id: str) -> None:
        section = self.sections[section_id]
        section["text"], section["sent"], section["reset"] = "", 0, True
        self.changed.add(section_id)

    def section_delta(self, section_id: str, text: str) -> None:
        self.arrivals.append(time.monotonic())
        section = self.sections[section_id]
        if len(section["text"]) < TEXT_CAP:
            section["text"] += text
        self.changed.add(section_id)

    def written(self, result: SectionResult) -> None:
        section = self.sections.setdefault(result.id, {"id": result.id, "title": result.title, "text": "", "sent": 0})
        section["state"] = "failed" if not result.ok else result.finish_reason or "done"
        self.state["done"] += 1
        self.state["tokens"] += result.completion_tokens or 0
        self.changed.add(result.id)

    def finished(self, outcome) -> None:
        self.state["final"] = {"head": ["measure", "value"], "rows": book_rows(outcome.stats)}

    # ------------------------------------------------------------ bench listener

    def level_started(self, label: str, streams: int, backends: list[str], levels: int) -> None:
        self.state["title"] = f"fanout bench: {streams} streams a backend" + (f" ({label})" if label != "bench" else "")
        self.state["unit"] = "requests"
        done, _ = self.state["levels"].get(f"ladder {label}", [0, levels])
        self.state["levels"][f"ladder {label}"] = [done, levels]
        self.in_flight = {name: {"name": name, "cap": streams, "in_flight": 0} for name in backends}
        self.state["backends"] = list(self.in_flight.values())

    def rate_started(self, label: str, rate: float, slots: dict[str, int], levels: int) -> None:
        self.state["title"] = f"fanout bench: open loop, {rate:g} requests a second" + (
            f" ({label})" if label != "bench" else ""
        )
        self.state["unit"] = "requests"
        done, _ = self.state["levels"].get(f"open loop {label}", [0, levels])
        self.state["levels"][f"open loop {label}"] = [done, levels]
        self.in_flight = {name: {"name": name, "cap": count, "in_flight": 0} for name, count in slots.items()}
        self.state["backends"] = list(self.in_flight.values())

    def rate_done(self, label: str, point) -> None:
        self.state["levels"][f"open loop {label}"][0] += 1

    def request_started(self, backend: str, number: int) -> None:
        self.state["total"] += 1
        self.in_flight[backend]["in_flight"] += 1
        self.section_started(request_id(number), f"request {number} → {backend}")

    def request_done(self, sample) -> None:
        self.in_flight[sample.backend]["in_flight"] -= 1
        section = self.sections[request_id(sample.number)]
        section["state"] = "failed" if sample.error else sample.finish_reason or "done"
        self.state["done"] += 1
        self.state["tokens"] += sample.completion_tokens or 0
        self.changed.add(section["id"])

    def level_done(self, label: str, result) -> None:
        self.state["levels"][f"ladder {label}"][0] += 1
        point = result.total
        self.ladder.append(
            [
                label,
                str(point.streams),
                f"{point.sustained:,.1f}",
                f"{point.best_second:,.1f}",
                f"{point.per_stream:,.1f}",
                f"{point.step_ms or 0:,.2f}",
                f"{point.ttft_p50_ms or 0:,.0f}",
            ]
        )
        self.state["final"] = {"head": list(LADDER_HEAD), "rows": self.ladder, "running": True}

    def bench_finished(self, record) -> None:
        self.state["final"] = {"head": list(LADDER_HEAD), "rows": self.ladder}

    # ------------------------------------------------------------ rates

    def _client_rate(self) -> float:
        """Tokens (stream pieces) per second over the last few seconds, by this process's clock."""
        now = time.monotonic()
        while self.arrivals and self.arrivals[0] < now - RATE_WINDOW_S:
            self.arrivals.popleft()
        return len(self.arrivals) / RATE_WINDOW_S

    async def _count_server_tokens(self) -> None:
        """Where every engine counts per step, the rate is the counters' growth; else client timestamps."""
        fleet = self.fleet
        assert fleet is not None, "started from fleet_opened"
        per_step = all(fleet.engines[b.name].counts_per_step for b in fleet.backends)
        previous: tuple[float, float] | None = None
        while True:
            if not per_step:
                self.state["rate"], self.state["rate_source"] = self._client_rate(), "client token timestamps"
            else:
                total = await generated_tokens(fleet)
                now = time.monotonic()
                if previous is not None and total is not None and now > previous[0]:
                    self.state["rate"] = (total - previous[1]) / (now - previous[0])
                    self.state["rate_source"] = "server counter (generated tokens)"
                # a failed scrape keeps the last rate rather than show a false jump
                previous = None if total is None else (now, total)
            await asyncio.sleep(1.0)

    # ------------------------------------------------------------ web

    async def _page(self, request: web.Request) -> web.Response:
        return web.Response(
            text=template_path("live.html").read_text(encoding="utf-8"),
            content_type="text/html",
            headers={
                "Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; "
                "style-src 'unsafe-inline'; connect-src 'self'"
            },
        )

    def _snapshot(self) -> dict[str, Any]:
        """For a page that just connected: the latest sections as far as the other pages have them (the
        next tick sends every page the rest)."""
        latest = list(self.sections.values())[-200:]
        return {**self.state, "sections": [{**self._public(s), "append": s["text"][: s["sent"]]} for s in latest]}

    @staticmethod
    def _public(section: dict[str, Any]) -> dict[str, Any]:
        return {"id": section["id"], "title": section["title"], "state": section["state"]}

    def _changes(self) -> list[dict[str, Any]]:
        """Each changed section with only the text added since the last tick."""
        changes = []
        for section_id in self.changed:
            section = self.sections[section_id]
            changes.append(
                {
                    **self._public(section),
                    "append": section["text"][section["sent"] :],
                    "reset": section.pop("reset", False),
                }
            )
            section["sent"] = len(section["text"])
        self.changed.clear()
        return changes

    async def _events(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        queue: asyncio.Queue = asyncio.Queue()
        self.clients.append(queue)
        try:
            await response.write(self._event(self._snapshot()))
            while (payload := await queue.get()) is not None:
                await response.write(payload)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.clients.remove(queue)
        return response

    @staticmethod
    def _event(data: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(data).encode() + b"\n\n"

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            if self.pool is not None:
                self.state["backends"] = self.pool.snapshot()
            payload = self._event({**self.state, "sections": self._changes()})
            for queue in self.clients:
                queue.put_nowait(payload)


LADDER_HEAD = ("series", "streams", "sustained tok/s", "best second", "per stream", "step ms", "TTFT p50 ms")


def book_rows(stats) -> list[list[str]]:
    """The final stats of a book run, as the page's table shows them."""
    return [
        [name, str(value)]
        for name, value in (
            ("sections ok / planned", f"{stats.sections_ok} / {stats.sections}"),
            (
                "requests (planning + writing)",
                f"{stats.requests} ({stats.requests_planning} + {stats.requests_writing})",
            ),
            ("tokens written (server usage)", f"{stats.tokens_written:,}"),
            ("write time s", stats.write_seconds),
            ("average while writing tok/s (usage / client clock)", stats.write_tok_s),
            ("whole job s", stats.job_seconds),
            ("words", f"{stats.words:,}"),
            ("request errors", stats.request_errors),
            (
                "failed / empty / truncated",
                f"{stats.failed_sections} / {stats.empty_sections} / {stats.truncated_sections}",
            ),
        )
    ]


async def serve_during(feed: LiveFeed, job, linger_s: float):
    """Run `job(feed)` with the page up; keep the page (final stats on it) `linger_s` seconds after."""
    url = await feed.start()
    print(f"fanout: live page: {url}", file=sys.stderr, flush=True)  # a result the user acts on: --quiet keeps it
    try:
        result = await job(feed)
        if linger_s > 0:
            log.info("live page stays up %.0f s more with the final stats (Ctrl-C ends it)", linger_s)
            await asyncio.sleep(linger_s)
        return result
    finally:
        await feed.stop()
