"""`--endpoint completions` for the bench (ladder and open loop), identity, sweep's refusals and the book's: the
same figures as over chat, every request sent as a text completion. On FAKE engines."""

from __future__ import annotations

import json

import pytest

from pipeline.bench.studies.identity import IdentitySpec, run_identity
from pipeline.cli import main
from pipeline.config import Settings
from pipeline.records import Backend, Endpoint
from tests.fakes.fake_engine import FakeEngine
from tests.fakes.fake_steplaw import log_of, steplaw_in_thread

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def test_a_ladder_and_a_rate_over_text_completions(tmp_path, capsys):
    with steplaw_in_thread((12.94, 0.2451)) as (engine,):
        base = ["bench", "--backend", f"{engine.url},cap=16", "--engine-slots", "16", "--max-tokens", "16"]
        ladder = ["--streams", "2", "--window", "2", "--warmup", "0.2", "--rate", "5", "--duration", "1.5"]
        assert main([*base, *ladder, "--endpoint", "completions", "--out", str(tmp_path / "run"), "--json"]) == 0
        sent = log_of(engine.url)
    record = json.loads(capsys.readouterr().out)
    assert record["spec"]["endpoint"] == "completions"
    assert main(["report", str(tmp_path / "run"), "--format", "vllm", "--out", str(tmp_path / "vllm")]) == 0
    assert {json.loads(p.read_text())["backend"] for p in (tmp_path / "vllm").glob("*.json")} == {"openai"}
    assert sent and all(entry["text"] for entry in sent), "every request went to /v1/completions"
    (level,) = record["series"][0]["levels"]
    assert level["total"]["sustained"] > 0 and level["total"]["latency"]["ttft"]["count"] > 0
    (point,) = record["sweeps"][0]["points"]
    assert point["completed"] == point["scheduled"] and point["completion_tokens"] == 16 * point["completed"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["bench", "--rate", "2", "--multi-turn", "--dataset", "x.json"], "a conversation's turns need roles"),
        (["bench", "--workload", "RUN"], "replay them over chat"),
        (["identity", "--book", "RUN"], "--endpoint do not apply"),
        (["book", "a prompt"], "sends chat completions only"),
    ],
)
def test_what_text_completions_cannot_carry_is_refused(args, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.json").write_text('[{"conversations": [{"from": "human", "value": "hi"}]}]')
    assert main([*args, "--endpoint", "completions"]) == 2
    assert message in capsys.readouterr().err


async def test_identity_over_text_completions():
    engine = await FakeEngine(tokens=8).start()
    try:
        settings = Settings(backends=[Backend(name="f", base_url=engine.url, cap=4)])
        spec = IdentitySpec(prompts=["one", "two"], levels=[1, 2], max_tokens=8, endpoint=Endpoint.COMPLETIONS)
        record = await run_identity(settings, spec)
    finally:
        await engine.stop()
    assert all("prompt" in body and "messages" not in body for body in engine.bodies)
    assert [level.identical == level.total for level in record.levels] == [True, True]


def test_probe_says_whether_a_backend_answers_text_completions(capsys):
    with steplaw_in_thread((1.0, 0.01)) as (engine,):
        assert main(["probe", "--backend", f"{engine.url},cap=4", "--endpoint", "completions"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("completions=ok")
