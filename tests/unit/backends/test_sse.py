"""The SSE reader (pipeline/backends/sse.py): whatever way a body is cut into reads, and whatever its events
hold, `SseStream.feed_bytes` gives what parsing every event with json.loads gives; events of another shape
fail the attempt as `bad_event` instead of crashing the job."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.backends.sse import AttemptError, SseStream, completion_of
from pipeline.records import Backend, ChatRequest


def content_event(content: str, *, created: int = 1, extra: dict | None = None) -> bytes:
    event = {"id": "c1", "created": created, "choices": [{"index": 0, "delta": {"content": content}, **(extra or {})}]}
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()


def body_of(events: list[bytes], *, separator: bytes = b"\n\n") -> bytes:
    return b"".join(b"data: " + event + separator for event in events) + b"data: [DONE]" + separator


def read_all(body: bytes, cuts: list[int]) -> tuple[SseStream, bool]:
    stream = SseStream(keep_token_times=False)
    edges = [0, *sorted({cut % (len(body) + 1) for cut in cuts}), len(body)]
    done = False
    for start, end in zip(edges, edges[1:]):
        if end > start and stream.feed_bytes(body[start:end]):
            done = True
            break
    return stream, done


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    contents=st.lists(texts, min_size=1, max_size=12),
    createds=st.lists(st.integers(1, 2), min_size=12, max_size=12),
    cuts=st.lists(st.integers(0, 10_000), max_size=8),
    one_event_a_read=st.booleans(),
    separator=st.sampled_from([b"\n\n", b"\r\n\r\n", b"\n"]),
)
def test_any_reads_of_any_events_give_what_json_gives(contents, createds, cuts, one_event_a_read, separator):
    events = [content_event(text, created=created) for text, created in zip(contents, createds)]
    body = body_of(events, separator=separator)
    if one_event_a_read:  # as engines write them: the template path takes each whole read
        at, cuts = 0, []
        for event in events:
            at += len(b"data: " + event + separator)
            cuts.append(at)
    stream, done = read_all(body, cuts)
    assert done
    assert stream.parts == [text for text in contents if text]
    assert stream.size == sum(len(text.encode()) for text in contents)


def test_reads_of_several_whole_events_and_a_part_read_the_same():
    events = [content_event(text) for text in ("a", "b c", "", "dé", 'q"uote', "e")]
    body = body_of(events)
    half = len(body) // 2
    stream = SseStream(keep_token_times=False)
    assert not stream.feed_bytes(b"data: " + events[0] + b"\n\n")  # teaches the template
    assert not stream.feed_bytes(body[len(events[0]) + 8 : half])
    assert stream.feed_bytes(body[half:])
    assert stream.parts == ["a", "b c", "dé", 'q"uote', "e"]


def test_a_read_left_over_from_the_one_before_is_joined_first():
    first, second = content_event("Hel"), content_event("lo")
    stream = SseStream(keep_token_times=False)
    assert not stream.feed_bytes(b"data: " + first + b"\n\ndata: " + second[:5])
    assert not stream.feed_bytes(second[5:] + b"\n\n")  # not a whole event alone: never the template path
    assert stream.feed_bytes(b"data: " + content_event("!") + b"\n\ndata: [DONE]\n\n")
    assert "".join(stream.parts) == "Hello!"


@pytest.mark.parametrize(
    "event",
    [
        b'{"choices":[{"delta":{"content":["a"]}}]}',
        b'{"choices":[{"delta":"text"}]}',
        b'{"choices":["text"]}',
        b'{"choices":[],"usage":[1,2]}',
        b"[1, 2]",
        b"{not json",
    ],
)
def test_events_of_another_shape_are_a_bad_event(event):
    stream = SseStream(keep_token_times=False)
    with pytest.raises(AttemptError) as raised:
        stream.feed_bytes(b"data: " + event + b"\n\n")
    assert raised.value.kind == "bad_event"


LLAMA_TAIL = (
    b'data: {"choices":[],"id":"chatcmpl-7","usage":{"completion_tokens":1,"prompt_tokens":152},'
    b'"timings":{"cache_n":145,"prompt_n":7,"prompt_ms":69.3}}\n\n'
)


@pytest.mark.parametrize(
    ("usage_details", "cached", "source"),
    [
        (b"", 145, "timings.cache_n"),  # llama.cpp builds that do not fill the usage field
        (b',"prompt_tokens_details":{"cached_tokens":144}', 144, "usage.prompt_tokens_details.cached_tokens"),
    ],
)
def test_the_engines_cache_prefill_time_and_answer_id_reach_the_completion(usage_details, cached, source):
    stream = SseStream(keep_token_times=False)
    stream.feed_bytes(b'data: {"id":"chatcmpl-7","choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n')
    stream.feed_bytes(LLAMA_TAIL.replace(b'"prompt_tokens":152}', b'"prompt_tokens":152' + usage_details + b"}"))
    assert stream.feed_bytes(b"data: [DONE]\n\n")
    backend = Backend(name="b", base_url="http://127.0.0.1:1/v1")
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}])
    completion = completion_of(backend, request, stream, t_sent=0.0, request_id="fanout-1")
    assert (completion.cached_tokens, completion.cached_source) == (cached, source)
    assert completion.prefill_ms == 69.3 and completion.prompt_tokens == 152
    assert (completion.request_id, completion.response_id) == ("fanout-1", "chatcmpl-7")


def test_usage_counts_and_finish_reasons_of_another_type_are_left_out():
    stream = SseStream(keep_token_times=False)
    stream.feed_bytes(b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n')
    stream.feed_bytes(b'data: {"choices":[{"index":0,"delta":{},"finish_reason":{"why":1}}]}\n\n')
    stream.feed_bytes(b'data: {"choices":[],"usage":{"prompt_tokens":"many","completion_tokens":-1}}\n\n')
    backend = Backend(name="b", base_url="http://127.0.0.1:1/v1")
    completion = completion_of(backend, ChatRequest(messages=[]), stream, t_sent=0.0)
    assert completion.prompt_tokens is None and completion.completion_tokens is None
    assert completion.cached_tokens is None and completion.prefill_ms is None and completion.finish_reason is None
