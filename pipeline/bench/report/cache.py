"""The prefix cache of an open-loop level, and the hit rate a shared-prefix workload plans, for any level.

Takes a level's requests (and, for the open loop, its RateRaw and the engines' counter names); returns
figures for the RatePoint or LadderPoint. Three views, each labelled: the engines' cached-prompt counters
over the level (vLLM's `vllm:prefix_cache_hits_total`, SGLang's, llama.cpp's), the answers' own cached
tokens (usage.prompt_tokens_details or llama.cpp's timings), and the plan: with --prefix-len N every request
after the first of its group on its backend (since the run began or that backend's cache was emptied) should
find its N prefix tokens cached. The plan leaves out what an engine caches beyond it (the chat template's
opening, shared by every prompt) and what it cannot (vLLM caches whole blocks of 16 tokens), so the
measured rate sits a little above or below it; the record shows both.
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.backends.engines import metric_names
from pipeline.bench.load.openloop import RateRaw
from pipeline.bench.report.figures import request_cache
from pipeline.records import EngineInfo
from pipeline.records.bench import RequestSample


def cache_counter_source(infos: list[EngineInfo]) -> str | None:
    names = sorted({n.cached_prompt_tokens for i in infos if (n := metric_names(i.kind)) and n.cached_prompt_tokens})
    return f"{' + '.join(names)} (engine /metrics) / usage prompt tokens" if names else None


def planned_prefix_hit_rate(
    requests: list[RequestSample], tokens: int, group_of: Callable[[int], int], seen: set[tuple[str, int]]
) -> float | None:
    """Planned cached prefix tokens over the answers' usage prompt tokens. `seen` holds the (backend, group)
    pairs already cached before the level and gains this level's: the caller keeps it across levels and
    drops a backend's pairs when that backend's cache is emptied."""
    planned = prompt = 0
    for request in sorted(requests, key=lambda r: r.t_sent):
        key = (request.backend, group_of(request.number))
        hit = key in seen
        if request.t_first is not None:
            seen.add(key)  # admitted: its blocks are in the cache now
        if request.error is None and request.prompt_tokens:
            prompt += request.prompt_tokens
            planned += tokens if hit else 0
    return planned / prompt if prompt else None


def rate_cache_figures(raw: RateRaw, done: list[RequestSample], source: str | None) -> dict:
    """The engines' counters summed over the backends (None unless every backend has one), and the answers'."""
    before = {s.backend: s.cached_prompt for s in raw.start}
    deltas = [
        end.cached_prompt - start
        for end in raw.end
        if end.cached_prompt is not None and (start := before.get(end.backend)) is not None
    ]
    cached = sum(deltas) if deltas and len(deltas) == len(raw.end) else None
    prompts = sum(r.prompt_tokens or 0 for r in done)
    later = [r for r in done if r.turn is not None and r.turn > 1]
    return {
        "cached_prompt_tokens": cached,
        "cache_hit_rate": cached / prompts if cached is not None and prompts else None,
        "cache_hit_rate_source": source if cached is not None else None,
        "follow_up_cache_hit_rate": request_cache(later)["request_cache_hit_rate"] if later else None,
        "turns": len(later) if any(r.turn is not None for r in done) else None,
    } | request_cache(done)
