"""The bench on the REAL embedded llama-server: a ladder 1, 2, 4 where the server's token counter equals
the client's usage exactly, prompts sized by the engine's own /tokenize, and figures labelled with their
source (llama.cpp counts at request end, so per-second figures come from client timestamps)."""

from __future__ import annotations

import pytest

from pipeline.backends.embedded.engine import EmbeddedEngine
from pipeline.bench.studies.identity import IdentitySpec, run_identity
from pipeline.bench.studies.ladder import bench
from pipeline.config import EngineSettings, Settings
from pipeline.records import Endpoint
from pipeline.records.bench import BenchSpec
from tests.conftest import ENGINE_THREADS

pytestmark = [pytest.mark.engine, pytest.mark.anyio]
MAX_TOKENS = 24
PROMPT_TOKENS = 48


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_a_ladder_on_the_embedded_engine_counts_the_same_on_both_sides(engine_assets, tmp_path):
    settings = EngineSettings(slots=4, threads=ENGINE_THREADS, ctx_per_slot=512)
    with EmbeddedEngine(settings, engine_assets, tmp_path / "llama-server.log") as engine:
        spec = BenchSpec(
            streams=[1, 2, 4], window_s=4.0, warmup_s=0.5, max_tokens=MAX_TOKENS, prompt_tokens=PROMPT_TOKENS
        )
        record = await bench(Settings(backends=[engine.backend], read_timeout=60), spec)
    (backend,) = record.provenance.backends
    assert backend.engine == "llama.cpp" and backend.slots == 4 and backend.slots_source.startswith("engine")
    assert backend.ignore_eos and backend.tokenizer.startswith("engine /tokenize")
    for level in record.series[0].levels:
        point = level.total
        assert point.tokens_match, f"{level.streams} streams: server {point.level_server_tokens} != usage"
        assert point.level_server_tokens == point.level_client_tokens == point.requests_done * MAX_TOKENS
        assert point.requests_failed == 0
        assert point.prompt_tokens_min == point.prompt_tokens_max == PROMPT_TOKENS  # as the engine counts them
        assert point.sustained > 0 and point.best_second >= point.sustained * 0.9
        assert point.sustained_source.startswith("client token timestamps")
        assert point.step_ms_server is not None and "n_decode_total" in point.step_ms_server_source
        assert point.cached_prompt_tokens is not None  # the engine's cached-prompt counter is reported
        assert point.ttft_p50_ms is not None and point.ttft_p50_ms <= point.ttft_p99_ms
    assert record.series[0].fit is not None


async def test_an_open_loop_on_the_embedded_engine_at_two_rates(engine_assets, tmp_path):
    """Two request rates, Poisson arrivals, synthetic prompts of 64-96 tokens sized by the engine's tokenizer:
    every request answered, the engine's counter equals usage, every latency figure present, one row a
    request. Structure only: what the rates achieve on this host is a benchmark, not a test."""
    settings = EngineSettings(slots=4, threads=ENGINE_THREADS, ctx_per_slot=512)
    with EmbeddedEngine(settings, engine_assets, tmp_path / "llama-server.log") as engine:
        spec = BenchSpec(
            streams=[],
            rates=[0.5, 2.0],
            duration_s=4.0,
            max_tokens=MAX_TOKENS,
            input_len="64-96",
            goodput_slo_ms={"e2e": 60_000},
            save_requests=True,
        )
        record = await bench(Settings(backends=[engine.backend], read_timeout=60), spec)
    (sweep,) = record.sweeps
    assert [p.rate for p in sweep.points] == [0.5, 2.0] and sweep.workload == "synthetic"
    for point in sweep.points:
        assert point.failed == 0 and point.completed == point.scheduled > 0
        assert point.tokens_match and point.completion_tokens == point.completed * MAX_TOKENS
        assert point.slots == 4 and point.running_mean is not None  # llama.cpp's gauges, read from /metrics
        latency = point.latency
        for figure in (latency.ttft, latency.tpot, latency.itl, latency.e2el):
            assert figure.count > 0 and 0 < figure.median_ms <= figure.percentiles_ms["p99"]
        assert latency.goodput is not None and latency.goodput.good == point.completed
    prompts = [row["prompt_tokens"] for row in record.request_rows]
    assert len(record.request_rows) == sum(p.scheduled for p in sweep.points)
    assert min(prompts) >= 58 and max(prompts) <= 102  # drawn in 64-96, as the engine counts them


async def test_text_completions_on_the_embedded_engine_give_the_same_figures(engine_assets, tmp_path):
    """The ladder and an open-loop rate over /v1/completions, which llama-server serves: the prompt goes with
    no chat template and is sized as that endpoint sends it (the bare text), and every figure the chat path
    has is there; then identity over completions."""
    settings = EngineSettings(slots=4, threads=ENGINE_THREADS, ctx_per_slot=512)
    with EmbeddedEngine(settings, engine_assets, tmp_path / "llama-server.log") as engine:
        fleet = Settings(backends=[engine.backend], read_timeout=60)
        shape = {"max_tokens": MAX_TOKENS, "prompt_tokens": PROMPT_TOKENS, "window_s": 3.0, "warmup_s": 0.5}
        chat = await bench(fleet, BenchSpec(streams=[2], **shape))
        spec = BenchSpec(streams=[2], rates=[2.0], duration_s=3.0, endpoint=Endpoint.COMPLETIONS, **shape)
        record = await bench(fleet, spec)
        identity = await run_identity(
            fleet, IdentitySpec(prompts=["Once upon a time", "The capital of France is"], levels=[2], max_tokens=12,
                                endpoint=Endpoint.COMPLETIONS),
        )  # fmt: skip
    (level,) = record.series[0].levels
    point, over_chat = level.total, chat.series[0].levels[0].total
    assert point.tokens_match and point.level_client_tokens == point.requests_done * MAX_TOKENS > 0
    assert point.sustained > 0 and point.latency is not None and point.latency.ttft.count > 0
    sizes = {point.prompt_tokens_min, point.prompt_tokens_max, over_chat.prompt_tokens_min, over_chat.prompt_tokens_max}
    assert sizes == {PROMPT_TOKENS}, "sized by the engine's tokenizer as each endpoint sends the prompt"
    (rate,) = record.sweeps[0].points
    assert rate.failed == 0 and rate.completed == rate.scheduled > 0 and rate.tokens_match
    for figure in (rate.latency.ttft, rate.latency.tpot, rate.latency.itl, rate.latency.e2el):
        assert figure.count > 0 and 0 < figure.median_ms <= figure.percentiles_ms["p99"]
    (users,) = identity.levels
    assert users.total == 2 and identity.oracle_has_token_ids, "llama.cpp gives token ids over completions too"
