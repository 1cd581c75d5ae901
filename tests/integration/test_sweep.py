"""The sweep on a FAKE engine in its own process (gate, slots, repetitions, record) and on the real engine."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.fakes.fake_engine import fake_process as fake_engine_process


def sweep(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipeline", "sweep", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def fake_url():
    process, url = fake_engine_process(token_delay=0.002, jitter=0.0)
    yield url
    process.kill()


def test_a_model_that_fails_the_gate_is_refused_unless_asked(fake_url, tmp_path):
    common = [
        "--backend",
        f"{fake_url},cap=4",
        "--levels",
        "1,2",
        "--repetitions",
        "2",
        "--max-tokens",
        "16",
        "--prompt-tokens",
        "32",
        "--engine-slots",
        "4",
        "--out",
        str(tmp_path),
    ]
    refused = sweep(*common)
    assert refused.returncode == 2 and "coherence gate failed" in refused.stderr
    done = sweep(*common, "--skip-gate", "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["gate"] == {"passed": False, "skipped": True, "answers": record["gate"]["answers"]}
    assert record["slots"] == 4 and "given" in record["slots_source"] and record["duration_s"] > 0
    one, two = record["levels"]
    assert len(one["runs"]) == len(two["runs"]) == 2 and not one["failed"] and not two["failed"]
    assert one["efficiency"] == pytest.approx(1.0)
    assert two["efficiency"] == pytest.approx(two["mean"] / (2 * one["mean"]), rel=1e-2)
    assert all(run["tokens"] == 16 * level["users"] for level in record["levels"] for run in level["runs"])
    assert (tmp_path / "sweep.json").exists() and "| users |" in (tmp_path / "sweep.md").read_text()


def test_slots_are_required_where_the_engine_cannot_report_them(fake_url):
    done = sweep("--backend", f"{fake_url},cap=4", "--levels", "1", "--skip-gate")
    assert done.returncode == 2 and "--engine-slots" in done.stderr


def test_levels_above_the_cap_are_refused(fake_url):
    done = sweep("--backend", f"{fake_url},cap=2", "--levels", "1,4", "--engine-slots", "8", "--skip-gate")
    assert done.returncode == 2 and "queueing" in done.stderr


@pytest.mark.engine
def test_a_short_sweep_on_the_real_engine(tmp_path):
    from tests.conftest import ENGINE_THREADS

    done = sweep(
        "--levels",
        "1,2",
        "--repetitions",
        "2",
        "--max-tokens",
        "24",
        "--prompt-tokens",
        "48",
        "--slots",
        "2",
        "--threads",
        str(ENGINE_THREADS),
        "--out",
        str(tmp_path),
        "--json",
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["gate"]["passed"] and record["slots"] == 2 and record["ignore_eos"]
    assert record["prompt_tokens_reported"] == 48, "prompts are sized by the engine's own tokenizer"
    assert all(run["tokens"] == 24 * level["users"] for level in record["levels"] for run in level["runs"])


@pytest.mark.engine
def test_the_real_engine_empties_its_slots_between_repetitions_when_asked(tmp_path):
    """llama-server keeps each slot's last prompt: without --reset-cache the second repetition finds the shared
    prefix in its slots; with it every slot is erased first (the embedded engine then runs without its RAM
    prompt cache, which no endpoint empties)."""
    from tests.conftest import ENGINE_THREADS

    records = {}
    for reset in (False, True):
        done = sweep(
            *("--levels", "2", "--repetitions", "2", "--max-tokens", "4", "--prompt-tokens", "48"),
            *("--prefix-len", "64", "--slots", "2", "--threads", str(ENGINE_THREADS), "--skip-gate"),
            *(["--reset-cache"] if reset else []),
            *("--out", str(tmp_path / str(reset)), "--json"),
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        records[reset] = json.loads(done.stdout)["levels"][0]["runs"]
    warm, emptied = records[False], records[True]
    assert warm[1]["cached_tokens"] >= 2 * 64 and not warm[1]["cache_reset"]
    for run in emptied:
        (reset,) = run["cache_reset"]
        assert reset["done"] and reset["statuses"] == [200, 200] and "slots" in reset["asked"]
        assert run["cached_tokens"] < 64, "the erased slots held none of the shared prefix"
