"""pipeline.backends.metrics: parsing fixture /metrics texts, the per-engine name map, and engine
detection against an in-process fake server that answers like each engine does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from pipeline.backends import metrics
from pipeline.backends.engines import ENGINES, metric_names
from pipeline.backends.metrics import (
    EngineReading,
    detect_engine,
    parse_metrics,
    read_engine,
    scrape,
)
from pipeline.records import Backend, EngineKind

FIXTURES = Path(__file__).parents[2] / "fixtures" / "metrics"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp needs asyncio


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


# ---------------------------------------------------------------- a fake server


class FakeProbeServer:
    """A fake engine: an aiohttp server on 127.0.0.1 that answers fixed bodies per path, 404 elsewhere,
    and records the Authorization header of every request."""

    def __init__(self, routes: dict[str, tuple[int, str, str]]) -> None:
        self.routes = routes  # path -> (status, body, content type)
        self.auth_seen: list[str | None] = []
        self._runner: web.AppRunner | None = None
        self.root = ""

    async def _handle(self, request: web.Request) -> web.Response:
        self.auth_seen.append(request.headers.get("Authorization"))
        status, body, ctype = self.routes.get(request.path, (404, '{"detail":"Not Found"}', "application/json"))
        return web.Response(status=status, text=body, content_type=ctype)

    async def __aenter__(self) -> FakeProbeServer:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.root = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()


def as_json(body: Any, status: int = 200) -> tuple[int, str, str]:
    return (status, json.dumps(body), "application/json")


def as_metrics(name: str) -> tuple[int, str, str]:
    return (200, fixture_text(name), "text/plain")


def models_list(model_id: str, owned_by: str, created: int = 1762700000) -> tuple[int, str, str]:
    entry = {"id": model_id, "object": "model", "created": created, "owned_by": owned_by}
    return as_json({"object": "list", "data": [entry]})


VLLM_ROUTES = {
    "/metrics": as_metrics("vllm.txt"),
    "/version": as_json({"version": "0.11.0"}),
    "/v1/models": as_json(
        {
            "object": "list",
            "data": [
                {
                    "id": "Qwen/Qwen3-8B",
                    "object": "model",
                    "created": 1762700000,
                    "owned_by": "vllm",
                    "root": "Qwen/Qwen3-8B",
                    "parent": None,
                    "max_model_len": 32768,
                    "permission": [{"id": "modelperm-1", "object": "model_permission", "allow_sampling": True}],
                }
            ],
        }
    ),
}

SGLANG_SERVER_INFO = {
    "model_path": "meta-llama/Llama-3.1-8B-Instruct",
    "tokenizer_path": "meta-llama/Llama-3.1-8B-Instruct",
    "host": "0.0.0.0",
    "port": 30000,
    "tp_size": 1,
    "enable_metrics": True,
    "max_total_num_tokens": 65536,
    "max_req_input_len": 65530,
    "internal_states": [{"last_gen_throughput": 812.4, "avg_spec_accept_length": None}],
    "version": "0.5.4",
}

SGLANG_ROUTES = {
    "/metrics": as_metrics("sglang.txt"),
    "/get_server_info": as_json(SGLANG_SERVER_INFO),
    "/v1/models": models_list("meta-llama/Llama-3.1-8B-Instruct", "sglang"),
}

# Shapes as served by the embedded llama-server (llama-cpp-python 0.3.36's vendored llama.cpp).
LLAMACPP_MODEL = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"
LLAMACPP_PROPS = {
    "default_generation_settings": {"params": {"seed": 4294967295, "temperature": 0.8, "top_k": 40}, "n_ctx": 2048},
    "total_slots": 2,
    "model_alias": LLAMACPP_MODEL,
    "model_ftype": "Q4_1",
    "model_path": LLAMACPP_MODEL,
    "modalities": {"vision": False, "video": False, "audio": False},
    "endpoint_slots": True,
    "endpoint_props": False,
    "endpoint_metrics": True,
    "chat_template": "{% for message in messages %}...{% endfor %}",
    "bos_token": "<|im_start|>",
    "eos_token": "<|im_end|>",
    "build_info": "b1-0c1e570",
    "is_sleeping": False,
}

LLAMACPP_ROUTES = {
    "/metrics": as_metrics("llamacpp_real.txt"),
    "/props": as_json(LLAMACPP_PROPS),
    "/v1/models": as_json(
        {
            # an Ollama-style "models" list next to the OpenAI "data" one
            "models": [
                {"name": LLAMACPP_MODEL, "model": LLAMACPP_MODEL, "type": "model", "capabilities": ["completion"]}
            ],
            "object": "list",
            "data": [
                {
                    "id": LLAMACPP_MODEL,
                    "aliases": [LLAMACPP_MODEL],
                    "tags": [],
                    "object": "model",
                    "created": 1796008692,
                    "owned_by": "llamacpp",
                    "meta": {"vocab_type": 2, "n_vocab": 49152, "n_ctx": 2048, "n_ctx_train": 8192},
                }
            ],
        }
    ),
}

TGI_INFO = {
    "model_id": "mistralai/Mistral-7B-Instruct-v0.3",
    "model_sha": "e0bc86c23ce5aae1db576c8cca6f06f1f73af2db",
    "model_dtype": "torch.bfloat16",
    "model_device_type": "cuda",
    "model_pipeline_tag": "text-generation",
    "max_concurrent_requests": 128,
    "max_best_of": 2,
    "max_stop_sequences": 4,
    "max_input_tokens": 4095,
    "max_total_tokens": 4096,
    "validation_workers": 2,
    "max_client_batch_size": 4,
    "router": "text-generation-router",
    "version": "3.3.6",
    "sha": "a8f6f5a1c4e0f0e4c2b1a8b3c0f1d2e3a4b5c6d7",
    "docker_label": "sha-a8f6f5a",
}

TGI_ROUTES = {
    "/metrics": as_metrics("tgi.txt"),
    "/info": as_json(TGI_INFO),
    # TGI lists its one model, owned_by the model id, created 0
    "/v1/models": models_list(TGI_INFO["model_id"], TGI_INFO["model_id"], created=0),
}

OLLAMA_ROUTES = {
    "/api/version": as_json({"version": "0.12.6"}),
    "/v1/models": as_json(
        {
            "object": "list",
            "data": [
                {"id": "llama3.2:latest", "object": "model", "created": 1762600000, "owned_by": "library"},
                {"id": "qwen3:8b", "object": "model", "created": 1762500000, "owned_by": "library"},
            ],
        }
    ),
    "/metrics": (404, "404 page not found", "text/plain"),
}

# An OpenAI-compatible proxy in front of something else: no engine endpoint, owned_by "openai";
# its /metrics is an HTML login page.
UNKNOWN_ROUTES = {
    "/v1/models": models_list("gpt-4o-mini", "openai"),
    "/metrics": (200, "<!doctype html><html><body>Sign in</body></html>", "text/html"),
}


async def detect_on(routes: dict[str, tuple[int, str, str]]):
    async with FakeProbeServer(routes) as fake, aiohttp.ClientSession() as session:
        return await detect_engine(session, Backend(name="b", base_url=fake.root + "/v1"))


# ---------------------------------------------------------------- parsing


def test_vllm_sums_over_engine_labels() -> None:
    samples = parse_metrics(fixture_text("vllm.txt"))
    assert samples["vllm:generation_tokens_total"] == 12345.0 + 6655.0
    assert samples["vllm:num_requests_running"] == 12.0
    assert samples["vllm:iteration_tokens_total_count"] == 2500.0 + 1800.0
    assert samples["vllm:iteration_tokens_total_sum"] == 64345.0 + 54655.0
    # buckets of every `le` and engine fall into one name
    assert samples["vllm:iteration_tokens_total_bucket"] == 120 + 1900 + 2400 + 2500 + 80 + 1200 + 1700 + 1800
    assert samples["vllm:request_success_total"] == 80.0


def test_read_vllm() -> None:
    reading = read_engine(EngineKind.VLLM, parse_metrics(fixture_text("vllm.txt")))
    assert reading == EngineReading(
        generated_tokens=19000.0,
        prompt_tokens=100000.0,
        running=12.0,
        waiting=2.0,
        kv_usage=0.375,  # summed over the two engines, like every series
        decode_steps=4300.0,
        cached_prompt_tokens=45056.0,
    )


def test_vllm_deprecated_kv_name_is_accepted() -> None:
    text = 'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.6\n'
    assert read_engine(EngineKind.VLLM, parse_metrics(text)).kv_usage == 0.6


def test_read_sglang() -> None:
    reading = read_engine(EngineKind.SGLANG, parse_metrics(fixture_text("sglang.txt")))
    assert reading == EngineReading(
        generated_tokens=23000.0,
        prompt_tokens=91000.0,
        running=9.0,
        waiting=4.0,
        kv_usage=0.31,
        decode_steps=None,
        cached_prompt_tokens=38000.0,  # device + host cache sources
    )


def test_read_llamacpp() -> None:
    reading = read_engine(EngineKind.LLAMACPP, parse_metrics(fixture_text("llamacpp.txt")))
    assert reading == EngineReading(
        generated_tokens=23210.0,
        prompt_tokens=96641.0,
        running=2.0,
        waiting=3.0,
        kv_usage=0.5,
        decode_steps=23381.0,
        cached_prompt_tokens=None,
    )


def test_read_tgi() -> None:
    samples = parse_metrics(fixture_text("tgi.txt"))
    # counters keep their served names: no `_total` is added to TGI's suffix-less counters
    assert samples["tgi_batch_inference_count"] == 4270.0
    assert "tgi_batch_inference_count_total" not in samples
    reading = read_engine(EngineKind.TGI, samples)
    assert reading == EngineReading(generated_tokens=14830.0, prompt_tokens=41200.0, running=16.0, waiting=6.0)


def test_read_real_llamacpp() -> None:
    """/metrics of the embedded llama-server after two identical 16-token chats, 2 slots (captured by
    hand): no KV-usage gauge any more, and the second prompt came from the cache."""
    reading = read_engine(EngineKind.LLAMACPP, parse_metrics(fixture_text("llamacpp_real.txt")))
    assert reading == EngineReading(
        generated_tokens=32.0,
        prompt_tokens=33.0,  # excludes the cached tokens in this build
        running=0.0,
        waiting=0.0,
        kv_usage=None,
        decode_steps=32.0,
        cached_prompt_tokens=31.0,
    )


def test_read_without_name_map_is_all_none() -> None:
    assert metric_names(EngineKind.OLLAMA) is None
    samples = parse_metrics(fixture_text("vllm.txt"))
    assert read_engine(EngineKind.OLLAMA, samples) == EngineReading()
    assert read_engine(EngineKind.UNKNOWN, samples) == EngineReading()


def test_only_vllm_counts_per_step() -> None:
    assert {k for k, e in ENGINES.items() if e.metrics is not None and e.metrics.counts_per_step} == {EngineKind.VLLM}


def test_every_engine_kind_has_one_record() -> None:
    assert set(ENGINES) == set(EngineKind) and all(kind is e.kind for kind, e in ENGINES.items())


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "<!doctype html><html><body>502 Bad Gateway</body></html>",
        "\x00\xff\ufffd{{{}}} = = =",
        'metric{label="unterminated 1\n',
        "# TYPE x counter\n# HELP\n#\n",
        'x{a="no value"}\n',
        "x{a=unquoted} 1\n",
        "x 1e999999\n",  # overflows to inf: dropped
        "name value_is_not_a_number\n",
    ],
)
def test_garbage_does_not_raise(garbage: str) -> None:
    assert parse_metrics(garbage) == {}


def test_good_lines_survive_bad_ones() -> None:
    text = (
        "llamacpp:tokens_predicted_total 10\n"
        "this is { not prometheus\n"
        'llamacpp:requests_processing{slot="a"} 1\n'
        'llamacpp:requests_processing{slot="b"} 2\n'
        "llamacpp:requests_deferred NaN\n"
    )
    assert parse_metrics(text) == {"llamacpp:tokens_predicted_total": 10.0, "llamacpp:requests_processing": 3.0}
    assert (
        parse_metrics("# TYPE c counter\nc 1\nbad line {\n") == parse_metrics("# TYPE c counter\nc 1\n") == {"c": 1.0}
    )


# ---------------------------------------------------------------- HTTP


@pytest.mark.anyio
async def test_scrape_sends_bearer_and_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FANOUT_TEST_KEY", "sk-test-123")
    async with FakeProbeServer({"/metrics": as_metrics("llamacpp.txt")}) as fake:
        backend = Backend(name="b", base_url=fake.root, api_key_env="FANOUT_TEST_KEY")
        async with aiohttp.ClientSession() as session:
            samples = await scrape(session, backend)
    assert samples is not None and samples["llamacpp:n_decode_total"] == 23381.0
    assert fake.auth_seen == ["Bearer sk-test-123"]


@pytest.mark.anyio
async def test_scrape_without_key_sends_no_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FANOUT_TEST_KEY", raising=False)
    async with FakeProbeServer({"/metrics": as_metrics("tgi.txt")}) as fake:
        backend = Backend(name="b", base_url=fake.root, api_key_env="FANOUT_TEST_KEY")
        async with aiohttp.ClientSession() as session:
            assert await scrape(session, backend) is not None
    assert fake.auth_seen == [None]


@pytest.mark.anyio
@pytest.mark.parametrize("status", [404, 501, 500])
async def test_scrape_absent_is_none(status: int) -> None:
    # llama-server without --metrics answers 501
    async with FakeProbeServer({"/metrics": (status, "not here", "text/plain")}) as fake:
        async with aiohttp.ClientSession() as session:
            assert await scrape(session, Backend(name="b", base_url=fake.root)) is None


@pytest.mark.anyio
async def test_scrape_oversized_body_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "MAX_BODY_BYTES", 1000)
    big = "llamacpp:requests_processing 1\n" * 100
    async with FakeProbeServer(
        {"/metrics": (200, big, "text/plain"), "/small": (200, big[:500], "text/plain")}
    ) as fake:
        backend = Backend(name="b", base_url=fake.root)
        async with aiohttp.ClientSession() as session:
            assert await scrape(session, backend) is None
            fake.routes["/metrics"] = fake.routes["/small"]
            assert await scrape(session, backend) == {"llamacpp:requests_processing": 16.0}


@pytest.mark.anyio
async def test_scrape_unreachable_is_none() -> None:
    async with FakeProbeServer({}) as fake:
        root = fake.root  # the port is closed again once the fake is gone
    async with aiohttp.ClientSession() as session:
        assert await scrape(session, Backend(name="b", base_url=root)) is None


# ---------------------------------------------------------------- detection


@pytest.mark.anyio
async def test_detect_vllm() -> None:
    info = await detect_on(VLLM_ROUTES)
    assert (info.kind, info.version, info.models) == (EngineKind.VLLM, "0.11.0", ["Qwen/Qwen3-8B"])
    assert info.has_metrics and info.counts_per_step and info.slots is None
    assert info.context == 32768  # /v1/models max_model_len


@pytest.mark.anyio
async def test_detect_sglang() -> None:
    info = await detect_on(SGLANG_ROUTES)
    assert (info.kind, info.version) == (EngineKind.SGLANG, "0.5.4")
    assert info.models == ["meta-llama/Llama-3.1-8B-Instruct"]
    assert info.has_metrics and not info.counts_per_step


@pytest.mark.anyio
async def test_detect_sglang_without_enable_metrics() -> None:
    routes = {k: v for k, v in SGLANG_ROUTES.items() if k != "/metrics"}
    info = await detect_on(routes)
    assert info.kind is EngineKind.SGLANG and not info.has_metrics


@pytest.mark.anyio
async def test_detect_llamacpp() -> None:
    info = await detect_on(LLAMACPP_ROUTES)
    assert (info.kind, info.version, info.slots) == (EngineKind.LLAMACPP, "b1-0c1e570", 2)
    assert info.models == [LLAMACPP_MODEL] and info.context == 2048  # a slot's share
    assert info.has_metrics and not info.counts_per_step


@pytest.mark.anyio
async def test_detect_llamacpp_without_metrics_flag() -> None:
    routes = dict(LLAMACPP_ROUTES, **{"/metrics": (501, '{"error":{"code":501}}', "application/json")})
    info = await detect_on(routes)
    assert (info.kind, info.slots, info.has_metrics) == (EngineKind.LLAMACPP, 2, False)


@pytest.mark.anyio
async def test_detect_tgi() -> None:
    info = await detect_on(TGI_ROUTES)
    assert (info.kind, info.version) == (EngineKind.TGI, "3.3.6")
    assert info.models == ["mistralai/Mistral-7B-Instruct-v0.3"]
    assert info.has_metrics and not info.counts_per_step and info.slots is None
    assert info.context == 4096  # /info max_total_tokens


@pytest.mark.anyio
async def test_detect_ollama() -> None:
    info = await detect_on(OLLAMA_ROUTES)
    assert (info.kind, info.version) == (EngineKind.OLLAMA, "0.12.6")
    assert info.models == ["llama3.2:latest", "qwen3:8b"]
    assert not info.has_metrics and not info.counts_per_step and info.context is None  # /api/show is a POST


@pytest.mark.anyio
async def test_detect_owned_by_fallback() -> None:
    # a vLLM whose /metrics and /version are blocked by a proxy: only owned_by is left
    info = await detect_on({"/v1/models": VLLM_ROUTES["/v1/models"]})
    assert (info.kind, info.version, info.has_metrics) == (EngineKind.VLLM, None, False)
    assert info.counts_per_step  # a property of the engine, not of the scrape


@pytest.mark.anyio
async def test_metric_prefix_beats_owned_by() -> None:
    routes = dict(SGLANG_ROUTES, **{"/v1/models": models_list("m", "vllm")})
    assert (await detect_on(routes)).kind is EngineKind.SGLANG


@pytest.mark.anyio
async def test_detect_unknown() -> None:
    info = await detect_on(UNKNOWN_ROUTES)
    assert info.kind is EngineKind.UNKNOWN
    assert info.models == ["gpt-4o-mini"]
    assert (info.version, info.has_metrics, info.counts_per_step, info.slots) == (None, False, False, None)
    assert info.context is None


@pytest.mark.anyio
async def test_detect_garbage_bodies_is_unknown() -> None:
    garbage = (200, "[1, 2", "application/json")
    routes = {p: garbage for p in ("/props", "/info", "/version", "/api/version", "/get_server_info", "/v1/models")}
    routes["/props"] = as_json(["total_slots", "build_info"])  # JSON, but not an object
    info = await detect_on(routes)
    assert (info.kind, info.models) == (EngineKind.UNKNOWN, [])


@pytest.mark.anyio
async def test_detect_unreachable_is_unknown() -> None:
    async with FakeProbeServer({}) as fake:
        root = fake.root
    async with aiohttp.ClientSession() as session:
        info = await detect_engine(session, Backend(name="b", base_url=root))
    assert info.kind is EngineKind.UNKNOWN and info.models == []
