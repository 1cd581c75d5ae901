"""Opens the fleet a run uses: the given backends, or the embedded engine when none is given.

Takes Settings; yields a Fleet (pool, detected engines, the aiohttp session, and a pool of its own for
planning when planner backends are given) and tears it all down at the end. On the way it raises the
open-file limit for the caps (lowering caps if it must), checks that each backend answers and serves the
named model (filling in the model when none was named), and detects the engine behind each. No backend
reachable, or a wrong model name, is a usage error.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import anyio

from pipeline.backends.aiohttp_chat import new_session
from pipeline.backends.chat import check_proxies
from pipeline.backends.chatworkers import ChatWorkers
from pipeline.backends.embedded.buildgroup import stop_all
from pipeline.backends.embedded.engine import EmbeddedEngine
from pipeline.backends.embedded.install import EngineAssets, ensure_installed
from pipeline.backends.engines import engine, metric_names
from pipeline.backends.limits import plan_open_files
from pipeline.backends.metrics import detect_engine, scrape
from pipeline.backends.pool import BackendPool, RetryPolicy
from pipeline.backends.raychat import RayChatWorkers
from pipeline.backends.sdk import close_sdk_clients
from pipeline.backends.supervisor import EngineSupervisor
from pipeline.backends.transport import Transport
from pipeline.config import EngineSettings, Settings
from pipeline.errors import UsageError
from pipeline.records import Backend, EngineInfo, EngineKind, WarmSchedule

log = logging.getLogger("fanout")
EXTRA_CONNECTIONS = 32  # metrics scrapes and probes beside the capped requests


@dataclass
class Fleet:
    pool: BackendPool
    engines: dict[str, EngineInfo]  # every backend's, planners' included
    session: aiohttp.ClientSession
    embedded: EmbeddedEngine | None
    planner_pool: BackendPool | None = None  # planning's own backends (STORM's plan-on-one, write-on-many)
    supervisor: EngineSupervisor | None = None  # restarts the embedded engine once if it dies mid-job

    @property
    def engine_restarts(self) -> int:
        return 0 if self.supervisor is None else self.supervisor.restarts

    @property
    def backends(self) -> list[Backend]:
        return [state.backend for state in self.pool.states]

    @property
    def planners(self) -> BackendPool:
        """The pool planning requests go to: its own, or the writers' when it has none."""
        return self.planner_pool or self.pool

    def prefix_ready(self, name: str) -> WarmSchedule:
        """When a prompt the named backend is computing can serve another's (its engine's `prefix_ready`)."""
        info = self.engines.get(name)
        return engine(info.kind if info is not None else EngineKind.UNKNOWN).prefix_ready

    def infos(self, pool: BackendPool) -> list[EngineInfo]:
        return [self.engines[state.backend.name] for state in pool.states]


def retry_policy(settings: Settings) -> RetryPolicy:
    return RetryPolicy(
        attempts=settings.attempts, read_timeout=settings.read_timeout, give_up_after=settings.give_up_after
    )


@asynccontextmanager
async def open_fleet(
    settings: Settings, engine_log: Path | None = None, *, ram_prompt_cache: bool = True
) -> AsyncIterator[Fleet]:
    """`ram_prompt_cache` False starts the embedded engine without its host-memory prompt cache, which no
    endpoint empties (a bench that empties the cache between levels asks for that)."""
    embedded = None
    supervisor = None
    backends = settings.backends
    if not backends:
        engine_settings = EngineSettings(
            slots=settings.slots,
            threads=settings.engine_threads,
            ctx_per_slot=settings.ctx_per_slot,
            ram_prompt_cache=ram_prompt_cache,
        )
        assets = await set_up_engine()
        embedded = EmbeddedEngine(engine_settings, assets, log_path=engine_log)
        embedded.launch()  # from the event loop's thread, which outlives the server (see EmbeddedEngine.launch)
        await anyio.to_thread.run_sync(embedded.wait_ready)
        backends = [embedded.backend]
    backends = [settings.request_options(b) for b in backends]
    planners = [settings.request_options(b) for b in settings.planner_backends]
    try:
        check_proxies([b for b in backends + planners if embedded is None or b.name != embedded.backend.name])
        fd_plan = plan_open_files([b.cap for b in backends + planners])
        if fd_plan.warning:
            log.warning(fd_plan.warning)
        async with new_session(sum(fd_plan.caps) + EXTRA_CONNECTIONS) as session:
            backends, engines, down = await check_backends(session, backends)
            pool = BackendPool(backends, retry_policy(settings), caps=fd_plan.caps[: len(backends)])
            pool.rest(down)
            if embedded is not None:
                supervisor = EngineSupervisor(embedded, pool, embedded.backend.name)
                supervisor.start()
            planner_pool = None
            if planners:
                planners, planner_engines, planners_down = await check_backends(session, planners)
                engines.update(planner_engines)
                planner_pool = BackendPool(planners, retry_policy(settings), caps=fd_plan.caps[len(backends) :])
                planner_pool.rest(planners_down)
            with ExitStack() as stack:
                if settings.workers > 1:
                    transport = await start_workers(settings, stack)
                    for each in (pool, planner_pool):
                        if each is not None:
                            each.transport = transport
                try:
                    yield Fleet(pool, engines, session, embedded, planner_pool, supervisor)
                finally:
                    await close_sdk_clients()
    finally:
        if supervisor is not None:
            supervisor.close()
        if embedded is not None:
            await anyio.to_thread.run_sync(embedded.stop)


