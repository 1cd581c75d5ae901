"""Engine detection and Prometheus metrics for one backend.

Takes a `Backend` (and an open aiohttp session) or raw /metrics text; returns
- `parse_metrics(text)`: sample name -> value, summed over label sets (vLLM reports one series per
  `engine` label). Never raises: backends are untrusted, bad lines are skipped.
- `read_engine(kind, samples)`: an `EngineReading` of the numbers the fleet code needs, via the
  engine's metric names (engines.py); None for what the engine does not report.
- `scrape(session, backend)`: GET {root}/metrics parsed, or None when there is none.
- `detect_engine(session, backend)`: an `EngineInfo` from probing /metrics, /version, /props, /info,
  /api/version, /get_server_info and /v1/models. Every probe is a short GET; failures count as absent.

Names, and how each engine's counters move, are in engines.py. Counters are cumulative: callers take
differences between two scrapes. Only vLLM counts generated tokens every engine step; the others add
a request's tokens when it finishes (`counts_per_step`).
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from pipeline.backends.engines import ENGINES, engine, metric_names
from pipeline.backends.envelope import auth_headers
from pipeline.records import Backend, EngineInfo, EngineKind

PROBE_TIMEOUT = aiohttp.ClientTimeout(total=5, sock_connect=2)
MAX_BODY_BYTES = 8 * 1024 * 1024  # a vLLM /metrics with many engines is a few hundred KB


@dataclass(frozen=True)
class EngineReading:
    """One scrape read through the engine's name map; cumulative counters, current gauges.

    Gauges are summed over label sets like everything else: with several vLLM engines (data
    parallel) `running`/`waiting` are totals, and `kv_usage` is the sum of per-engine ratios, so it
    can pass 1."""

    generated_tokens: float | None = None
    prompt_tokens: float | None = None
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None
    decode_steps: float | None = None
    cached_prompt_tokens: float | None = None


# ---------------------------------------------------------------- parsing


def _add_samples(text: str, into: dict[str, float]) -> None:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            value = float(sample.value)
            if math.isfinite(value):
                into[sample.name] = into.get(sample.name, 0.0) + value


def _sample_lines(text: str) -> list[str]:
    """The sample lines, without # HELP/# TYPE. Dropping TYPE keeps names as served: the parser
    would otherwise rename a counter `x` to `x_total` (TGI's counters have no suffix)."""
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def parse_metrics(text: str) -> dict[str, float]:
    """Sample name (as served) -> value summed over all label sets. Bad lines are skipped; never raises."""
    lines = _sample_lines(text)
    samples: dict[str, float] = {}
    try:
        _add_samples("\n".join(lines) + "\n", samples)
        return samples
    except Exception:  # noqa: BLE001 - untrusted text; the parser stops at the first bad line
        pass
    samples = {}
    for line in lines:
        try:
            _add_samples(line + "\n", samples)
        except Exception:  # noqa: BLE001 - skip the line, keep the rest
            continue
    return samples


def read_engine(kind: EngineKind, samples: dict[str, float]) -> EngineReading:
    """The fields of `samples` that `kind` reports; all None for an engine without a name map."""
    names = metric_names(kind)
    if names is None:
        return EngineReading()
    return EngineReading(
        generated_tokens=_get(samples, names.generated_tokens),
        prompt_tokens=_get(samples, names.prompt_tokens),
        running=_get(samples, names.running),
        waiting=_get(samples, names.waiting),
        kv_usage=next((samples[n] for n in names.kv_usage if n in samples), None),
        decode_steps=_get(samples, names.decode_steps),
        cached_prompt_tokens=_get(samples, names.cached_prompt_tokens),
    )


def _get(samples: dict[str, float], name: str | None) -> float | None:
    return None if name is None else samples.get(name)


def engine_from_samples(samples: dict[str, float]) -> EngineKind:
    """The engine whose metric prefix appears on /metrics; UNKNOWN when none does."""
    for known in ENGINES.values():  # no prefix begins another, so the order does not matter
        if known.metric_prefix and any(name.startswith(known.metric_prefix) for name in samples):
            return known.kind
    return EngineKind.UNKNOWN


# ---------------------------------------------------------------- HTTP


async def _get_text(session: aiohttp.ClientSession, backend: Backend, path: str) -> str | None:
    """Body of GET {root}{path} on a 200, else None (404, refused, timeout, oversized)."""
    try:
        async with session.get(backend.root_url + path, headers=auth_headers(backend), timeout=PROBE_TIMEOUT) as resp:
            if resp.status != 200:
                return None
            body = await _read_capped(resp.content)
            return None if body is None else body.decode("utf-8", errors="replace")
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None


async def _read_capped(stream: aiohttp.StreamReader) -> bytes | None:
    """The whole body, or None when it passes MAX_BODY_BYTES."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in stream.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def _get_json(session: aiohttp.ClientSession, backend: Backend, path: str) -> dict[str, Any] | None:
    """GET {root}{path} as a JSON object, or None."""
    text = await _get_text(session, backend, path)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


async def scrape(session: aiohttp.ClientSession, backend: Backend) -> dict[str, float] | None:
    """Parsed {root}/metrics, or None when the server has none (404/501, unreachable, timeout)."""
    text = await _get_text(session, backend, "/metrics")
    return None if text is None else parse_metrics(text)


# ---------------------------------------------------------------- detection


@dataclass(frozen=True)
class _Probes:
    samples: dict[str, float] | None
    version: dict[str, Any] | None  # vLLM /version
    props: dict[str, Any] | None  # llama.cpp /props
    info: dict[str, Any] | None  # TGI /info
    api_version: dict[str, Any] | None  # Ollama /api/version
    server_info: dict[str, Any] | None  # SGLang /get_server_info
    models: dict[str, Any] | None  # /v1/models


async def _probe(session: aiohttp.ClientSession, backend: Backend) -> _Probes:
    paths = ("/version", "/props", "/info", "/api/version", "/get_server_info", "/v1/models")
    samples, *bodies = await asyncio.gather(scrape(session, backend), *(_get_json(session, backend, p) for p in paths))
    return _Probes(samples, *bodies)


def _is_llamacpp_props(props: dict[str, Any] | None) -> bool:
    return props is not None and ("total_slots" in props or "build_info" in props)


def _is_tgi_info(info: dict[str, Any] | None) -> bool:
    return (
        info is not None
        and "model_id" in info
        and "version" in info
        and ("docker_label" in info or "max_concurrent_requests" in info)
    )


def _is_sglang_info(server_info: dict[str, Any] | None) -> bool:
    return server_info is not None and "version" in server_info and "model_path" in server_info


def _model_ids(models: dict[str, Any] | None) -> list[str]:
    data = models.get("data") if models else None
    if not isinstance(data, list):
        return []
    return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]


def _owned_by_kind(models: dict[str, Any] | None) -> EngineKind:
    data = models.get("data") if models else None
    for entry in data if isinstance(data, list) else []:
        owner = str(entry.get("owned_by", "")).lower() if isinstance(entry, dict) else ""
        kind = next((known.kind for known in ENGINES.values() if owner and known.owned_by == owner), None)
        if kind is not None:
            return kind
    return EngineKind.UNKNOWN


def _decide_kind(p: _Probes) -> EngineKind:
    """Strongest evidence first: metric prefixes, then engine-only endpoints, then `owned_by`."""
    from_metrics = engine_from_samples(p.samples or {})
    if from_metrics is not EngineKind.UNKNOWN:
        return from_metrics
    if _is_llamacpp_props(p.props):
        return EngineKind.LLAMACPP
    if _is_tgi_info(p.info):
        return EngineKind.TGI
    if _is_sglang_info(p.server_info):
        return EngineKind.SGLANG
    if p.api_version is not None and "version" in p.api_version:
        return EngineKind.OLLAMA
    return _owned_by_kind(p.models)


def _version_of(kind: EngineKind, p: _Probes) -> str | None:
    where = engine(kind).version_at
    body = None if where is None else getattr(p, where[0])
    if where is None or body is None:
        return None
    value = body.get(where[1])
    return None if value is None else str(value)


def _slots_of(kind: EngineKind, props: dict[str, Any] | None) -> int | None:
    if not engine(kind).slots_from_props or props is None:
        return None
    slots = props.get("total_slots")
    return slots if isinstance(slots, int) and not isinstance(slots, bool) else None


def _context_of(kind: EngineKind, p: _Probes) -> int | None:
    """The tokens one request may hold, where the engine reports it (engines.py's `context_at`), or None."""
    for probe, path in engine(kind).context_at:
        body: Any = getattr(p, probe)
        if probe == "models":
            data = body.get("data") if isinstance(body, dict) else None
            body = data[0] if isinstance(data, list) and data else None
        for key in path:
            body = body.get(key) if isinstance(body, dict) else None
        if isinstance(body, int) and not isinstance(body, bool) and body > 0:
            return body
    return None


async def detect_engine(session: aiohttp.ClientSession, backend: Backend) -> EngineInfo:
    """Which engine serves `backend`, its version, models and metric capabilities. Never raises on
    what the server answers; UNKNOWN when nothing matches."""
    probes = await _probe(session, backend)
    kind = _decide_kind(probes)
    names = metric_names(kind)
    return EngineInfo(
        kind=kind,
        version=_version_of(kind, probes),
        models=_model_ids(probes.models),
        has_metrics=names is not None and engine_from_samples(probes.samples or {}) is kind,
        counts_per_step=names is not None and names.counts_per_step,
        slots=_slots_of(kind, probes.props),
        context=_context_of(kind, probes),
    )
