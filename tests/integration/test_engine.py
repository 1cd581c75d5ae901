"""Integration with the REAL embedded llama-server (SmolLM2-135M-Instruct): start, stream, count, stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import anyio
import pytest

from pipeline.backends.aiohttp_chat import new_session, stream_chat_aiohttp
from pipeline.backends.embedded.engine import EmbeddedEngine
from pipeline.backends.metrics import detect_engine, scrape
from pipeline.backends.pool import BackendPool, RetryPolicy
from pipeline.backends.sdk import sdk_chat
from pipeline.backends.wire import stream_chat
from pipeline.config import EngineSettings
from pipeline.records import ChatRequest, EngineKind
from tests.conftest import ENGINE_THREADS

pytestmark = [pytest.mark.engine, pytest.mark.anyio]
COUNTER = "llamacpp:tokens_predicted_total"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def question(i: int, max_tokens: int = 48) -> ChatRequest:
    return ChatRequest(
        messages=[{"role": "user", "content": f"Question {i}: name one use of the number {i}."}],
        max_tokens=max_tokens,
        tag=f"q{i}",
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead for our purpose
        return stat.read().split()[2] != "Z"


async def settled_counter(session, backend, expected_at_least: float) -> float:
    """llama-server adds to its counter when a slot is released, a moment after the stream ends."""
    value = 0.0
    for _ in range(50):
        value = (await scrape(session, backend))[COUNTER]
        if value >= expected_at_least:
            return value
        await anyio.sleep(0.05)
    return value


async def test_eight_streams_usage_equals_the_server_counter(engine8):
    backend = engine8.backend
    async with new_session(16) as session:
        info = await detect_engine(session, backend)
        assert info.kind == EngineKind.LLAMACPP and info.slots == 8 and info.has_metrics
        before = (await scrape(session, backend))[COUNTER]
        pool = BackendPool([backend], RetryPolicy(read_timeout=120))
        results = []

        async def one(i: int) -> None:
            results.append(await pool.complete(question(i)))

        async with anyio.create_task_group() as group:
            for i in range(8):
                group.start_soon(one, i)
        client_tokens = sum(c.completion_tokens for c in results)
        after = await settled_counter(session, backend, before + client_tokens)
    assert pool.states[0].peak_in_flight == 8
    assert all(c.text.strip() and c.finish_reason in ("stop", "length") for c in results)
    assert after - before == client_tokens
    assert all(c.t_sent < c.t_first_token <= c.t_done for c in results)


async def test_wire_aiohttp_and_sdk_paths_return_the_same_answer(engine_assets, tmp_path):
    settings = EngineSettings(slots=1, threads=ENGINE_THREADS, ctx_per_slot=1024)
    with EmbeddedEngine(settings, engine_assets, tmp_path / "server.log") as engine:
        request = question(7, max_tokens=32)
        wire = await stream_chat(engine.backend, request, read_timeout=120)
        async with new_session(4) as session:
            lean = await stream_chat_aiohttp(session, engine.backend, request, read_timeout=120)
        sdk = await sdk_chat(engine.backend, request)
    for answer in (wire, lean):
        assert answer.text == sdk.text
        assert (answer.prompt_tokens, answer.completion_tokens, answer.finish_reason) == (
            sdk.prompt_tokens,
            sdk.completion_tokens,
            sdk.finish_reason,
        )


def test_stop_leaves_no_process(engine_assets, tmp_path):
    engine = EmbeddedEngine(EngineSettings(slots=2, threads=ENGINE_THREADS), engine_assets, tmp_path / "s.log")
    engine.start()
    pid = engine.process.pid
    assert alive(pid)
    engine.stop()
    assert not alive(pid)


def serve(*flags: str, scratch: Path) -> subprocess.Popen:
    """`fanout serve` with its temporary files (the engine's log and slots folder) in `scratch`: a SIGKILL
    leaves them behind, and they must not be left in the system's temporary folder."""
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline", "serve", "--threads", str(ENGINE_THREADS), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        preexec_fn=hear_ctrl_c,
        env={**os.environ, "TMPDIR": str(scratch)},
    )


def hear_ctrl_c() -> None:
    """A shell starts a background job with SIGINT ignored, and a child keeps that; a user's terminal does not."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def server_pid_of(parent: int) -> int:
    children = subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True).stdout.split()
    assert len(children) == 1, children
    return int(children[0])


@pytest.mark.parametrize("kill_with", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_fanout_serve_prints_a_healthy_url_and_leaves_no_orphan(kill_with, tmp_path):
    process = serve("--slots", "2", scratch=tmp_path)
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        with urllib.request.urlopen(url[:-3] + "/health", timeout=5) as response:
            assert response.status == 200
        server = server_pid_of(process.pid)
        process.send_signal(kill_with)
        process.wait(20)
        deadline = time.monotonic() + 10
        while alive(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(server), f"llama-server {server} outlived `fanout serve` killed with {kill_with!r}"
    finally:
        process.kill()


def test_a_server_dies_with_the_thread_that_launched_it():
    """PR_SET_PDEATHSIG follows the launching thread: a pool worker that retires takes the server with it."""
    import threading

    engine = EmbeddedEngine(EngineSettings(slots=1, threads=ENGINE_THREADS, ctx_per_slot=512))
    launcher = threading.Thread(target=engine.launch)
    launcher.start()
    launcher.join()
    try:
        assert engine.process is not None and engine.process.wait(10) == -signal.SIGKILL
    finally:
        engine.stop()


async def test_the_fleets_engine_outlives_a_retired_worker_thread():
    """open_fleet launches the server from the event loop's thread: anyio retires a worker thread idle for
    10 s when the next call comes, and the server must not go with it."""
    from pipeline.backends.fleet import open_fleet
    from pipeline.config import Settings

    async with open_fleet(Settings(slots=2, threads=ENGINE_THREADS, ctx_per_slot=512)) as fleet:
        assert fleet.embedded is not None and fleet.embedded.process is not None
        async with anyio.create_task_group() as group:  # more workers, so the oldest idle one is retired
            for _ in range(3):
                group.start_soon(anyio.to_thread.run_sync, time.sleep, 0.3)
        await anyio.sleep(11)
        await anyio.to_thread.run_sync(lambda: None)  # retires the workers idle for 10 s, the oldest first
        await anyio.sleep(0.5)
        assert fleet.embedded.process.poll() is None, "the server was killed with a retired thread"
        answer = await fleet.pool.complete(question(1, max_tokens=8))
        assert answer.text
