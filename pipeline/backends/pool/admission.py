"""Admission: which backend an attempt takes its slots on, and when it may.

Contract:
- A backend holds at most `limit` requests: a `first` (planning) request may fill its cap; any other may fill
  what the cap allows, less what the reservation holds back for `first` requests (`reserve_for_first`: never
  a backend's only slot), and on the planning lane's backend no more than the lane allows (`planning_lane`).
- Of the backends that are up (health.py) with room under that limit, and that the retry rule lets the
  request go to (retry.py, RetryRule.where), an attempt takes the one the request prefers, else for a `first`
  request the lane's backend, else the least loaded (in_flight / cap).
- A request with several choices takes as many slots as are free, one a choice, at least one (Tries.granted).
- Requests wait first come first served, `first` ones ahead of all others; a waiter is woken only when a slot
  it may take is free, so a retry that must avoid some backends never holds up those behind it. Waiters also
  wake when a rested backend may be probed, and fail with FleetUnavailable once the fleet cannot answer.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import anyio

from pipeline.backends.pool.health import Health
from pipeline.backends.pool.retry import RetryRule
from pipeline.backends.pool.state import BackendState, Tries


@dataclass(eq=False)
class _Waiter:
    """A request waiting for a slot: what it may take is `Admission.pick(tries, first=first)`."""

    event: anyio.Event
    tries: Tries | None
    first: bool


class Admission:
    """The pool's slots and queues (the module docstring states the rule)."""

    def __init__(self, states: list[BackendState], *, health: Health, retry: RetryRule):
        self.states = states
        self._health = health
        self._retry = retry
        self._waiters: deque[_Waiter] = deque()
        self._urgent: deque[_Waiter] = deque()  # `first` requests: woken before any other
        self._reserved = 0  # slots of each backend (never its only one) that only `first` requests may take
        self._lane: BackendState | None = None  # the planning lane's backend while planning_lane is on
        self._lane_writing = 0  # the writing requests the lane's backend takes meanwhile

    def limit(self, state: BackendState, *, first: bool) -> int:
        """The most requests `state` may hold when this one takes a slot: for a `first` request what the cap
        allows; for any other that less what the reservation holds back, and on the lane's backend no more than
        the lane allows."""
        cap_allows = state.cap
        if first:
            return cap_allows
        after_reserve = cap_allows - self.reserve_holds_back(state)
        if state is not self._lane:
            return after_reserve
        lane_allows = self._lane_writing
        return min(after_reserve, lane_allows)

    def reserve_holds_back(self, state: BackendState) -> int:
        """The slots of `state` only `first` requests may take: the reserve, but never the backend's last slot."""
        return min(self._reserved, state.cap - 1)

    @contextmanager
    def reserve_for_first(self, slots: int = 1) -> Iterator[None]:
        """Keep `slots` of each backend free for `first` requests while the block runs."""
        self._reserved = slots
        try:
            yield
        finally:
            self._reserved = 0
            self.wake_next()

    @contextmanager
    def planning_lane(self, writing_slots: int) -> Iterator[None]:
        """While the block runs, the first backend takes at most `writing_slots` writing requests and is the
        one `first` requests try first. No lane with `writing_slots` 0 or a single backend (its batch is the
        whole fleet's)."""
        if writing_slots <= 0 or len(self.states) < 2:
            yield
            return
        self._lane, self._lane_writing = self.states[0], writing_slots
        try:
            yield
        finally:
            self._lane = None
            self.wake_next()

    def pick(self, tries: Tries | None, *, first: bool = True) -> BackendState | None:
        """The request's preferred backend if it is free, else (for `first`) the lane's, else the least-loaded
        free backend that is up, among those the retry rule allows; None when none is."""
        now = time.monotonic()
        free = [s for s in self.states if s.in_flight < self.limit(s, first=first) and self._health.is_up(s, now)]
        if tries is not None:
            free = self._retry.where(tries, free)
        preferred = [s for s in free if tries is not None and s.backend.name == tries.prefer]
        if not preferred and first and self._lane in free:
            preferred = [self._lane]
        return min(preferred or free, key=lambda s: s.load, default=None)

    async def acquire(self, tries: Tries, *, first: bool = False) -> BackendState:
        """Take a slot: at once if one is free and nobody waits ahead, else in arrival order (urgent first),
        each waiter woken only when a slot it may take is free. FleetUnavailable while waiting once no backend
        can answer."""
        queue = self._urgent if first else self._waiters
        ahead = self._urgent if first else self._urgent or self._waiters
        state = self.pick(tries, first=first)
        if state is None or ahead:
            waiter = _Waiter(anyio.Event(), tries, first=first)
            queue.append(waiter)
            self.wake_next()  # this one, if no waiter ahead of it can take the free slot
            await self._wait_turn(queue, waiter)
            while (state := self.pick(tries, first=first)) is None:  # another took it meanwhile
                waiter = _Waiter(anyio.Event(), tries, first=first)
                queue.appendleft(waiter)
                await self._wait_turn(queue, waiter)
        tries.granted = max(1, min(tries.slots, self.limit(state, first=first) - state.in_flight))
        state.in_flight += tries.granted
        state.peak_in_flight = max(state.peak_in_flight, state.in_flight)
        self.wake_next()  # more than one slot came free: pass the turn on
        return state

    def spare(self) -> int:
        """Slots a writing request could take at once, with no request waiting for one (0 while any waits)."""
        if self._urgent or self._waiters:
            return 0
        now = time.monotonic()
        up = [s for s in self.states if self._health.is_up(s, now)]
        return sum(max(0, self.limit(s, first=False) - s.in_flight) for s in up)

    def release(self, state: BackendState, slots: int = 1) -> None:
        state.in_flight -= slots
        self.wake_next()

    def wake_next(self) -> None:
        """Wake the first waiter (urgent ones first) that can take a slot now, if any."""
        if not (self._urgent or self._waiters) or self.pick(None, first=True) is None:
            return  # no waiter, or no slot free for any (the common case while every slot is busy)
        for queue in (self._urgent, self._waiters):
            for waiter in queue:
                if self.pick(waiter.tries, first=waiter.first) is not None:
                    queue.remove(waiter)
                    waiter.event.set()
                    return

    def wake_all(self) -> None:
        """Wake every waiter (the fleet was stopped: each hears it)."""
        for queue in (self._urgent, self._waiters):
            while queue:
                queue.popleft().event.set()

    async def _wait_turn(self, queue: deque[_Waiter], waiter: _Waiter) -> None:
        try:
            with anyio.move_on_after(self._health.rest_left()):
                await waiter.event.wait()
        finally:
            if not waiter.event.is_set():
                queue.remove(waiter)
        if self._health.cannot_answer():
            self.wake_next()  # the turn this waiter may have been given: the next one hears the news too
            raise self._health.unavailable_error()
