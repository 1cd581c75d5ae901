"""Where the CPU went, by stage: the client's CPU seconds and the local backends', for `fanout efficiency`.

Inside this process a stage is charged with the CPU clock of the thread that runs it (time.thread_time):
code between two awaits runs on one thread, so a synchronous stretch (a title's checks, a section's margin in
a worker thread, a journal line) is charged exactly. Stages nest, each charged only its own time (an
embedding inside a title's checks is charged to embeddings). What is left of the process's CPU is the event
loop's own: reading the streams, the pool, the listeners. psutil (a well-kept, cross-platform process
library; its C calls, not /proc parsing by hand) reads this process's CPU, its children's (render workers)
and a backend server's where one listens on this machine (the embedded llama-server, FAKE engines in their
own process); a backend served from inside this process (FAKE engines on a thread) cannot be told apart
from the client and is said so.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ParamSpec, TypeVar
from urllib.parse import urlsplit

import psutil

from pipeline.records.bench import CpuUse


class Stage(StrEnum):
    PLANNING_CHECKS = "planning checks"  # a planned title's checks, coverage, last resorts
    SECTION_SCORING = "section scoring"  # a written section's on-point margin
    EMBEDDINGS = "embeddings"  # the meaning model's forward passes, wherever they are asked for
    JOURNALING = "journaling"  # sections.jsonl and requests.jsonl lines
    FINISHING = "assembly, audit, typesetting"  # the finished book, in this process (render workers: children)


EVENT_LOOP = "streams, pool and the rest"  # what no stage claims: the event loop's own work

_charged: defaultdict[str, float] = defaultdict(float)
_lock = threading.Lock()
_local = threading.local()


BLAS_THREADS = "1"


def one_blas_thread() -> None:
    """The client's numpy (the meaning judges' matrix products) runs its BLAS on one thread, unless the user's
    environment says otherwise; set before numpy is first imported. OpenBLAS's threads spin, and beside
    llama-server's spinning threads on two cores the two fought: the demo's client spent 60 CPU-s (28 of them
    in the judges) and planning took 173.7 s; with one BLAS thread planning took 82.7 s (2-core AMD EPYC,
    embedded engine, one run each; the baseline planner took 274.1 s on the same machine)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", BLAS_THREADS)  # not OMP_NUM_THREADS: the engine inherits it


@contextmanager
def stage(name: Stage) -> Iterator[None]:
    """Charge the CPU this thread spends inside the block to `name` (less any stage nested in it)."""
    stack: list[Stage] = _local.__dict__.setdefault("stack", [])
    now = time.thread_time()
    if stack:
        _charge(stack[-1], now - _local.since)
    stack.append(name)
    _local.since = now
    try:
        yield
    finally:
        now = time.thread_time()
        _charge(stack.pop(), now - _local.since)
        _local.since = now


_P = ParamSpec("_P")
_R = TypeVar("_R")


def charged(name: Stage) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """A function whose every call is charged to `name` (stage())."""

    def decorate(function: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(function)
        def timed(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            with stage(name):
                return function(*args, **kwargs)

        return timed

    return decorate


def _charge(name: str, seconds: float) -> None:
    with _lock:
        _charged[name] += seconds


@dataclass
class CpuSnapshot:
    """CPU seconds so far: this process, its children, each stage, and each local backend's server."""

    process: float
    children: float
    stages: dict[str, float]
    backends: dict[str, float | None]
    at: float = field(default_factory=time.monotonic)


def process_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def children_seconds(process: psutil.Process) -> float:
    """Living children (render workers, an embedded engine) and those reaped; CpuMeter takes out a child
    that is one of its named backends."""
    times = process.cpu_times()
    alive = 0.0
    for child in process.children(recursive=True):
        try:
            alive += process_seconds(child)
        except psutil.Error:
            continue
    return times.children_user + times.children_system + alive


def listener_pid(url: str) -> int | None:
    """The process listening on this machine at the URL's port, or None (elsewhere, or not found)."""
    parts = urlsplit(url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1", "0.0.0.0") or parts.port is None:
        return None
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == parts.port:
            return conn.pid
    return None


class CpuMeter:
    """Snapshots of the CPU; `backends` names each backend's URL. A backend whose server is this process
    reads None (its CPU is the client's); backends one process serves are read once, under their names
    joined; a server that is a child of this one (the embedded engine) is counted as a backend, not among
    the children."""

    def __init__(self, backends: dict[str, str]) -> None:
        self.me = psutil.Process()
        serving: dict[int | None, list[str]] = {}
        for name, url in backends.items():
            pid = listener_pid(url)
            serving.setdefault(None if pid == self.me.pid else pid, []).append(name)
        # one entry a server process: backends served by one process (six FAKE engines) are read once
        self.servers: dict[str, psutil.Process | None] = {}
        for pid, names in serving.items():
            if pid is None:
                self.servers.update({name: None for name in names})
            else:
                self.servers[", ".join(names)] = psutil.Process(pid)

    def snapshot(self) -> CpuSnapshot:
        backends: dict[str, float | None] = {}
        for name, server in self.servers.items():
            try:
                backends[name] = None if server is None else process_seconds(server)
            except psutil.Error:
                backends[name] = None
        served_by_children = sum(seconds or 0.0 for name, seconds in backends.items() if self._is_child(name))
        with _lock:
            stages = dict(_charged)
        return CpuSnapshot(process_seconds(self.me), children_seconds(self.me) - served_by_children, stages, backends)

    def _is_child(self, name: str) -> bool:
        server = self.servers.get(name)
        try:
            return server is not None and server.ppid() == self.me.pid
        except psutil.Error:
            return False


def cpu_use(before: CpuSnapshot, after: CpuSnapshot) -> CpuUse:
    """The CPU spent between two snapshots: the client's by stage (the rest is the event loop's), its
    children's, each local backend's (None: not on this machine, or served from inside this process)."""
    client = after.process - before.process
    stages = {name.value: round(after.stages.get(name, 0.0) - before.stages.get(name, 0.0), 3) for name in Stage}
    stages[EVENT_LOOP] = round(max(client - sum(stages.values()), 0.0), 3)
    backends: dict[str, float | None] = {}
    for name, seconds in after.backends.items():
        earlier = before.backends.get(name)
        backends[name] = None if seconds is None or earlier is None else round(seconds - earlier, 3)
    return CpuUse(
        seconds=round(after.at - before.at, 3),
        client=round(client, 3),
        by_stage=stages,
        children=round(after.children - before.children, 3),
        backends=backends,
    )
