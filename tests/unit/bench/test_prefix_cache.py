"""Prefix-cache workloads against FAKE step-law engines with a modelled prefix cache (tests/fakes/fake_steplaw.py):
shared prefixes hit as planned, --reset-cache empties the cache between levels and repetitions, conversations
go turn by turn with their history, and an over-saturated level stops."""

from __future__ import annotations

import json

import pytest

from pipeline.backends.aiohttp_chat import new_session
from pipeline.backends.cachereset import reset_prefix_cache
from pipeline.bench.load.prompts import shared_prefixes, token_counter
from pipeline.bench.load.saturation import SaturationDetector, slope_with_margin
from pipeline.bench.studies.ladder import bench
from pipeline.cli import main
from pipeline.config import Settings
from pipeline.errors import UsageError
from pipeline.records import Backend, EngineInfo, EngineKind
from pipeline.records.bench import BenchSpec
from tests.fakes.fake_engine import FakeEngine
from tests.fakes.fake_steplaw import StepLawEngine, steplaw_in_thread

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def fleet(url: str, cap: int = 64) -> Settings:
    return Settings(backends=[Backend(name="e0", base_url=url, cap=cap)], read_timeout=10)


def spec(**fields) -> BenchSpec:
    base = {"streams": [], "max_tokens": 8, "engine_slots": {"*": 64}, "duration_s": 2.0, "seed": 3}
    return BenchSpec(**(base | fields))


async def test_shared_prefixes_count_as_asked_and_differ_from_their_first_words():
    engine = await StepLawEngine().start()
    try:
        async with new_session(4) as session:
            counter = await token_counter(session, Backend(name="f", base_url=engine.url, model="fake-steplaw"))
            prefixes = await shared_prefixes(counter, 200, 3, "abc123")
            assert counter.name == "engine /tokenize"  # the fake's own count: words
            assert [await counter.count(text) for text in prefixes.texts] == [200, 200, 200]
    finally:
        await engine.stop()
    assert len({text.split()[2] for text in prefixes.texts}) == 3  # "Shared context 0000 ..." apart at once
    assert [prefixes.group(n) for n in (1, 2, 3, 4)] == [0, 1, 2, 0]
    assert prefixes.before(4, "own").startswith(prefixes.texts[0]) and prefixes.before(4, "own").endswith("own")


async def test_prefix_len_hit_rates_come_out_as_planned_in_the_ladder_and_the_open_loop():
    with steplaw_in_thread((1.0, 0.01)) as (engine,):
        for groups in (1, 4):
            asked = spec(streams=[4], window_s=2.0, warmup_s=0.2, rates=[20.0], prefix_len=256, prefix_groups=groups)
            record = await bench(fleet(engine.url), asked.model_copy(update={"input_len": "64"}))
            (level,) = record.series[0].levels
            (point,) = record.sweeps[0].points
            for figures in (level.total, point):
                assert figures.prefix_planned_hit_rate and figures.request_cache_hit_rate
                assert figures.request_cache_hit_rate == pytest.approx(figures.prefix_planned_hit_rate, abs=0.02)
            assert point.cache_hit_rate == pytest.approx(point.request_cache_hit_rate, abs=1e-9)
            assert point.cache_hit_rate_source.startswith("vllm:prefix_cache_hits_total")
            assert record.shared_prefix.tokens == 256 and record.shared_prefix.groups == groups
    # the ladder's first level misses once a group; the open loop after it finds every prefix cached
    assert point.prefix_planned_hit_rate == pytest.approx(256 / (256 + 65), abs=0.02)


async def test_reset_cache_empties_the_cache_before_every_level_and_says_so():
    with steplaw_in_thread((1.0, 0.01)) as (engine,):
        asked = spec(rates=[10.0, 12.0], prefix_len=128, input_len="32", reset_cache=True)
        record = await bench(fleet(engine.url), asked)
    points = record.sweeps[0].points
    for point in points:
        (reset,) = point.cache_reset
        assert reset.done and reset.asked == "POST /reset_prefix_cache" and reset.statuses == [200]
        assert point.request_cache_hit_rate == pytest.approx(point.prefix_planned_hit_rate, abs=0.02)
    # emptied, the second level misses its first request again, as the first did
    assert points[1].request_cached_tokens == 128 * (points[1].completed - 1)


async def test_engines_without_a_reset_endpoint_are_recorded_as_not_reset():
    engine = await FakeEngine().start()
    try:
        async with new_session(2) as session:
            backend = Backend(name="f", base_url=engine.url, model="fake")
            tgi = await reset_prefix_cache(session, backend, EngineInfo(kind=EngineKind.TGI))
            vllm = await reset_prefix_cache(session, backend, EngineInfo(kind=EngineKind.VLLM))
            llama = await reset_prefix_cache(session, backend, EngineInfo(kind=EngineKind.LLAMACPP, slots=2))
    finally:
        await engine.stop()
    assert not tgi.done and tgi.asked is None and "TGI" in tgi.note
    assert not vllm.done and vllm.statuses == [404] and "VLLM_SERVER_DEV_MODE" in vllm.note
    assert not llama.done and len(llama.statuses) == 2 and llama.asked == "POST /slots/{slot}?action=erase"


