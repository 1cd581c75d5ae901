"""BackendPool: sends requests to a fleet of backends, each with a cap, and returns their Completions.

A request goes to the least-loaded backend with a free slot and waits, first come first served, while all are
full; planning's requests (`first=True`) wait ahead of the others and may have slots kept for them
(`reserve_for_first`) and a backend with a small batch (`planning_lane`), so planning that runs beside writing
never waits for a whole section to end and its tokens come near the engine's idle step time (admission.py).
A failed attempt is retried with backoff on another backend first, until the request has failed `attempts`
times and every backend has had it; a backend that blamed the request is never asked it again (retry.py).
A backend that fails `down_after` times in a row is rested and later probed by a single request; when every
backend is down and none has answered for `give_up_after` seconds, requests fail with FleetUnavailable,
which ends a job (one line; what was written stays, and a resume finishes it); a backend whose engine is
being restarted is held out of use and revived with its new address (health.py).
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
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial

from pipeline.backends.chat import chat
from pipeline.backends.pool.admission import Admission
from pipeline.backends.pool.health import FleetUnavailable, Health
from pipeline.backends.pool.policy import RetryPolicy
from pipeline.backends.pool.retry import REASK_BEFORE_FIRST_BYTE, RetryRule
from pipeline.backends.pool.state import BackendSnapshot, BackendState, Tries
from pipeline.backends.sse import AttemptError, OnDelta
from pipeline.backends.transport import Transport
from pipeline.errors import FanoutError
from pipeline.records import Attempt, Backend, ChatRequest, Completion, Outcome

RequestWatcher = Callable[[ChatRequest, Completion | None, float, list[Attempt]], None]


@dataclass
class PoolStats:
    attempts: list[Attempt] = field(default_factory=list)  # every attempt the pool made, in order


class BackendPool:
    """Sends each request through its attempts and returns its Completion; the coordinator of four parts.

    admission.py (Admission) says which backend an attempt takes its slots on, and when; health.py (Health)
    which backends are up and whether the fleet can answer at all; retry.py (RetryRule) whether, where and how
    soon a failed request is asked again; the Transport (pipeline/backends/transport.py: chat.chat unless
    fleet.py sets worker processes' or Ray actors') sends each attempt. The pool itself runs one attempt on
    its slots (re-asking a cut before the first byte at once, REASK_BEFORE_FIRST_BYTE times), records every
    attempt (`stats`, each backend's counters, `snapshot`) and tells `on_finished` of every request."""

    def __init__(self, backends: list[Backend], policy: RetryPolicy | None = None, caps: list[int] | None = None):
        if not backends:
            raise FanoutError("no backends")
        caps = caps or [b.cap for b in backends]
        self.states = [BackendState(b, cap) for b, cap in zip(backends, caps)]
        self.policy = policy or RetryPolicy()
        self.stats = PoolStats()
        self.on_finished: RequestWatcher | None = None  # hears of every request, answered or failed
        self.transport: Transport = chat  # or ChatWorkers.chat: the streams read in worker processes
        self.health = Health(self.states, self.policy)
        names = [state.backend.name for state in self.states]
        self.retry = RetryRule(self.policy, names, cannot_answer=self.health.cannot_answer)
        self.admission = Admission(self.states, health=self.health, retry=self.retry)

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
        tries = Tries(prefer=prefer, on_sent=on_sent, slots=request.choices)
        t_asked = time.monotonic()
        completion: Completion | None = None
        try:
            try:
                completion = await self._attempt(request, tries, on_delta, first=first)
            except AttemptError as made:
                again = partial(self._attempt, request, tries, on_delta, first=first)
                completion = await self.retry.after_failure(made, tries, again, on_retry=on_retry)
        except AttemptError:
            raise self._failure(request.tag, tries) from None
        finally:  # answered, failed, or cancelled by its caller (planning stops once it has enough)
            if self.on_finished is not None:
                self.on_finished(request, completion, t_asked, tries.attempts)
        completion.attempts = tries.attempts
        return completion

    def _failure(self, tag: str, tries: Tries) -> FanoutError:
        if self.health.cannot_answer():
            return self.health.unavailable_error()
        return self.retry.verdict(tag, tries)

    async def _attempt(
        self, request: ChatRequest, tries: Tries, on_delta: OnDelta | None, *, first: bool
    ) -> Completion:
        """One attempt on the slots admission grants: a cut before the first byte is re-asked at once on them."""
        state = await self.admission.acquire(tries, first=first)
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
                    tries.count_failure(name, blames_request=error.blames_request)
                    if not error.blames_request:
                        self.health.note_failure(state, f"{error.kind}: {error.detail}")
                    raise
                self._record(tries.attempts, state, t_start, Outcome.OK, "")
                self.health.note_success(state)
                return completion
            in_a_row = f"{REASK_BEFORE_FIRST_BYTE} times in a row"
            tries.count_failure(name, blames_request=False)
            self.health.note_failure(state, f"{Outcome.CUT_BEFORE_FIRST_BYTE}: {in_a_row}")
            raise AttemptError(Outcome.CUT_BEFORE_FIRST_BYTE, in_a_row)
        finally:
            self.admission.release(state, tries.granted)

    def _record(self, attempts: list[Attempt], state: BackendState, t_start: float, outcome: str, detail: str) -> None:
        attempt = Attempt(
            backend=state.backend.name, t_start=t_start, t_end=time.monotonic(), outcome=outcome, detail=detail[:300]
        )
        attempts.append(attempt)
        self.stats.attempts.append(attempt)
        state.sent += 1

    @property
    def last_answer(self) -> float:
        """When any backend last answered (the pool's start before any did)."""
        return self.health.last_answer

    async def next_answer(self, timeout: float) -> None:
        """Wait until any backend answers a request, or `timeout` seconds (Health.next_answer)."""
        await self.health.next_answer(timeout)

    def unavailable(self) -> bool:
        """No backend can answer anything (Health.unavailable)."""
        return self.health.unavailable()

    def unavailable_error(self) -> FleetUnavailable:
        """The one line that says why no backend can answer (Health.unavailable_error)."""
        return self.health.unavailable_error()

    def stop_all(self, why: str) -> None:
        """Stop the fleet: every request waiting or asked from now on fails with FleetUnavailable(why)."""
        self.health.stop(why)
        self.admission.wake_all()

    def hold(self, name: str) -> None:
        """Take a backend out of use until `revive` (its engine is being restarted)."""
        self.health.hold(name)

    def revive(self, name: str, base_url: str | None = None) -> None:
        """Put a held backend back in use with a clean record, at its new address if it has one."""
        self.health.revive(name, base_url)
        self.admission.wake_next()

    def rest(self, names: set[str]) -> None:
        """Start these backends as down: they get a probe once their rest is over."""
        self.health.rest(names)

    def spare_slots(self) -> int:
        """Slots free at once with no request waiting for one (admission.py: spare)."""
        return self.admission.spare()

    def reserve_for_first(self, slots: int = 1) -> AbstractContextManager[None]:
        """Keep `slots` of each backend free for `first` requests while the block runs (admission.py)."""
        return self.admission.reserve_for_first(slots)

    def planning_lane(self, writing_slots: int) -> AbstractContextManager[None]:
        """While the block runs, the first backend takes at most `writing_slots` writing requests and is the
        one `first` requests try first (admission.py)."""
        return self.admission.planning_lane(writing_slots)

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
                "down": self.health.is_down(s),
            }
            for s in self.states
        ]
