"""Where the client's CPU goes on the streaming hot path, apart from the kernel's reads.

    .venv/bin/python examples/client_cost.py [--reads 300000] [--seconds 6] [--rounds 6]

1. Per read, hot in cache: one engine-like read (one chunked SSE content event of the ceiling source,
   pipeline/bench/studies/sse_source.py) through `wire._Exchange.data_received` whole, and through its parts
   alone: httptools' framing and body callback, the SSE reader on a whole read (`SseStream.feed_bytes`), the
   same read split line by line, one event's JSON (`SseStream.feed`); beside them the ceiling bench's floor
   client (`_FloorExchange`, which only counts lines).
2. Per request: closed-loop requests of 8 events against the unpaced source in its own process, through
   `BackendPool.complete`, through `wire.stream_chat` alone and through the floor client, taken in turn; CPU
   a request (time.process_time, the least of the turns), then the pool under cProfile, top functions by own
   time.

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
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import httptools

from pipeline.backends.loop import fast_loop
from pipeline.backends.pool import BackendPool, RetryPolicy
from pipeline.backends.sse import SseStream
from pipeline.backends.wire import _Exchange, http_request, stream_chat, target_of
from pipeline.bench.studies.ceiling_worker import _FloorExchange
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


def per_item_us(call: Callable[[Any], object], items: Sequence[Any]) -> float:
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
    whole_read = SseStream(keep_token_times=False, on_delta=lambda text: None)
    line_by_line = SseStream(keep_token_times=False, on_delta=lambda text: None)
    event_only = SseStream(keep_token_times=False, on_delta=lambda text: None)
    for warm in (whole_read, line_by_line):
        warm.feed_bytes(events[0])  # the first event teaches the template
    floor = _FloorExchange(b"", [0])
    floor.transport = _NoTransport()
    return [
        ("wire._Exchange.data_received, whole", per_item_us(whole.data_received, reads)),
        ("  httptools framing and body callback", per_item_us(parser.feed_data, reads)),
        ("  SseStream.feed_bytes (one event a read)", per_item_us(whole_read.feed_bytes, events)),
        ("  the same, line by line", per_item_us(line_by_line._feed_lines, events)),
        ("  SseStream.feed (one event's JSON)", per_item_us(event_only.feed, [event[6:-2] for event in events])),
        ("floor client's data_received", per_item_us(floor.data_received, reads)),
    ]


Ask = Callable[[], Awaitable[Any]]


async def closed_loop(ask: Ask, seconds: float) -> int:
    """STREAMS closed-loop streams of `ask()` for `seconds`; how many answers came."""
    stop = time.monotonic() + seconds
    done = 0

    async def one() -> None:
        nonlocal done
        while time.monotonic() < stop:
            await ask()
            done += 1

    await asyncio.gather(*(one() for _ in range(STREAMS)))
    return done


def askers(backend: Backend) -> dict[str, Ask]:
    """One request of EVENTS_A_REQUEST events three ways: the pool, wire.py alone, the floor client."""
    pool = BackendPool([backend], RetryPolicy(attempts=1, read_timeout=30.0))
    target = target_of(backend.base_url)

    def request() -> ChatRequest:
        return ChatRequest(messages=[{"role": "user", "content": "go"}], max_tokens=EVENTS_A_REQUEST)

    async def floor() -> None:
        exchange = _FloorExchange(http_request(target, backend, request()), [0])
        await asyncio.get_running_loop().create_connection(lambda: exchange, target.host, target.port)
        await exchange.done

    return {
        "BackendPool.complete": lambda: pool.complete(request(), lambda text: None),
        "  wire.stream_chat alone": lambda: stream_chat(backend, request(), 30.0, lambda text: None),
        "floor client": floor,
    }


def per_request(seconds: float, rounds: int) -> tuple[dict[str, float], pstats.Stats]:
    """CPU µs a request of each way (the least of `rounds` turns, taken in turn), and a profile of the pool."""
    source = subprocess.Popen(
        [sys.executable, "-m", "pipeline.bench.studies.sse_source", "--tick-ms", "0"], stdout=subprocess.PIPE, text=True
    )
    least: dict[str, float] = {}
    try:
        assert source.stdout is not None
        port = int(source.stdout.readline())
        backend = Backend(name="source", base_url=f"http://127.0.0.1:{port}/v1", cap=STREAMS)
        ways = askers(backend)
        with fast_loop():
            for _ in range(rounds):
                for label, ask in ways.items():
                    started = time.process_time()
                    done = asyncio.run(closed_loop(ask, seconds / rounds))
                    cpu_us = (time.process_time() - started) / max(done, 1) * 1e6
                    least[label] = min(least.get(label, cpu_us), cpu_us)
            profile = cProfile.Profile()
            profile.enable()
            asyncio.run(closed_loop(ways["BackendPool.complete"], seconds / rounds))
            profile.disable()
    finally:
        source.kill()
    return least, pstats.Stats(profile)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=300_000)
    parser.add_argument("--seconds", type=float, default=6.0, help="client time per way, all turns together")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    for label, micros in asyncio.run(per_read(args.reads)):
        print(f"{label:42s} {micros:5.2f} µs a read")
    least, stats = per_request(args.seconds, args.rounds)
    print(f"\nper request ({EVENTS_A_REQUEST} events, {STREAMS} streams, least of {args.rounds} turns):")
    for label, micros in least.items():
        print(f"{label:42s} {micros:5.0f} µs CPU")
    print()
    stats.sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