SET_UP_STOP_S = 1.5  # a stopped set-up's thread ends its build (buildgroup.GRACE_S at most) and says so by then


async def set_up_engine() -> EngineAssets:
    """The embedded engine's assets, set up on a worker thread where missing (a pip-installed wheel's first use:
    minutes). A run stopped meanwhile does not wait for the build: its process groups are ended (buildgroup.py), and
    the thread is given SET_UP_STOP_S to end its progress line before the run's own last line."""
    ended = threading.Event()

    def set_up() -> EngineAssets:
        try:
            return ensure_installed()
        finally:
            ended.set()

    try:
        return await anyio.to_thread.run_sync(set_up, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        stop_all()
        ended.wait(SET_UP_STOP_S)
        raise


async def start_workers(settings: Settings, stack: ExitStack) -> Transport:
    """The streams' readers: worker processes, or Ray actors (`ray_address` set: "" a local instance)."""
    if settings.ray_address is not None:
        actors = await anyio.to_thread.run_sync(RayChatWorkers(settings.workers, settings.ray_address or None).start)
        stack.callback(actors.stop)
        return actors.chat
    workers = ChatWorkers(settings.workers)
    stack.callback(workers.__exit__)
    await anyio.to_thread.run_sync(workers.__enter__)
    return workers.chat


async def check_backends(
    session: aiohttp.ClientSession, backends: list[Backend]
) -> tuple[list[Backend], dict[str, EngineInfo], set[str]]:
    """Detect every backend's engine at once; settle each one's model. Returns the backends (models filled
    in), their EngineInfo, and the names of those that did not answer (to be rested, not dropped)."""
    infos: dict[str, EngineInfo] = {}

    async def detect(backend: Backend) -> None:
        infos[backend.name] = await detect_engine(session, backend)

    async with anyio.create_task_group() as group:
        for backend in backends:
            group.start_soon(detect, backend)
    down = {b.name for b in backends if not infos[b.name].models}
    if len(down) == len(backends):
        raise UsageError(f"no backend reachable: {', '.join(b.base_url for b in backends)}")
    for name in sorted(down):
        log.warning("backend %s does not answer /v1/models: rested, to be probed later", name)
    settled = [b if b.name in down else settle_model(b, infos[b.name]) for b in backends]
    return settled, infos, down


def settle_model(backend: Backend, info: EngineInfo) -> Backend:
    if backend.model is None:
        return backend.model_copy(update={"model": info.models[0]})
    if backend.model not in info.models:
        raise UsageError(
            f"backend {backend.name}: model {backend.model!r} is not served there (it serves: {', '.join(info.models)})"
        )
    return backend


async def generated_tokens(fleet: Fleet) -> float | None:
    """Sum of every backend's generated-token counter, or None if any backend lacks one."""
    total = 0.0
    for backend in fleet.backends:
        names = metric_names(fleet.engines[backend.name].kind)
        samples = await scrape(fleet.session, backend)
        if names is None or samples is None or names.generated_tokens not in samples:
            return None
        total += samples[names.generated_tokens]
    return total
