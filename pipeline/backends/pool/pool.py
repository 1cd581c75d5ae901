"""The backend pool: caps, least-loaded balancing, retries elsewhere, down-marking.

Takes Backends (each with a cap: the most requests in flight there) and ChatRequests; returns Completions.
A request goes to the backend with the lowest in_flight/cap that has a free slot and waits, first come
first served, while all are full; a request sent with `first=True` (planning) waits ahead of the others,
and while `reserve_for_first` is on, one slot of each backend is kept for such requests, so planning that
runs beside writing never waits for a whole section to end. While `planning_lane` is on (a fleet of two
backends or more), the first backend takes at most a few writing requests and `first` requests go to it
before any other: its batch stays small, so planning's tokens come near the engine's idle step time instead
of the full batch's.
A failed attempt is the backend's fault unless records.Outcome.blames_request says it is the request's:
it is retried with backoff (tenacity) on another backend first, until it has failed `attempts` times and
every backend has had it; a backend that blamed the request is never asked it again. A backend that fails
`down_after` times in a row is rested and later probed by a single request. When every backend is down and
none has answered for `give_up_after` seconds, no backend can answer anything: requests fail with
FleetUnavailable, which ends a job (one line; what was written stays, and a resume finishes it).
A backend whose engine is being restarted is held out of use and revived with its new address.
A request with several choices (`n`) takes a slot for each, as the engine gives each sample a slot, but only as
many as are free when its turn comes (at least one), and is sent with that many: waiting for all of them had
sections take each freed slot first, and llama-server, told of one slot for four samples, let its children wait
until no backend answered for 60 s.
A connection the server closed before the first byte (llama-server drops idle keep-alives), or a request
whose client worker process ended (`--workers`), is re-asked at once on the same slot and counted apart
from failures. Every attempt is recorded.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypedDict

import anyio
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential_jitter

from pipeline.backends.chat import chat
from pipeline.backends.sse import AttemptError, OnDelta
from pipeline.backends.transport import Transport
from pipeline.errors import FanoutError
from pipeline.records import Attempt, Backend, ChatRequest, Completion, Outcome

REASK_BEFORE_FIRST_BYTE = 5
RequestWatcher = Callable[[ChatRequest, Completion | None, float, list[Attempt]], None]


class BackendSnapshot(TypedDict):
    """One backend's counters, as BackendPool.snapshot reports them."""

    name: str
    cap: int
    in_flight: int
    peak_in_flight: int
    sent: int
    succeeded: int
    failed: int
    reissued: int
    down: bool


class RequestFailed(FanoutError):
    """Every attempt of one request failed, on every backend it could be asked of."""

    def __init__(self, tag: str, attempts: list[Attempt], why: str = "failed"):
        last = attempts[-1] if attempts else None
        super().__init__(
            f"request {tag or '?'} {why} after {len(attempts)} attempts"
            + (f" (last: {last.outcome} on {last.backend}: {last.detail[:120]})" if last else "")
        )
        self.tag = tag
        self.attempts = attempts


class RequestRefused(RequestFailed):
    """Every backend answered that the request itself cannot be served (records.Outcome.blames_request):
    asking it again, here or later, would get the same answer."""

    def __init__(self, tag: str, attempts: list[Attempt]):
        super().__init__(tag, attempts, "was refused by every backend as the request's own fault")


class FleetUnavailable(FanoutError):
    """No backend can answer anything: every one is down and none has answered for
    `RetryPolicy.give_up_after` seconds, or the fleet was stopped (its embedded engine died twice)."""


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4  # a request gives up after this many failed attempts, once every backend had one
    backoff_initial: float = 0.5
    backoff_max: float = 10.0
    read_timeout: float = 120.0
    down_after: int = 3
    probe_after: float = 5.0
    give_up_after: float = 60.0  # every backend down and no answer for this long: the fleet cannot answer


