"""The step-law fleet simulation against cases worked out by hand."""

from __future__ import annotations

import json

import pytest

from pipeline.bench.studies.fleetsim import StepLaw, TreeRequest, book_tree, makespan, tree_makespan

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


# ---------------------------------------------------------------- a book's tree: each request sent by its parent's line

SECOND = StepLaw(a_s=1.0, b_s=0.0)  # every step a second, whatever the streams: the cases read in steps


def test_a_child_goes_when_its_line_is_generated_and_shares_the_parents_steps():
    tree = [TreeRequest(10), TreeRequest(3, parent=0, after=5), TreeRequest(2, parent=0, after=10)]
    # the root's tokens end at 1..10 s; the first child joins after its 5th (tokens at 6, 7, 8), the second after
    # its 10th (11, 12)
    assert tree_makespan(tree, caps=[4], law=SECOND) == pytest.approx(12.0)


def test_a_child_waits_for_a_slot_when_the_engine_is_full():
    tree = [TreeRequest(4), TreeRequest(2, parent=0, after=1)]
    # one slot: the child waits for the root to end at 4 s, then runs 2 steps
    assert tree_makespan(tree, caps=[1], law=SECOND) == pytest.approx(6.0)
    assert tree_makespan(tree, caps=[2], law=SECOND) == pytest.approx(4.0), "with a slot it runs beside the root"


def test_book_tree_reads_each_line_where_it_ends_in_the_parents_answer(tmp_path):
    rows = [
        {"tag": "plan:book:0", "kind": "plan", "completion_tokens": 30, "text": "Title: T\n1. A: a.\n2. B: b.\n"},
        {"tag": "plan:p01:0", "kind": "plan", "completion_tokens": 20, "text": "1. C: c.\n2. D: d.\n"},
        {"tag": "plan:p01:1", "kind": "plan", "completion_tokens": 20, "text": "a second round: left out"},
        {"tag": "p01.c02", "kind": "section", "completion_tokens": 50, "text": "..."},
        {"tag": "p01.c02#1", "kind": "section", "completion_tokens": 50, "text": "a retry: left out"},
    ]
    log = tmp_path / "requests.jsonl"
    log.write_text("".join(json.dumps(row) + "\n" for row in rows))
    book, part, section = book_tree(log)
    assert book == TreeRequest(30)
    assert part == TreeRequest(20, parent=0, after=round(30 * len("Title: T\n1. A: a.") / len(rows[0]["text"])))
    assert section == TreeRequest(50, parent=1, after=round(20 * 17 / 18)), "line 2: all but the answer's last newline"
    assert book_tree(log, sections_streamed=False)[2].after == 20
