"""Where the CPU went (pipeline/cpu.py): stages charged by the thread's CPU clock, nested ones only their own
time, the rest left to the event loop; a backend's server found by its port when it runs on this machine."""

from __future__ import annotations

import threading
import time

from pipeline.cpu import EVENT_LOOP, CpuMeter, Stage, charged, cpu_use, stage
from tests.fakes.fake_steplaw import steplaw_in_thread, steplaw_process


def spin(cpu_seconds: float) -> None:
    """Burn this much of the thread's CPU (not wall) time."""
    until = time.thread_time() + cpu_seconds
    while time.thread_time() < until:
        pass


def test_a_nested_stage_is_charged_its_own_time_and_the_outer_the_rest():
    meter = CpuMeter({})
    before = meter.snapshot()
    with stage(Stage.PLANNING_CHECKS):
        spin(0.02)
        with stage(Stage.EMBEDDINGS):
            spin(0.12)
        spin(0.02)
    use = cpu_use(before, meter.snapshot())
    checks, embeddings = use.by_stage[Stage.PLANNING_CHECKS], use.by_stage[Stage.EMBEDDINGS]
    assert embeddings >= 0.12 and 0.04 <= checks < embeddings, "each charged only its own CPU"
    assert use.by_stage[EVENT_LOOP] >= 0.0 and sum(use.by_stage.values()) >= use.client - 0.001, "all CPU is told"


def test_a_stage_in_a_worker_thread_is_charged_to_that_thread():
    meter = CpuMeter({})
    before = meter.snapshot()
    worker = threading.Thread(target=charged(Stage.SECTION_SCORING)(spin), args=(0.1,))
    worker.start()
    worker.join()
    assert cpu_use(before, meter.snapshot()).by_stage[Stage.SECTION_SCORING] >= 0.1


def test_backends_one_process_serves_are_read_once():
    with steplaw_process(2) as urls:
        meter = CpuMeter({"b0": urls[0], "b1": urls[1]})
        use = cpu_use(meter.snapshot(), meter.snapshot())
    assert list(use.backends) == ["b0, b1"]


def test_a_local_backend_server_is_read_and_one_inside_the_client_or_elsewhere_is_not():
    with steplaw_process(1) as urls, steplaw_in_thread((12.94, 0.2451)) as inside:
        backends = {"own process": urls[0], "in the client": inside[0].url, "elsewhere": "http://10.1.2.3:8000/v1"}
        meter = CpuMeter(backends)
        use = cpu_use(meter.snapshot(), meter.snapshot())
    assert use.backends["own process"] is not None and use.backends["own process"] >= 0.0
    assert use.backends["in the client"] is None and use.backends["elsewhere"] is None
