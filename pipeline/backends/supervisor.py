"""The embedded engine, supervised: a llama-server that fanout started and that dies mid-job is started again.

Takes the EmbeddedEngine and the pool that sends it requests. A thread waits on the server process; when it
ends while the job still needs it (killed, crashed), the pool holds the backend (requests wait instead of
spending their attempts on a dead port), the server is started again on the same port (or a new one when
that is taken), and once it answers /health the pool is told its address and takes it back; the requests
the dead server held failed as cut or refused and are asked again. One restart a job: a second death, or a
restart that does not come up, stops the pool (every request fails with FleetUnavailable, one line).

The thread that relaunches the server lives as long as that server (it waits on it), as the engine's
die-with-parent rule needs (EmbeddedEngine.launch). Pool calls go to the event loop's thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from pipeline.backends.embedded.engine import EmbeddedEngine
from pipeline.backends.pool import BackendPool
from pipeline.errors import FanoutError

log = logging.getLogger("fanout")


class EngineSupervisor:
    def __init__(self, engine: EmbeddedEngine, pool: BackendPool, name: str, *, restarts_allowed: int = 1):
        self.engine = engine
        self.pool = pool
        self.name = name  # the engine's backend name in the pool
        self.restarts_allowed = restarts_allowed
        self.restarts = 0
        self.closing = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        """Watch from now on; call it on the event loop's thread."""
        self.loop = asyncio.get_running_loop()
        self.thread = threading.Thread(target=self._watch, name="engine-supervisor", daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Before the engine is stopped on purpose: its end is then no death."""
        self.closing.set()

    def _watch(self) -> None:
        while (process := self.engine.process) is not None:
            code = process.wait()
            if self.closing.is_set():
                return
            if self.restarts >= self.restarts_allowed:
                self._tell(self.pool.stop_all, f"the embedded engine died again (exit {code}) after a restart")
                return
            self.restarts += 1
            log.warning("the embedded engine died (exit %s): starting it again", code)
            self._tell(self.pool.hold, self.name)
            try:
                self.engine.relaunch()
                self.engine.wait_ready()
            except FanoutError as error:
                why = f"the embedded engine died (exit {code}) and did not start again: {error}"
                self._tell(self.pool.stop_all, why)
                return
            if self.closing.is_set():  # the job ended while it came up
                self.engine.stop()
                return
            log.warning("the embedded engine answers again at %s", self.engine.root_url)
            self._tell(self.pool.revive, self.name, self.engine.backend.base_url)

    def _tell(self, call: Callable[..., None], *args: object) -> None:
        assert self.loop is not None, "start() sets the loop"
        self.loop.call_soon_threadsafe(call, *args)
