"""The retry rule alone (pipeline/backends/pool/retry.py): where a failed request may go, when asking stops,
how long it waits, and what it ends with; no engine, no pool."""

from __future__ import annotations

import pytest
from tenacity import AsyncRetrying, RetryCallState

from pipeline.backends.pool.policy import RetryPolicy
from pipeline.backends.pool.retry import MAX_RETRY_AFTER, RequestFailed, RequestRefused, RetryRule
from pipeline.backends.pool.state import BackendState, Tries
from pipeline.backends.sse import AttemptError
from pipeline.records import Backend

pytestmark = pytest.mark.anyio
POLICY = RetryPolicy(attempts=2, backoff_initial=0.5, backoff_max=10.0)
NAMES = ["a", "b", "c"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


def rule(policy: RetryPolicy = POLICY, *, cannot_answer: bool = False) -> RetryRule:
    return RetryRule(policy, NAMES, cannot_answer=lambda: cannot_answer)


def states() -> list[BackendState]:
    return [BackendState(Backend(name=name, base_url=f"http://{name}/v1", cap=2), cap=2) for name in NAMES]


def names(picked: list[BackendState]) -> list[str]:
    return [state.backend.name for state in picked]


def tries(*, failures: int = 0, failed_on: tuple[str, ...] = (), refused_by: tuple[str, ...] = ()) -> Tries:
    return Tries(failures=failures, failed_on=set(failed_on), refused_by=set(refused_by))


def test_a_fresh_request_may_go_to_any_free_backend():
    free = states()
    assert rule().where(tries(), free) is free


def test_a_backend_that_blamed_the_request_is_never_asked_it_again():
    assert names(rule().where(tries(failures=1, refused_by=("a",)), states())) == ["b", "c"]
    spent = tries(failures=5, refused_by=("a", "b"))
    assert names(rule().where(spent, states())) == ["c"]


def test_a_backend_that_failed_the_request_is_asked_only_when_no_other_is_free_while_attempts_are_left():
    assert names(rule().where(tries(failures=1, failed_on=("a",)), states())) == ["b", "c"], "others first"
    only_failed = [states()[0]]
    assert names(rule().where(tries(failures=1, failed_on=("a",)), only_failed)) == ["a"], "no other free"
    assert rule().where(tries(failures=2, failed_on=("a",)), only_failed) == [], "attempts spent: never again"
    assert names(rule().where(tries(failures=2, failed_on=("a",)), states())) == ["b", "c"]


def test_asking_goes_on_until_every_backend_failed_it_once_and_its_attempts_are_spent():
    assert not rule().given_up(tries())
    assert not rule().given_up(tries(failures=2, failed_on=("a", "b"))), "c has not had it"
    assert not rule().given_up(tries(failures=1, failed_on=("a", "b", "c"))), "an attempt is left"
    assert rule().given_up(tries(failures=2, failed_on=("a", "b", "c")))
    assert rule().given_up(tries(failures=2, failed_on=("a", "b"), refused_by=("c",))), "c is not asked again"


def test_asking_stops_at_once_when_every_backend_blamed_the_request_or_the_fleet_cannot_answer():
    assert rule().given_up(tries(failures=3, refused_by=("a", "b", "c")))
    assert rule(cannot_answer=True).given_up(tries())


def test_the_verdict_is_refused_only_when_every_backend_blamed_the_request():
    refused = rule().verdict("sec-1", tries(failures=3, refused_by=("a", "b", "c")))
    assert isinstance(refused, RequestRefused) and "sec-1" in str(refused)
    failed = rule().verdict("sec-2", tries(failures=3, failed_on=("a",), refused_by=("b", "c")))
    assert type(failed) is RequestFailed


def after(error: AttemptError, attempt_number: int = 1) -> RetryCallState:
    state = RetryCallState(AsyncRetrying(), fn=None, args=(), kwargs={})
    state.attempt_number = attempt_number
    state.set_exception((type(error), error, None))
    return state


def test_the_pause_is_none_after_the_requests_fault_the_servers_hint_when_given_else_the_backoff():
    assert rule().pause(after(AttemptError("http_400", "bad request"))) == 0.0
    assert rule().pause(after(AttemptError("http_429", "", retry_after=1.5))) == 1.5
    assert rule().pause(after(AttemptError("http_503", "", retry_after=600.0))) == MAX_RETRY_AFTER
    first = [rule().pause(after(AttemptError("http_500"))) for _ in range(50)]
    assert all(0.5 <= wait <= 1.0 for wait in first), "backoff_initial plus jitter up to backoff_initial"
    third = [rule().pause(after(AttemptError("timeout"), attempt_number=3)) for _ in range(50)]
    assert all(2.0 <= wait <= 2.5 for wait in third), "doubling each attempt"
    assert rule().pause(after(AttemptError("timeout"), attempt_number=10)) == POLICY.backoff_max


async def test_after_a_failure_it_asks_again_until_an_answer_calling_on_retry_before_each():
    fast = RetryPolicy(attempts=4, backoff_initial=0.001, backoff_max=0.002)
    retry = RetryRule(fast, NAMES, cannot_answer=lambda: False)
    request_tries = tries(failures=1, failed_on=("a",))
    heard: list[str] = []
    answer = object()  # stands for the Completion

    async def attempt():
        heard.append("attempt")
        if heard.count("attempt") < 2:
            request_tries.failures += 1
            raise AttemptError("http_500")
        return answer

    got = await retry.after_failure(
        AttemptError("http_500"), request_tries, attempt, on_retry=lambda: heard.append("retry")
    )
    assert got is answer and heard == ["retry", "attempt", "retry", "attempt"], "the failure made is not sent again"


async def test_after_a_failure_it_raises_the_last_once_it_gives_up():
    fast = RetryPolicy(attempts=1, backoff_initial=0.001, backoff_max=0.002)
    retry = RetryRule(fast, ["a"], cannot_answer=lambda: False)
    request_tries = tries(failures=1, failed_on=("a",))

    async def attempt():
        raise AssertionError("given up: nothing more is sent")

    made = AttemptError("http_500", "first")
    with pytest.raises(AttemptError) as raised:
        await retry.after_failure(made, request_tries, attempt, on_retry=None)
    assert raised.value is made
