"""The openai SDK path (`client = "sdk"`): the same request as wire.stream_chat, through httpx, for networks
that need what httpx does and the fast path does not (HTTP(S)_PROXY and NO_PROXY, custom TLS through
SSL_CERT_FILE, HTTP/2 proxies). Slower per event (the ceiling bench measures by how much).

Takes a Backend and a ChatRequest (of one choice or several, `n`); returns a Completion or raises
AttemptError with the same failure kinds as the fast path, so the pool retries it the same way, and with the
key hidden in it as every transport hides it (envelope.hide_key_in). One SDK client per backend and event
loop, its own retries off (the pool's retry policy is the only one), closed with the fleet.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from pipeline.backends.envelope import (
    REQUEST_ID_HEADER,
    api_key,
    hide_key_in,
    new_request_id,
    request_body,
    status_error,
)
from pipeline.backends.sse import AttemptError, OnDelta, SseStream, completion_of
from pipeline.records import Backend, ChatRequest, Completion, Endpoint, Outcome

if TYPE_CHECKING:
    from openai import AsyncOpenAI

_CLIENTS: dict[tuple[int, str, str, str], AsyncOpenAI] = {}


def sdk_client(backend: Backend, read_timeout: float = 120.0) -> AsyncOpenAI:
    from openai import AsyncOpenAI

    return AsyncOpenAI(
        base_url=backend.base_url,
        api_key=api_key(backend) or "unused",
        max_retries=0,
        timeout=read_timeout,
        default_headers=backend.headers or None,
    )


def shared_client(backend: Backend, read_timeout: float) -> AsyncOpenAI:
    key = (id(asyncio.get_running_loop()), backend.base_url, repr(sorted(backend.headers.items())), api_key(backend))
    client = _CLIENTS.get(key)
    if client is None:
        client = _CLIENTS[key] = sdk_client(backend, read_timeout)
    return client


async def close_sdk_clients() -> None:
    """Close this event loop's shared clients (the fleet does, as it closes): an httpx client left to the
    garbage collector after its loop has ended fails there instead."""
    loop = id(asyncio.get_running_loop())
    for key in [k for k in _CLIENTS if k[0] == loop]:
        await _CLIENTS.pop(key).close()


async def _stream(
    client: AsyncOpenAI, backend: Backend, request: ChatRequest, stream: SseStream, request_id: str
) -> None:
    body = request_body(backend, request)
    model = body.pop("model", backend.model or "default")
    common: dict[str, Any] = {
        "model": model,
        "max_tokens": body.pop("max_tokens"),
        "temperature": body.pop("temperature"),
        "stream": True,
        "stream_options": body.pop("stream_options"),
        "extra_headers": {REQUEST_ID_HEADER: request_id},  # the backend's headers and key are the client's
    }
    if "n" in body:  # several choices: each chunk's choices carry their index, which SseStream sorts by
        common["n"] = body.pop("n")
    chunks: Any
    if request.endpoint is Endpoint.COMPLETIONS:
        prompt = body.pop("prompt")
        extra = {k: v for k, v in body.items() if k != "stream"}
        chunks = await client.completions.create(prompt=prompt, extra_body=extra, **common)
    else:
        messages = body.pop("messages")
        extra = {k: v for k, v in body.items() if k != "stream"}
        chunks = await client.chat.completions.create(messages=messages, extra_body=extra, **common)
    async for chunk in chunks:
        stream.feed(chunk.model_dump_json(exclude_none=True).encode())


async def sdk_stream_chat(
    backend: Backend, request: ChatRequest, read_timeout: float = 120.0, on_delta: OnDelta | None = None
) -> Completion:
    return await _completion(shared_client(backend, read_timeout), backend, request, on_delta=on_delta)


async def _completion(
    client: AsyncOpenAI, backend: Backend, request: ChatRequest, *, on_delta: OnDelta | None = None
) -> Completion:
    """One request on `client`; its failure raised as the pool's failure kind, the key hidden in it."""
    import openai

    t_sent = time.monotonic()
    stream = SseStream(keep_token_times=request.keep_token_times, on_delta=on_delta, endpoint=request.endpoint)
    request_id = new_request_id()
    try:
        await _stream(client, backend, request, stream, request_id)
    except AttemptError as error:
        hide_key_in(error, backend)
        raise
    except (openai.APIConnectionError, openai.APIStatusError) as exc:
        failed = attempt_error(exc, streamed=stream.t_first is not None)
        hide_key_in(failed, backend)
        raise failed from exc
    return completion_of(backend, request, stream, t_sent, request_id)


def attempt_error(exc: Exception, *, streamed: bool) -> AttemptError:
    """The SDK's failure as the pool's failure kind (a connection lost once text had `streamed` is a cut stream);
    its message may quote what the server said, so the caller hides the key in it."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return AttemptError(Outcome.TIMEOUT, str(exc))
    if isinstance(exc, openai.APIStatusError):
        retry_after = exc.response.headers.get("retry-after") if exc.response is not None else None
        return status_error(exc.status_code, str(exc.message), retry_after)
    return AttemptError(Outcome.STREAM_CUT if streamed else Outcome.CONNECT, str(exc))


async def sdk_chat(backend: Backend, request: ChatRequest) -> Completion:
    """One request on a client of its own (model checks, tests); it fails as sdk_stream_chat does."""
    async with sdk_client(backend) as client:
        return await _completion(client, backend, request)
