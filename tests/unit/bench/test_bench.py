"""The bench on FAKE step-law engines (tests/fakes/fake_steplaw.py): the ladder recovers the law and the fit
recovers a and b, two engines sum on a common grid, bad input is refused with exit 2, and the report
renders with its charts."""

from __future__ import annotations

import json

import pytest

from pipeline.backends.aiohttp_chat import new_session
from pipeline.bench.load.prompts import TiktokenCounter, sized_prompts, token_counter
from pipeline.bench.report.figures import (
    Grid,
    best_span,
    client_cumulative,
    common_grid,
    server_cumulative,
    weighted_token_times,
)
from pipeline.bench.report.fit import least_squares
from pipeline.bench.report.report import write_report
from pipeline.bench.studies.ladder import bench
from pipeline.cli import main
from pipeline.config import Settings
from pipeline.errors import UsageError
from pipeline.records import Backend
from pipeline.records.bench import BenchSpec, RequestSample
from pipeline.tokens import offline_encoding
from tests.fakes.fake_engine import FakeEngine
from tests.fakes.fake_steplaw import StepLawEngine, prompts_of, steplaw_in_thread, steplaw_process

pytestmark = pytest.mark.anyio
A_MS, B_MS = 12.94, 0.2451


@pytest.fixture
def anyio_backend():
    return "asyncio"


def fleet_of(*engines: StepLawEngine | str, cap: int = 64) -> Settings:
    urls = [e if isinstance(e, str) else e.url for e in engines]
    return Settings(
        backends=[Backend(name=f"e{i}", base_url=url, cap=cap) for i, url in enumerate(urls)], read_timeout=10
    )


def law_rate(streams: int, a_ms: float = A_MS, b_ms: float = B_MS) -> float:
    return streams * 1000 / (a_ms + b_ms * streams)


def spec(levels: list[int], **fields) -> BenchSpec:
    base = {"window_s": 3.0, "warmup_s": 0.5, "max_tokens": 128, "engine_slots": {"*": 256}}
    return BenchSpec(streams=levels, **(base | fields))


# How far the FAKE engine's own steps may drift from its law while the host takes a core from it or the client
# (a clean-clone CI run measured 32 streams 3.5% under the law). The bench's count itself is held to the engine's
# own counter exactly (tokens_match).
LAW, LAW_A, LAW_B = 0.10, 0.10, 0.20


def near_the_law(record) -> bool:
    levels, fit = record.series[0].levels, record.series[0].fit
    points = all(abs(level.total.sustained / law_rate(level.streams) - 1) <= LAW for level in levels)
    return points and abs(fit.a_ms / A_MS - 1) <= LAW_A and abs(fit.b_ms / B_MS - 1) <= LAW_B


async def test_the_ladder_recovers_the_step_law_and_the_fit_recovers_a_and_b(tmp_path):
    # Measured a second time only when the first missed: on 2 cores the host's own work now and then took a
    # core from the client for part of a window (a CI run read 32 streams 13% low, another b 6% high); a bench
    # that is wrong misses both times.
    with steplaw_process(1, A_MS, B_MS) as (url,):  # its own process: the suite's GC cannot stall its clock
        record, before = await bench(fleet_of(url), spec([1, 8, 32])), 0
        if not near_the_law(record):
            before = len(prompts_of(url))
            record = await bench(fleet_of(url), spec([1, 8, 32]))
        prompts = prompts_of(url)[before:]  # the kept measurement's requests
    levels = record.series[0].levels
    for level in levels:
        point, law = level.total, law_rate(level.streams)
        assert point.sustained == pytest.approx(law, rel=LAW), f"{level.streams} streams"
        assert point.step_ms == pytest.approx(A_MS + B_MS * level.streams, rel=LAW)
        assert point.step_ms_server == pytest.approx(A_MS + B_MS * level.streams, rel=LAW)
        assert point.sustained * 0.99 <= point.best_second <= point.sustained * (1 + 2 * LAW)
        assert "vllm:generation_tokens_total" in point.sustained_source
        assert point.tokens_match and point.requests_failed == 0 and point.occupancy == pytest.approx(1.0, abs=0.05)
        assert point.power_w is None and point.tokens_per_joule is None  # no nvidia-smi here: null, never zero
    fit = record.series[0].fit
    assert fit.a_ms == pytest.approx(A_MS, rel=LAW_A) and fit.b_ms == pytest.approx(B_MS, rel=LAW_B)
    assert fit.ceiling_tok_s == pytest.approx(1000 / fit.b_ms, rel=0.001)
    assert len(set(prompts)) == len(prompts), "every request must have its own prompt"
    assert all(p.startswith("Request ") for p in prompts)
    assert len(levels[0].samples) >= 2 * spec([1]).window_s  # raw counter samples every 0.5 s are kept

    paths = write_report(record, tmp_path)
    saved = json.loads(paths["record"].read_text())
    assert saved["series"][0]["levels"][0]["samples"] and saved["provenance"]["host"]["cores"] > 0
    assert saved["provenance"]["backends"][0]["slots_source"] == "--engine-slots"
    for name in ("throughput", "per_stream", "step_time", "ttft"):
        png = tmp_path / "charts" / f"{name}.png"
        assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 5000
        assert f"charts/{name}.png" in paths["html"].read_text()
    markdown = paths["markdown"].read_text()
    assert "step_ms = 1" in markdown and "| 32 |" in markdown


