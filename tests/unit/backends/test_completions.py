"""Text completions (/v1/completions) on FAKE engines: the prompt goes as it is (no messages), the answer is
read from each choice's `text` through both clients and the fast path's template, the legacy logprobs shape
becomes one dict a token, and a request with roles cannot be sent there."""

from __future__ import annotations

import anyio
import pytest
from pydantic import ValidationError

from pipeline.backends.chat import chat
from pipeline.backends.sdk import close_sdk_clients
from pipeline.backends.sse import SseStream, per_token_logprobs
from pipeline.records import Backend, ChatRequest, Endpoint
from tests.fakes.fake_engine import FakeEngine
from tests.fakes.fake_steplaw import steplaw_in_thread

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def completion_request(prompt: str, max_tokens: int, **extra) -> ChatRequest:
    message = {"role": "user", "content": prompt}
    return ChatRequest(messages=[message], max_tokens=max_tokens, endpoint=Endpoint.COMPLETIONS, extra=extra)


@pytest.mark.parametrize("client", ["fast", "sdk"])
async def test_the_prompt_goes_as_it_is_and_the_text_comes_back(client):
    engine = await FakeEngine(tokens=6).start()
    try:
        backend = Backend(name="f", base_url=engine.url, client=client)
        completion = await chat(backend, completion_request("Once upon a time", 6, logprobs=True), read_timeout=5)
    finally:
        await close_sdk_clients()
        await engine.stop()
    body = engine.bodies[-1]
    assert body["prompt"] == "Once upon a time" and "messages" not in body
    assert body["stream_options"] == {"include_usage": True}
    assert completion.text == "w0 w1 w2 w3 w4 w5 " and completion.completion_tokens == 6
    assert completion.finish_reason == "length" and completion.chunks == 6
    first = (completion.logprobs or [])[0]
    assert first["token"] == "w0 " and first["top_logprobs"][0] == {"token": "w0 ", "logprob": -0.05}


def test_the_fast_path_learns_the_text_events_template():
    with steplaw_in_thread((1.0, 0.01)) as (engine,):
        backend = Backend(name="s", base_url=engine.url)

        async def ask():
            return await chat(backend, completion_request("write", 40, ignore_eos=True), read_timeout=5)

        completion = anyio.run(ask)
    assert completion.completion_tokens == 40 and completion.chunks == 40
    assert completion.text.split() == [f"t{i}" for i in range(1, 41)]


def test_text_events_after_the_first_skip_json():
    stream = SseStream(keep_token_times=False, endpoint=Endpoint.COMPLETIONS)
    event = b'data: {"id":"a","object":"text_completion","choices":[{"index":0,"text":"%s"}]}\n\n'
    for word in ("one ", "two ", "three "):
        stream.feed_bytes(event % word.encode())
    assert stream.parts == ["one ", "two ", "three "] and stream.other_events == 1, "only the first was parsed"


def test_legacy_logprobs_become_one_dict_a_token():
    legacy = {"tokens": ["a", "b"], "token_logprobs": [-0.1, -0.2], "top_logprobs": [{"a": -0.1, "x": -2}, None]}
    assert per_token_logprobs(legacy) == [
        {
            "token": "a",
            "logprob": -0.1,
            "top_logprobs": [{"token": "a", "logprob": -0.1}, {"token": "x", "logprob": -2.0}],
        },
        {"token": "b", "logprob": -0.2, "top_logprobs": []},
    ]
    chat_shape = {"content": [{"token": "a", "logprob": -0.1, "top_logprobs": []}]}
    assert per_token_logprobs(chat_shape) == chat_shape["content"]


def test_a_request_with_roles_cannot_go_to_completions():
    with pytest.raises(ValidationError, match="one user message"):
        ChatRequest(
            messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
            endpoint=Endpoint.COMPLETIONS,
        )
