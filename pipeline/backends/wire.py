"""The streaming hot path on the wire: one chat completion on its own HTTP/1.1 connection, parsed as it
arrives, with no task wake-up per read.

Takes a Backend and a ChatRequest, returns a Completion or raises AttemptError, exactly as the aiohttp path
(aiohttp_chat.py) does (same SSE reader of sse.py, same failure kinds). Why it exists: aiohttp hands every read to
a waiting task (a future, a loop callback and a coroutine resume per read), and against an engine each read
carries one event, so at 1,536 streams that hand-off costs about as much as the parse (13 µs an event against 6 µs
on a 2-core machine; `python -m pipeline.bench.studies.ceiling` measures both). Here an asyncio Protocol passes
each read straight to httptools (llhttp: status line, headers, chunked decoding) and on to the SSE reader inside
the loop's own callback; the awaiting coroutine wakes once, at the end.

One connection a request, closed after it (`Connection: close`): on loopback the connect costs a fraction
of a microsecond an event over a few hundred tokens, and llama-server's habit of dropping idle keep-alive
connections (a third of requests re-asked, with aiohttp) goes away. Over https every request pays a TLS
handshake. The read timeout is one timer a request, re-armed lazily, so events cost no timer work.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import cast
from urllib.parse import urlsplit

import httptools

from pipeline.backends.envelope import (
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

MAX_HEADER_BYTES = 64 * 1024
MAX_ERROR_BODY = 64 * 1024
IDLE_CHECKS = 4


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    host_header: str
    base_path: str  # the base URL's path (/v1): each request adds its endpoint's
    tls: bool


@lru_cache(maxsize=256)
def target_of(base_url: str) -> Target:
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AttemptError(Outcome.CONNECT, f"not an http(s) URL: {base_url}")
    tls = parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    return Target(parts.hostname, port, parts.netloc.rpartition("@")[2], parts.path.rstrip("/"), tls)


@lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()


def http_request(target: Target, backend: Backend, request: ChatRequest, request_id: str | None = None) -> bytes:
    body = json.dumps(request_body(backend, request)).encode()
    headers = {
        "Host": target.host_header,
        "User-Agent": "fanout",
        "Accept": "text/event-stream",
        "Content-Type": "application/json",
        "Content-Length": str(len(body)),
        "Connection": "close",
        **request_headers(backend, request_id),
    }
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    path = target.base_path + request.endpoint.path
    return f"POST {path} HTTP/1.1\r\n{head}\r\n".encode("latin-1") + body


class _Exchange(asyncio.Protocol):
    """One request and its streamed answer. `done` resolves at [DONE] or fails with an AttemptError."""

    def __init__(self, stream: SseStream, payload: bytes, read_timeout: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.done: asyncio.Future[None] = self.loop.create_future()
        self.stream = stream
        self.feed = stream.feed_bytes
        self.streaming = False  # a 200 answer until [DONE] or a failure: body bytes go to `feed`
        self.payload = payload
        self.read_timeout = read_timeout
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.status = 0
        self.retry_after: str | None = None
        self.content_type = b""
        self.header_bytes = 0
        self.error_body = bytearray()
        self.reads = 0
        self.progress_seen = -1
        self.quiet_checks = 0
        self.timer = self.loop.call_later(read_timeout / IDLE_CHECKS, self._check_idle)

    # ------------------------------------------------------------ transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # create_connection hands a stream protocol a full Transport; asyncio.Protocol types it as the base
        self.transport = cast(asyncio.Transport, transport)
        self.transport.write(self.payload)

    def data_received(self, data: bytes) -> None:
        self.reads += 1
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            # what a callback raised (the SSE reader's AttemptError) comes back as the context
            cause = exc.__cause__ or exc.__context__
            self._fail(cause if isinstance(cause, AttemptError) else AttemptError(Outcome.BAD_RESPONSE, str(exc)[:200]))

    def connection_lost(self, exc: Exception | None) -> None:
        self.timer.cancel()
        if self.done.done():
            return
        if self.status and self.status != 200:
            self._fail(self._status_error())
        elif self.status:
            self._fail(AttemptError(Outcome.STREAM_CUT, str(exc) if exc else "stream ended without [DONE]"))
        else:
            self._fail(AttemptError(Outcome.CUT_BEFORE_FIRST_BYTE, str(exc) if exc else "connection closed"))

    # ------------------------------------------------------------ httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self.header_bytes += len(name) + len(value)
        if self.header_bytes > MAX_HEADER_BYTES:
            raise AttemptError(Outcome.BAD_RESPONSE, "response headers too large")
        name = name.lower()
        if name == b"retry-after":
            self.retry_after = value.decode("latin-1")
        elif name == b"content-type":
            self.content_type = value.strip().lower()

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        if self.status == 200 and not is_event_stream(self.content_type):
            self._fail(not_event_stream(self.content_type.decode("latin-1")))
            return
        self.streaming = self.status == 200 and not self.done.done()

    def on_body(self, body: bytes) -> None:
        if self.streaming:
            if self.feed(body):
                self._finish()
        elif self.status != 200 and len(self.error_body) < MAX_ERROR_BODY:
            self.error_body += body

    def on_message_complete(self) -> None:
        if self.done.done():
            return
        if self.status != 200:
            self._fail(self._status_error())
        else:
            self._fail(AttemptError(Outcome.STREAM_CUT, "stream ended without [DONE]"))  # no-op after [DONE]

    # ------------------------------------------------------------ the answer

    def _status_error(self) -> AttemptError:
        return status_error(self.status, self.error_body.decode("utf-8", "replace"), self.retry_after)

    def _check_idle(self) -> None:
        """Every read_timeout / IDLE_CHECKS: no progress since the last look, IDLE_CHECKS times running, is a
        stall (so one is caught between 1 and 1 + 1/IDLE_CHECKS read timeouts, and reads need no clock).
        Before the answer's headers, progress is any read; after them, a data event: a server that drips
        keep-alive comments or blank lines and never an event stalls as surely as a silent one."""
        progress = self.stream.events if self.status else self.reads
        self.quiet_checks = self.quiet_checks + 1 if progress == self.progress_seen else 0
        self.progress_seen = progress
        if self.quiet_checks >= IDLE_CHECKS:
            self._fail(AttemptError(Outcome.TIMEOUT, "no progress (bytes, then events) within the timeout"))
        else:
            self.timer = self.loop.call_later(self.read_timeout / IDLE_CHECKS, self._check_idle)

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)
        self.close()

    def _fail(self, error: AttemptError) -> None:
        if not self.done.done():
            self.done.set_exception(error)
        self.close(abort=True)

    def close(self, *, abort: bool = False) -> None:
        self.streaming = False
        self.timer.cancel()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort() if abort else self.transport.close()


async def stream_chat(
    backend: Backend, request: ChatRequest, read_timeout: float, on_delta: OnDelta | None = None
) -> Completion:
    """Send one streaming chat request; raise AttemptError on any failure, empty answers included.
    `read_timeout` bounds the connect and every wait for bytes."""
    t_sent = time.monotonic()
    target = target_of(backend.base_url)
    stream = SseStream(keep_token_times=request.keep_token_times, on_delta=on_delta, endpoint=request.endpoint)
    request_id = new_request_id()
    exchange = _Exchange(stream, http_request(target, backend, request, request_id), read_timeout)
    loop = exchange.loop
    try:
        try:
            async with asyncio.timeout(read_timeout):  # not wait_for: on 3.11 it can swallow a cancel
                await loop.create_connection(
                    lambda: exchange,
                    target.host,
                    target.port,
                    ssl=_tls_context() if target.tls else None,
                    server_hostname=target.host if target.tls else None,
                )
        except (TimeoutError, OSError) as exc:
            raise AttemptError(Outcome.CONNECT, f"{target.host}:{target.port}: {exc or 'timed out'}") from exc
        await exchange.done
    except AttemptError as error:
        hide_key_in(error, backend)
        raise
    finally:
        if not exchange.done.done():  # cancelled: drop the connection
            exchange.done.cancel()
        elif not exchange.done.cancelled():
            exchange.done.exception()  # a failure that landed after its caller stopped waiting is not news
        exchange.close(abort=True)
    return completion_of(backend, request, stream, t_sent, request_id)
