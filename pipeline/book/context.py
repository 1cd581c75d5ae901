"""What every stage of one book run reads (RunContext), made once the fleet is open: the spec with its sampling
profiles settled from what the engines report (recorded in spec.json), and the writers' and planners' samplers
with the body fields that switch thinking off where every answering engine has the switch."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pipeline.backends.engines import engine
from pipeline.backends.fleet import Fleet
from pipeline.backends.pool import BackendPool
from pipeline.book.folder import RunFolder
from pipeline.book.profiles import Sampler, choose_profile
from pipeline.book.requestlog import RequestLog
from pipeline.book.sourcestage import BookSources
from pipeline.config import Settings
from pipeline.files import write_atomic
from pipeline.meaning.embed import Embedder
from pipeline.records import BookSpec, EngineInfo, SamplingProfile
from pipeline.watch.listeners import BookListener

log = logging.getLogger("fanout")


@dataclass(frozen=True)
class RunContext:
    """The settings, the spec (profiles settled), the run folder, the watchers every event goes to, the encoder
    the meaning checks share, and the samplers of writing and of planning (the same one without planner
    backends)."""

    settings: Settings
    spec: BookSpec
    folder: RunFolder
    listener: BookListener
    embedder: Embedder
    writing: Sampler
    planning: Sampler
    sources: BookSources | None = None  # the user's documents, indexed (the sources stage, book/sourcestage.py)


def engine_switches(infos: list[EngineInfo]) -> dict[str, Any]:
    """The body fields that switch thinking off, where every answering engine has the switch."""
    kinds = {info.kind for info in infos if info.models}
    return (
        {"chat_template_kwargs": {"enable_thinking": False}}
        if kinds and all(engine(k).thinking_switch for k in kinds)
        else {}
    )


def sampler_for(profile: SamplingProfile, infos: list[EngineInfo]) -> Sampler:
    kinds = frozenset(info.kind for info in infos if info.models)
    return Sampler(profile=profile, kinds=kinds, switches=engine_switches(infos))


def settle_profiles(settings: Settings, spec: BookSpec, fleet: Fleet) -> BookSpec:
    """The spec with its sampling profiles chosen from what the engines report (a resumed spec keeps its own)."""

    def models(pool: BackendPool) -> list[str]:
        return [state.backend.model for state in pool.states if state.backend.model]

    update: dict[str, SamplingProfile] = {}
    if spec.profile is None:
        update["profile"] = choose_profile(settings.profile, settings.sampling, models(fleet.pool))
    if fleet.planner_pool is not None and spec.planner_profile is None:
        update["planner_profile"] = choose_profile(settings.profile, settings.sampling, models(fleet.planner_pool))
    return spec.model_copy(update=update) if update else spec


def writing_context(fleet: Fleet) -> int | None:
    """The tokens one request may hold on every writing backend that reports it (the smallest), or None."""
    known = [info.context for info in fleet.infos(fleet.pool) if info.context]
    return min(known) if known else None


def open_context(
    settings: Settings,
    spec: BookSpec,
    folder: RunFolder,
    fleet: Fleet,
    *,
    listener: BookListener,
    embedder: Embedder,
    sources: BookSources | None = None,
) -> RunContext:
    """Settle the sampling profiles (recorded in spec.json) and make the writers' and planners' samplers."""
    settled = settle_profiles(settings, spec, fleet)
    if settled != spec:
        write_atomic(folder.spec, settled.model_dump_json(indent=2))
    assert settled.profile is not None
    writing = sampler_for(settled.profile, fleet.infos(fleet.pool))
    planning = (
        writing
        if fleet.planner_pool is None
        else sampler_for(settled.planner_profile or settled.profile, fleet.infos(fleet.planner_pool))
    )
    log.info(
        "sampling: %s for writing, %s for planning (%s)",
        writing.profile.name,
        planning.profile.name,
        ", ".join(sorted(kind.value for kind in writing.kinds | planning.kinds)),
    )
    return RunContext(settings, settled, folder, listener, embedder, writing, planning, sources)


def log_requests(fleet: Fleet, request_log: RequestLog) -> None:
    """Every request of the fleet's pools, writing's and planning's (one pool when planning has no backends of
    its own), goes to the request log."""
    for pool in {id(fleet.pool): fleet.pool, id(fleet.planners): fleet.planners}.values():
        pool.on_finished = request_log.record
