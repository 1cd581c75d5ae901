"""The job-efficiency benchmark on FAKE step-law engines in their own process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.fakes.fake_steplaw import steplaw_process


def test_efficiency_reports_each_schedule_against_the_sustained_rate_and_where_the_cpu_went(tmp_path):
    with steplaw_process(2, 5, 0.2, 16, plans=True) as urls:
        backends = [arg for url in urls for arg in ("--backend", f"{url},cap=16")]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pipeline",
                "efficiency",
                "--shape",
                "1x2x8",
                "--max-tokens",
                "24",
                "--window",
                "2",
                *backends,
                "--out",
                str(tmp_path),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["caps"] == [16, 16] and record["sustained_tok_s"] > 0
    assert [row["schedule"] for row in record["rows"]] == ["pipelined", "streamed", "barrier"]
    assert record["first_chain_s"] > 0
    # two ladder levels (2 and 16 streams a backend) fit the FAKE engines' law, 5 + 0.2 × streams ms
    assert record["step_law_a_ms"] == pytest.approx(5, rel=0.5) and record["step_law_b_ms"] == pytest.approx(
        0.2, rel=0.5
    )
    for row in record["rows"]:
        assert row["sections"] == 16 and row["tokens"] == 16 * 24
        assert row["whole_ratio"] == round(row["generate_tok_s"] / record["sustained_tok_s"], 3)
        assert 0 < row["whole_ratio"] <= row["write_ratio"] * 1.05
        # the limit: the planning the schedule waits for, alone, plus the tokens at the sustained rate
        critical = row["plan_seconds"] if row["schedule"] == "barrier" else record["first_chain_s"]
        limit = row["tokens"] / (critical + row["tokens"] / record["sustained_tok_s"])
        assert row["critical_plan_s"] == round(critical, 2) and row["limit_tok_s"] == pytest.approx(limit, rel=0.01)
        assert row["limit_ratio"] == pytest.approx(row["generate_tok_s"] / row["limit_tok_s"], rel=0.01)
        assert 0 < row["first_section_s"] < row["generate_seconds"] and row["drain_s"] >= 0
        # what its sends allow: its sections on the fitted step law, each sent when the job sent it
        assert 0 < row["sends_bound_s"] and row["sends_ratio"] == pytest.approx(
            row["sends_bound_s"] / row["generate_seconds"], abs=0.01
        )
    barrier = record["rows"][2]
    assert barrier["first_section_s"] >= barrier["plan_seconds"] * 0.9, "the barrier writes once planning ends"
    assert all(row["cpu"]["client"] > 0 and row["cpu"]["backends"] for row in record["rows"])
    markdown = (tmp_path / "efficiency.md").read_text()
    assert "÷ sustained" in markdown and "÷ limit" in markdown and "Where the CPU went" in markdown


def run_fanout(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True, text=True, timeout=timeout)


def test_a_finished_book_against_its_own_requests_replayed_at_once(tmp_path):
    """A book on FAKE step-law engines, then `efficiency --workload` on its run folder: every logged request is
    replayed on the same fleet, and the ratio is the book's tok/s over the replay's."""
    with steplaw_process(2, 5, 0.2, 16, plans=True) as urls:
        backends = [arg for url in urls for arg in ("--backend", f"{url},cap=16")]
        run = tmp_path / "run"
        book = run_fanout("book", "Write a handbook on rope.", "--shape", "1x2x4", "--out", str(run), *backends)
        assert book.returncode == 0, book.stderr
        done = run_fanout("efficiency", "--workload", str(run), *backends, "--out", str(tmp_path / "eff"), "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    logged = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    stats = json.loads((run / "stats.json").read_text())
    assert record["requests"] == len(logged) and record["replay_failed"] == 0
    assert record["book_tokens"] == sum(row["completion_tokens"] or 0 for row in logged)
    assert record["book_seconds"] == round(stats["generate_seconds"], 2)
    assert record["replay_tokens"] >= record["book_tokens"], "cut planning answers run to their end in the replay"
    assert record["tok_s_ratio"] == round(record["book_tok_s"] / record["replay_tok_s"], 3)
    assert all(row["t_asked"] <= row["t_done"] for row in logged)
    assert "replay at once" in (tmp_path / "eff" / "efficiency.md").read_text()


def test_efficiency_of_a_folder_that_is_not_a_finished_run_is_one_line_exit_2(tmp_path):
    done = run_fanout("efficiency", "--workload", str(tmp_path), "--backend", "http://127.0.0.1:9/v1")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "not a finished book run" in done.stderr
