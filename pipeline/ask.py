"""Ask: send one prompt (or N numbered copies at once) through the fleet and measure what came back.

Takes Settings and an AskSpec; returns an AskReport with every Completion, the wall time, the tokens
counted by the client (sum of usage) and by the server's own counter where it has one. With one stream the
answer is streamed to the caller as it arrives.
"""

from __future__ import annotations

import time

import anyio
from pydantic import BaseModel

from pipeline.backends.fleet import generated_tokens, open_fleet
from pipeline.backends.sse import OnDelta
from pipeline.config import Settings
from pipeline.records import ChatRequest, Completion, Endpoint, EngineInfo


class AskSpec(BaseModel):
    prompt: str
    streams: int = 1
    max_tokens: int = 256
    ignore_eos: bool = False
    endpoint: Endpoint = Endpoint.CHAT


class AskReport(BaseModel):
    completions: list[Completion]
    wall_s: float
    client_tokens: int
    server_tokens: float | None  # the engine's generated-token counter delta, summed over backends
    engines: dict[str, EngineInfo]

    @property
    def client_rate(self) -> float:
        return self.client_tokens / self.wall_s if self.wall_s > 0 else 0.0


def build_request(spec: AskSpec, index: int) -> ChatRequest:
    prompt = spec.prompt if spec.streams == 1 else f"[{index + 1}] {spec.prompt}"
    extra = {"ignore_eos": True} if spec.ignore_eos else {}
    return ChatRequest(
        messages=[{"role": "user", "content": prompt}],
        max_tokens=spec.max_tokens,
        extra=extra,
        tag=f"ask-{index + 1}",
        endpoint=spec.endpoint,
    )


async def ask(settings: Settings, spec: AskSpec, on_delta: OnDelta | None = None) -> AskReport:
    async with open_fleet(settings) as fleet:
        before = await generated_tokens(fleet)
        completions: list[Completion | None] = [None] * spec.streams

        async def one(index: int) -> None:
            completions[index] = await fleet.pool.complete(build_request(spec, index), on_delta)

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            for index in range(spec.streams):
                group.start_soon(one, index)
        wall = time.monotonic() - started
        after = await generated_tokens(fleet)
    done = [c for c in completions if c is not None]
    return AskReport(
        completions=done,
        wall_s=wall,
        client_tokens=sum(c.completion_tokens or 0 for c in done),
        server_tokens=None if before is None or after is None else after - before,
        engines=fleet.engines,
    )
