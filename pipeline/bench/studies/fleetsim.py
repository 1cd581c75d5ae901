"""What a job's own sends allow: a fleet of continuous-batching engines simulated under a step law.

Takes the times a job sent its requests, each answer's length in tokens, the engines' caps and a step law
(each step gives every running stream one token and takes a + b·n seconds for n streams: the law the FAKE
step-law engine keeps, tests/fakes/fake_steplaw.py, and that `fanout bench`'s ladder fits); returns when the
last answer would end if each request were sent at its time, or as soon as a slot was free after it, to the
least-loaded engine with one, waiting requests first come first served. Nothing else is modelled: no
prefill, no client, no network. Set beside the job's own time it says how much the client lost against what
its sends allowed; with the sends moved earlier (planning made faster) it says what a faster plan is worth
(examples/schedule_bound.py).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class StepLaw:
    """One decoding step of n streams takes a_s + b_s·n seconds and gives each of them one token."""

    a_s: float
    b_s: float

    def step(self, streams: int) -> float:
        return self.a_s + self.b_s * streams

    def sustained(self, streams: int) -> float:
        """Tokens a second of one engine that always runs `streams` streams."""
        return streams / self.step(streams)


@dataclass
class _Engine:
    cap: int
    running: list[int] = field(default_factory=list)  # tokens each stream in the step under way has left
    joining: list[int] = field(default_factory=list)  # admitted during that step: they run from the next one
    step_end: float | None = None  # when the step under way ends; None while idle

    @property
    def streams(self) -> int:
        return len(self.running) + len(self.joining)

    @property
    def load(self) -> float:
        return self.streams / self.cap

    def end_step(self) -> bool:
        """The step under way ends: each of its streams has one token more; True when one of them is done."""
        left = [tokens - 1 for tokens in self.running]
        self.running = [tokens for tokens in left if tokens > 0] + self.joining
        self.joining = []
        self.step_end = None
        return any(tokens == 0 for tokens in left)


def makespan(sends: Sequence[float], tokens: Sequence[int], *, caps: Sequence[int], law: StepLaw) -> float:
    """When the last answer ends. A stream admitted during a step joins at the next one (continuous batching);
    an engine that was idle starts a step at once with every stream admitted at that moment."""
    if len(sends) != len(tokens):
        raise ValueError("one answer length for each send")
    order = sorted((at, length) for at, length in zip(sends, tokens) if length > 0)
    engines = [_Engine(cap) for cap in caps]
    waiting: deque[int] = deque()
    sent = 0
    last = 0.0
    while sent < len(order) or waiting or any(e.streams for e in engines):
        next_send = order[sent][0] if sent < len(order) else float("inf")
        busy = [e for e in engines if e.step_end is not None]
        stepping = min(busy, key=lambda e: e.step_end or 0.0, default=None)
        next_step = stepping.step_end if stepping is not None and stepping.step_end is not None else float("inf")
        if next_send <= next_step:
            now = next_send
            while sent < len(order) and order[sent][0] <= now:
                waiting.append(order[sent][1])
                sent += 1
        else:
            assert stepping is not None, "a finite next step belongs to a busy engine"
            now = next_step
            if stepping.end_step():
                last = now
        _admit(engines, waiting)
        for engine in engines:
            if engine.step_end is None and engine.streams:
                engine.running += engine.joining
                engine.joining = []
                engine.step_end = now + law.step(len(engine.running))
    return last


def _admit(engines: list[_Engine], waiting: deque[int]) -> None:
    """Waiting requests to the least-loaded engines with a free slot, first come first served."""
    while waiting:
        free = [e for e in engines if e.streams < e.cap]
        if not free:
            return
        engine = min(free, key=lambda e: e.load)
        (engine.joining if engine.step_end is not None else engine.running).append(waiting.popleft())


def first_section_sends(request_log: Path) -> tuple[list[float], list[int]]:
    """Each section's first request in a book's request log (pipeline/book/requestlog.py): when it was sent,
    in seconds from the log's first request, and its answer's tokens. Off-point retries (tagged '#n') are left
    out: they are sent when their first answer is scored, which a simulation moves."""
    rows = [json.loads(line) for line in request_log.read_text().splitlines() if line.strip()]
    if not rows:
        return [], []
    start = min(row["t_asked"] for row in rows)
    firsts = [row for row in rows if row["kind"] == "section" and "#" not in row["tag"]]
    return [row["t_asked"] - start for row in firsts], [row["completion_tokens"] or 0 for row in firsts]
