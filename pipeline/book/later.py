"""Work whose request failed on every backend is asked again later in the run, not given up.

The pool (pipeline/backends/pool/retry.py) asks a failed request again on other backends until every backend
has had it; when even that fails, the planner's node, the writer's section or the repair waits, while the rest
of the book goes on, until any backend answers something (or LATER_PAUSE_S), and asks again: up to
LATER_ROUNDS times while the fleet answers other requests, for as long as the pool does not say that no
backend can answer anything (FleetUnavailable, which passes through and ends the job) while it answers none.
A request every backend blamed on itself (RequestRefused) would get the same answer and is not asked again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from pipeline.backends.pool import BackendPool, RequestFailed, RequestRefused

LATER_ROUNDS = 3
LATER_PAUSE_S = 10.0

_T = TypeVar("_T")


async def asked_until_answered(
    pool: BackendPool,
    ask: Callable[[], Awaitable[_T]],
    *,
    on_later: Callable[[], None] | None = None,
    rounds: int = LATER_ROUNDS,
    pause: float = LATER_PAUSE_S,
) -> _T:
    """`ask()`, and while its request fails on every backend, again after the pool's next answer (or `pause`
    seconds); `on_later` hears of each wait. A round in which the fleet answered other requests is this
    request's own bad luck, and after `rounds` of them the last RequestFailed is raised; a round in which
    nothing was answered is the fleet's, and the wait goes on until it answers again or the pool says no
    backend can (FleetUnavailable)."""
    unlucky = 0
    while True:
        since = pool.last_answer
        try:
            return await ask()
        except RequestRefused:
            raise
        except RequestFailed:
            if pool.last_answer != since:
                unlucky += 1
                if unlucky > rounds:
                    raise
        if on_later is not None:
            on_later()
        await pool.next_answer(pause)