def test_a_sweep_with_reset_cache_keeps_ttft_level_where_a_warm_cache_does_not(tmp_path, capsys):
    """A FAKE whose prefill costs 0.5 ms a token: a repetition that finds the 1,024-token prefix cached starts
    its answers sooner, unless every repetition starts from an empty cache."""
    runs = {}
    with steplaw_in_thread((2.0, 0.01), prefill_ms=0.5) as (engine,):
        for reset in (False, True):
            args = ["sweep", "--backend", f"{engine.url},cap=8", "--engine-slots", "8", "--levels", "4"]
            args += ["--repetitions", "3", "--prompt-tokens", "32", "--max-tokens", "8", "--skip-gate"]
            args += ["--prefix-len", "1024", "--out", str(tmp_path / str(reset)), "--json"]
            assert main(args + (["--reset-cache"] if reset else [])) == 0
            runs[reset] = json.loads(capsys.readouterr().out)["levels"][0]["runs"]
    warm, cold = ([r["ttft_ms_mean"] for r in runs[flag]] for flag in (False, True))
    assert warm[1] < 0.5 * warm[0] and warm[2] < 0.5 * warm[0]  # the first repetition's prefix served the rest
    assert max(cold) < 1.5 * min(cold)  # each repetition prefilled its prefix again
    assert [r["cached_tokens"] for r in runs[True]] == [3 * 1024] * 3  # three of four users hit, each time
    assert all(r["cache_reset"][0]["done"] for r in runs[True])


def write_conversations(path, count: int, turns: int) -> None:
    conversations = []
    for c in range(count):
        exchange = []
        for t in range(turns):
            exchange.append({"from": "human", "value": f"conversation {c} question {t} " + "word " * 20})
            exchange.append({"from": "gpt", "value": "reply " * 12})
        conversations.append({"id": str(c), "conversations": exchange})
    path.write_text(json.dumps(conversations))


async def test_multi_turn_conversations_resend_the_history_and_hit_the_cache(tmp_path):
    dataset = tmp_path / "chats.json"
    write_conversations(dataset, count=3, turns=3)
    with steplaw_in_thread((1.0, 0.01)) as (engine,):
        asked = spec(rates=[2.0], num_requests=3, dataset=str(dataset), multi_turn=True, output_len="8")
        record = await bench(fleet(engine.url), asked)
        prompts = list(engine.prompts)
    (point,) = record.sweeps[0].points
    assert point.completed == 9 and point.turns == 6  # three conversations of three turns
    by_conversation: dict[str, list[str]] = {}
    for prompt in prompts:  # the last message of each request, in the order the engine got them
        by_conversation.setdefault(prompt.split()[1], []).append(prompt.split()[3])
    assert by_conversation == {c: ["0", "1", "2"] for c in "012"}  # three conversations, each turn by turn
    # a question is 24 tokens and an answer 8: each turn resends the history, answers included
    assert point.prompt_tokens == 3 * (24 + (24 + 8 + 24) + (24 + 8 + 24 + 8 + 24))
    # the fake caches whole 16-token blocks of each earlier prompt: 16 of 56, then 48 of 88
    assert point.follow_up_cache_hit_rate == pytest.approx((16 + 48) / (56 + 88))


async def test_bad_cache_settings_are_refused_before_any_engine():
    for fields, message in [
        ({"rates": [1.0], "prefix_groups": 2}, "give 'prefix_len' too"),
        ({"rates": [1.0], "multi_turn": True}, "ShareGPT-style dataset"),
        ({"streams": [2], "stop_when_saturated": True}, "give request rates"),
    ]:
        with pytest.raises(UsageError, match=message):
            await bench(fleet("http://127.0.0.1:9/v1"), spec(**fields))


def test_the_saturation_rule_fires_on_rising_queues_and_not_on_a_steady_state():
    assert slope_with_margin([(t, 2.0 * t + 1) for t in range(10)]) == pytest.approx((2.0, 0.0))
    steady, rising = SaturationDetector(t0=0.0), SaturationDetector(t0=0.0)
    for step in range(60):
        t = step * 0.5
        wobble = (-1) ** step * 0.3
        steady.in_flight(t, 8 + round(wobble))
        steady.first_token(t, 0.05 + wobble / 100)
        rising.in_flight(t, 8 + step)
        rising.first_token(t, 0.05 + 0.02 * step + wobble / 100)
    assert not steady.check(30.0).saturated
    verdict = rising.check(30.0)
    assert verdict.saturated and verdict.concurrent_slope == pytest.approx(2.0) and verdict.ttft_n > 5
    assert not rising.check(5.0).saturated  # too early to judge


async def test_stop_when_saturated_stops_the_level_and_skips_the_rates_above():
    """The law serves at most 16.8 requests a second of 32 tokens with 8 running: at 40 a second the queue grows."""
    with steplaw_in_thread((12.94, 0.2451), max_seqs=8) as (engine,):
        asked = spec(rates=[8.0, 40.0, 80.0], duration_s=14.0, max_tokens=32, engine_slots={"*": 8})
        record = await bench(fleet(engine.url), asked.model_copy(update={"stop_when_saturated": True}))
    sweep = record.sweeps[0]
    below, above = sweep.points
    assert below.saturation is not None and not below.saturation.saturated and below.keeps_up
    assert above.saturation is not None and above.saturation.saturated
    assert 10.0 <= (above.saturation.stopped_at_s or 0) < 14.0 and above.scheduled < 40 * 14
    assert sweep.saturated_rate == 40.0 and sweep.rates_skipped == [80.0]
