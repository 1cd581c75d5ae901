"""The client's fast SSE path (pipeline/backends/sse.py) and the client-ceiling bench
(pipeline/bench/studies/ceiling.py, its client processes in ceiling_worker.py).

The fast content parser must say exactly what json.loads says; the bench's source (its own process) must
deliver exact token counts to our path and to the naive SDK loop alike, also sharded over two workers."""

from __future__ import annotations

import asyncio
import json

import pytest

from pipeline.backends.aiohttp_chat import new_session, read_events, stream_chat_aiohttp
from pipeline.backends.sdk import sdk_chat
from pipeline.backends.sse import AttemptError, SseStream
from pipeline.backends.wire import stream_chat
from pipeline.bench.studies import ceiling
from pipeline.bench.studies.sse_source import content_event, expected_text
from pipeline.records import Backend, ChatRequest, Endpoint

HEAD = b'{"id":"c1","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"index":0,"delta":{"content":"'
TAIL = b'"},"logprobs":null,"finish_reason":null}]}'


def plain(text: bytes) -> bytes:
    return HEAD + text + TAIL


TRICKY = [
    plain(b"hello"),  # learnt as the template
    plain(b" world"),
    plain(b'say \\"hi\\"'),  # escaped quotes
    plain(b"line\\nbreak\\ttab"),
    plain(b"caf\\u00e9"),
    plain(b"\\ud83d\\ude00 smile"),  # a surrogate pair
    plain("caf\u00e9 \U0001f600 raw utf-8".encode()),
    plain(b"back\\\\slash"),
    plain(b"\\/solidus"),
    plain(b""),  # empty content: not a chunk
    plain(b"x"),
    b'{"id":"c1","object":"chat.completion.chunk","created":6,"model":"m","choices":[{"index":0,"delta":'
    b'{"content":"new second"},"logprobs":null,"finish_reason":null}]}',  # another tail: relearnt
    plain(b"after"),
    b'{"id":"c1","choices":[{"index":0,"delta":{"content":"lp"},"logprobs":{"content":[{"token":"lp",'
    b'"logprob":-0.1}]},"finish_reason":null}]}',
    b'{"id":"c1","choices":[{"index":0,"delta":{"content":" last"},"finish_reason":"stop"}]}',
    b'{"id":"c1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":14,"total_tokens":17}}',
    plain(b"tail \\u0022quote\\u0022"),
    b'{"id":"c1", "choices": [{"index": 0, "delta": {"content": "spaced"}}]}',
    b'{"id":"c1", "choices": [{"index": 0, "delta": {"content": "spaced again"}}]}',
]


def reference(payloads: list[bytes]) -> dict:
    parts, logprobs, finish, usage = [], [], None, None
    for payload in payloads:
        event = json.loads(payload)
        usage = event.get("usage") or usage
        for choice in event.get("choices") or ():
            if choice.get("delta", {}).get("content"):
                parts.append(choice["delta"]["content"])
            if choice.get("logprobs"):
                logprobs.extend(choice["logprobs"]["content"])
            finish = choice.get("finish_reason") or finish
    return {"parts": parts, "logprobs": logprobs, "finish": finish, "usage": usage}


def fed(payloads: list[bytes]) -> tuple[SseStream, list[str]]:
    seen: list[str] = []
    stream = SseStream(keep_token_times=False, on_delta=seen.append)
    for payload in payloads:
        stream.feed(payload)
    return stream, seen


def test_fast_parser_equals_json_loads_on_tricky_payloads():
    stream, seen = fed(TRICKY)
    want = reference(TRICKY)
    assert stream.parts == want["parts"] == seen
    assert stream.chunks == len(want["parts"])
    assert stream.logprobs == want["logprobs"] and stream.finish_reason == want["finish"] == "stop"
    assert stream.usage == want["usage"] and stream.model == "m"
    assert stream._fixed  # the template was learnt: the fast path really ran


@pytest.mark.parametrize(
    "payload",
    [
        plain(b"tab\there"),  # a raw control character: json.loads (strict) refuses it, so must we
        plain(b"caf\xe9"),  # not UTF-8
        plain(b'a"b'),  # a bare quote: not JSON
    ],
)
def test_payloads_json_refuses_are_refused_on_the_fast_path_too(payload):
    stream, _ = fed([plain(b"template")])
    assert stream._fixed
    with pytest.raises(AttemptError) as caught:
        stream.feed(payload)
    assert caught.value.kind == "bad_event"


def test_surrogate_bytes_fall_back_to_json_loads():
    """json.loads decodes bytes with surrogatepass; the fast path must not decide differently."""
    payload = plain(b"\xed\xa0\x80")
    stream, _ = fed([plain(b"template"), payload])
    assert stream.parts[-1] == json.loads(payload)["choices"][0]["delta"]["content"]


def test_a_repeated_key_is_never_a_template():
    payload = b'{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}'
    stream, _ = fed([payload, payload.replace(b'"a"', b'"c"')])
    assert not stream._fixed and stream.parts == ["b", "b"]


