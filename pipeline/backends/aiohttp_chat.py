"""The aiohttp path: the same streaming exchange as wire.py over an aiohttp session.

Takes a session, a Backend and a ChatRequest; returns a Completion or raises an AttemptError. Kept as the
client-ceiling bench's yardstick; the hot path is wire.py. The events are read by sse.py's SseStream.
"""

from __future__ import annotations

import time

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong

from pipeline.backends.envelope import (
    hide_key,
    hide_key_in,
    is_event_stream,
    new_request_id,
    not_event_stream,
    request_body,
    request_headers,
    status_error,
)
from pipeline.backends.sse import AttemptError, OnDelta, SseStream, completion_of
from pipeline.records import Backend, ChatRequest, Completion, Outcome


def new_session(total_connections: int) -> aiohttp.ClientSession:
    """One session for a whole run; its connector is sized to the caps so it never queues requests itself."""
    connector = aiohttp.TCPConnector(limit=max(total_connections, 1), limit_per_host=0, ttl_dns_cache=300)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None))


async def stream_chat_aiohttp(
    session: aiohttp.ClientSession,
    backend: Backend,
    request: ChatRequest,
    read_timeout: float,
    on_delta: OnDelta | None = None,
) -> Completion:
    """Send one streaming chat request; raise AttemptError on any failure, empty answers included.

    `read_timeout` bounds every wait for bytes (headers, first token, each later event): a stalled
    server fails the attempt instead of hanging the job."""
    t_sent = time.monotonic()
    stream = SseStream(keep_token_times=request.keep_token_times, on_delta=on_delta, endpoint=request.endpoint)
    request_id = new_request_id()
    got_bytes = False
    url = backend.base_url + request.endpoint.path
    try:
        async with session.post(
            url,
            json=request_body(backend, request),
            headers=request_headers(backend, request_id),
            timeout=aiohttp.ClientTimeout(sock_read=read_timeout),
        ) as response:
            await check_head(response, backend)
            got_bytes = True
            done = await read_events(response, stream)
    except AttemptError as error:
        hide_key_in(error, backend)
        raise
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
        kind = Outcome.STREAM_CUT if got_bytes else Outcome.CUT_BEFORE_FIRST_BYTE
        if isinstance(exc, aiohttp.ClientConnectorError):
            kind = Outcome.CONNECT
        raise AttemptError(kind, str(exc)) from exc
    except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
        raise AttemptError(Outcome.TIMEOUT, "no bytes within the timeout") from exc
    except aiohttp.ClientPayloadError as exc:
        raise AttemptError(Outcome.STREAM_CUT, str(exc)) from exc
    except aiohttp.ClientError as exc:
        raise AttemptError(Outcome.CONNECT, str(exc)) from exc
    except HttpProcessingError as exc:  # any other malformed response: a failed attempt, never a crashed job
        raise AttemptError(Outcome.BAD_RESPONSE, str(exc)[:200]) from exc
    if not done:
        raise AttemptError(Outcome.STREAM_CUT, "stream ended without [DONE]")
    return completion_of(backend, request, stream, t_sent, request_id)


async def check_head(response: aiohttp.ClientResponse, backend: Backend) -> None:
    """Raise the AttemptError an answer's status and content type call for, if any."""
    if response.status != 200:
        text = hide_key(await response.text(errors="replace"), backend)
        raise status_error(response.status, text, response.headers.get("Retry-After"))
    content_type = response.headers.get("Content-Type", "")
    if not is_event_stream(content_type.strip().lower().encode("latin-1", "replace")):
        raise not_event_stream(content_type)


async def read_events(response: aiohttp.ClientResponse, stream: SseStream) -> bool:
    """Read the SSE body until [DONE]; True if it came. Reads whatever bytes arrived (one event per read
    against a real engine) and hands them to the reader: aiohttp's per-line iteration costs more than the parse."""
    content = response.content
    try:
        while data := await content.readany():
            if stream.feed_bytes(data):
                return True
    except (ValueError, LineTooLong) as exc:  # as aiohttp's own line reader said it (LineTooLong is not a
        # ClientError: uncaught, it crashed the whole job); our own AttemptError is neither
        raise AttemptError(Outcome.OVERSIZED, "SSE line too long") from exc
    return False
