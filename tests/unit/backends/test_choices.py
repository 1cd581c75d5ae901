"""Several choices of one prompt (ChatRequest.choices, the OpenAI `n`): the SSE reader sorts llama-server's
interleaved events by index, learns its fast-path template from choice 0 only and calls an answer empty only
when every choice is; the body asks for `n` only past one; the FAKE engine's n choices come back apart through
the pool on both clients; which engines honour `n`."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.backends.engines import ENGINES, honours_choices
from pipeline.backends.envelope import request_body
from pipeline.backends.pool import BackendPool, RetryPolicy
from pipeline.backends.sdk import close_sdk_clients
from pipeline.backends.sse import AttemptError, EveryChoice, SseStream, completion_of
from pipeline.records import Backend, ChatRequest, Endpoint, EngineKind
from tests.fakes.fake_engine import BookReplies, FakeEngine
from tests.fakes.fake_prompts import plan_level
from tests.fakes.fake_steplaw import steplaw_in_thread

pytestmark = pytest.mark.anyio
FAST = RetryPolicy(attempts=2, backoff_initial=0.01, backoff_max=0.05, read_timeout=2.0, probe_after=0.2)
BACKEND = Backend(name="b", base_url="http://127.0.0.1:1/v1")


@pytest.fixture
def anyio_backend():
    return "asyncio"


def ask(choices: int, content: str = "hi", max_tokens: int = 8) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": content}], max_tokens=max_tokens, choices=choices)


def llama_event(index: int, content: str | None = None, finish: str | None = None) -> bytes:
    """An event as llama-server writes it for a request with n > 1: one choice, its index, keys in its order."""
    delta = {} if content is None else {"content": content}
    choice = {"finish_reason": finish, "index": index, "delta": delta}
    event = {
        "choices": [choice],
        "created": 1796460468,
        "id": "chatcmpl-n",
        "model": "m",
        "object": "chat.completion.chunk",
    }
    return b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"


USAGE = b'data: {"choices":[],"id":"chatcmpl-n","usage":{"completion_tokens":9,"prompt_tokens":4}}\n\n'


def read(*reads: bytes) -> tuple[SseStream, list[str]]:
    deltas: list[str] = []
    stream = SseStream(keep_token_times=True, on_delta=deltas.append)
    assert any(stream.feed_bytes(data) for data in reads), "[DONE] came"
    return stream, deltas


def test_interleaved_choices_each_keep_their_own_text_and_only_choice_0_streams():
    events = [
        llama_event(2, "Z"),  # the first content event is not choice 0's
        llama_event(1, "Y"),
        llama_event(0, "A"),
        llama_event(2, "zz"),
        llama_event(0, "b"),
        llama_event(1, "yy"),
        llama_event(0, "c"),
        llama_event(1, None, "length"),
        llama_event(0, None, "stop"),
        llama_event(2, None, "stop"),
    ]
    stream, deltas = read(*events, USAGE, b"data: [DONE]\n\n")
    assert deltas == ["A", "b", "c"] and stream.token_times is not None and len(stream.token_times) == 3
    completion = completion_of(BACKEND, ask(3), stream, t_sent=0.0)
    assert (completion.text, completion.finish_reason, completion.chunks) == ("Abc", "stop", 3)
    assert completion.more_texts == ["Yyy", "Zzz"] and completion.more_finish_reasons == ["length", "stop"]
    assert completion.completion_tokens == 9 and completion.t_first_token is not None


def test_the_template_is_choice_0s_and_still_takes_its_events_after_another_choices():
    first_0, later_0 = llama_event(0, "a"), llama_event(0, "b")
    stream, deltas = read(
        llama_event(1, "x"),
        llama_event(1, "y"),  # the same event as the one before but its text: never a template of choice 0
        first_0,  # learned
        llama_event(1, "z"),
        later_0,  # one whole read: the template path
        later_0 + llama_event(1, "w") + later_0,  # several events in one read, then the line path
        later_0[:20],  # split reads
        later_0[20:],
        b"data: [DONE]\n\n",
    )
    assert stream.parts == ["a", "b", "b", "b", "b"] == deltas
    assert stream.more_parts == {1: ["x", "y", "z", "w"]}
    assert stream.other_events == 5, "the index-1 events and the first of choice 0 were parsed whole, no other"


def events_of(choice_texts: list[tuple[int, str]]) -> bytes:
    return b"".join(llama_event(index, text) for index, text in choice_texts) + b"data: [DONE]\n\n"


@settings(max_examples=200, deadline=None)
@given(
    choice_texts=st.lists(
        st.tuples(st.integers(0, 2), st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=4)),
        max_size=14,
    ),
    cuts=st.lists(st.integers(0, 4_000), max_size=6),
)
def test_any_interleaving_cut_anywhere_gives_each_choice_its_text(choice_texts, cuts):
    body = events_of(choice_texts)
    edges = [0, *sorted({cut % (len(body) + 1) for cut in cuts}), len(body)]
    stream, _ = read(*(body[start:end] for start, end in zip(edges, edges[1:]) if end > start))
    texts = ["".join(text for index, text in choice_texts if index == choice) for choice in range(3)]
    assert ["".join(stream.parts), *stream.more_texts(3)] == texts


def test_an_answer_is_empty_only_when_every_choice_is():
    stream, _ = read(llama_event(0, " "), llama_event(1, "only one"), b"data: [DONE]\n\n")
    completion = completion_of(BACKEND, ask(3), stream, t_sent=0.0)
    assert (completion.text, completion.more_texts, completion.more_finish_reasons) == (
        " ",
        ["only one", ""],
        [None, None],
    )
    stream, _ = read(llama_event(0, " "), llama_event(1, "\n"), llama_event(2, None, "stop"), b"data: [DONE]\n\n")
    with pytest.raises(AttemptError) as empty:
        completion_of(BACKEND, ask(3), stream, t_sent=0.0)
    assert empty.value.kind == "empty"


@pytest.mark.parametrize(
    ("event", "choices"),
    [
        (llama_event(2, "past the last choice asked"), 2),
        (llama_event(1, None, "stop"), 1),
        (llama_event(0, "x").replace(b'"index":0', b'"index":"1"'), 2),
        (llama_event(0, "x").replace(b'"index":0', b'"index":-1'), 2),
    ],
)
def test_an_index_that_is_no_choice_asked_is_a_bad_event(event, choices):
    with pytest.raises(AttemptError) as bad:
        stream, _ = read(llama_event(0, "fine"), event, b"data: [DONE]\n\n")
        completion_of(BACKEND, ask(choices), stream, t_sent=0.0)
    assert bad.value.kind == "bad_event"


def test_the_body_asks_for_n_only_past_one_choice():
    assert "n" not in request_body(BACKEND, ask(1))
    assert request_body(BACKEND, ask(3))["n"] == 3
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        ask(0)


@pytest.mark.parametrize("client", ["fast", "sdk"])
async def test_the_fake_engines_choices_come_back_apart_through_the_pool(client):
    engine = await FakeEngine(tokens=4).start()
    try:
        pool = BackendPool([Backend(name="f", base_url=engine.url, model="fake-model", cap=4, client=client)], FAST)
        streamed: list[str] = []
        completion = await pool.complete(ask(3), streamed.append)
        assert engine.bodies[-1]["n"] == 3
        assert completion.text == "w0 w1 w2 w3 " == "".join(streamed)
        assert completion.more_texts == ["w0.1 w1.1 w2.1 w3.1 ", "w0.2 w1.2 w2.2 w3.2 "]
        assert completion.more_finish_reasons == ["stop", "stop"] and completion.completion_tokens == 12
        one = await pool.complete(ask(1))
        assert "n" not in engine.bodies[-1] and one.more_texts == [] and one.more_finish_reasons == []
        heard: dict[int, list[str]] = {}  # a listener of every choice hears each piece with its index
        again = await pool.complete(ask(3), EveryChoice(lambda index, text: heard.setdefault(index, []).append(text)))
        assert ["".join(heard[index]) for index in range(3)] == [again.text, *again.more_texts]
    finally:
        await close_sdk_clients()
        await engine.stop()


@pytest.mark.parametrize("client", ["fast", "sdk"])
async def test_a_text_completion_gets_its_choices_too(client):
    engine = await FakeEngine(tokens=3).start()
    try:
        backend = Backend(name="f", base_url=engine.url, model="fake-model", cap=4, client=client)
        pool = BackendPool([backend], FAST)
        asked = ask(2).model_copy(update={"endpoint": Endpoint.COMPLETIONS})
        completion = await pool.complete(asked)
        assert engine.bodies[-1]["n"] == 2 and "prompt" in engine.bodies[-1]
        assert (completion.text, completion.more_texts) == ("w0 w1 w2 ", ["w0.1 w1.1 w2.1 "])
    finally:
        await close_sdk_clients()
        await engine.stop()


async def test_planning_choices_list_different_items():
    engine = await FakeEngine(reply=BookReplies()).start()
    try:
        pool = BackendPool([Backend(name="f", base_url=engine.url, model="fake-model", cap=4)], FAST)
        prompt = "Plan a book on tea. List 3 parts, one a line."
        assert plan_level(prompt) == "book"
        completion = await pool.complete(ask(3, prompt, max_tokens=400))
        answers = [completion.text, *completion.more_texts]
        items = [{line for line in answer.splitlines() if line[:1].isdigit()} for answer in answers]
        assert all(len(lines) == 3 for lines in items)
        assert not (items[0] & items[1]) and not (items[0] & items[2]) and not (items[1] & items[2])
    finally:
        await engine.stop()


async def test_a_reply_that_repeats_itself_still_gives_different_choices():
    engine = await FakeEngine(reply=lambda body: "the same answer every time").start()
    try:
        pool = BackendPool([Backend(name="f", base_url=engine.url, model="fake-model", cap=4)], FAST)
        completion = await pool.complete(ask(3, max_tokens=400))
        assert len({completion.text, *completion.more_texts}) == 3
        assert completion.text == "the same answer every time"
    finally:
        await engine.stop()


def test_vllm_sglang_and_llamacpp_honour_n_and_no_other():
    kinds = {kind for kind, known in ENGINES.items() if known.parallel_sampling}
    assert kinds == {EngineKind.VLLM, EngineKind.SGLANG, EngineKind.LLAMACPP}
    assert honours_choices({EngineKind.VLLM, EngineKind.LLAMACPP})
    assert not honours_choices({EngineKind.VLLM, EngineKind.OLLAMA})
    assert not honours_choices({EngineKind.UNKNOWN}) and not honours_choices(set())


async def test_the_step_law_fake_runs_each_choice_as_its_own_sequence():
    # tests/fakes/fake_steplaw.py: n sequences in the batch, so the planner's samples cost what vLLM's do
    with steplaw_in_thread((1.0, 0.01)) as (engine,):
        pool = BackendPool([Backend(name="s", base_url=engine.url, model="fake-steplaw", cap=8)], FAST)
        completion = await pool.complete(ask(3, "Plan a book on tea. List 3 parts, one a line.", max_tokens=400))
        answers = [completion.text, *completion.more_texts]
        items = [{line for line in answer.splitlines() if line[:1].isdigit()} for answer in answers]
        assert all(len(lines) == 3 for lines in items) and len(set().union(*items)) == 9, "each its own titles"
        assert completion.completion_tokens == sum(len(answer.rstrip(" ").split(" ")) for answer in answers)
        assert completion.more_finish_reasons == ["stop", "stop"]
        short = await pool.complete(ask(2, max_tokens=5))
        assert short.completion_tokens == 10 and short.finish_reason == "length"
