"""The retry rule: which failed attempt is asked again, where, how many times, and how soon.

Contract (records.Outcome says which kind an attempt's outcome is):
- A connection the server closed before the first byte, or a client worker that ended
  (`Outcome.asked_again_at_once`), is asked again at once on the same slot, counted apart from failures;
  REASK_BEFORE_FIRST_BYTE such cuts in a row are one failure of that backend (pool.py runs that loop).
- A failure that blames the request (`Outcome.blames_request`) is asked again at once on another backend, and
  the backend that blamed it is never asked it again (`where`, `pause`).
- Any other failure is the backend's: asked again after a backoff, exponential with jitter (tenacity), or
  after the server's Retry-After when it sent one (at most MAX_RETRY_AFTER s), on a backend that has not
  failed it while one has a free slot, on one that has only while the request has attempts left (`where`).
- Asking stops (`given_up`) once every backend blamed the request (RequestRefused), the fleet cannot answer
  (the caller's FleetUnavailable), or the request failed `attempts` times and every backend that did not
  blame it failed it once (RequestFailed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential_jitter

from pipeline.backends.pool.policy import RetryPolicy
from pipeline.backends.pool.state import BackendState, Tries
from pipeline.backends.sse import AttemptError
from pipeline.errors import FanoutError
from pipeline.records import Attempt, Completion

REASK_BEFORE_FIRST_BYTE = 5
MAX_RETRY_AFTER = 60.0  # seconds: a longer Retry-After is waited this long


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


class RetryRule:
    """The retry rule over a fixed set of backends (the module docstring states it). `cannot_answer` says
    whether the fleet can answer at all (health.py's Health.cannot_answer)."""

    def __init__(self, policy: RetryPolicy, backends: Collection[str], *, cannot_answer: Callable[[], bool]):
        self.policy = policy
        self.backends = frozenset(backends)
        self.cannot_answer = cannot_answer
        self._backoff = wait_exponential_jitter(
            multiplier=policy.backoff_initial, max=policy.backoff_max, jitter=policy.backoff_initial
        )

    def where(self, tries: Tries, free: list[BackendState]) -> list[BackendState]:
        """Of the backends with a free slot, those the request may be asked of now: never one that blamed it;
        one that failed it only when no other is free, and not at all once it has used its attempts."""
        if not (tries.refused_by or tries.failed_on):
            return free
        spent = tries.failures >= self.policy.attempts
        free = [s for s in free if s.backend.name not in tries.refused_by]
        untried = [s for s in free if s.backend.name not in tries.failed_on]
        return untried if spent else untried or free

    def given_up(self, tries: Tries) -> bool:
        """Stop asking: every backend blamed the request; or the fleet cannot answer; or the request has
        failed `attempts` times and every backend that did not blame it has failed it once."""
        left = self.backends - tries.refused_by
        if not left or self.cannot_answer():
            return True
        return tries.failures >= self.policy.attempts and left <= tries.failed_on

    def pause(self, retry_state: RetryCallState) -> float:
        """Seconds to wait before the next attempt: none after a failure that blamed the request, the
        server's Retry-After (at most MAX_RETRY_AFTER) when it sent one, else the backoff."""
        error = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(error, AttemptError) and error.blames_request:
            return 0.0  # another backend is asked at once: this one's backoff says nothing of it
        if isinstance(error, AttemptError) and error.retry_after is not None:
            return min(error.retry_after, MAX_RETRY_AFTER)
        return self._backoff(retry_state)

    def verdict(self, tag: str, tries: Tries) -> RequestFailed:
        """Why a request the rule gave up on failed (the caller says FleetUnavailable first, when it is that):
        RequestRefused when every backend blamed the request, else RequestFailed."""
        if tries.refused_by >= self.backends:
            return RequestRefused(tag, tries.attempts)
        return RequestFailed(tag, tries.attempts)

    async def after_failure(
        self,
        made: AttemptError,
        tries: Tries,
        attempt: Callable[[], Awaitable[Completion]],
        *,
        on_retry: Callable[[], None] | None,
    ) -> Completion:
        """After a failed first attempt (`made`), tenacity decides the rest: whether to ask again (`given_up`),
        how long to wait (`pause`), when to stop; `on_retry` is called before each later `attempt()`. The
        failure already made is its first attempt (raised again here, nothing sent), so the policy counts it
        as before. Only failed requests come here: around every request, tenacity's async iteration cost 333
        against 203 µs of CPU a request of 8 events (the per-request loop of `examples/client_cost.py`, 2-core
        machine), a third of the client's whole cost of a short request. The last failure is raised."""
        retrying = AsyncRetrying(
            stop=lambda _: self.given_up(tries),
            wait=self.pause,
            retry=retry_if_exception_type(AttemptError),
            reraise=True,
        )
        earlier: AttemptError | None = made
        async for each in retrying:
            with each:
                if earlier is not None:
                    error, earlier = earlier, None
                    raise error
                if on_retry is not None:
                    on_retry()
                return await attempt()
        raise AssertionError("tenacity ends by returning or raising")  # reraise=True
