"""Latency figures and goodput against hand-computed cases (vLLM's definitions), no engine."""

from __future__ import annotations

import pytest

from pipeline.bench.report.latency import (
    goodput,
    is_good,
    parse_goodput,
    percentile,
    request_duration,
    summarise,
    tpot_of,
)
from pipeline.errors import UsageError
from pipeline.records.bench import RequestSample


def sample(sent: float, events: list[float], done: float, tokens: int | None = None, **fields) -> RequestSample:
    return RequestSample(
        backend="b0",
        number=fields.pop("number", 1),
        t_sent=sent,
        t_first=events[0] if events else None,
        t_done=done,
        completion_tokens=len(events) if tokens is None else tokens,
        chunks=len(events),
        token_times=events,
        **fields,
    )


def test_percentiles_interpolate_linearly_like_numpy():
    values = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert percentile(values, 50) == 3.0
    assert percentile(values, 90) == pytest.approx(4 + 0.6 * 6)  # position 3.6 between 4 and 10
    assert percentile(values, 99) == pytest.approx(4 + 0.96 * 6)
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 10.0
    assert percentile([7.0], 99) == 7.0 and percentile([], 50) is None


def test_ttft_tpot_itl_and_e2el_of_hand_made_requests():
    # sent at 0; events at 0.1, 0.3, 0.6 (gaps 0.2, 0.3); [DONE] at 0.7; 3 tokens
    one = sample(0.0, [0.1, 0.3, 0.6], 0.7)
    # sent at 1; events at 1.5, 1.6 (gap 0.1); done 1.6; the engine counted 5 tokens in 2 events
    two = sample(1.0, [1.5, 1.6], 1.6, tokens=5, number=2)
    assert tpot_of(one) == pytest.approx((0.7 - 0.1) / 2)
    assert tpot_of(two) == pytest.approx((0.6 - 0.5) / 4)  # usage tokens, not events
    summary = summarise([one, two], "hand", [50, 100])
    assert summary.ttft.mean_ms == pytest.approx(300.0) and summary.ttft.count == 2
    assert summary.e2el.percentiles_ms["p100"] == pytest.approx(700.0)
    assert sorted(summary.itl.percentiles_ms.values()) == pytest.approx([200.0, 300.0])  # p50 of 0.1,0.2,0.3
    assert summary.itl.count == 3 and summary.itl.mean_ms == pytest.approx(200.0)
    assert summary.tpot.median_ms == pytest.approx((300.0 + 25.0) / 2)


def test_one_token_answers_have_no_tpot_and_failures_no_latency():
    single = sample(0.0, [0.2], 0.25)
    failed = RequestSample(backend="b0", number=3, t_sent=0.0, t_done=0.1, error="http_500: boom")
    summary = summarise([single, failed], "hand")
    assert tpot_of(single) is None and summary.tpot.count == 0
    assert summary.requests == 2 and summary.ttft.count == 1 and failed.error_kind == "http_500"


def test_goodput_counts_exactly_the_planted_outcomes():
    slo = parse_goodput("ttft:100,tpot:50,e2e:1000")
    assert slo == {"ttft": 100.0, "tpot": 50.0, "e2el": 1000.0}
    good = sample(0.0, [0.05, 0.09], 0.1)  # ttft 50 ms, tpot 50 ms (equal is good), e2el 100 ms
    slow_first = sample(0.0, [0.2, 0.21], 0.21, number=2)  # ttft 200 ms
    slow_tokens = sample(0.0, [0.05, 0.2], 0.2, number=3)  # tpot 150 ms
    long_total = sample(0.0, [0.01] + [0.01 + 0.04 * i for i in range(1, 40)], 1.6, number=4)  # e2el 1.6 s
    single = sample(0.0, [0.05], 0.06, number=5)  # one token: TPOT counts 0
    failed = RequestSample(backend="b0", number=6, t_sent=0.0, t_done=0.01, error="timeout: x")
    requests = [good, slow_first, slow_tokens, long_total, single, failed]
    assert [is_good(r, slo) for r in requests] == [True, False, False, False, True, False]
    result = goodput(requests, slo, duration_s=2.0)
    assert (result.good, result.requests, result.share, result.rate) == (2, 6, pytest.approx(1 / 3), 1.0)
    assert parse_goodput("e2el:5") == {"e2el": 5.0}


@pytest.mark.parametrize("text", ["ttft", "ttft:x", "speed:10", "ttft:-1", ""])
def test_bad_goodput_names_the_setting(text):
    with pytest.raises(UsageError, match="setting 'goodput'"):
        parse_goodput(text)


def test_duration_runs_from_the_first_send_to_the_last_answer():
    assert request_duration([sample(1.0, [1.1], 2.0), sample(1.5, [1.6], 3.5, number=2)]) == pytest.approx(2.5)
    assert request_duration([]) is None
