"""Identity against a single-user oracle: planted near-ties on a FAKE engine, and the real engine."""

from __future__ import annotations

import pytest

from pipeline.backends.embedded.engine import EmbeddedEngine
from pipeline.backends.pool import BackendPool
from pipeline.bench.studies.identity import (
    Answer,
    Candidate,
    compared_levels,
    first_divergence,
    oracle_answers,
)
from pipeline.config import EngineSettings
from pipeline.records import Backend
from tests.conftest import ENGINE_THREADS
from tests.fakes.fake_engine import TIE_INDEX, FakeEngine

pytestmark = pytest.mark.anyio
PROMPTS = ["plain one", "plain two [tie]", "plain three", "plain four"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def tie_engine(flip_above: int) -> FakeEngine:
    engine = FakeEngine(tokens=8, token_delay=0.02)
    engine.tie_flip_above = flip_above
    return await engine.start()


async def test_identity_finds_exactly_the_planted_divergence_and_its_token_index():
    engine = await tie_engine(flip_above=2)
    pool = BackendPool([Backend(name="fake", base_url=engine.url, cap=8)])
    oracle = await oracle_answers(pool, PROMPTS, 8)
    levels = await compared_levels(pool, PROMPTS, [1, 2, 4, 8], 8, oracle)
    await engine.stop()
    assert [(lv.users, lv.identical, lv.total) for lv in levels] == [(1, 4, 4), (2, 4, 4), (4, 3, 4), (8, 6, 8)]
    for level in levels[2:]:
        assert {d.prompt_index for d in level.divergences} == {1}
        for divergence in level.divergences:
            assert divergence.unit == "token" and divergence.index == TIE_INDEX
            assert (divergence.oracle.token, divergence.got.token) == ("alpha ", "beta ")
            assert divergence.oracle.logprob == pytest.approx(-0.6931) and divergence.got.logprob == pytest.approx(
                -0.6932
            )
            assert [c.token for c in divergence.got_top] == ["beta ", "alpha "]


async def test_the_same_question_many_times_at_once():
    engine = await tie_engine(flip_above=3)
    pool = BackendPool([Backend(name="fake", base_url=engine.url, cap=8)])
    oracle = await oracle_answers(pool, ["[tie] asked again"], 8)
    levels = await compared_levels(pool, ["[tie] asked again"], [2, 4], 8, oracle, same_question=True)
    await engine.stop()
    assert [(lv.identical, lv.total, lv.distinct_answers) for lv in levels] == [(2, 2, 1), (0, 4, 1)]


def test_byte_comparison_when_no_logprobs():
    oracle, got = Answer(prompt_index=0, text="same start, then A"), Answer(prompt_index=0, text="same start, then B")
    divergence = first_divergence(oracle, got, request=0)
    assert divergence.unit == "byte" and divergence.index == len("same start, then ")
    assert first_divergence(oracle, oracle, request=0) is None


def test_a_shorter_answer_diverges_at_its_end():
    tokens = [Candidate(token=t, id=i) for i, t in enumerate("abc")]
    long, short = (
        Answer(prompt_index=0, text="abc", tokens=tokens),
        Answer(prompt_index=0, text="ab", tokens=tokens[:2]),
    )
    divergence = first_divergence(long, short, request=0)
    assert divergence.index == 2 and divergence.got.token == "<end>"


@pytest.mark.engine
async def test_the_real_engine_with_one_slot_is_identical_and_with_many_is_measured(engine_assets, tmp_path):
    prompts = ["Name three colours.", "What is a variable in programming?", "Count from one to five in words."]
    one_slot = EngineSettings(slots=1, threads=ENGINE_THREADS, ctx_per_slot=1024)
    with EmbeddedEngine(one_slot, engine_assets, tmp_path / "one.log") as engine:
        pool = BackendPool([engine.backend])
        oracle = await oracle_answers(pool, prompts, 32)
        again = await compared_levels(pool, prompts, [1], 32, oracle)
    assert all(t.id is not None for a in oracle for t in a.tokens), "llama-server returns token ids"
    assert again[0].identical == again[0].total == 3
    many = EngineSettings(slots=4, threads=ENGINE_THREADS, ctx_per_slot=1024)
    with EmbeddedEngine(many, engine_assets, tmp_path / "many.log") as engine:
        pool = BackendPool([engine.backend])
        oracle = await oracle_answers(pool, prompts, 32)
        levels = await compared_levels(pool, prompts, [1, 4], 32, oracle)
    # Measured, not asserted: llama.cpp is known to diverge with several slots (they batch unlike one stream).
    print("identity with 4 slots:", [(lv.users, f"{lv.identical}/{lv.total}") for lv in levels])
    assert all(lv.total == max(lv.users, 3) for lv in levels)
