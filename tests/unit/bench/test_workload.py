"""Arrival processes, workloads (synthetic lengths, datasets, a book run's request log), no engine."""

from __future__ import annotations

import json
import statistics

import pytest

from pipeline.bench.load.openloop import arrival_offsets, replay_offsets
from pipeline.bench.load.workload import Lengths, load_dataset, load_replay, parse_lengths, synthetic_workload
from pipeline.errors import UsageError

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.parametrize("burstiness", [1.0, 0.5, 4.0])
def test_arrivals_have_the_asked_mean_gap_and_the_gamma_spread(burstiness):
    offsets = arrival_offsets(rate=20.0, burstiness=burstiness, duration_s=500.0, count=None, seed=7)
    gaps = [b - a for a, b in zip(offsets, offsets[1:])]
    assert len(offsets) == pytest.approx(20 * 500, rel=0.05)
    assert statistics.fmean(gaps) == pytest.approx(1 / 20, rel=0.03)
    # a gamma of shape k has a coefficient of variation 1/sqrt(k): 1 for Poisson, burstier below 1
    assert statistics.pstdev(gaps) / statistics.fmean(gaps) == pytest.approx(burstiness**-0.5, rel=0.05)
    assert offsets[0] == 0.0 and offsets[-1] < 500.0


def test_arrivals_are_seeded_and_can_stop_at_a_count():
    first = arrival_offsets(5.0, 1.0, 10.0, None, seed=1)
    assert first == arrival_offsets(5.0, 1.0, 10.0, None, seed=1)
    assert first != arrival_offsets(5.0, 1.0, 10.0, None, seed=2)
    assert len(arrival_offsets(5.0, 1.0, None, 12, seed=1)) == 12
    with pytest.raises(ValueError):
        arrival_offsets(0.0, 1.0, 10.0, None, seed=1)


def test_a_replay_keeps_its_times_scaled_or_sends_all_at_once(tmp_path):
    log = tmp_path / "requests.jsonl"
    rows = [
        {"tag": "plan:book:1", "kind": "plan", "t_asked": 1.0, "messages": [{"role": "user", "content": "a"}],
         "max_tokens": 40, "extra": {"temperature": 0.5}, "prompt_tokens": 12},
        {"tag": "p01.c01.s01", "kind": "section", "t_asked": 5.0, "messages": [{"role": "user", "content": "b"}],
         "max_tokens": 455, "extra": {"temperature": 0.5, "seed": 3}, "prompt_tokens": None},
    ]  # fmt: skip
    log.write_text("".join(json.dumps(r) + "\n" for r in reversed(rows)))
    replay = load_replay(tmp_path)
    assert [w.kind for w in replay.rows] == ["plan", "section"]  # in time order
    assert replay_offsets(replay.rows, 1.0) == [0.0, 4.0]
    assert replay_offsets(replay.rows, 2.0) == [0.0, 2.0]
    assert replay_offsets(replay.rows, 0) == [0.0, 0.0]
    assert replay.rows[1].extra == {"temperature": 0.5, "seed": 3} and replay.rows[0].prompt_tokens == 12


def test_a_run_folder_without_a_request_log_is_refused(tmp_path):
    with pytest.raises(UsageError, match="no requests.jsonl"):
        load_replay(tmp_path)
    (tmp_path / "requests.jsonl").write_text('{"kind": "plan"}\n')
    with pytest.raises(UsageError, match="line 1: not a request record"):
        load_replay(tmp_path)


def test_a_jsonl_dataset_and_its_bad_rows_named_by_line(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "one", "max_tokens": 7}\n\n{"prompt": "two"}\n')
    data = load_dataset(path, default_cap=64, output_len=None, seed=0)
    assert sorted((w.messages[0]["content"], w.max_tokens) for w in data.rows) == [("one", 7), ("two", 64)]
    assert {data.item(n).messages[0]["content"] for n in range(1, 5)} == {"one", "two"}  # cycled
    for text, message in [
        ('{"prompt": "ok"}\n{"prompt": 3}\n', "line 2: expected"),
        ('{"prompt": "ok"}\nnot json\n', "line 2: not JSON"),
        ('{"prompt": "ok", "max_tokens": 0}\n', "line 1: max_tokens must be a positive"),
        ("\n", "no usable prompts"),
    ]:
        path.write_text(text)
        with pytest.raises(UsageError, match=message):
            load_dataset(path, 64, None, 0)


def test_a_sharegpt_dataset_takes_the_first_turns_and_the_reply_length(tmp_path):
    path = tmp_path / "sharegpt.json"
    reply = "A fairly long answer that has more than four tokens in it, surely."
    path.write_text(
        json.dumps(
            [
                {"conversations": [{"from": "human", "value": "Question?"}, {"from": "gpt", "value": reply}]},
                {"conversations": [{"from": "human", "value": "No answer"}]},  # skipped, as vLLM does
                {"conversations": [{"from": "human", "value": "Short"}, {"from": "gpt", "value": "ok"}]},  # < 4
            ]
        )
    )
    data = load_dataset(path, 64, None, 0)
    (row,) = data.rows
    assert row.messages == [{"role": "user", "content": "Question?"}] and 10 <= row.max_tokens <= 20
    assert load_dataset(path, 64, Lengths(5, 5), 0).rows[0].max_tokens == 5  # --output-len wins
    path.write_text('[{"conversations": "x"}]')
    with pytest.raises(UsageError, match="entry 0: expected a 'conversations' list"):
        load_dataset(path, 64, None, 0)


def test_lengths_parse_and_draw_inside_their_range():
    import random

    assert parse_lengths("128", "input_len") == Lengths(128, 128)
    lengths = parse_lengths("10-20", "output_len")
    rng = random.Random(1)
    draws = {lengths.draw(rng) for _ in range(500)}
    assert min(draws) == 10 and max(draws) == 20
    for bad in ["x", "0", "20-10", "-5"]:
        with pytest.raises(UsageError, match="setting 'input_len'"):
            parse_lengths(bad, "input_len")


class WordCounter:
    """A FAKE tokenizer: one token a word, plus a fixed template."""

    name = "fake words"

    async def count(self, content: str) -> int:
        return len(content.split()) + 5


async def test_synthetic_prompts_reach_their_drawn_length_and_stay_distinct():
    workload = await synthetic_workload(WordCounter(), "abc123", Lengths(40, 80), Lengths(16, 16), seed=3)
    counter = WordCounter()
    items = [workload.item(n) for n in range(1, 30)]
    heads = {item.messages[0]["content"][:26] for item in items}
    assert len(heads) == len(items)  # numbered and nonce'd: no shared prefix
    for item in items:
        tokens = await counter.count(item.messages[0]["content"])
        assert 38 <= tokens <= 82 and item.max_tokens == 16
    assert workload.item(5) == workload.item(5)  # a number's draw is seeded
