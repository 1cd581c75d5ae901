"""A near-zero-cost OpenAI-style SSE source for the client-ceiling benchmark (not an LLM, not a test fake).

Run in its own process (`python -m pipeline.bench.studies.sse_source --tick-ms 20 [--port N]`, prints its port):
POST /v1/chat/completions answers `max_tokens` content events, then a finish_reason event, a usage event and
[DONE], over HTTP/1.1 keep-alive with chunked encoding, shaped like vLLM's; POST /v1/completions the same as
text completions (each choice's `text`, no role event). Paced (tick > 0): one ticker
writes one event to every running stream each tick, so each client read carries one event; unpaced
(tick 0): the whole answer in one write. Every byte is precomputed per token index, so the server's own
cost stays far below a client's. Token i's text is `token_text(i)`: mostly plain, some with escapes, quotes
and non-ASCII, so exact-text checks also cover a client's slow parsing path. GET /stats: events written,
requests, server CPU seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

MODEL = "ceiling"
PROMPT_TOKENS = 7


def token_text(index: int) -> str:
    if index % 97 == 96:
        return ' "quoted\\path"\n'
    if index % 61 == 60:
        return " caf\u00e9 \U0001f600"
    return f" t{index}"


def expected_text(count: int) -> str:
    return "".join(token_text(i) for i in range(count))


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


HEAD = {"id": "chatcmpl-ceiling", "object": "chat.completion.chunk", "created": 1700000000, "model": MODEL}
TEXT_HEAD = {"id": "cmpl-ceiling", "object": "text_completion", "created": 1700000000, "model": MODEL}


def _choice(text: str | None, *, completion: bool) -> dict:
    """One choice carrying `text` (None: none, as in the finish event), as chat or as a text completion."""
    if completion:
        return {"index": 0, "text": text or ""}
    return {"index": 0, "delta": {} if text is None else {"content": text}}


def content_event(index: int, *, completion: bool = False) -> bytes:
    choice = _choice(token_text(index), completion=completion) | {"logprobs": None, "finish_reason": None}
    return _event({**(TEXT_HEAD if completion else HEAD), "choices": [choice]})


def tail_events(count: int, *, completion: bool = False) -> bytes:
    head = TEXT_HEAD if completion else HEAD
    finish = _event(
        {**head, "choices": [_choice(None, completion=completion) | {"logprobs": None, "finish_reason": "length"}]}
    )
    usage = _event(
        {
            **head,
            "choices": [],
            "usage": {
                "prompt_tokens": PROMPT_TOKENS,
                "completion_tokens": count,
                "total_tokens": PROMPT_TOKENS + count,
            },
        }
    )
    return finish + usage + b"data: [DONE]\n\n"


RESPONSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)
ROLE_EVENT = _event(
    {
        **HEAD,
        "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
        ],
    }
)


class Source:
    def __init__(self, tick_s: float):
        self.tick_s = tick_s
        # chunk-encoded content event per token index, and the rest, for chat (False) and text completions (True)
        self.chunks: dict[bool, list[bytes]] = {False: [], True: []}
        self.tails: dict[tuple[int, bool], bytes] = {}
        self.whole: dict[tuple[int, bool], bytes] = {}
        self.running: list[list] = []  # [transport, next index, count, completion]
        self.events = 0
        self.requests = 0
        self.connections = 0

    def chunk(self, index: int, *, completion: bool) -> bytes:
        chunks = self.chunks[completion]
        while len(chunks) <= index:
            chunks.append(_chunked(content_event(len(chunks), completion=completion)))
        return chunks[index]

    def tail(self, count: int, *, completion: bool) -> bytes:
        if (count, completion) not in self.tails:
            self.tails[count, completion] = _chunked(tail_events(count, completion=completion)) + b"0\r\n\r\n"
        return self.tails[count, completion]

    def start(self, transport: asyncio.Transport, count: int, *, completion: bool = False) -> None:
        self.requests += 1
        opening = RESPONSE_HEAD + (b"" if completion else _chunked(ROLE_EVENT))
        if self.tick_s <= 0:
            if (count, completion) not in self.whole:
                self.whole[count, completion] = (
                    opening
                    + b"".join(self.chunk(i, completion=completion) for i in range(count))
                    + self.tail(count, completion=completion)
                )
            transport.write(self.whole[count, completion])
            self.events += count
            return
        self.chunk(count, completion=completion)
        transport.write(opening)
        self.running.append([transport, 0, count, completion])

    async def ticker(self) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            next_at += self.tick_s
            await asyncio.sleep(max(next_at - loop.time(), 0))
            kept = []
            chunks = self.chunks
            for entry in self.running:
                transport, index, count, completion = entry
                if transport.is_closing():
                    continue
                if index < count:
                    transport.write(chunks[completion][index])
                    entry[1] = index + 1
                    self.events += 1
                    kept.append(entry)
                else:
                    transport.write(self.tail(count, completion=completion))
            self.running = kept

    def stats(self) -> bytes:
        return json.dumps(
            {
                "events": self.events,
                "requests": self.requests,
                "cpu_s": time.process_time(),
                "running": len(self.running),
                "connections": self.connections,
            }
        ).encode()


class Connection(asyncio.Protocol):
    def __init__(self, source: Source):
        self.source = source
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.source.connections += 1

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            self.answer(head.split(" ", 2), body)

    def answer(self, request_line: list[str], body: bytes) -> None:
        assert self.transport is not None, "answers come after connection_made"
        method, path = request_line[0], request_line[1] if len(request_line) > 1 else "/"
        if method == "POST" and path.endswith("/completions"):
            count = int(json.loads(body).get("max_tokens") or 16)
            self.source.start(self.transport, count, completion=not path.endswith("/chat/completions"))
            return
        payload = self.source.stats() if path.startswith("/stats") else b'{"status":"ok"}'
        self.transport.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(payload), payload)
        )


def use_uvloop() -> bool:
    try:
        import uvloop
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


async def serve(tick_s: float, port: int) -> None:
    source = Source(tick_s)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Connection(source), "127.0.0.1", port, backlog=4096)
    print(server.sockets[0].getsockname()[1], flush=True)
    if tick_s > 0:
        await source.ticker()
    else:
        await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tick-ms", type=float, default=20.0, help="one event per stream per tick; 0: unpaced")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    use_uvloop()
    try:
        asyncio.run(serve(args.tick_ms / 1000, args.port))
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
