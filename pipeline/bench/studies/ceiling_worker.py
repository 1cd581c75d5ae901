"""One client process of the client-ceiling bench (pipeline/bench/studies/ceiling.py starts it and merges what
it prints): the clients under test and the count over one wall-clock window.

`python -m pipeline.bench.studies.ceiling_worker --client C --port P --streams N --offset O --total T
--max-tokens M --ramp R --window W` imports everything, prints `ready`, reads the start time (seconds since
the epoch) from stdin, runs N closed-loop streams of client C (`ours`, `aiohttp`, `sdk` or `floor`) against
the SSE source on port P, and prints one JSON line: events, CPU (user and kernel), read syscalls and seconds
over the window, streams receiving, answers completed, exact and failed, the first mismatches. Stream
O + i of T gets a first answer shorter by its own amount. CeilingActor runs the same code as a Ray actor.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from pathlib import Path

_LOOP_POLICY = None


async def _sampler(boxes: list[list[int]], start_at: float, window_s: float, out: dict) -> None:
    """Counts and CPU at the window's two ends. A loop busy with a burst of events wakes late: the window
    then starts late but still lasts window_s, and rates use the times actually read."""
    await asyncio.sleep(max(start_at - time.time(), 0))
    out["start"] = [b[0] for b in boxes]
    out["cpu0"], out["t0"] = time.process_time(), time.time()
    out["sys0"], out["reads0"] = resource.getrusage(resource.RUSAGE_SELF).ru_stime, _read_syscalls()
    await asyncio.sleep(window_s)
    out["cpu1"], out["t1"] = time.process_time(), time.time()
    out["sys1"], out["reads1"] = resource.getrusage(resource.RUSAGE_SELF).ru_stime, _read_syscalls()
    out["end"] = [b[0] for b in boxes]


def _read_syscalls() -> int:
    """This process's read syscalls so far (Linux /proc/self/io syscr; 0 elsewhere): how many events a
    socket read carried is events / reads."""
    try:
        return next(
            int(line.split()[1]) for line in Path("/proc/self/io").read_text().splitlines() if line.startswith("syscr:")
        )
    except (OSError, StopIteration, ValueError):
        return 0


def _first_tokens(index: int, streams: int, max_tokens: int) -> int:
    """Each stream's first answer is shorter by a different amount, so answers end spread over time."""
    return max(1, max_tokens - (index * max_tokens) // max(streams, 1))


class _Checks:
    def __init__(self) -> None:
        self.completed = 0
        self.exact = 0
        self.errors = 0
        self.mismatches: list[str] = []

    def check(self, asked: int, text: str, events: int, usage_tokens: int | None, finish: str | None) -> None:
        from pipeline.bench.studies.sse_source import expected_text

        self.completed += 1
        if text == expected_text(asked) and events == asked and usage_tokens == asked and finish == "length":
            self.exact += 1
        elif len(self.mismatches) < 5:
            self.mismatches.append(
                f"asked {asked}: events {events}, usage {usage_tokens}, finish {finish}, "
                f"text ok {text == expected_text(asked)}"
            )


async def _closed_loop(
    ask, streams: int, offset: int, total: int, max_tokens: int, boxes, checks: _Checks, failed: type[Exception]
) -> None:
    """`streams` closed-loop streams through `ask(request, on_delta) -> Completion`, each answer checked."""
    from pipeline.records import ChatRequest

    async def one(index: int) -> None:
        box = boxes[index]

        def on_delta(_text: str) -> None:
            box[0] += 1

        asked = _first_tokens(offset + index, total, max_tokens)
        while True:
            request = ChatRequest(messages=[{"role": "user", "content": "go"}], max_tokens=asked)
            try:
                completion = await ask(request, on_delta)
            except failed:
                checks.errors += 1
                await asyncio.sleep(0.1)
                continue
            checks.check(
                asked, completion.text, completion.chunks, completion.completion_tokens, completion.finish_reason
            )
            asked = max_tokens

    await asyncio.gather(*(one(i) for i in range(streams)))


def _source_backend(port: int, streams: int):
    from pipeline.records import Backend

    return Backend(name="source", base_url=f"http://127.0.0.1:{port}/v1", model="ceiling", cap=streams)


async def _ours(port: int, streams: int, offset: int, total: int, max_tokens: int, boxes, checks: _Checks) -> None:
    """The real path: BackendPool.complete -> wire.stream_chat."""
    from pipeline.backends.pool import BackendPool, RequestFailed, RetryPolicy

    pool = BackendPool([_source_backend(port, streams)], RetryPolicy(attempts=1, read_timeout=30.0))
    await _closed_loop(pool.complete, streams, offset, total, max_tokens, boxes, checks, RequestFailed)


async def _aiohttp(port: int, streams: int, offset: int, total: int, max_tokens: int, boxes, checks: _Checks) -> None:
    """The same reader over aiohttp (client.stream_chat_aiohttp): the path the hot path replaced."""
    from pipeline.backends.aiohttp_chat import new_session, stream_chat_aiohttp
    from pipeline.backends.sse import AttemptError

    backend = _source_backend(port, streams)
    async with new_session(streams) as session:

        async def ask(request, on_delta):
            return await stream_chat_aiohttp(session, backend, request, 30.0, on_delta)

        await _closed_loop(ask, streams, offset, total, max_tokens, boxes, checks, AttemptError)


class _FloorExchange(asyncio.Protocol):
    """The floor: send the request, count `data:` lines in every read, close at [DONE]. No HTTP parsing,
    no JSON, no text kept: what reading one event costs here before any client does any work."""

    def __init__(self, payload: bytes, box: list[int]) -> None:
        self.payload, self.box = payload, box
        self.lines = 0
        self.done = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(self.payload)

    def data_received(self, data: bytes) -> None:
        lines = data.count(b"data: ")
        self.lines += lines
        self.box[0] += lines
        if b"data: [DONE]" in data and not self.done.done():  # bytes already read may follow a close
            self.transport.close()
            self.done.set_result(None)

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError("closed before [DONE]"))


