"""The render process pool: jobs in niced worker processes, the lowest priority first, a failed job once more.

`RenderScheduler(workers, preload=[...])` starts a forkserver pool of `workers` processes (none for 0: every
job then runs at once in the calling process), each preloading `preload`, niced by WORKER_NICE, and leaving
on its own once the process that started it is gone. `submit(priority, fn, job)` returns a Future at once;
at most one job a worker is in flight, the lowest priority first, ties in submission order. A job that
fails (it raised, or its worker died and broke the pool) is queued again once at priority + RETRY_PRIORITY,
on a fresh pool if the old one broke; its second failure goes to its Future. `on_done` is called after every
job, under `lock` when a pool runs them. `warm()` starts every worker; `close()` cancels what waits and stops
the pool. pipeline/typeset/parts.py (PartTypesetter) is its user.
"""

from __future__ import annotations

import heapq
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from typing import Any

log = logging.getLogger("fanout")
MAX_WORKERS = 4
WORKER_NICE = 10
OWNER_CHECK_S = 1.0  # how often a render worker checks that its fanout process still exists
RETRY_PRIORITY = 10  # a job rendered again after a failure goes behind every first try


def default_workers() -> int:
    """One worker a core, at most MAX_WORKERS."""
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


def _pool(workers: int, preload: list[str]) -> ProcessPoolExecutor:
    context = multiprocessing.get_context("forkserver")  # no fork of a threaded parent (anyio, engines)
    context.set_forkserver_preload(preload)
    # Niced: parts render while the book is still streaming, and on a small machine the client (and any
    # local engine) must keep the CPU it needs; rendering takes what is left.
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_start_worker, initargs=(os.getpid(),)
    )


def _start_worker(owner: int) -> None:
    os.nice(WORKER_NICE)
    threading.Thread(target=_exit_with, args=(owner,), name="owner-watch", daemon=True).start()


def _exit_with(owner: int) -> None:
    """A fanout killed outright (SIGKILL) cannot shut its pool down: its workers would wait on the pool's
    queue forever, and keep the forkserver alive. So each worker leaves once the process it renders for is
    gone."""
    while True:
        time.sleep(OWNER_CHECK_S)
        try:
            os.kill(owner, 0)
        except (ProcessLookupError, PermissionError):  # gone (or its pid now another user's process)
            os._exit(0)


class RenderScheduler:
    """Jobs to a pool, at most one a worker in flight, contents slices before parts: so each slice is
    rendered as soon as it can be, between parts, and only the last one is left when the last part lands.
    A job that fails (its worker died, taking the pool with it, or it raised) is queued again once, behind
    what is waiting, on a fresh pool if the old one broke: a part is rendered again at the end, not lost.
    With no pool (workers=0) every job runs at once in this process. `preload`: the modules each worker
    imports before its first job (those holding the job functions)."""

    def __init__(self, workers: int, *, preload: list[str]) -> None:
        self.preload = preload
        self.pool = _pool(workers, preload) if workers > 0 else None
        self.slots = workers
        self.lock = threading.RLock()
        self.queue: list[tuple[int, int, Callable, Any, Future]] = []
        self.running = 0
        self.seq = 0
        self.retried: set[int] = set()  # seq of jobs already queued again after a failure
        self.on_done: Callable[[], None] = lambda: None

    def submit(self, priority: int, fn: Callable, job: Any) -> Future:
        out: Future = Future()
        if self.pool is None:
            try:
                out.set_result(fn(job))
            except Exception as error:  # handed over through the future, as a pool would
                out.set_exception(error)
            self.on_done()
            return out
        with self.lock:
            self.seq += 1
            heapq.heappush(self.queue, (priority, self.seq, fn, job, out))
            self._dispatch()
        return out

    def warm(self) -> None:
        if self.pool is not None:
            for done in [self.pool.submit(os.getpid) for _ in range(self.slots)]:
                done.result()

    def _dispatch(self) -> None:
        while self.running < self.slots and self.queue:
            entry = heapq.heappop(self.queue)
            priority, seq, fn, job, out = entry
            self.running += 1
            assert self.pool is not None, "jobs queue only with a pool"
            try:
                inner = self.pool.submit(fn, job)
            except BrokenProcessPool:  # a worker died since the last job ended: a fresh pool takes it
                self._renew()
                inner = self.pool.submit(fn, job)
            inner.add_done_callback(partial(self._finished, entry=entry, pool=self.pool))

    def _finished(
        self, inner: Future, entry: tuple[int, int, Callable, Any, Future], pool: ProcessPoolExecutor
    ) -> None:
        priority, seq, fn, job, out = entry
        with self.lock:
            self.running -= 1
            error = None if inner.cancelled() else inner.exception()
            if inner.cancelled():
                out.cancel()
            elif error is not None and seq not in self.retried:
                log.warning("typesetting: %s failed (%s); rendering it again after the rest", fn.__name__, error)
                self.retried.add(seq)
                if isinstance(error, BrokenProcessPool) and pool is self.pool:  # the first of its jobs to hear
                    self._renew()
                heapq.heappush(self.queue, (priority + RETRY_PRIORITY, seq, fn, job, out))
            elif error is not None:
                out.set_exception(error)
            else:
                out.set_result(inner.result())
            self.on_done()
            self._dispatch()

    def _renew(self) -> None:
        """A broken pool (one of its workers died) refuses every job: start a fresh one."""
        broken, self.pool = self.pool, _pool(self.slots, self.preload)
        if broken is not None:
            broken.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        with self.lock:
            for *_, out in self.queue:
                out.cancel()
            self.queue.clear()
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