@dataclass
class BackendState:
    backend: Backend
    cap: int
    in_flight: int = 0
    peak_in_flight: int = 0
    sent: int = 0
    succeeded: int = 0
    failed: int = 0
    reissued: int = 0
    consecutive_failures: int = 0
    down_until: float = 0.0
    held: bool = False  # out of use until revived (its engine is being restarted)
    last_failure: str = ""  # the last failed attempt's outcome and detail, for the fleet's last word

    @property
    def load(self) -> float:
        return self.in_flight / self.cap


@dataclass
class PoolStats:
    attempts: list[Attempt] = field(default_factory=list)  # every attempt the pool made, in order


@dataclass
class _Tries:
    """One request's attempts so far, and which backends it must not or had better not be asked of."""

    attempts: list[Attempt] = field(default_factory=list)
    failures: int = 0  # attempts that failed (a run of cuts before the first byte counts once)
    failed_on: set[str] = field(default_factory=set)  # backends that failed it: others are asked first
    refused_by: set[str] = field(default_factory=set)  # backends that blamed the request: never asked again
    prefer: str | None = None  # the backend to take when it has a free slot (it holds the request's prefix)
    on_sent: Callable[[str], None] | None = None  # told the backend of each attempt
    slots: int = 1  # slots it would hold: one a choice (an engine gives each sample a slot)
    granted: int = 1  # slots its current attempt holds: as many of `slots` as were free, at least one


@dataclass(eq=False)
class _Waiter:
    """A request waiting for a slot: what it may take is `_pick(tries, first=first)`."""

    event: anyio.Event
    tries: _Tries | None
    first: bool


