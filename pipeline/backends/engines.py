"""What fanout knows of each engine kind, in one record a kind: the sampling fields it honours and their wire
names, whether it has a thinking switch and honours ignore_eos and `n` (several choices of one prompt), its
Prometheus metric names and how its counters move, how (and how far) it empties its prefix cache over HTTP,
and how to recognise it (metric prefix, /v1/models owned_by, where it reports its version).

The book's sampling (book/profiles.py), its thinking switch (book/context.py), the bench's ignore_eos
(bench/studies/ladder.py, bench/studies/sweep.py) and the metric readers (backends/metrics.py, backends/fleet.py,
bench/report/figures.py) all read `engine(kind)`. Names come from the engines' sources and docs: vLLM's and
SGLang's sampling params and /metrics, llama.cpp's server README (`repeat_penalty`, `dry_multiplier`,
`/props`, `/slots/{id}?action=erase`), TGI's and Ollama's OpenAI-compatible routes; vLLM's
`/reset_prefix_cache` is registered only in its dev mode (vllm/entrypoints/serve, `VLLM_SERVER_DEV_MODE`).
Where each reports the context one request may fill (`context_at`): vLLM's and SGLang's /v1/models
`max_model_len`, llama.cpp's /props `default_generation_settings.n_ctx` (a slot's share), TGI's /info
`max_total_tokens`; Ollama's needs a POST to /api/show and an unknown engine's is not known (None).
An unknown engine gets the OpenAI standard only, less `n`: vLLM, SGLang and llama.cpp's server (its n_cmpl,
child seeds seed+1, seed+2, ...) sample n choices; TGI and Ollama answer one, and an unknown engine is not
trusted to do more.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from pipeline.records import EngineKind, WarmSchedule

# Body fields the OpenAI API defines beyond temperature; every engine takes them.
STANDARD_FIELDS = frozenset({"top_p", "frequency_penalty", "presence_penalty", "seed", "stop"})
EXTENDED_FIELDS = STANDARD_FIELDS | {"min_p", "top_k", "repetition_penalty"}


@dataclass(frozen=True)
class MetricNames:
    """Prometheus sample names of one engine; None (or an empty tuple) where it has no such metric."""

    generated_tokens: str | None
    prompt_tokens: str | None
    running: str | None
    waiting: str | None
    kv_usage: tuple[str, ...]  # accepted names, first present wins (0-1 ratio)
    decode_steps: str | None  # a counter that moves once per engine step
    cached_prompt_tokens: str | None  # prompt tokens served from the prefix cache
    counts_per_step: bool  # does generated_tokens move every step (True) or at request end (False)


@dataclass(frozen=True)
class CacheReset:
    """How an engine empties its prefix cache over HTTP: `path` is asked with `method`, once, or once a slot
    with `{slot}` filled in (`per_slot`); `caveat` says what it needs or leaves behind."""

    method: str
    path: str
    per_slot: bool = False
    caveat: str = ""


@dataclass(frozen=True)
class Engine:
    kind: EngineKind
    sampling_fields: frozenset[str] = STANDARD_FIELDS  # body fields honoured, by their OpenAI/vLLM names
    wire_names: dict[str, str] = field(default_factory=dict)  # a field's name in this engine's body
    thinking_switch: bool = False  # chat_template_kwargs.enable_thinking reaches the chat template
    ignore_eos: bool = False  # honours ignore_eos, so a bench answer runs to its cap
    parallel_sampling: bool = False  # honours `n`: one prompt prefilled once, n choices sampled from it
    metrics: MetricNames | None = None  # None: no Prometheus /metrics fanout can read
    metric_prefix: str | None = None  # sample-name prefix that identifies it on /metrics
    owned_by: str | None = None  # its /v1/models `owned_by`
    version_at: tuple[str, str] | None = None  # (probe, key): where it reports its version
    slots_from_props: bool = False  # /props total_slots says how many sequences it runs at once
    # where it reports the tokens one sequence may hold, prompt and answer together: (probe, key path), the
    # first that answers a whole number wins ("models" paths are into /v1/models' first model)
    context_at: tuple[tuple[str, tuple[str, ...]], ...] = ()
    cache_reset: CacheReset | None = None  # None: it offers no way to empty its prefix cache
    no_cache_reset: str = "no endpoint known to empty its prefix cache"  # said where cache_reset is None
    # when a prompt it is computing can serve another request's prefix: once the prompt's blocks are
    # computed (its first token; vLLM's and SGLang's caches), or once its answer is in and its slot free
    # (llama.cpp keeps a prompt in the slot that computed it, and in its host-memory cache once the slot is
    # taken again; Ollama runs llama.cpp)
    prefix_ready: WarmSchedule = WarmSchedule.FIRST_TOKEN


ENGINES: dict[EngineKind, Engine] = {
    EngineKind.VLLM: Engine(
        kind=EngineKind.VLLM,
        sampling_fields=EXTENDED_FIELDS,
        thinking_switch=True,
        ignore_eos=True,
        parallel_sampling=True,
        metrics=MetricNames(
            generated_tokens="vllm:generation_tokens_total",
            prompt_tokens="vllm:prompt_tokens_total",
            running="vllm:num_requests_running",
            waiting="vllm:num_requests_waiting",
            kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
            decode_steps="vllm:iteration_tokens_total_count",  # one histogram observation per step
            cached_prompt_tokens="vllm:prefix_cache_hits_total",
            counts_per_step=True,
        ),
        metric_prefix="vllm:",
        owned_by="vllm",
        version_at=("version", "version"),
        context_at=(("models", ("max_model_len",)),),
        cache_reset=CacheReset(
            "POST",
            "/reset_prefix_cache",
            caveat="served only when vLLM runs with VLLM_SERVER_DEV_MODE=1 (404 otherwise)",
        ),
    ),
    EngineKind.SGLANG: Engine(
        kind=EngineKind.SGLANG,
        sampling_fields=EXTENDED_FIELDS,
        thinking_switch=True,
        ignore_eos=True,
        parallel_sampling=True,
        metrics=MetricNames(
            generated_tokens="sglang:generation_tokens_total",
            prompt_tokens="sglang:prompt_tokens_total",
            running="sglang:num_running_reqs",
            waiting="sglang:num_queue_reqs",
            kv_usage=("sglang:token_usage",),
            decode_steps=None,
            cached_prompt_tokens="sglang:cached_tokens_total",
            counts_per_step=False,
        ),
        metric_prefix="sglang:",
        owned_by="sglang",
        version_at=("server_info", "version"),
        context_at=(("models", ("max_model_len",)), ("server_info", ("context_length",))),
        cache_reset=CacheReset(
            "POST", "/flush_cache", caveat="SGLang flushes only while no request runs (each level is drained first)"
        ),
    ),
    EngineKind.LLAMACPP: Engine(
        kind=EngineKind.LLAMACPP,
        sampling_fields=EXTENDED_FIELDS | {"dry_multiplier"},
        wire_names={"repetition_penalty": "repeat_penalty"},
        thinking_switch=True,
        ignore_eos=True,
        parallel_sampling=True,
        metrics=MetricNames(
            generated_tokens="llamacpp:tokens_predicted_total",
            prompt_tokens="llamacpp:prompt_tokens_total",
            running="llamacpp:requests_processing",
            waiting="llamacpp:requests_deferred",
            kv_usage=("llamacpp:kv_cache_usage_ratio",),  # older builds only; current ones have none
            decode_steps="llamacpp:n_decode_total",
            # newer builds; there prompt_tokens_total excludes the cached tokens
            cached_prompt_tokens="llamacpp:prompt_tokens_cached_total",
            counts_per_step=False,
        ),
        metric_prefix="llamacpp:",
        owned_by="llamacpp",
        version_at=("props", "build_info"),
        slots_from_props=True,
        # a slot's share of the context (--ctx-size / --parallel), which is what one request may fill
        context_at=(("props", ("default_generation_settings", "n_ctx")), ("models", ("meta", "n_ctx"))),
        prefix_ready=WarmSchedule.ANSWER,
        cache_reset=CacheReset(
            "POST",
            "/slots/{slot}?action=erase",
            per_slot=True,
            caveat="needs --slot-save-path (501 otherwise); the host-memory prompt cache (--cache-ram) is kept, "
            "no endpoint empties it, so a full reset needs --cache-ram 0",
        ),
    ),
    EngineKind.TGI: Engine(
        kind=EngineKind.TGI,
        metrics=MetricNames(
            generated_tokens="tgi_request_generated_tokens_sum",
            prompt_tokens="tgi_request_input_length_sum",
            running="tgi_batch_current_size",
            waiting="tgi_queue_size",
            kv_usage=(),  # only a proxy: tgi_batch_current_max_tokens / max batch total tokens
            decode_steps=None,
            cached_prompt_tokens=None,
            counts_per_step=False,
        ),
        metric_prefix="tgi_",
        version_at=("info", "version"),
        context_at=(("info", ("max_total_tokens",)),),
        no_cache_reset="TGI has no endpoint that empties its prefix cache",
    ),
    EngineKind.OLLAMA: Engine(
        kind=EngineKind.OLLAMA,
        owned_by="library",
        version_at=("api_version", "version"),
        prefix_ready=WarmSchedule.ANSWER,
        no_cache_reset="Ollama has no endpoint that empties a loaded model's cache (unloading it, keep_alive 0, does)",
    ),
    EngineKind.UNKNOWN: Engine(kind=EngineKind.UNKNOWN),
}


def engine(kind: EngineKind) -> Engine:
    return ENGINES[kind]


def metric_names(kind: EngineKind) -> MetricNames | None:
    return ENGINES[kind].metrics


def honours_choices(kinds: Collection[EngineKind]) -> bool:
    """Whether a request for several choices (ChatRequest.choices) gets them from every engine of `kinds`:
    there is at least one, and each honours `n`."""
    return bool(kinds) and all(ENGINES[kind].parallel_sampling for kind in kinds)