async def test_two_engines_are_summed_on_a_common_grid():
    with steplaw_process(1, A_MS, B_MS) as (fast,), steplaw_process(1, 20.0, 0.5) as (slow,):
        record = await bench(fleet_of(fast, slow), spec([4], window_s=2.5, max_tokens=96))
    level = record.series[0].levels[0]
    by_name = {p.scope: p for p in level.backends}
    assert by_name["e0"].sustained == pytest.approx(law_rate(4), rel=0.04)
    assert by_name["e1"].sustained == pytest.approx(law_rate(4, 20.0, 0.5), rel=0.04)
    assert level.total.streams == 8
    assert level.total.sustained == pytest.approx(by_name["e0"].sustained + by_name["e1"].sustained, rel=1e-6)
    assert level.total.best_second <= by_name["e0"].best_second + by_name["e1"].best_second + 1e-6
    assert level.total.sustained_source.startswith("sum of 2 backends on a common")


def test_the_best_second_of_a_sum_is_a_simultaneous_peak():
    """A bursts in second 2-3, B in second 5-6: the sum's best second is one burst, not both."""

    def counter(burst_at: float) -> list[tuple[float, float]]:
        points, value = [], 0.0
        for k in range(21):  # samples every 0.5 s over 10 s: 100 tok/s, 300 during the burst second
            t = k * 0.5
            points.append((t, value))
            value += 150 if burst_at <= t < burst_at + 1 else 50
        return points

    grid = common_grid(0.0, 10.0)
    a, b = server_cumulative(counter(2.0), grid), server_cumulative(counter(5.0), grid)
    total = [x + y for x, y in zip(a, b)]
    assert best_span(a, grid) == pytest.approx(300) and best_span(b, grid) == pytest.approx(300)
    assert best_span(total, grid) == pytest.approx(400)  # 300 + 100, not 600
    assert total[-1] / grid.length == pytest.approx(240)


def test_client_timestamps_are_scaled_to_usage():
    """A request that stops on EOS streams one chunk fewer than its usage counts; weights make it up."""
    requests = [
        RequestSample(backend="x", number=1, t_sent=0, completion_tokens=4, token_times=[1.0, 1.5, 2.0]),
        RequestSample(backend="x", number=2, t_sent=0, completion_tokens=2, token_times=[1.2, 3.0]),
        RequestSample(backend="x", number=3, t_sent=0, error="http_500", token_times=[1.1]),
    ]
    times, weights = weighted_token_times(requests)
    assert sum(weights) == pytest.approx(6)
    grid = Grid(start=0.0, step=0.5, count=9)
    assert client_cumulative(times, weights, grid)[-1] == pytest.approx(6)
    assert client_cumulative(times, weights, common_grid(1.4, 2.5))[-1] == pytest.approx(4 / 3 * 2)


def test_least_squares_recovers_a_line():
    xs = [1, 4, 8, 16, 32, 64, 128, 256]
    a, b, r2 = least_squares(xs, [A_MS + B_MS * x for x in xs])
    assert a == pytest.approx(A_MS) and b == pytest.approx(B_MS) and r2 == pytest.approx(1.0)


