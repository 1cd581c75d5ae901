"""A FAKE OpenAI-compatible engine for fast unit tests of logic (caps, balancing, retries, faults).

It is not an LLM: it streams a fixed number of word tokens per request, in the SSE format vLLM and
llama-server use, and keeps a vLLM-style generation counter on /metrics. Each request takes the next mode
from `modes` (then "ok"): ok, http_500, http_429, reset (connection dropped mid-stream), close_early
(connection dropped before any byte), empty, stall (no bytes until the client gives up), no_done (stream
ends without [DONE]). It records the most requests it ever had in flight.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections import deque
from typing import Callable

from aiohttp import web

MODEL = "fake-model"


class FakeEngine:
    def __init__(self, tokens: int = 8, token_delay: float = 0.0, modes: list[str] | None = None,
                 retry_after: float = 0.2, reply: Callable[[dict], str] | None = None, jitter: float = 0.0):
        self.tokens = tokens
        self.reply = reply  # the answer's text from the request body; else "w0 w1 ..." of `tokens` words
        self.jitter = jitter  # a random pause of up to this many seconds before answering
        self.token_delay = token_delay
        self.modes: deque[str] = deque(modes or [])
        self.retry_after = retry_after
        self.in_flight = 0
        self.peak_in_flight = 0
        self.requests = 0
        self.generated = 0
        self.bodies: list[dict] = []
        self.runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> FakeEngine:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/health", self.health)
        app.router.add_get("/fake/prompts", self.prompts)
        self.runner = web.AppRunner(app, handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "vllm"}]})

    async def prompts(self, request: web.Request) -> web.Response:
        """Every prompt received so far, for tests that run this fake in another process."""
        return web.json_response([body["messages"][-1]["content"] for body in self.bodies])

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def metrics(self, request: web.Request) -> web.Response:
        text = ("# TYPE vllm:generation_tokens counter\n"
                f'vllm:generation_tokens_total{{engine="0",model_name="{MODEL}"}} {self.generated}\n'
                "# TYPE vllm:num_requests_running gauge\n"
                f'vllm:num_requests_running{{engine="0",model_name="{MODEL}"}} {self.in_flight}\n')
        return web.Response(text=text, content_type="text/plain")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        self.requests += 1
        mode = self.modes.popleft() if self.modes else "ok"
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            return await self._answer(request, body, mode)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request, body: dict, mode: str) -> web.StreamResponse:
        if mode == "http_500":
            return web.Response(status=500, text="internal error")
        if mode == "http_429":
            return web.Response(status=429, text="slow down", headers={"Retry-After": str(self.retry_after)})
        if mode == "close_early":
            request.transport.close()
            return web.Response(status=200)
        if mode == "stall":
            await asyncio.sleep(3600)
        if self.jitter:
            await asyncio.sleep(random.uniform(0, self.jitter))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        pieces = self._pieces(body, mode)
        count = len(pieces)
        for index, piece in enumerate(pieces):
            await self._event(response, {"choices": [{"index": 0, "delta": {"content": piece}}]})
            if mode == "reset" and index == count // 2:
                request.transport.close()
                return response
            if self.token_delay:
                await asyncio.sleep(self.token_delay)
        self.generated += count
        finish = "length" if count == body.get("max_tokens") else "stop"
        await self._event(response, {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        await self._event(response, {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": count,
                                                              "total_tokens": 5 + count}})
        if mode != "no_done":
            await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    def _pieces(self, body: dict, mode: str) -> list[str]:
        """The answer as token-sized pieces, cut at max_tokens like a real engine."""
        if mode == "empty":
            return []
        limit = body.get("max_tokens", self.tokens)
        if self.reply is None:
            return [f"w{index} " for index in range(min(self.tokens, limit))]
        words = self.reply(body).split(" ")
        pieces = [word + " " for word in words[:-1]] + words[-1:]
        return [piece for piece in pieces if piece][:limit]

    async def _event(self, response: web.StreamResponse, payload: dict) -> None:
        payload = {"id": "x", "object": "chat.completion.chunk", "model": MODEL, **payload}
        await response.write(b"data: " + json.dumps(payload).encode() + b"\n\n")


def prompt_of(body: dict) -> str:
    return body["messages"][-1]["content"]


def requested_count(body: dict) -> int:
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    for prop in schema.get("properties", {}).values():
        if prop.get("type") == "array":
            return prop["minItems"]
    return int(re.search(r"(?:exactly|What are) (\d+)", prompt_of(body)).group(1))


class BookReplies:
    """FAKE model answers for a whole book: unique titles for planning prompts, a paragraph per section."""

    def __init__(self, words: int = 40, section_text: str | None = None):
        self.words = words
        self.section_text = section_text  # a fixed answer for every section (hostile text, say)
        self.counter = 0
        self.sections_asked: list[str] = []

    def __call__(self, body: dict) -> str:
        prompt = prompt_of(body)
        if "Give it a new" in prompt:
            return json.dumps({"title": self._title()})
        if prompt.startswith("Your answer stopped"):
            return "and so the section ends here, complete."
        if "Answer with JSON" not in prompt:
            title = prompt.split("Section: ", 1)[1].split("\n", 1)[0]
            self.sections_asked.append(title)
            if self.section_text is not None:
                return self.section_text
            sentence = f"This text explains {title} with care and a short example."
            return " ".join([sentence] * (self.words // 10 + 1))
        titles = [self._title() for _ in range(requested_count(body))]
        if prompt.startswith("Plan a book"):
            return json.dumps({"title": "The Fake Handbook", "parts": titles})
        return json.dumps({"titles": titles})

    def _title(self) -> str:
        self.counter += 1
        return f"Topic number {self.counter}"


async def serve_forever(port: int, token_delay: float, jitter: float, section_text: str | None = None) -> None:
    engine = FakeEngine(token_delay=token_delay, jitter=jitter, reply=BookReplies(section_text=section_text))
    await engine.start()
    print(engine.url, flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await engine.stop()


if __name__ == "__main__":  # a FAKE engine in its own process, for tests that kill the client
    import sys

    text = sys.argv[sys.argv.index("--section-text") + 1] if "--section-text" in sys.argv else None
    asyncio.run(serve_forever(0, float(sys.argv[1]), float(sys.argv[2]), text))
