"""What a job's own sends allow: a fleet of continuous-batching engines simulated under a step law.

Takes the times a job sent its requests, each answer's length in tokens, the engines' caps and a step law
(each step gives every running stream one token and takes a + b·n seconds for n streams: the law the FAKE
step-law engine keeps, tests/fakes/fake_steplaw.py, and that `fanout bench`'s ladder fits); returns when the
last answer would end if each request were sent at its time, or as soon as a slot was free after it, to the
least-loaded engine with one, waiting requests first come first served. Nothing else is modelled: no
prefill, no client, no network. Set beside the job's own time it says how much the client lost against what
its sends allowed; with the sends moved earlier (planning made faster) it says what a faster plan is worth
(examples/schedule_bound.py).

What a job's own plan allows (`tree_makespan`, `book_tree`): its first-round planning requests and its sections
on the same engines, each sent the moment its parent's answer generated the line that names it, so that planning's
answers stream in the batches beside the sections, at their loaded pace.
"""

from __future__ import annotations

import json
import re
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


@dataclass(frozen=True)
class TreeRequest:
    """A request to simulate: its answer's tokens, and when it is sent: at `at` seconds, or (with a `parent`, the
    request whose answer sends it) once that answer has `after` tokens (the line that names it has landed)."""

    tokens: int
    parent: int | None = None
    after: int = 0
    at: float = 0.0


@dataclass
class _Stream:
    request: int
    done: int = 0  # tokens generated so far


@dataclass
class _Engine:
    cap: int
    running: list[_Stream] = field(default_factory=list)  # the streams of the step under way
    joining: list[_Stream] = field(default_factory=list)  # admitted during that step: they run from the next one
    step_end: float | None = None  # when the step under way ends; None while idle

    @property
    def streams(self) -> int:
        return len(self.running) + len(self.joining)

    @property
    def load(self) -> float:
        return self.streams / self.cap


def makespan(sends: Sequence[float], tokens: Sequence[int], *, caps: Sequence[int], law: StepLaw) -> float:
    """When the last answer ends. A stream admitted during a step joins at the next one (continuous batching);
    an engine that was idle starts a step at once with every stream admitted at that moment."""
    if len(sends) != len(tokens):
        raise ValueError("one answer length for each send")
    order = sorted((at, length) for at, length in zip(sends, tokens) if length > 0)
    return tree_makespan([TreeRequest(length, at=at) for at, length in order], caps=caps, law=law)


def tree_makespan(requests: Sequence[TreeRequest], *, caps: Sequence[int], law: StepLaw) -> float:
    """When the last answer ends: a request without a parent sent at its `at`, one with a parent the moment the line
    that names it was generated (a client with no cost), so that planning's requests run in the same batches as the
    sections. Each engine keeps the step law; waiting requests go to the least-loaded engine with a slot, first come
    first served (at the same moment, in the order given)."""
    children: dict[int, list[int]] = {}
    for index, request in enumerate(requests):
        if request.parent is not None:
            children.setdefault(request.parent, []).append(index)
    roots = sorted((index for index, r in enumerate(requests) if r.parent is None), key=lambda i: requests[i].at)
    engines = [_Engine(cap) for cap in caps]
    waiting: deque[int] = deque()
    sent, last = 0, 0.0
    while sent < len(roots) or waiting or any(e.streams for e in engines):
        next_send = requests[roots[sent]].at if sent < len(roots) else float("inf")
        stepping = min((e for e in engines if e.step_end is not None), key=lambda e: e.step_end or 0.0, default=None)
        next_step = stepping.step_end if stepping is not None and stepping.step_end is not None else float("inf")
        if next_send <= next_step:
            now = next_send
            while sent < len(roots) and requests[roots[sent]].at <= now:
                waiting.append(roots[sent])
                sent += 1
        else:
            assert stepping is not None, "a finite next step belongs to a busy engine"
            now = next_step
            if _end_step(stepping, requests, children, waiting):
                last = now
        _admit(engines, waiting)
        for engine in engines:
            if engine.step_end is None and engine.streams:
                engine.running += engine.joining
                engine.joining = []
                engine.step_end = now + law.step(len(engine.running))
    return last


def _end_step(
    engine: _Engine, requests: Sequence[TreeRequest], children: dict[int, list[int]], waiting: deque[int]
) -> bool:
    """The step under way ends: each of its streams has one token more, and the requests its lines name so far
    wait to be sent; True when one of them is done."""
    going, ended = [], False
    for stream in engine.running:
        stream.done += 1
        waiting.extend(c for c in children.get(stream.request, []) if max(1, requests[c].after) == stream.done)
        if stream.done < requests[stream.request].tokens:
            going.append(stream)
        else:
            ended = True
    engine.running, engine.joining, engine.step_end = going + engine.joining, [], None
    return ended


def _admit(engines: list[_Engine], waiting: deque[int]) -> None:
    """Waiting requests to the least-loaded engines with a free slot, first come first served."""
    while waiting:
        free = [e for e in engines if e.streams < e.cap]
        if not free:
            return
        engine = min(free, key=lambda e: e.load)
        (engine.joining if engine.step_end is not None else engine.running).append(_Stream(waiting.popleft()))


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


# ---------------------------------------------------------------- a book's own tree


def book_tree(request_log: Path, *, sections_streamed: bool = True) -> list[TreeRequest]:
    """A book's first-round planning requests and each section's first request, from its request log: each sent
    once its parent's answer had generated the line that names it (its number's line, at the share of the answer's
    tokens its characters end at); with `sections_streamed` False (the pipelined schedule) a section once its
    chapter's whole answer is in. Second rounds, phrasing and off-point retries are left out."""
    rows = [json.loads(line) for line in request_log.read_text().splitlines() if line.strip()]
    firsts = {}
    for row in rows:
        node = node_of(row["tag"], row["kind"])
        if node is not None and node not in firsts:
            firsts[node] = row
    index = {node: number for number, node in enumerate(firsts)}
    tree = []
    for node, row in firsts.items():
        parent = parent_of(node)
        after = 0
        if parent in firsts:
            above = firsts[parent]
            whole = not sections_streamed and row["kind"] == "section"
            after = above["completion_tokens"] or 0 if whole else line_end_token(above, line_number(node))
        tree.append(TreeRequest(row["completion_tokens"] or 0, index.get(parent or ""), after))
    return tree


def node_of(tag: str, kind: str) -> str | None:
    """The node a request plans ('book', 'p01', 'p01.c03') or the section it writes, for first requests only."""
    if "#" in tag:
        return None
    if kind == "plan":
        _, node, asked = (tag.split(":") + ["", ""])[:3]
        return node if asked == "0" and NODE.fullmatch(node) else None
    return tag if kind == "section" and NODE.fullmatch(tag) else None


NODE = re.compile(r"book|p\d+(\.c\d+(\.s\d+)?)?")


def parent_of(node: str) -> str | None:
    if node == "book":
        return None
    return node.rpartition(".")[0] or "book"


def line_number(node: str) -> int:
    return int(re.sub(r"\D", "", node.rpartition(".")[2]))


def line_end_token(row: dict, number: int) -> int:
    """The answer's tokens up to the end of its line numbered `number` (all of them when there is none)."""
    text, tokens = row.get("text") or "", row["completion_tokens"] or 0
    found = re.search(rf"(?m)^\s*{number}[.)][^\n]*", text)
    if found is None or not text:
        return tokens
    return max(1, round(tokens * found.end() / len(text)))
