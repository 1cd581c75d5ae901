"""The bench's workers as Ray actors (`--workers N --ray`) on a real local Ray instance the run starts and
stops itself, against a FAKE step-law engine (tests/fakes/fake_steplaw.py) in its own process: the same
requests and tokens as process workers would send, every time put back on the driver's clock."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pipeline.bench.studies.ladder import bench
from pipeline.config import Settings
from pipeline.records import Backend
from pipeline.records.bench import BenchSpec
from tests.fakes.fake_steplaw import steplaw_process

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_a_ladder_and_an_open_loop_from_two_ray_actors_count_exactly(tmp_path):
    with steplaw_process(1, 2.0, 0.01, 64) as (url,):
        settings = Settings(backends=[Backend(name="e0", base_url=url, cap=16)], read_timeout=20)
        spec = BenchSpec(
            streams=[4], window_s=2.0, warmup_s=0.2, rates=[20.0], duration_s=2.0, max_tokens=16,
            engine_slots={"*": 64}, workers=2, ray=True, save_requests=True,
        )  # fmt: skip
        record = await bench(settings, spec)
    assert record.ray is not None and record.ray.nodes == 1 and len(record.ray.actors) == 2
    assert record.ray.worst_uncertainty_ms < 50 and record.ray.start_seconds > 0
    (level,) = record.series[0].levels
    assert level.total.requests_failed == 0 and level.total.tokens_match
    (point,) = record.sweeps[0].points
    assert point.completed == point.scheduled > 0 and point.failed == 0 and point.tokens_match
    numbers = [row["number"] for row in record.request_rows]
    assert len(numbers) == len(set(numbers)), "every request numbered apart across the actors"
    for row in record.request_rows:  # on the driver's clock: sent after the bench began, answered after sent
        assert 0 <= row["t_sent"] <= row["t_done"] and row["completion_tokens"] == 16


def test_ray_is_refused_in_one_line_when_the_cluster_cannot_be_reached():
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "bench", "--ray", "127.0.0.1:9", "--workers", "2", "--rate", "1",
         "--backend", "http://127.0.0.1:9/v1", "--engine-slots", "1"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 2 and "--ray 127.0.0.1:9" in done.stderr, done.stderr[-1500:]


async def test_two_ray_nodes_on_one_machine_each_run_an_actor():
    """ray.cluster_utils.Cluster: a head and a second node, as `ray start --head` and `ray start --address`
    give on two machines; SPREAD puts one actor on each, and both clocks are measured."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    address = cluster.address
    try:
        with steplaw_process(1, 2.0, 0.01, 64) as (url,):
            settings = Settings(backends=[Backend(name="e0", base_url=url, cap=16)], read_timeout=20)
            spec = BenchSpec(
                streams=[], rates=[10.0], duration_s=2.0, max_tokens=8, engine_slots={"*": 64}, workers=2,
                ray=True, ray_address=address,
            )  # fmt: skip
            record = await bench(settings, spec)
    finally:
        cluster.shutdown()
    assert record.ray is not None and record.ray.nodes == 2 and record.ray.address == address
    assert len({actor.node for actor in record.ray.actors}) == 2, "one actor on each node"
    (point,) = record.sweeps[0].points
    assert point.completed == point.scheduled > 0 and point.failed == 0 and point.tokens_match


def test_the_ceiling_bench_runs_its_workers_as_ray_actors_beside_processes():
    from pipeline.bench.studies import ceiling

    rows = ceiling.run_ceiling(
        ["ours"], [5.0], [12], [2], timing=ceiling.Timing(max_tokens=40, ramp_s=0.8, window_s=1.2),
        echo=lambda _line: None, runners=("processes", "ray"),
    )  # fmt: skip
    assert [r.case.runner for r in rows] == ["processes", "ray"]
    for row in rows:
        assert row.receiving == 12 and row.exact == row.completed > 0 and not row.mismatches and row.errors == 0
    assert "Ray actors take in" in ceiling.runner_ratios(rows)[0]
