"""The openai SDK path: the same request as wire.stream_chat, for calls where its types help and rate does not
matter (planning, model checks). Takes a Backend and a ChatRequest; returns a Completion."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from pipeline.backends.sse import SseStream, completion_of, request_body
from pipeline.records import Backend, ChatRequest, Completion

if TYPE_CHECKING:
    from openai import AsyncOpenAI


def sdk_client(backend: Backend) -> AsyncOpenAI:
    """The openai SDK for calls where its types help and rate does not matter; its own retries are off
    so they do not multiply with the pool's."""
    from openai import AsyncOpenAI

    key = os.environ.get(backend.api_key_env, "") if backend.api_key_env else ""
    return AsyncOpenAI(base_url=backend.base_url, api_key=key or "unused", max_retries=0)


async def sdk_chat(backend: Backend, request: ChatRequest) -> Completion:
    """The same request as wire.stream_chat, through the openai SDK (slow path: planning, model checks)."""
    t_sent = time.monotonic()
    stream = SseStream(request.keep_token_times)
    body = request_body(backend, request)
    messages, model = body.pop("messages"), body.pop("model", backend.model or "default")
    async with sdk_client(backend) as client:
        chunks = await client.chat.completions.create(
            model=model,
            messages=messages,
            max_tokens=body.pop("max_tokens"),
            temperature=body.pop("temperature"),
            stream=True,
            stream_options=body.pop("stream_options"),
            extra_body={k: v for k, v in body.items() if k != "stream"},
        )
        async for chunk in chunks:
            stream.feed(chunk.model_dump_json(exclude_none=True).encode())
    return completion_of(backend, request, stream, t_sent)
