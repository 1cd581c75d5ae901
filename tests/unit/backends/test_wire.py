"""The wire client (pipeline/backends/wire.py) against a FAKE raw-socket server in this test: what it sends,
how it reads answers split anywhere, and the failures only a hand-driven socket can produce (oversized
headers, a stall after some text, a cancelled request, a refused connection)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from pipeline.backends.sse import AttemptError
from pipeline.backends.wire import stream_chat
from pipeline.records import Backend, ChatRequest

pytestmark = pytest.mark.anyio
REQUEST = ChatRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=8, tag="t")


@pytest.fixture
def anyio_backend():
    return "asyncio"


def event(content: str) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": content}}]}).encode() + b"\n\n"


def chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    + chunked(event("Hello") + event(", wor"))
    + chunked(event("ld") + b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3}}\n\n')
    + chunked(b"data: [DONE]\n\n")
    + b"0\r\n\r\n"
)


class FakeWireServer:
    """Answers every connection with `script(reader, writer)`; keeps what each request sent."""

    def __init__(self, script):
        self.script = script
        self.requests: list[bytes] = []
        self.closed = asyncio.Event()

    async def __aenter__(self) -> FakeWireServer:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(
            next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        )
        self.requests.append(head + await reader.readexactly(length))
        try:
            await self.script(reader, writer)
            await reader.read()  # until the client closes
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.closed.set()
            writer.close()


def backend(url: str) -> Backend:
    return Backend(name="wire", base_url=url, model="m")


@pytest.mark.parametrize("piece", [1, 5, 64, 100_000])
async def test_an_answer_split_anywhere_reads_the_same(piece):
    async def script(reader, writer):
        for start in range(0, len(ANSWER), piece):
            writer.write(ANSWER[start : start + piece])
            await writer.drain()

    async with FakeWireServer(script) as server:
        answer = await stream_chat(backend(server.url), REQUEST, 5.0)
        await asyncio.wait_for(server.closed.wait(), 5)
    assert answer.text == "Hello, world" and answer.chunks == 3 and answer.completion_tokens == 3
    sent = server.requests[0]
    assert sent.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") and b"Connection: close" in sent
    assert f"X-Request-Id: {answer.request_id}\r\n".encode() in sent and answer.request_id.startswith("fanout-")
    assert json.loads(sent.split(b"\r\n\r\n", 1)[1])["model"] == "m"


async def test_oversized_headers_fail_as_a_bad_response():
    async def script(reader, writer):
        writer.write(b"HTTP/1.1 200 OK\r\n" + b"X-Junk: " + b"j" * 70_000 + b"\r\n\r\n")
        await writer.drain()

    async with FakeWireServer(script) as server:
        with pytest.raises(AttemptError) as caught:
            await stream_chat(backend(server.url), REQUEST, 5.0)
    assert caught.value.kind == "bad_response"


async def test_a_stall_after_some_text_times_out_within_a_quarter_more():
    async def script(reader, writer):
        writer.write(ANSWER[: ANSWER.index(b"data: [DONE]") - 5])
        await writer.drain()  # then silence

    async with FakeWireServer(script) as server:
        started = time.monotonic()
        with pytest.raises(AttemptError) as caught:
            await stream_chat(backend(server.url), REQUEST, 0.8)
        waited = time.monotonic() - started
    assert caught.value.kind == "timeout" and 0.8 <= waited < 0.8 * 1.25 + 0.3


async def test_a_cancelled_request_drops_its_connection():
    async def script(reader, writer):
        writer.write(ANSWER[:120])
        await writer.drain()  # then silence: the harness waits until the client hangs up

    async with FakeWireServer(script) as server:
        task = asyncio.create_task(stream_chat(backend(server.url), REQUEST, 10.0))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(server.closed.wait(), 2)


async def test_refused_and_cut_before_the_first_byte_are_told_apart():
    async def hang_up(reader, writer):
        writer.transport.abort()

    async with FakeWireServer(hang_up) as server:
        with pytest.raises(AttemptError) as cut:
            await stream_chat(backend(server.url), REQUEST, 5.0)
    with pytest.raises(AttemptError) as refused:
        await stream_chat(backend("http://127.0.0.1:9/v1"), REQUEST, 5.0)
    assert cut.value.kind == "cut_before_first_byte" and refused.value.kind == "connect"
