"""The backend pool: caps, least-loaded balancing, retries elsewhere, down-marking.

Takes Backends (each with a cap: the most requests in flight there) and ChatRequests; returns Completions.
A request goes to the backend with the lowest in_flight/cap that has a free slot and waits, first come
first served, while all are full; a request sent with `first=True` (planning) waits ahead of the others,
and while `reserve_for_first` is on, one slot of each backend is kept for such requests, so planning that
runs beside writing never waits for a whole section to end.
A failed attempt is retried with backoff (tenacity), preferring another backend; a backend that fails
`down_after` times in a row is rested and later probed by a single request.
A connection the server closed before the first byte (llama-server drops idle keep-alives), or a request
whose client worker process ended (`--workers`), is re-asked at once on the same slot and counted apart
from failures. Every attempt is recorded.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypedDict

import anyio
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from pipeline.backends.chat import chat
from pipeline.backends.sse import AttemptError, OnDelta
from pipeline.errors import FanoutError
from pipeline.records import Attempt, Backend, ChatRequest, Completion, Outcome

REASK_BEFORE_FIRST_BYTE = 5
RequestWatcher = Callable[[ChatRequest, Completion | None, float, list[Attempt]], None]
Transport = Callable[[Backend, ChatRequest, float, OnDelta | None], Awaitable[Completion]]


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
    """Every attempt of one request failed."""

    def __init__(self, tag: str, attempts: list[Attempt]):
        last = attempts[-1] if attempts else None
        super().__init__(
            f"request {tag or '?'} failed after {len(attempts)} attempts"
            + (f" (last: {last.outcome} on {last.backend}: {last.detail[:120]})" if last else "")
        )
        self.tag = tag
        self.attempts = attempts


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    backoff_initial: float = 0.5
    backoff_max: float = 10.0
    read_timeout: float = 120.0
    down_after: int = 3
    probe_after: float = 5.0


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

    @property
    def load(self) -> float:
        return self.in_flight / self.cap


@dataclass
class PoolStats:
    attempts: list[Attempt] = field(default_factory=list)  # every attempt the pool made, in order


class BackendPool:
    def __init__(self, backends: list[Backend], policy: RetryPolicy | None = None, caps: list[int] | None = None):
        if not backends:
            raise FanoutError("no backends")
        caps = caps or [b.cap for b in backends]
        self.states = [BackendState(b, cap) for b, cap in zip(backends, caps)]
        self.policy = policy or RetryPolicy()
        self.stats = PoolStats()
        self._waiters: deque[anyio.Event] = deque()
        self._urgent: deque[anyio.Event] = deque()
        self.on_finished: RequestWatcher | None = None  # hears of every request, answered or failed
        self.transport: Transport = chat  # or ChatWorkers.chat: the streams read in worker processes
        self._reserved = 0  # slots of each backend (never its only one) that only `first` requests may take
        self._backoff = wait_exponential_jitter(
            multiplier=self.policy.backoff_initial, max=self.policy.backoff_max, jitter=self.policy.backoff_initial
        )

    async def complete(
        self,
        request: ChatRequest,
        on_delta: OnDelta | None = None,
        *,
        first: bool = False,
        on_retry: Callable[[], None] | None = None,
    ) -> Completion:
        """Send one request through the pool; raise RequestFailed when every attempt failed. `first` puts it
        ahead of every waiting request without it; `on_retry` is called before each attempt after the first
        (text an earlier attempt streamed to `on_delta` is void)."""
        attempts: list[Attempt] = []
        avoid: set[str] = set()
        t_asked = time.monotonic()
        completion: Completion | None = None
        try:
            try:
                completion = await self._attempt(request, attempts, avoid, on_delta, first=first)
            except AttemptError as made:
                completion = await self._retried(
                    request, attempts, avoid, on_delta, first=first, on_retry=on_retry, made=made
                )
        except AttemptError:
            raise RequestFailed(request.tag, attempts) from None
        finally:  # answered, failed, or cancelled by its caller (planning stops once it has enough)
            if self.on_finished is not None:
                self.on_finished(request, completion, t_asked, attempts)
        completion.attempts = attempts
        return completion

    async def _retried(
        self,
        request: ChatRequest,
        attempts: list[Attempt],
        avoid: set[str],
        on_delta: OnDelta | None,
        *,
        first: bool,
        on_retry: Callable[[], None] | None,
        made: AttemptError,
    ) -> Completion:
        """After a failed first attempt, tenacity decides the rest: whether to ask again, how long to wait,
        when to stop. The failure already made is its first attempt (raised again here, nothing sent), so
        the policy counts it as before. Only failed requests come here: around every request, tenacity's
        async iteration cost 333 against 203 µs of CPU a request of 8 events (the per-request loop of
        `examples/client_cost.py`, 2-core machine), a third of the client's whole cost of a short request."""
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.policy.attempts),
            wait=self._wait,
            retry=retry_if_exception(lambda exc: isinstance(exc, AttemptError) and exc.retryable),
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
                return await self._attempt(request, attempts, avoid, on_delta, first=first)
        raise AssertionError("tenacity ends by returning or raising")  # reraise=True

    def _wait(self, retry_state: RetryCallState) -> float:
        error = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(error, AttemptError) and error.retry_after is not None:
            return min(error.retry_after, 60.0)
        return self._backoff(retry_state)

    async def _attempt(
        self, request: ChatRequest, attempts: list[Attempt], avoid: set[str], on_delta: OnDelta | None, *, first: bool
    ) -> Completion:
        state = await self._acquire(avoid, first=first)
        try:
            for _ in range(REASK_BEFORE_FIRST_BYTE):
                t_start = time.monotonic()
                try:
                    completion = await self.transport(state.backend, request, self.policy.read_timeout, on_delta)
                except AttemptError as error:
                    self._record(attempts, state, t_start, error.kind, error.detail)
                    if error.outcome.asked_again_at_once:
                        state.reissued += 1
                        continue
                    self._note_failure(state)
                    avoid.add(state.backend.name)
                    raise
                self._record(attempts, state, t_start, Outcome.OK, "")
                self._note_success(state)
                return completion
            self._note_failure(state)
            avoid.add(state.backend.name)
            raise AttemptError(Outcome.CUT_BEFORE_FIRST_BYTE, f"{REASK_BEFORE_FIRST_BYTE} times in a row")
        finally:
            self._release(state)

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

    def _note_failure(self, state: BackendState) -> None:
        state.failed += 1
        state.consecutive_failures += 1
        if state.consecutive_failures >= self.policy.down_after:
            state.down_until = time.monotonic() + self.policy.probe_after

    def _is_up(self, state: BackendState, now: float) -> bool:
        """A backend is up unless it failed `down_after` times in a row; once its rest is over, one
        request at a time probes it."""
        if state.consecutive_failures < self.policy.down_after:
            return True
        return now >= state.down_until and state.in_flight == 0

    @contextmanager
    def reserve_for_first(self, slots: int = 1) -> Iterator[None]:
        """Keep `slots` of each backend free for `first` requests while the block runs."""
        self._reserved = slots
        try:
            yield
        finally:
            self._reserved = 0
            self._wake_next()

    def _pick(self, avoid: set[str], *, first: bool = True) -> BackendState | None:
        now = time.monotonic()
        free = [s for s in self.states if s.in_flight < self._limit(s, first=first) and self._is_up(s, now)]
        preferred = [s for s in free if s.backend.name not in avoid] or free
        return min(preferred, key=lambda s: s.load, default=None)

    def _limit(self, state: BackendState, *, first: bool) -> int:
        return state.cap if first else state.cap - min(self._reserved, state.cap - 1)

    async def _acquire(self, avoid: set[str], *, first: bool = False) -> BackendState:
        """Take a slot: at once if one is free and nobody waits ahead, else in arrival order (urgent first)."""
        queue = self._urgent if first else self._waiters
        ahead = self._urgent if first else self._urgent or self._waiters
        state = self._pick(avoid, first=first)
        if state is None or ahead:
            await self._wait_turn(queue, at_front=False)
            while (state := self._pick(avoid, first=first)) is None:
                await self._wait_turn(queue, at_front=True)
        state.in_flight += 1
        state.peak_in_flight = max(state.peak_in_flight, state.in_flight)
        if (self._urgent or self._waiters) and self._pick(set()) is not None:
            self._wake_next()  # more than one slot came free: pass the turn on
        return state

    async def _wait_turn(self, queue: deque[anyio.Event], *, at_front: bool) -> None:
        event = anyio.Event()
        if at_front:
            queue.appendleft(event)
        else:
            queue.append(event)
        try:
            with anyio.move_on_after(self._rest_left()):
                await event.wait()
        finally:
            if not event.is_set():
                queue.remove(event)

    def _rest_left(self) -> float:
        """How long until a rested backend may be probed: waiters wake then even if nothing was released."""
        now = time.monotonic()
        rests = [s.down_until - now for s in self.states if s.down_until > now]
        return max(min(rests), 0.05) if rests else 5.0

    def _wake_next(self) -> None:
        for queue in (self._urgent, self._waiters):
            if queue:
                queue.popleft().set()
                return

    def _release(self, state: BackendState) -> None:
        state.in_flight -= 1
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
