"""The step-law fleet simulation against cases worked out by hand."""

from __future__ import annotations

import pytest

from pipeline.bench.studies.fleetsim import StepLaw, makespan

LAW = StepLaw(a_s=0.010, b_s=0.001)


def test_one_request_alone_takes_its_tokens_at_the_idle_step():
    assert makespan([2.0], [10], caps=[4], law=LAW) == pytest.approx(2.0 + 10 * 0.011)


def test_requests_sent_together_share_each_step():
    assert makespan([0.0] * 4, [10] * 4, caps=[4], law=LAW) == pytest.approx(10 * (0.010 + 4 * 0.001))


def test_past_the_cap_they_wait_for_a_slot_and_run_in_waves():
    assert makespan([0.0] * 4, [10] * 4, caps=[2], law=LAW) == pytest.approx(2 * 10 * (0.010 + 2 * 0.001))


def test_the_least_loaded_engine_takes_each_request():
    assert makespan([0.0] * 4, [10] * 4, caps=[2, 2], law=LAW) == pytest.approx(10 * (0.010 + 2 * 0.001))


def test_a_request_sent_mid_step_joins_at_the_next_one_and_slows_the_others():
    # A alone for 5 steps (0.055 s); B is sent at 0.05, inside A's fifth step, and joins at its end
    one, two = 0.011, 0.012
    a_ends = 5 * one + 5 * two
    b_ends = a_ends + 5 * one
    assert makespan([0.0, 0.05], [10, 10], caps=[4], law=LAW) == pytest.approx(b_ends)


def test_later_sends_and_empty_answers():
    assert makespan([0.0, 1.0], [3, 0], caps=[1], law=LAW) == pytest.approx(3 * 0.011), "an empty answer runs nothing"
    early = makespan([0.0, 0.0, 0.0], [20, 20, 20], caps=[8, 8], law=LAW)
    late = makespan([0.0, 0.0, 0.5], [20, 20, 20], caps=[8, 8], law=LAW)
    assert late > early


def test_the_step_law_gives_its_sustained_rate():
    assert LAW.sustained(100) == pytest.approx(100 / 0.110)