async def test_prompts_of_n_tokens_fall_back_to_offline_tiktoken():
    engine = await FakeEngine().start()  # a FAKE with no /tokenize
    try:
        async with new_session(4) as session:
            counter = await token_counter(session, Backend(name="f", base_url=engine.url, model="fake"))
    finally:
        await engine.stop()
    assert isinstance(counter, TiktokenCounter) and counter.name.startswith("tiktoken")
    maker = await sized_prompts(counter, 60, "abc123")
    assert await counter.count(maker.prompt(100000)) == 60
    assert maker.prompt(1) != maker.prompt(2) and maker.prompt(7).startswith("Request 000007 [abc123]")


def test_tiktoken_caches_its_encoding_in_fanouts_cache_not_the_systems_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("FANOUT_CACHE", str(tmp_path))
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "system-tmp"))  # where tiktoken's default would go
    monkeypatch.setattr("tiktoken.registry.ENCODINGS", {})  # loaded afresh, not from this process's earlier load
    offline_encoding.cache_clear()
    counter = TiktokenCounter()
    assert counter.encoding.encode("hello world")
    assert list((tmp_path / "tiktoken").iterdir()), "the encoding file is cached under FANOUT_CACHE"
    assert not (tmp_path / "system-tmp").exists()


@pytest.mark.parametrize(
    "levels, cap, slots, message",
    [
        ([1, 8], 4, {"*": 64}, "cap 4, so 8 streams would measure queueing, not batching"),
        ([1, 8], 64, {"*": 4}, "runs at most 4 sequences at once"),
        ([1], 64, {}, "setting 'engine_slots' e0=N"),
    ],
)
async def test_levels_that_would_measure_queueing_are_refused(levels, cap, slots, message):
    engine = await StepLawEngine().start()
    try:
        with pytest.raises(UsageError, match=message.replace(".", r"\.")):
            await bench(fleet_of(engine, cap=cap), spec(levels, engine_slots=slots))
        assert engine.requests == 0
    finally:
        await engine.stop()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--window", "1"], "too short to hold full occupancy"),
        (["--streams", "1,x"], "expected whole numbers"),
        (["--streams", "0"], "positive"),
        (["--engine-slots", "a=b"], "[NAME=]N"),
        (["--streams", "1", "--window", "3", "--backend", "http://127.0.0.1:9/v1"], "no backend reachable"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, capsys):
    assert main(["bench", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fanout: error:") and message in err and "\n" not in err


def test_the_cli_runs_backends_side_by_side_with_a_ratio_column(tmp_path, capsys):
    with steplaw_in_thread((A_MS, B_MS), (20.0, 0.5)) as (plain, drafting):
        code = main(
            [
                "bench",
                "--backend",
                f"{plain.url},cap=8,name=plain",
                "--backend",
                f"{drafting.url},cap=8,name=drafting",
                "--compare",
                "--streams",
                "2",
                "--window",
                "2",
                "--warmup",
                "0.2",
                "--max-tokens",
                "64",
                "--engine-slots",
                "64",
                "--out",
                str(tmp_path),
                "--json",
                "--label",
                "plain vs drafting",
            ]
        )
    assert code == 0
    record = json.loads(capsys.readouterr().out)
    assert [s["label"] for s in record["series"]] == ["plain", "drafting"]
    (row,) = record["comparison"]
    assert row["label"] == "drafting" and row["streams"] == 2
    assert row["ratio"] == pytest.approx((2000 / (20.0 + 1.0)) / (2000 / (A_MS + 2 * B_MS)), rel=0.06)
    report = (tmp_path / "report.md").read_text()
    assert "Side by side (against plain)" in report and "| Ratio |" in report
    assert (tmp_path / "report.html").exists() and (tmp_path / "charts" / "ttft.png").exists()


def test_gpu_power_from_a_fake_nvidia_smi_and_null_without_one(tmp_path, monkeypatch):
    from pipeline.bench.load.sampler import nvidia_smi, read_power
    from pipeline.bench.report.provenance import gpus

    fake = tmp_path / "nvidia-smi"  # a FAKE nvidia-smi: two cards, one without a power reading
    fake.write_text(
        '#!/bin/sh\ncase "$1" in --query-gpu=power.draw) printf "412.5\\n[N/A]\\n";;\n'
        '*) printf "NVIDIA H200, 143771\\nNVIDIA H200, 143771\\n";; esac\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    sample = read_power(nvidia_smi())
    assert sample.watts == 412.5 and sample.per_gpu == [412.5]
    assert [g.name for g in gpus()] == ["NVIDIA H200", "NVIDIA H200"] and gpus()[0].memory_mib == 143771
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert nvidia_smi() is None and gpus() == []
