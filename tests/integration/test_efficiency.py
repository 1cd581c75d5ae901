"""The job-efficiency benchmark on FAKE step-law engines in their own process."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.fakes.fake_steplaw import steplaw_process


def test_efficiency_reports_both_schedules_against_the_sustained_rate(tmp_path):
    with steplaw_process(2, 5, 0.2, 16) as urls:
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
    assert [row["schedule"] for row in record["rows"]] == ["pipelined", "barrier"]
    for row in record["rows"]:
        assert row["sections"] == 16 and row["tokens"] == 16 * 24
        assert row["whole_ratio"] == round(row["generate_tok_s"] / record["sustained_tok_s"], 3)
        assert 0 < row["whole_ratio"] <= row["write_ratio"] * 1.05
    assert "÷ sustained" in (tmp_path / "efficiency.md").read_text()
