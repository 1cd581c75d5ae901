"""Worker processes on a pipe each, for the client's load (`--workers N`): started with `spawn` (no copy of
this process's event loop, sockets or threads), each says "ready" once imported; told None, they end.

Takes the count and the worker's entry point (a module-level function of one Connection); gives the
parent's ends of the pipes. Used by backends/chatworkers.py (a book's streams) and bench/load/workers.py (bench
levels); a process that does not come up within START_TIMEOUT_S is an error, one still alive 5 s after being
told to end is killed.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from pipeline.errors import FanoutError

START_TIMEOUT_S = 60.0


class Processes:
    def __init__(self, count: int, entry: Callable[[Connection], None], what: str):
        self.count = count
        self.entry = entry
        self.what = what
        self.connections: list[Connection] = []
        self.processes: list[Any] = []

    def start(self) -> list[Connection]:
        context = multiprocessing.get_context("spawn")
        for _ in range(self.count):
            parent, child = context.Pipe()
            process = context.Process(target=self.entry, args=(child,), daemon=True)
            process.start()
            self.connections.append(parent)
            self.processes.append(process)
        for connection in self.connections:
            try:
                started = connection.poll(START_TIMEOUT_S) and connection.recv() == "ready"
            except (EOFError, OSError):
                started = False
            if not started:
                self.stop()
                raise FanoutError(f"a {self.what} process did not start (see the error above)")
        return self.connections

    def stop(self) -> None:
        for connection in self.connections:
            try:
                connection.send(None)
            except OSError:
                pass
        for process in self.processes:
            process.join(5)
            if process.is_alive():
                process.kill()