class BackendPool:
    def __init__(self, backends: list[Backend], policy: RetryPolicy | None = None, caps: list[int] | None = None):
        if not backends:
            raise FanoutError("no backends")
        caps = caps or [b.cap for b in backends]
        self.states = [BackendState(b, cap) for b, cap in zip(backends, caps)]
        self.policy = policy or RetryPolicy()
        self.stats = PoolStats()
        self._waiters: deque[_Waiter] = deque()
        self._urgent: deque[_Waiter] = deque()
        self.on_finished: RequestWatcher | None = None  # hears of every request, answered or failed
        self.transport: Transport = chat  # or ChatWorkers.chat: the streams read in worker processes
        self._reserved = 0  # slots of each backend (never its only one) that only `first` requests may take
        self._lane: BackendState | None = None  # the planning lane's backend while planning_lane is on
        self._lane_writing = 0  # the writing requests the lane's backend takes meanwhile
        self._backoff = wait_exponential_jitter(
            multiplier=self.policy.backoff_initial, max=self.policy.backoff_max, jitter=self.policy.backoff_initial
        )
        self.last_answer = time.monotonic()  # when any backend last answered (the pool's start before any did)
        self._answered: anyio.Event | None = None  # set at the next answer, for work waiting on one
        self._stopped: str | None = None  # why the whole fleet was stopped (stop_all)

    async def complete(
        self,
        request: ChatRequest,
        on_delta: OnDelta | None = None,
        *,
        first: bool = False,
        on_retry: Callable[[], None] | None = None,
        prefer: str | None = None,
        on_sent: Callable[[str], None] | None = None,
    ) -> Completion:
        """Send one request through the pool. A failed attempt is asked again, another backend first, until
        it has failed `attempts` times and every backend has had it (RequestFailed), or every backend blamed
        the request itself (RequestRefused); FleetUnavailable when no backend can answer anything. `first`
        puts it ahead of every waiting request without it; `on_retry` is called before each attempt after
        the first (text an earlier attempt streamed to `on_delta` is void). `prefer` names the backend to
        take whenever it has a free slot (the one whose cache holds the request's prefix), `on_sent` hears
        the backend each attempt goes to."""
        tries = _Tries(prefer=prefer, on_sent=on_sent, slots=request.choices)
        t_asked = time.monotonic()
        completion: Completion | None = None
        try:
            try:
                completion = await self._attempt(request, tries, on_delta, first=first)
            except AttemptError as made:
                completion = await self._retried(request, tries, on_delta, first=first, on_retry=on_retry, made=made)
        except AttemptError:
            raise self._failure(request.tag, tries) from None
        finally:  # answered, failed, or cancelled by its caller (planning stops once it has enough)
            if self.on_finished is not None:
                self.on_finished(request, completion, t_asked, tries.attempts)
        completion.attempts = tries.attempts
        return completion

    async def _retried(
        self,
        request: ChatRequest,
        tries: _Tries,
        on_delta: OnDelta | None,
        *,
        first: bool,
        on_retry: Callable[[], None] | None,
        made: AttemptError,
    ) -> Completion:
        """After a failed first attempt, tenacity decides the rest: whether to ask again (`_given_up`), how
        long to wait, when to stop. The failure already made is its first attempt (raised again here,
        nothing sent), so the policy counts it as before. Only failed requests come here: around every
        request, tenacity's async iteration cost 333 against 203 µs of CPU a request of 8 events (the
        per-request loop of `examples/client_cost.py`, 2-core machine), a third of the client's whole cost
        of a short request."""
        retrying = AsyncRetrying(
            stop=lambda _: self._given_up(tries),
            wait=self._wait,
            retry=retry_if_exception_type(AttemptError),
            reraise=True,
        )
        earlier: AttemptError | None = made
        async for attempt in retrying:
            with attempt:
                if earlier is not None:
                    error, earlier = earlier, None
                    raise error
                if on_retry is not None:
                    on_retry()
                return await self._attempt(request, tries, on_delta, first=first)
        raise AssertionError("tenacity ends by returning or raising")  # reraise=True

    def _given_up(self, tries: _Tries) -> bool:
        """Stop asking: every backend blamed the request; or the fleet cannot answer; or the request has
        failed `attempts` times and every backend that did not blame it has failed it once."""
        left = {state.backend.name for state in self.states} - tries.refused_by
        if not left or self._stopped is not None or self.unavailable():
            return True
        return tries.failures >= self.policy.attempts and left <= tries.failed_on

    def _failure(self, tag: str, tries: _Tries) -> FanoutError:
        if self._stopped is not None or self.unavailable():
            return self.unavailable_error()
        if tries.refused_by >= {state.backend.name for state in self.states}:
            return RequestRefused(tag, tries.attempts)
        return RequestFailed(tag, tries.attempts)

    def _wait(self, retry_state: RetryCallState) -> float:
        error = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(error, AttemptError) and error.blames_request:
            return 0.0  # another backend is asked at once: this one's backoff says nothing of it
        if isinstance(error, AttemptError) and error.retry_after is not None:
            return min(error.retry_after, 60.0)
        return self._backoff(retry_state)

    async def _attempt(
        self, request: ChatRequest, tries: _Tries, on_delta: OnDelta | None, *, first: bool
    ) -> Completion:
        state = await self._acquire(tries, first=first)
        name = state.backend.name
        if tries.on_sent is not None:
            tries.on_sent(name)
        try:
            for _ in range(REASK_BEFORE_FIRST_BYTE):
                t_start = time.monotonic()
                try:
                    sent = (
                        request
                        if tries.granted == request.choices
                        else request.model_copy(update={"choices": tries.granted})
                    )
                    completion = await self.transport(state.backend, sent, self.policy.read_timeout, on_delta)
                except AttemptError as error:
                    self._record(tries.attempts, state, t_start, error.kind, error.detail)
                    if error.outcome.asked_again_at_once:
                        state.reissued += 1
                        continue
                    tries.failures += 1
                    if error.blames_request:
                        tries.refused_by.add(name)
                    else:
                        self._note_failure(state, f"{error.kind}: {error.detail}")
                        tries.failed_on.add(name)
                    raise
                self._record(tries.attempts, state, t_start, Outcome.OK, "")
                self._note_success(state)
                return completion
            tries.failures += 1
            self._note_failure(state, f"{Outcome.CUT_BEFORE_FIRST_BYTE}: {REASK_BEFORE_FIRST_BYTE} times in a row")
            tries.failed_on.add(name)
            raise AttemptError(Outcome.CUT_BEFORE_FIRST_BYTE, f"{REASK_BEFORE_FIRST_BYTE} times in a row")
        finally:
            self._release(state, tries.granted)

    def _record(self, attempts: list[Attempt], state: BackendState, t_start: float, outcome: str, detail: str) -> None:
        attempt = Attempt(
            backend=state.backend.name, t_start=t_start, t_end=time.monotonic(), outcome=outcome, detail=detail[:300]
        )
        attempts.append(attempt)
        self.stats.attempts.append(attempt)
        state.sent += 1

    def _note_success(self, state: BackendState) -> None:
        state.succeeded += 1
        state.consecutive_failures = 0
        state.down_until = 0.0
        self.last_answer = time.monotonic()
        if self._answered is not None:
            self._answered.set()
            self._answered = None

    async def next_answer(self, timeout: float) -> None:
        """Wait until any backend answers a request, or `timeout` seconds (at most `give_up_after`, so the
        wait ends in time to hear the verdict); FleetUnavailable once no backend can answer."""
        if self._answered is None:
            self._answered = anyio.Event()
        with anyio.move_on_after(min(timeout, self.policy.give_up_after)):
            await self._answered.wait()
        if self._stopped is not None or self.unavailable():
            raise self.unavailable_error()

    def _note_failure(self, state: BackendState, what: str) -> None:
        state.failed += 1
        state.consecutive_failures += 1
        state.last_failure = what[:160]
        if state.consecutive_failures >= self.policy.down_after:
            state.down_until = time.monotonic() + self.policy.probe_after

    def _is_up(self, state: BackendState, now: float) -> bool:
        """A backend is up unless it is held or failed `down_after` times in a row; once its rest is over,
        one request at a time probes it."""
        if state.held:
            return False
        if state.consecutive_failures < self.policy.down_after:
            return True
        return now >= state.down_until and state.in_flight == 0

    def unavailable(self) -> bool:
        """No backend can answer anything: every one (none held for a restart) failed `down_after` times in
        a row, and none has answered for `give_up_after` seconds."""
        quiet = time.monotonic() - self.last_answer >= self.policy.give_up_after
        down = all(not s.held and s.consecutive_failures >= self.policy.down_after for s in self.states)
        return quiet and down

    def unavailable_error(self) -> FleetUnavailable:
        """The one line that says why no backend can answer, with each backend's last failure."""
        if self._stopped is not None:
            return FleetUnavailable(self._stopped)
        each = "; ".join(f"{s.backend.name}: {s.last_failure or 'no answer'}" for s in self.states)
        return FleetUnavailable(f"no backend has answered for {self.policy.give_up_after:g} s ({each})")

    def stop_all(self, why: str) -> None:
        """Stop the fleet: every request waiting or asked from now on fails with FleetUnavailable(why)."""
        self._stopped = why
        for queue in (self._urgent, self._waiters):
            while queue:
                queue.popleft().event.set()

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
        self._wake_next()

    def _state(self, name: str) -> BackendState:
        return next(state for state in self.states if state.backend.name == name)

    @contextmanager
    def reserve_for_first(self, slots: int = 1) -> Iterator[None]:
        """Keep `slots` of each backend free for `first` requests while the block runs."""
        self._reserved = slots
        try:
            yield
        finally:
            self._reserved = 0
            self._wake_next()

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
            self._wake_next()

    def _pick(self, tries: _Tries | None, *, first: bool = True) -> BackendState | None:
        """The request's preferred backend if it is free, else the least-loaded free backend that is up; never
        one that blamed the request; one that failed it only when no other is free, and not at all once the
        request has used its attempts."""
        now = time.monotonic()
        free = [s for s in self.states if s.in_flight < self._limit(s, first=first) and self._is_up(s, now)]
        if tries is not None and (tries.refused_by or tries.failed_on):
            spent = tries.failures >= self.policy.attempts
            free = [s for s in free if s.backend.name not in tries.refused_by]
            untried = [s for s in free if s.backend.name not in tries.failed_on]
            free = untried if spent else untried or free
        preferred = [s for s in free if tries is not None and s.backend.name == tries.prefer]
        if not preferred and first and self._lane in free:
            preferred = [self._lane]
        return min(preferred or free, key=lambda s: s.load, default=None)

    def _limit(self, state: BackendState, *, first: bool) -> int:
        if first:
            return state.cap
        limit = state.cap - min(self._reserved, state.cap - 1)
        return min(limit, self._lane_writing) if state is self._lane else limit

    async def _acquire(self, tries: _Tries, *, first: bool = False) -> BackendState:
        """Take a slot: at once if one is free and nobody waits ahead, else in arrival order (urgent first),
        each waiter woken only when a slot it may take is free (a retry that must avoid some backends never
        holds up those behind it). FleetUnavailable while waiting once no backend can answer."""
        queue = self._urgent if first else self._waiters
        ahead = self._urgent if first else self._urgent or self._waiters
        state = self._pick(tries, first=first)
        if state is None or ahead:
            waiter = _Waiter(anyio.Event(), tries, first=first)
            queue.append(waiter)
            self._wake_next()  # this one, if no waiter ahead of it can take the free slot
            await self._wait_turn(queue, waiter)
            while (state := self._pick(tries, first=first)) is None:  # another took it meanwhile
                waiter = _Waiter(anyio.Event(), tries, first=first)
                queue.appendleft(waiter)
                await self._wait_turn(queue, waiter)
        tries.granted = max(1, min(tries.slots, self._limit(state, first=first) - state.in_flight))
        state.in_flight += tries.granted
        state.peak_in_flight = max(state.peak_in_flight, state.in_flight)
        self._wake_next()  # more than one slot came free: pass the turn on
        return state

    async def _wait_turn(self, queue: deque[_Waiter], waiter: _Waiter) -> None:
        try:
            with anyio.move_on_after(self._rest_left()):
                await waiter.event.wait()
        finally:
            if not waiter.event.is_set():
                queue.remove(waiter)
        if self._stopped is not None or self.unavailable():
            self._wake_next()  # the turn this waiter may have been given: the next one hears the news too
            raise self.unavailable_error()

    def _rest_left(self) -> float:
        """How long until a rested backend may be probed: waiters wake then even if nothing was released."""
        now = time.monotonic()
        rests = [s.down_until - now for s in self.states if s.down_until > now]
        return max(min(rests), 0.05) if rests else 5.0

    def _wake_next(self) -> None:
        """Wake the first waiter (urgent ones first) that can take a slot now, if any."""
        if not (self._urgent or self._waiters) or self._pick(None, first=True) is None:
            return  # no waiter, or no slot free for any (the common case while every slot is busy)
        for queue in (self._urgent, self._waiters):
            for waiter in queue:
                if self._pick(waiter.tries, first=waiter.first) is not None:
                    queue.remove(waiter)
                    waiter.event.set()
                    return

    def _release(self, state: BackendState, slots: int = 1) -> None:
        state.in_flight -= slots
        self._wake_next()

    def rest(self, names: set[str]) -> None:
        """Start these backends as down: they get a probe once their rest is over."""
        for state in self.states:
            if state.backend.name in names:
                state.consecutive_failures = self.policy.down_after
                state.down_until = time.monotonic() + self.policy.probe_after

    def snapshot(self) -> list[BackendSnapshot]:
        return [
            {
                "name": s.backend.name,
                "cap": s.cap,
                "in_flight": s.in_flight,
                "peak_in_flight": s.peak_in_flight,
                "sent": s.sent,
                "succeeded": s.succeeded,
                "failed": s.failed,
                "reissued": s.reissued,
                "down": s.consecutive_failures >= self.policy.down_after,
            }
            for s in self.states
        ]
