"""--audit-answers against a planted FAKE engine (tests/fakes/fake_engine.py) whose answers degrade with load:
clean at up to 5 requests in flight, looping above 5, cut at the cap above 10, one canned answer above 14. A
closed-loop level of N streams holds N in flight, N + 1 for a moment (the next request arrives before the
fake's handler of the last one returns), so the ladder's levels 1 and 4 are clean, 8 loops, 12 is cut and 16
duplicates. The audit must find each defect at exactly the levels where the fake plants it."""

from __future__ import annotations

import json

import pytest

from pipeline.bench.report.answers import audit_answers
from pipeline.bench.studies.ladder import bench
from pipeline.cli import main
from pipeline.config import Settings
from pipeline.records import Backend
from pipeline.records.bench import BenchSpec, RequestSample
from tests.fakes.fake_engine import FakeEngine, fake_process, prompt_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def degrading(engine: FakeEngine):
    """The planted answers: what a request gets depends on how many are in flight when it arrives."""

    def reply(body: dict) -> str:
        prompt = prompt_of(body).split(":")[0]  # "Request 000012 [nonce]": each prompt its own
        if engine.in_flight > 14:
            return "I am busy right now, please ask me again later."
        if engine.in_flight > 10:
            return prompt + " " + " ".join(f"step{i}" for i in range(200))
        if engine.in_flight > 5:
            return prompt + " and again" * 25 + "."  # 52 words: within the 64-token cap
        return prompt + " is answered in one plain sentence."

    return reply


async def test_answers_that_degrade_under_load_are_found_at_the_levels_where_they_do():
    engine = FakeEngine(token_delay=0.002)
    engine.reply = degrading(engine)
    await engine.start()
    try:
        settings = Settings(backends=[Backend(name="f", base_url=engine.url, cap=16)], read_timeout=10)
        spec = BenchSpec(
            streams=[1, 4, 8, 12, 16], window_s=2.0, warmup_s=0.2, max_tokens=64, engine_slots={"*": 16},
            audit_answers=True, ignore_eos=False, save_requests=True,
        )  # fmt: skip
        record = await bench(settings, spec)
    finally:
        await engine.stop()
    audits = {lv.streams: lv.total.answers for lv in record.series[0].levels}
    assert all(audit is not None and audit.answers > 0 for audit in audits.values())
    looping = {n: a.looping for n, a in audits.items() if a}
    capped = {n: a.capped for n, a in audits.items() if a}
    duplicate = {n: a.duplicate for n, a in audits.items() if a}
    assert looping[1] == looping[4] == 0 and looping[8] > 0
    assert capped[1] == capped[4] == capped[8] == 0 and capped[12] > 0
    assert duplicate[1] == duplicate[4] == duplicate[8] == duplicate[12] == 0 and duplicate[16] > 0
    assert all(a.empty == 0 for a in audits.values() if a)
    flagged = [row for row in record.request_rows if row["answer_flags"] not in (None, "ok")]
    assert flagged and all(row["level"] in ("8 streams", "12 streams", "16 streams") for row in flagged)


def test_the_audit_tells_repeated_prompts_from_duplicated_answers():
    def sample(number: int, text: str, key: str, finish: str = "stop") -> RequestSample:
        return RequestSample(backend="b", number=number, t_sent=0.0, answer=text, prompt_key=key, finish_reason=finish)

    same_prompt = [sample(1, "The same fine answer.", "k1"), sample(2, "The same fine answer.", "k1")]
    other_prompt = [
        sample(3, "The same fine answer.", "k2"),
        sample(4, "", "k3"),
        sample(5, "cut off in the", "k4", "length"),
    ]
    audit = audit_answers(same_prompt + other_prompt, ignore_eos=False)
    assert audit.answers == 5 and audit.duplicate == 3 and audit.empty == 1 and audit.capped == 1
    assert audit_answers(same_prompt, ignore_eos=False).duplicate == 0  # one prompt asked twice is not a defect


def test_the_cli_turns_ignore_eos_off_and_reports_the_audit(tmp_path, capsys):
    process, url = fake_process(0.001, 0.0)
    try:
        args = ["bench", "--backend", f"{url},cap=4", "--engine-slots", "4", "--streams", "2", "--window", "2"]
        args += ["--warmup", "0.2", "--max-tokens", "8", "--audit-answers", "--out", str(tmp_path), "--json"]
        assert main(args) == 0
    finally:
        process.kill()
    record = json.loads(capsys.readouterr().out)
    assert record["spec"]["ignore_eos"] is False and record["spec"]["audit_answers"] is True
    audit = record["series"][0]["levels"][0]["total"]["answers"]
    assert audit["answers"] > 0 and audit["capped"] == audit["answers"]  # "w0 w1 …" cut at 8: no full stop
    assert "Answers under load" in (tmp_path / "report.md").read_text() and (tmp_path / "charts/answers.png").exists()
