"""Samplers that run beside the load: every backend's /metrics and the host's GPU power, every 0.5 s on
one absolute schedule (t0 + k * interval), so samples of different backends line up.

Takes the open session, the backends with their engines and a stop event; fills lists of CounterSample and
PowerSample. Power comes from nvidia-smi where it exists; where it does not, there are no power samples
and every power figure is null, never zero.
"""

from __future__ import annotations

import shutil
import subprocess
import time

import aiohttp
import anyio

from pipeline.backends.metrics import read_engine, scrape
from pipeline.records import Backend, EngineInfo
from pipeline.records.bench import CounterSample, PowerSample, RequestSample

NVIDIA_SMI_TIMEOUT_S = 5.0
SETTLE_S = 3.0  # llama-server adds to its counter a moment after a stream ends


async def sample_backend(session: aiohttp.ClientSession, backend: Backend, info: EngineInfo) -> CounterSample:
    """One scrape, time-stamped at the middle of the request."""
    before = time.monotonic()
    samples = await scrape(session, backend)
    t = (before + time.monotonic()) / 2
    if samples is None:
        return CounterSample(backend=backend.name, t=t)
    reading = read_engine(info.kind, samples)
    return CounterSample(
        backend=backend.name,
        t=t,
        generated=reading.generated_tokens,
        prompt=reading.prompt_tokens,
        cached_prompt=reading.cached_prompt_tokens,
        running=reading.running,
        waiting=reading.waiting,
        kv_usage=reading.kv_usage,
        decode_steps=reading.decode_steps,
    )


async def sample_all(session: aiohttp.ClientSession, targets: list[tuple[Backend, EngineInfo]]) -> list[CounterSample]:
    found: list[CounterSample] = []

    async def one(backend: Backend, info: EngineInfo) -> None:
        found.append(await sample_backend(session, backend, info))

    async with anyio.create_task_group() as group:
        for backend, info in targets:
            group.start_soon(one, backend, info)
    return found


async def counter_loop(
    session: aiohttp.ClientSession,
    targets: list[tuple[Backend, EngineInfo]],
    t0: float,
    interval: float,
    stop: anyio.Event,
    into: list[CounterSample],
) -> None:
    """Scrape every backend at t0, t0 + interval, ... until `stop` is set."""
    tick = 0
    while not stop.is_set():
        await sleep_until(t0 + tick * interval)
        into.extend(await sample_all(session, targets))
        tick = max(tick + 1, int((time.monotonic() - t0) / interval) + 1)  # skip ticks a slow scrape missed


async def sleep_until(when: float) -> None:
    delay = when - time.monotonic()
    if delay > 0:
        await anyio.sleep(delay)


def nvidia_smi() -> str | None:
    return shutil.which("nvidia-smi")


def read_power(binary: str) -> PowerSample | None:
    """GPU draw now, summed over the GPUs; None when nvidia-smi fails or reports no number."""
    t = time.monotonic()
    try:
        out = subprocess.run(
            [binary, "--query-gpu=power.draw", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    watts = []
    for line in out.splitlines():
        try:
            watts.append(float(line.strip()))
        except ValueError:
            continue  # "[N/A]" on cards that do not report draw
    return PowerSample(t=t, watts=sum(watts), per_gpu=watts) if watts else None


async def power_loop(t0: float, interval: float, stop: anyio.Event, into: list[PowerSample]) -> None:
    binary = nvidia_smi()
    if binary is None:
        return
    tick = 0
    while not stop.is_set():
        await sleep_until(t0 + tick * interval)
        sample = await anyio.to_thread.run_sync(read_power, binary)
        if sample is not None:
            into.append(sample)
        tick = max(tick + 1, int((time.monotonic() - t0) / interval) + 1)


async def settled_end(
    session: aiohttp.ClientSession,
    pairs: list[tuple[Backend, EngineInfo]],
    start: list[CounterSample],
    requests: list[RequestSample],
) -> list[CounterSample]:
    """Scrape until every counter has taken in the level's usage tokens (or SETTLE_S passes)."""
    wanted = {
        backend.name: sum(r.completion_tokens or 0 for r in requests if r.backend == backend.name)
        for backend, _ in pairs
    }
    before = {s.backend: s.generated for s in start}
    deadline = time.monotonic() + SETTLE_S
    while True:
        end = await sample_all(session, pairs)
        settled = all(
            s.generated is None or (was := before.get(s.backend)) is None or s.generated - was >= wanted[s.backend]
            for s in end
        )
        if settled or time.monotonic() > deadline:
            return end
        await anyio.sleep(0.05)
