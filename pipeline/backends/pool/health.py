"""Backend health: which backends are up, when a rested one is probed, and when the fleet cannot answer.

Contract:
- A backend that fails `down_after` attempts in a row (RetryPolicy) is down: it gets nothing for `probe_after`
  seconds, then one request at a time probes it (`is_up`); an answer puts it back up (`note_success`).
  `rest` starts backends down (fleet.py: those that did not answer at start).
- A held backend (its engine is being restarted: `hold`) gets nothing until `revive`, which clears its record
  and takes its new address.
- The fleet cannot answer (`cannot_answer`) once it was stopped (`stop`), or when every backend, none held, is
  down and none has answered for `give_up_after` seconds; `unavailable_error` is then the one line that says
  why (FleetUnavailable), naming each backend's last failure.
Health holds no slots and wakes no waiters: pool.py tells admission.py after `revive` and `stop`.
"""

from __future__ import annotations

import time

import anyio

from pipeline.backends.pool.policy import RetryPolicy
from pipeline.backends.pool.state import BackendState
from pipeline.errors import FanoutError


class FleetUnavailable(FanoutError):
    """No backend can answer anything: every one is down and none has answered for
    `RetryPolicy.give_up_after` seconds, or the fleet was stopped (its embedded engine died twice)."""


class Health:
    """What the pool knows of its backends' health: down-marking, probes, holds, and the fleet's verdict."""

    def __init__(self, states: list[BackendState], policy: RetryPolicy):
        self.states = states
        self.policy = policy
        self.last_answer = time.monotonic()  # when any backend last answered (the pool's start before any did)
        self._answered: anyio.Event | None = None  # set at the next answer, for work waiting on one
        self.stopped: str | None = None  # why the whole fleet was stopped (stop)

    def note_success(self, state: BackendState) -> None:
        state.succeeded += 1
        state.consecutive_failures = 0
        state.down_until = 0.0
        self.last_answer = time.monotonic()
        if self._answered is not None:
            self._answered.set()
            self._answered = None

    def note_failure(self, state: BackendState, what: str) -> None:
        """A failed attempt the backend is to blame for: `down_after` in a row rest it for `probe_after` s."""
        state.failed += 1
        state.consecutive_failures += 1
        state.last_failure = what[:160]
        if state.consecutive_failures >= self.policy.down_after:
            state.down_until = time.monotonic() + self.policy.probe_after

    def is_up(self, state: BackendState, now: float) -> bool:
        """A backend is up unless it is held or failed `down_after` times in a row; once its rest is over,
        one request at a time probes it."""
        if state.held:
            return False
        if state.consecutive_failures < self.policy.down_after:
            return True
        return now >= state.down_until and state.in_flight == 0

    def is_down(self, state: BackendState) -> bool:
        """Failed `down_after` times in a row and not answered since (resting or being probed)."""
        return state.consecutive_failures >= self.policy.down_after

    def rest_left(self) -> float:
        """How long until a rested backend may be probed: waiters wake then even if nothing was released."""
        now = time.monotonic()
        rests = [s.down_until - now for s in self.states if s.down_until > now]
        return max(min(rests), 0.05) if rests else 5.0

    def rest(self, names: set[str]) -> None:
        """Start these backends as down: they get a probe once their rest is over."""
        for state in self.states:
            if state.backend.name in names:
                state.consecutive_failures = self.policy.down_after
                state.down_until = time.monotonic() + self.policy.probe_after

    def hold(self, name: str) -> None:
        """Take a backend out of use until `revive` (its engine is being restarted)."""
        self._state(name).held = True

    def revive(self, name: str, base_url: str | None = None) -> None:
        """Put a held backend back in use with a clean record, at its new address if it has one."""
        state = self._state(name)
        if base_url is not None and base_url != state.backend.base_url:
            state.backend = state.backend.model_copy(update={"base_url": base_url})
        state.held = False
        state.consecutive_failures = 0
        state.down_until = 0.0

    def stop(self, why: str) -> None:
        """From now on the fleet cannot answer, for this reason."""
        self.stopped = why

    def unavailable(self) -> bool:
        """No backend can answer anything: every one (none held for a restart) failed `down_after` times in
        a row, and none has answered for `give_up_after` seconds."""
        quiet = time.monotonic() - self.last_answer >= self.policy.give_up_after
        down = all(not s.held and s.consecutive_failures >= self.policy.down_after for s in self.states)
        return quiet and down

    def cannot_answer(self) -> bool:
        """The fleet was stopped, or no backend can answer anything (`unavailable`)."""
        return self.stopped is not None or self.unavailable()

    def unavailable_error(self) -> FleetUnavailable:
        """The one line that says why no backend can answer, with each backend's last failure."""
        if self.stopped is not None:
            return FleetUnavailable(self.stopped)
        each = "; ".join(f"{s.backend.name}: {s.last_failure or 'no answer'}" for s in self.states)
        return FleetUnavailable(f"no backend has answered for {self.policy.give_up_after:g} s ({each})")

    async def next_answer(self, timeout: float) -> None:
        """Wait until any backend answers a request, or `timeout` seconds (at most `give_up_after`, so the
        wait ends in time to hear the verdict); FleetUnavailable once no backend can answer."""
        if self._answered is None:
            self._answered = anyio.Event()
        with anyio.move_on_after(min(timeout, self.policy.give_up_after)):
            await self._answered.wait()
        if self.cannot_answer():
            raise self.unavailable_error()

    def _state(self, name: str) -> BackendState:
        return next(state for state in self.states if state.backend.name == name)
