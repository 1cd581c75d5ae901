"""`fanout report --format vllm|csv`: a ladder level and an open-loop rate of a FAKE step-law run, written as
`vllm bench serve --save-result` files whose keys are vLLM's (tests/fixtures/vllm/save_result_keys.json, read
from vLLM's source) and as one CSV row a level or rate."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from pipeline.bench.report.vllmformat import FIELD_NOTES, result_name
from pipeline.cli import main
from tests.fakes.fake_steplaw import steplaw_in_thread

FIXTURE = json.loads((Path(__file__).parents[2] / "fixtures" / "vllm" / "save_result_keys.json").read_text())
PERCENTILES = (50.0, 99.9)


def vllm_keys(*, lists: bool, detailed: bool = False) -> list[str]:
    """The keys vLLM writes, in its order, for ttft, tpot, itl and e2el at PERCENTILES; `detailed`: with the
    lists --save-detailed keeps, in the order benchmark() builds them."""
    keys = FIXTURE["run_metadata"] + FIXTURE["benchmark_figures"]
    if lists and detailed:
        keys += FIXTURE["per_request_lists_in_order_with_save_detailed"]
    elif lists:
        keys += FIXTURE["per_request_lists_kept_without_save_detailed"]
    keys += FIXTURE["after_the_lists"]
    for metric in ("ttft", "tpot", "itl", "e2el"):
        keys += [f"{stat}_{metric}_ms" for stat in ("mean", "median", "std")]
        keys += [f"p{q:g}_{metric}_ms" for q in PERCENTILES]
    return keys


def test_vllm_files_carry_vllms_keys_and_csv_one_row_a_level(tmp_path, capsys):
    with steplaw_in_thread((12.94, 0.2451)) as (engine,):
        base = ["bench", "--backend", f"{engine.url},cap=16", "--engine-slots", "16", "--max-tokens", "16"]
        base += ["--percentiles", ",".join(f"{q:g}" for q in PERCENTILES), "--out", str(tmp_path / "run")]
        ladder = ["--streams", "1,2", "--window", "2", "--warmup", "0.2"]
        assert main([*base, *ladder, "--rate", "5", "--duration", "1.5", "--save-requests"]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "run"), "--format", "vllm", "--out", str(tmp_path / "vllm")]) == 0
    results = {path.name: json.loads(path.read_text()) for path in sorted((tmp_path / "vllm").glob("*.json"))}
    assert len(results) == 3, "two ladder levels and one rate"
    for name, result in results.items():
        assert list(result) == vllm_keys(lists=result["request_rate"] != "inf"), name
        assert result["endpoint_type"] == "openai-chat" and result["failed"] == 0 and result["completed"] > 0
        assert all(value >= 0 for key, value in result.items() if key.endswith("_ms")), "milliseconds"
    rate = next(r for r in results.values() if r["request_rate"] == 5.0)
    assert len(rate["latencies"]) == rate["num_prompts"] == rate["completed"]
    assert rate["mean_e2el_ms"] == pytest.approx(sum(rate["latencies"]) / len(rate["latencies"]) * 1000, rel=1e-4)
    assert {r["max_concurrency"] for r in results.values() if r["request_rate"] == "inf"} == {1, 2}
    assert main(["report", str(tmp_path / "run"), "--format", "csv", "--out", str(tmp_path / "csv")]) == 0
    with (tmp_path / "csv" / "bench.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [row["kind"] for row in rows] == ["ladder", "ladder", "rate"]
    assert list(rows[0])[1:] == [k for k in vllm_keys(lists=False)], "the scalar keys, in vLLM's order"


def test_file_names_follow_vllm_and_every_unfilled_field_is_explained():
    name = result_name("my run (a)", "inf", 16, "org/Model-7B", "20261204-120000")
    assert name == "my-run-a-infqps-concurrency16-Model-7B-20261204-120000.json"
    assert result_name("vllm", 2.5, None, "m", "d") == "vllm-2.5qps-m-d.json"
    assert set(FIELD_NOTES) <= set(vllm_keys(lists=True, detailed=True))


def test_detailed_files_carry_the_lists_save_detailed_keeps_one_entry_a_request(tmp_path, capsys):
    with steplaw_in_thread((12.94, 0.2451)) as (engine,):
        base = ["bench", "--backend", f"{engine.url},cap=16", "--engine-slots", "16", "--max-tokens", "16"]
        base += ["--percentiles", ",".join(f"{q:g}" for q in PERCENTILES), "--out", str(tmp_path / "run")]
        assert main([*base, "--rate", "5", "--duration", "1.5", "--save-requests"]) == 0
        assert main([*base[:-1], str(tmp_path / "bare"), "--rate", "5", "--duration", "0.5"]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "run"), "--format", "vllm", "--detailed", "--out", str(tmp_path / "v")]) == 0
    (result,) = [json.loads(path.read_text()) for path in (tmp_path / "v").glob("*.json")]
    assert list(result) == vllm_keys(lists=True, detailed=True)
    count = result["completed"]
    lists = FIXTURE["per_request_lists_in_order_with_save_detailed"]
    assert count > 0 and all(len(result[key]) == count for key in lists), "one entry a completed request"
    assert all(n > 0 for n in result["input_lens"]) and all(n == 16 for n in result["output_lens"])
    assert all(0 < ttft < 1 for ttft in result["ttfts"]), "seconds"
    assert all(len(gaps) == 15 and all(0 <= g < 1 for g in gaps) for gaps in result["itls"]), "15 gaps of 16 tokens"
    assert all(text.strip() for text in result["generated_texts"]) and result["errors"] == [""] * count
    assert result["start_times"] == sorted(result["start_times"])
    assert result["mean_ttft_ms"] == pytest.approx(sum(result["ttfts"]) / count * 1000, rel=1e-3)
    for args in (["--format", "csv", "--detailed"], ["--format", "vllm", "--detailed"]):
        run = tmp_path / ("bare" if args[1] == "vllm" else "run")
        assert main(["report", str(run), *args, "--out", str(tmp_path / "x")]) == 2
        assert "--detailed" in capsys.readouterr().err
