"""A FAKE engine that follows a step-time law, for bench tests: not an LLM.

Every engine step advances each running request by one token and takes `a_ms + b_ms * running`
milliseconds (seed 003's card: 12.94 ms + 0.2451 ms per stream). Steps are kept on an absolute clock, so
a late wake-up is made good by the next step and the law holds on average. Like vLLM, it runs at most
`max_seqs` requests (the rest wait), exposes `vllm:generation_tokens_total` updated every step, running,
waiting, KV use and a per-step histogram count on /metrics, and names itself `owned_by: vllm`; like vLLM
it cannot report its slot count. Answers are `max_tokens` tokens long (as with ignore_eos).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from aiohttp import web

MODEL = "fake-steplaw"
MAX_BACKLOG_S = 0.5  # after a stall longer than this the clock restarts instead of catching up


@dataclass
class _Running:
    remaining: int
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)


class StepLawEngine:
    def __init__(self, a_ms: float = 12.94, b_ms: float = 0.2451, max_seqs: int = 256):
        self.a_ms, self.b_ms, self.max_seqs = a_ms, b_ms, max_seqs
        self.running: list[_Running] = []
        self.waiting: list[_Running] = []
        self.generated = 0
        self.prompt_tokens = 0
        self.steps = 0
        self.requests = 0
        self.prompts: list[str] = []
        self.wake = asyncio.Event()
        self.runner: web.AppRunner | None = None
        self.stepper: asyncio.Task | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def law_rate(self, streams: int) -> float:
        """Tokens per second the law gives at `streams` running requests."""
        return streams * 1000 / (self.a_ms + self.b_ms * streams)

    async def start(self) -> StepLawEngine:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics)
        self.runner = web.AppRunner(app, handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        self.stepper = asyncio.create_task(self.step_loop())
        return self

    async def stop(self) -> None:
        if self.stepper is not None:
            self.stepper.cancel()
        if self.runner is not None:
            await self.runner.cleanup()

    async def step_loop(self) -> None:
        next_t = time.monotonic()
        while True:
            self._admit()
            if not self.running:
                self.wake.clear()
                await self.wake.wait()
                next_t = time.monotonic()
                continue
            batch = list(self.running)
            next_t += (self.a_ms + self.b_ms * len(batch)) / 1000
            now = time.monotonic()
            if now - next_t > MAX_BACKLOG_S:
                next_t = now
            await asyncio.sleep(max(0.0, next_t - now))
            self._step(batch)

    def _admit(self) -> None:
        while self.waiting and len(self.running) < self.max_seqs:
            self.running.append(self.waiting.pop(0))

    def _step(self, batch: list[_Running]) -> None:
        for request in batch:
            request.remaining -= 1
            request.queue.put_nowait(request.remaining == 0)
            if request.remaining == 0:
                self.running.remove(request)
        self.generated += len(batch)
        self.steps += 1

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "vllm"}]})

    async def metrics(self, request: web.Request) -> web.Response:
        label = f'{{engine="0",model_name="{MODEL}"}}'
        text = (f"vllm:generation_tokens_total{label} {self.generated}\n"
                f"vllm:prompt_tokens_total{label} {self.prompt_tokens}\n"
                f"vllm:num_requests_running{label} {len(self.running)}\n"
                f"vllm:num_requests_waiting{label} {len(self.waiting)}\n"
                f"vllm:kv_cache_usage_perc{label} {len(self.running) / self.max_seqs}\n"
                f"vllm:iteration_tokens_total_count{label} {self.steps}\n")
        return web.Response(text=text, content_type="text/plain")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests += 1
        self.prompts.append(body["messages"][-1]["content"])
        prompt = len(body["messages"][-1]["content"].split())
        self.prompt_tokens += prompt
        pieces = answer_pieces(body)
        running = _Running(remaining=len(pieces))
        self.waiting.append(running)
        self.wake.set()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        count = 0
        try:
            while True:
                last = await running.queue.get()
                count += 1
                await _event(response, {"choices": [{"index": 0, "delta": {"content": pieces[count - 1]}}]})
                if last:
                    break
        finally:
            for pool in (self.running, self.waiting):
                if running in pool:
                    pool.remove(running)
        finish = "length" if count == int(body.get("max_tokens", 16)) else "stop"
        await _event(response, {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        await _event(response, {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": count,
                                                          "total_tokens": prompt + count}})
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def answer_pieces(body: dict) -> list[str]:
    """A planning prompt gets valid JSON with unique titles (one word a token); anything else gets
    `max_tokens` filler tokens, as with ignore_eos."""
    limit = int(body.get("max_tokens", 16))
    prompt = body["messages"][-1]["content"]
    if "Answer with JSON" not in prompt:
        return [f"t{i} " for i in range(1, limit + 1)]
    count = int(re.search(r"(?:exactly|What are) (\d+)", prompt).group(1))
    key = "parts" if prompt.startswith("Plan a book") else "titles"
    global _TITLES
    titles = []
    for _ in range(count):
        _TITLES += 1
        titles.append(f"Topic {_TITLES}")
    text = json.dumps({"title": "Step law book", key: titles} if key == "parts" else {key: titles})
    return [word + " " for word in text.split(" ")][:limit]


_TITLES = 0


async def _event(response: web.StreamResponse, payload: dict) -> None:
    payload = {"id": "x", "object": "chat.completion.chunk", "model": MODEL, **payload}
    await response.write(b"data: " + json.dumps(payload).encode() + b"\n\n")


@contextmanager
def steplaw_in_thread(*laws: tuple[float, float]) -> Iterator[list[StepLawEngine]]:
    """FAKE step-law engines served from their own event loop in a thread, for tests that run the CLI
    (which starts its own loop)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def make(a_ms: float, b_ms: float) -> StepLawEngine:
        return await StepLawEngine(a_ms, b_ms).start()

    engines = [asyncio.run_coroutine_threadsafe(make(a, b), loop).result(10) for a, b in laws]
    try:
        yield engines
    finally:
        for engine in engines:
            asyncio.run_coroutine_threadsafe(engine.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


async def _serve(count: int, a_ms: float, b_ms: float, max_seqs: int) -> None:
    engines = [await StepLawEngine(a_ms, b_ms, max_seqs).start() for _ in range(count)]
    print(" ".join(engine.url for engine in engines), flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":  # FAKE step-law engines in their own process: python -m tests.fake_steplaw N [A B SEQS]
    import sys

    numbers = [float(x) for x in sys.argv[2:5]] + [12.94, 0.2451, 256][len(sys.argv[2:5]):]
    asyncio.run(_serve(int(sys.argv[1]), numbers[0], numbers[1], int(numbers[2])))