class _Pieces:
    """A response whose body arrives in the given pieces (as aiohttp's readany would hand them over)."""

    def __init__(self, pieces: list[bytes]):
        self.content = self
        self.pieces = list(pieces)

    async def readany(self) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""


@pytest.mark.parametrize("size", [1, 7, 64, 10_000])
def test_events_split_anywhere_across_reads(size):
    body = (
        b": comment\r\n\r\nevent: x\n"
        + b"".join(b"data: " + p + b"\r\n\r\n" for p in TRICKY)
        + b"data: [DONE]\n\ndata: ignored after done\n\n"
    )
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    stream = SseStream(keep_token_times=False)
    assert asyncio.run(read_events(_Pieces(pieces), stream)) is True
    assert stream.parts == reference(TRICKY)["parts"]


def test_no_done_and_too_long_line():
    stream = SseStream(keep_token_times=False)
    assert asyncio.run(read_events(_Pieces([b"data: " + TRICKY[0] + b"\n\n"]), stream)) is False
    with pytest.raises(AttemptError) as caught:
        asyncio.run(read_events(_Pieces([b"data: " + b"y" * 70_000] * 3), SseStream(keep_token_times=False)))
    assert caught.value.kind == "oversized" and not caught.value.blames_request


@pytest.fixture(scope="module")
def source():
    process = ceiling.SourceProcess(0)
    yield process
    process.close()


@pytest.mark.parametrize("endpoint", list(Endpoint))
def test_our_path_aiohttp_and_the_sdk_get_the_same_answer(source, endpoint):
    backend = Backend(name="s", base_url=f"http://127.0.0.1:{source.port}/v1", model="ceiling")
    request = ChatRequest(messages=[{"role": "user", "content": "go"}], max_tokens=200, endpoint=endpoint)

    async def over_aiohttp():
        async with new_session(4) as session:
            return await stream_chat_aiohttp(session, backend, request, 10.0)

    answers = [
        asyncio.run(stream_chat(backend, request, 10.0)),
        asyncio.run(over_aiohttp()),
        asyncio.run(sdk_chat(backend, request)),
    ]
    for answer in answers:
        assert answer.text == expected_text(200)
        assert answer.completion_tokens == answer.chunks == 200 and answer.finish_reason == "length"


def test_source_events_are_what_json_says():
    for index in range(200):
        event = json.loads(content_event(index)[len(b"data: ") :])
        text = json.loads(content_event(index, completion=True)[len(b"data: ") :])
        assert event["choices"][0]["delta"]["content"] == expected_text(index + 1)[len(expected_text(index)) :]
        assert text["choices"][0]["text"] == event["choices"][0]["delta"]["content"], "both endpoints, one text"


def test_ceiling_harness_exact_counts_one_and_two_workers():
    rows = ceiling.run_ceiling(
        ["ours", "aiohttp", "sdk", "floor"],
        [5.0],
        [12],
        [1, 2],
        timing=ceiling.Timing(max_tokens=40, ramp_s=0.8, window_s=1.2),
        echo=lambda _line: None,
    )
    assert [(r.case.client, r.case.workers) for r in rows] == [
        ("ours", 1),
        ("ours", 2),
        ("aiohttp", 1),
        ("aiohttp", 2),
        ("sdk", 1),
        ("sdk", 2),
        ("floor", 1),
        ("floor", 2),
    ]
    for row in rows:
        assert row.completed > 0 and row.exact == row.completed and not row.errors, ceiling.format_row(row)
        assert row.events > 0 and row.receiving == 12
    assert "ours" in ceiling.table(rows)


def test_workers_merge_counts():
    case = ceiling.Case("ours", 10.0, 10, 2, 40, 1.0, 2.0)
    parts = [
        {
            "events": 900,
            "cpu_s": 0.5,
            "sys_s": 0.1,
            "reads": 900,
            "receiving": 5,
            "completed": 20,
            "exact": 20,
            "errors": 0,
            "mismatches": [],
        },
        {
            "events": 1100,
            "cpu_s": 0.7,
            "sys_s": 0.1,
            "reads": 550,
            "receiving": 5,
            "completed": 25,
            "exact": 24,
            "errors": 1,
            "mismatches": ["asked 40: ..."],
        },
    ]
    row = ceiling.merge(case, parts, server_cpu=0.4, server_events=2000)
    assert (row.events, row.completed, row.exact, row.errors, row.receiving) == (2000, 45, 44, 1, 10)
    assert row.tokens_per_s == 1000 and row.offered_tps == 1000
    assert row.client_cpu == pytest.approx(0.6) and row.worker_cpu_max == pytest.approx(0.35)
    assert row.us_per_event == pytest.approx(600.0) and row.mismatches == ["asked 40: ..."]
    assert row.events_per_read == pytest.approx(2000 / 1450)
    assert ceiling.shards(1536, 2) == [(0, 768), (768, 768)] and ceiling.shards(5, 2) == [(0, 3), (3, 2)]
