"""Where the client's CPU goes on the streaming hot path, apart from the kernel's reads.

    .venv/bin/python examples/client_cost.py [--reads 300000] [--seconds 3]

1. Per read, hot in cache: one engine-like read (one chunked SSE content event of the ceiling source,
   pipeline/bench/studies/sse_source.py) through `wire._Exchange.data_received` whole, and through its parts
   alone: httptools' framing and body callback, the SSE line split (`_lines`), the event reader
   (`SseStream.feed`); beside them the ceiling bench's floor client (`_FloorExchange`, which only counts lines).
2. Per request: closed-loop requests of 8 events through `BackendPool.complete` against the unpaced source in
   its own process; CPU a request (time.process_time), then the same under cProfile, top functions by own time.

`python -m pipeline.bench.studies.ceiling` measures what these add up to with real sockets, many streams and
cold caches; this script says which part of the difference to the floor is Python and which is per request.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import httptools

from pipeline.backends.loop import fast_loop
from pipeline.backends.pool import BackendPool, RetryPolicy
from pipeline.backends.sse import SseStream
from pipeline.backends.wire import _Exchange
from pipeline.bench.studies.ceiling import _FloorExchange
from pipeline.bench.studies.sse_source import _chunked, content_event
from pipeline.records import Backend, ChatRequest

RESPONSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
STREAMS = 32
EVENTS_A_REQUEST = 8


class _NoTransport:
    """Stands in for a socket's transport: writes and closes go nowhere."""

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


class _BodySink:
    def on_body(self, body: bytes) -> None:
        pass


class _NoReader:
    def feed(self, payload: bytes) -> None:
        pass


def per_item_us(call: Callable[[Any], None], items: Sequence[Any]) -> float:
    started = time.perf_counter()
    for item in items:
        call(item)
    return (time.perf_counter() - started) / len(items) * 1e6


def exchange(stream: Any) -> _Exchange:
    made = _Exchange(stream, b"", 30.0)
    made.transport = _NoTransport()  # type: ignore[assignment]
    made.timer.cancel()
    return made


async def per_read(count: int) -> list[tuple[str, float]]:
    events = [content_event(index % 50) for index in range(count)]
    reads = [_chunked(event) for event in events]
    whole = exchange(SseStream(keep_token_times=False, on_delta=lambda text: None))
    whole.data_received(RESPONSE_HEAD)
    parser = httptools.HttpResponseParser(_BodySink())
    parser.feed_data(RESPONSE_HEAD)
    lines = exchange(SseStream(keep_token_times=False))
    lines.stream = _NoReader()  # type: ignore[assignment]
    reader = SseStream(keep_token_times=False, on_delta=lambda text: None)
    floor = _FloorExchange(b"", [0])
    floor.transport = _NoTransport()
    return [
        ("wire._Exchange.data_received, whole", per_item_us(whole.data_received, reads)),
        ("  httptools framing and body callback", per_item_us(parser.feed_data, reads)),
        ("  _lines: SSE line split, [DONE] check", per_item_us(lines._lines, events)),
        ("  SseStream.feed (the template path)", per_item_us(reader.feed, [event[6:-2] for event in events])),
        ("floor client's data_received", per_item_us(floor.data_received, reads)),
    ]


async def closed_loop(backend: Backend, seconds: float) -> int:
    pool = BackendPool([backend], RetryPolicy(attempts=1, read_timeout=30.0))
    stop = time.monotonic() + seconds
    done = 0

    async def one() -> None:
        nonlocal done
        while time.monotonic() < stop:
            request = ChatRequest(messages=[{"role": "user", "content": "go"}], max_tokens=EVENTS_A_REQUEST)
            await pool.complete(request, lambda text: None)
            done += 1

    await asyncio.gather(*(one() for _ in range(STREAMS)))
    return done


def per_request(seconds: float) -> tuple[float, pstats.Stats]:
    source = subprocess.Popen(
        [sys.executable, "-m", "pipeline.bench.studies.sse_source", "--tick-ms", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert source.stdout is not None
        port = int(source.stdout.readline())
        backend = Backend(name="source", base_url=f"http://127.0.0.1:{port}/v1", cap=STREAMS)
        with fast_loop():
            asyncio.run(closed_loop(backend, 1.0))  # warm-up
            started = time.process_time()
            done = asyncio.run(closed_loop(backend, seconds))
            cpu_us = (time.process_time() - started) / max(done, 1) * 1e6
            profile = cProfile.Profile()
            profile.enable()
            asyncio.run(closed_loop(backend, seconds))
            profile.disable()
    finally:
        source.kill()
    return cpu_us, pstats.Stats(profile)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=300_000)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    for label, micros in asyncio.run(per_read(args.reads)):
        print(f"{label:42s} {micros:5.2f} µs a read")
    cpu_us, stats = per_request(args.seconds)
    print(f"\nper request ({EVENTS_A_REQUEST} events, {STREAMS} streams): {cpu_us:.0f} µs CPU\n")
    stats.sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