async def _floor(port: int, streams: int, offset: int, total: int, max_tokens: int, boxes, checks: _Checks) -> None:
    """Closed loop over _FloorExchange; an answer counts as exact when it had `asked` content events
    (its role, finish, usage and [DONE] lines are the 4 others)."""
    from pipeline.backends.wire import http_request, target_of
    from pipeline.records import ChatRequest

    backend = _source_backend(port, streams)
    target = target_of(backend.base_url)
    loop = asyncio.get_running_loop()

    async def one(index: int) -> None:
        asked = _first_tokens(offset + index, total, max_tokens)
        while True:
            request = ChatRequest(messages=[{"role": "user", "content": "go"}], max_tokens=asked)
            exchange = _FloorExchange(http_request(target, backend, request), boxes[index])
            try:
                # the factory runs inside this await, before `exchange` is rebound
                await loop.create_connection(lambda: exchange, target.host, target.port)  # noqa: B023
                await exchange.done
            except OSError:
                checks.errors += 1
                await asyncio.sleep(0.1)
                continue
            events = exchange.lines - 4
            boxes[index][0] -= 4
            checks.completed += 1
            checks.exact += events == asked
            asked = max_tokens

    await asyncio.gather(*(one(i) for i in range(streams)))


async def _sdk(port: int, streams: int, offset: int, total: int, max_tokens: int, boxes, checks: _Checks) -> None:
    import openai

    try:
        import httpx2

        http_client = openai.DefaultAsyncHttpx2Client(
            limits=httpx2.Limits(max_connections=streams + 16, max_keepalive_connections=streams + 16)
        )
    except (ImportError, AttributeError):
        import httpx  # type: ignore[import-not-found]  # older openai releases; not installed beside httpx2

        http_client = openai.DefaultAsyncHttpxClient(
            limits=httpx.Limits(max_connections=streams + 16, max_keepalive_connections=streams + 16)
        )
    client = openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, http_client=http_client, timeout=60.0
    )

    async def one(index: int) -> None:
        box = boxes[index]
        asked = _first_tokens(offset + index, total, max_tokens)
        while True:
            parts: list[str] = []
            usage = finish = None
            events = 0
            try:
                stream = await client.chat.completions.create(
                    model="ceiling",
                    messages=[{"role": "user", "content": "go"}],
                    max_tokens=asked,
                    stream=True,
                    stream_options={"include_usage": True},
                )
                async for chunk in stream:
                    if chunk.usage:
                        usage = chunk.usage.completion_tokens
                    for choice in chunk.choices:
                        if choice.delta.content:
                            parts.append(choice.delta.content)
                            events += 1
                            box[0] += 1
                        if choice.finish_reason:
                            finish = choice.finish_reason
            except openai.OpenAIError:
                checks.errors += 1
                await asyncio.sleep(0.1)
                continue
            checks.check(asked, "".join(parts), events, usage, finish)
            asked = max_tokens

    async with client:
        await asyncio.gather(*(one(i) for i in range(streams)))


