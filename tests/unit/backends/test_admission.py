"""The admission rule alone (pipeline/backends/pool/admission.py): each backend's limit, which backend an
attempt takes, how many slots, and in what order waiters get them; no engine, no pool."""

from __future__ import annotations

import anyio
import pytest

from pipeline.backends.pool.admission import Admission
from pipeline.backends.pool.health import FleetUnavailable, Health
from pipeline.backends.pool.policy import RetryPolicy
from pipeline.backends.pool.retry import RetryRule
from pipeline.backends.pool.state import BackendState, Tries
from pipeline.records import Backend

pytestmark = pytest.mark.anyio
POLICY = RetryPolicy(attempts=2, down_after=3, probe_after=5.0)


@pytest.fixture
def anyio_backend():
    return "asyncio"


def parts(*caps: int) -> tuple[Admission, Health]:
    states = [
        BackendState(Backend(name=f"b{i}", base_url=f"http://b{i}/v1", cap=cap), cap) for i, cap in enumerate(caps)
    ]
    health = Health(states, POLICY)
    retry = RetryRule(POLICY, [state.backend.name for state in states], cannot_answer=health.cannot_answer)
    return Admission(states, health=health, retry=retry), health


def admission_of(*caps: int) -> Admission:
    return parts(*caps)[0]


def limits(admission: Admission, *, first: bool = False) -> list[int]:
    return [admission.limit(state, first=first) for state in admission.states]


def test_writing_may_fill_the_cap_less_what_the_reserve_holds_back_but_never_the_last_slot():
    admission = admission_of(3, 8, 1)
    assert limits(admission) == limits(admission, first=True) == [3, 8, 1]
    with admission.reserve_for_first(1):
        assert [admission.reserve_holds_back(state) for state in admission.states] == [1, 1, 0]
        assert limits(admission) == [2, 7, 1] and limits(admission, first=True) == [3, 8, 1]
    with admission.reserve_for_first(5):
        assert limits(admission) == [1, 3, 1], "a backend's last slot is never kept"
    assert limits(admission) == [3, 8, 1], "the reserve is over"


def test_the_planning_lane_allows_its_backend_a_few_writing_requests_and_planning_all_of_its_slots():
    admission = admission_of(8, 8)
    with admission.planning_lane(2):
        assert limits(admission) == [2, 8] and limits(admission, first=True) == [8, 8]
        with admission.reserve_for_first(1):
            assert limits(admission) == [2, 7], "the lower of the reserve's and the lane's"
    with admission.planning_lane(8), admission.reserve_for_first(1):
        assert limits(admission) == [7, 7], "a lane wider than the reserve leaves the reserve's limit"
    with admission.planning_lane(0):
        assert limits(admission) == [8, 8], "no lane"
    alone = admission_of(4)
    with alone.planning_lane(1):
        assert limits(alone) == [4], "a single backend is never made a lane"
    assert limits(admission) == [8, 8], "the lane is over"


def picked(admission: Admission, tries: Tries | None = None, *, first: bool = False) -> str | None:
    state = admission.pick(tries, first=first)
    return None if state is None else state.backend.name


def test_an_attempt_takes_the_least_loaded_backend_with_room_that_is_up():
    admission, health = parts(2, 6)
    low, high = admission.states
    low.in_flight, high.in_flight = 1, 2
    assert picked(admission) == "b1", "2 of 6 is less loaded than 1 of 2"
    high.in_flight = 6
    assert picked(admission) == "b0"
    low.in_flight = 2
    assert picked(admission) is None, "every backend full"
    low.in_flight = high.in_flight = 0
    health.rest({"b1"})
    assert picked(admission) == "b0", "a resting backend gets nothing"
    health.hold("b0")
    assert picked(admission) is None, "a held backend gets nothing"


def test_an_attempt_takes_its_preferred_backend_then_for_planning_the_lane_within_what_the_retry_rule_allows():
    admission = admission_of(4, 4, 4)
    admission.states[0].in_flight = 3
    assert picked(admission, Tries(prefer="b0")) == "b0", "preferred while it has a free slot"
    admission.states[0].in_flight = 4
    assert picked(admission, Tries(prefer="b0")) == "b1", "full: the least loaded instead"
    admission.states[0].in_flight = 2
    with admission.planning_lane(2):
        assert picked(admission, first=True) == "b0", "planning goes to the lane first"
        assert picked(admission) == "b1", "writing: the lane is full at two"
    refused = Tries(failures=1, refused_by={"b1"})
    assert picked(admission, refused) == "b2", "never a backend that blamed the request"


async def test_a_request_with_several_choices_takes_as_many_slots_as_are_free_at_least_one():
    admission = admission_of(4)
    (state,) = admission.states
    state.in_flight = 1
    tries = Tries(slots=4)
    assert await admission.acquire(tries) is state
    assert tries.granted == 3 and state.in_flight == state.peak_in_flight == 4
    admission.release(state, tries.granted)
    assert state.in_flight == 1


async def test_waiters_take_freed_slots_in_arrival_order_planning_first():
    admission = admission_of(1)
    (state,) = admission.states
    order: list[str] = []

    async def take(tag: str, *, first: bool = False) -> None:
        taken = await admission.acquire(Tries(), first=first)
        order.append(tag)
        await anyio.sleep(0.01)
        admission.release(taken)

    held = await admission.acquire(Tries())
    async with anyio.create_task_group() as group:
        for tag in ("w0", "w1"):
            group.start_soon(take, tag)
            await anyio.sleep(0.01)
        group.start_soon(lambda: take("plan", first=True))
        await anyio.sleep(0.01)
        assert order == [], "all wait while the only slot is held"
        admission.release(held)
    assert order == ["plan", "w0", "w1"] and state.in_flight == 0


async def test_a_reserved_slot_goes_to_planning_while_writing_waits():
    admission = admission_of(2)
    with admission.reserve_for_first(1):
        await admission.acquire(Tries())
        with anyio.move_on_after(0.05) as waited:
            await admission.acquire(Tries())
        assert waited.cancelled_caught, "writing waits for the kept slot"
        assert await admission.acquire(Tries(), first=True) is admission.states[0], "planning takes it at once"


async def test_waiters_hear_at_once_that_the_fleet_was_stopped():
    admission, health = parts(1)
    await admission.acquire(Tries())
    failures: list[str] = []

    async def wait() -> None:
        with pytest.raises(FleetUnavailable) as stopped:
            await admission.acquire(Tries())
        failures.append(str(stopped.value))

    with anyio.fail_after(1):
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(wait)
            await anyio.sleep(0.01)
            health.stop("the embedded engine died again")
            admission.wake_all()
    assert failures == ["the embedded engine died again"] * 3
