"""Every fault of the FAKE hostile backend, one request each through the fast client: the attempt fails
with the outcome FAULTS names, and no fault escapes as anything but an AttemptError."""

from __future__ import annotations

import pytest

from pipeline.backends.chat import chat
from pipeline.backends.sse import AttemptError
from pipeline.records import Backend, ChatRequest, Outcome
from tests.fakes.fake_engine import BookReplies
from tests.fakes.hostile_fleet import FAULTS, HostileBackend

pytestmark = pytest.mark.anyio
REQUEST = ChatRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=64, tag="t")


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_each_fault_is_the_outcome_it_names(fault):
    hostile = await HostileBackend(BookReplies(), seed=1, share=1.0, faults=[fault]).start()
    try:
        with pytest.raises(AttemptError) as failure:
            await chat(Backend(name="h", base_url=hostile.url, model="fake-model"), REQUEST, read_timeout=0.4)
    finally:
        await hostile.stop()
    assert failure.value.kind == FAULTS[fault], failure.value
    assert failure.value.blames_request == (fault == "http_400"), "only a 400 names the request"
    assert hostile.drawn == [fault]


async def test_a_request_without_a_fault_is_answered_and_the_draw_follows_the_seed():
    draws = []
    for _ in range(2):
        hostile = await HostileBackend(BookReplies(), seed=7, share=0.5, faults=["http_500"]).start()
        backend = Backend(name="h", base_url=hostile.url, model="fake-model")
        answered = 0
        for _ in range(12):
            try:
                answer = await chat(backend, REQUEST, read_timeout=2)
            except AttemptError as error:
                assert error.outcome is Outcome.HTTP
            else:
                answered += 1
                assert answer.text.split() == [f"w{i}" for i in range(40)]
        await hostile.stop()
        draws.append(hostile.drawn)
        assert answered == hostile.drawn.count("ok") and 0 < answered < 12
    assert draws[0] == draws[1], "the same seed draws the same faults"