async def _worker_main(
    client: str, port: int, streams: int, offset: int, total: int, max_tokens: int, start_at: float, end_at: float
) -> dict:
    boxes = [[0] for _ in range(streams)]
    checks = _Checks()
    marks: dict = {}
    runner = {"ours": _ours, "aiohttp": _aiohttp, "sdk": _sdk, "floor": _floor}[client]
    task = asyncio.ensure_future(runner(port, streams, offset, total, max_tokens, boxes, checks))
    if os.environ.get("CEILING_DEBUG"):

        async def progress():
            while True:
                await asyncio.sleep(1)
                print(
                    f"{time.time() - start_at:+.1f}s events {sum(b[0] for b in boxes)} completed {checks.completed} "
                    f"cpu {time.process_time():.2f}",
                    file=sys.stderr,
                    flush=True,
                )

        asyncio.ensure_future(progress())
    await _sampler(boxes, start_at, end_at - start_at, marks)
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):  # the window is over: in-flight answers are dropped unchecked
        pass
    receiving = sum(1 for a, b in zip(marks["start"], marks["end"]) if b > a)
    return {
        "events": sum(marks["end"]) - sum(marks["start"]),
        "cpu_s": marks["cpu1"] - marks["cpu0"],
        "sys_s": marks["sys1"] - marks["sys0"],
        "reads": marks["reads1"] - marks["reads0"],
        "seconds": marks["t1"] - marks["t0"],
        "late_s": marks["t0"] - start_at,
        "receiving": receiving,
        "completed": checks.completed,
        "exact": checks.exact,
        "errors": checks.errors,
        "mismatches": checks.mismatches,
    }


def worker_entry(argv: list[str]) -> None:
    """Child process: import everything, say ready, read the start time, run, print one JSON line."""
    parser = argparse.ArgumentParser()
    for name in ("client",):
        parser.add_argument(f"--{name}")
    for name in ("port", "streams", "offset", "total", "max-tokens"):
        parser.add_argument(f"--{name}", type=int)
    parser.add_argument("--ramp", type=float)
    parser.add_argument("--window", type=float)
    args = parser.parse_args(argv)
    if args.client in ("ours", "aiohttp", "floor"):
        import pipeline.backends.pool  # noqa: F401  (imports before the clock starts)
        from pipeline.backends.loop import fast_loop

        global _LOOP_POLICY
        _LOOP_POLICY = fast_loop()  # this process only runs the client: the policy stays for its life
        _LOOP_POLICY.__enter__()
    else:
        import openai  # noqa: F401
    print("ready", flush=True)
    t0 = float(sys.stdin.readline())
    start_at = t0 + args.ramp
    result = asyncio.run(
        _worker_main(
            args.client,
            args.port,
            args.streams,
            args.offset,
            args.total,
            args.max_tokens,
            start_at,
            start_at + args.window,
        )
    )
    print(json.dumps(result), flush=True)
    os._exit(0)  # skip tearing down thousands of sockets


class CeilingActor:
    """A ceiling worker as a Ray actor: the worker process's code on its own uvloop, in the actor's process."""

    def run(self, client: str, port: int, streams: int, offset: int, total: int, max_tokens: int,
            start_at: float, end_at: float) -> dict:  # fmt: skip
        from pipeline.backends.loop import fast_loop

        with fast_loop():
            return asyncio.run(_worker_main(client, port, streams, offset, total, max_tokens, start_at, end_at))


if __name__ == "__main__":
    worker_entry(sys.argv[1:])
