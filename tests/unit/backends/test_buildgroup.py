"""The engine's set-up commands run in a process group of their own (pipeline/backends/embedded/buildgroup.py),
with real processes: a stopped run ends the whole tree, and a SIGKILLed client leaves none of it behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from pipeline.backends.embedded.buildgroup import Stopped, run_in_group, stop_all

ROOT = Path(__file__).resolve().parents[3]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}/stat").exists() else "X"
    return state not in {"Z", "X"}


def wait_for(path: Path, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.05)
    return int(path.read_text())


def grandchild(pid_file: Path) -> list[str]:
    """A shell that starts a long sleep of its own, as cmake starts make and the compilers."""
    return ["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"]


def test_a_stopped_run_ends_the_whole_tree_within_two_seconds(tmp_path):
    pid_file = tmp_path / "sleep.pid"
    raised: list[BaseException] = []

    def waiting() -> None:
        with (tmp_path / "out.log").open("w") as output:
            try:
                run_in_group(grandchild(pid_file), output=output)
            except Stopped as stopped:
                raised.append(stopped)

    thread = threading.Thread(target=waiting)
    thread.start()
    sleeper = wait_for(pid_file)
    started = time.monotonic()
    stop_all()
    thread.join(5)
    assert time.monotonic() - started < 2 and not thread.is_alive()
    assert raised, "the waiting thread is told its command was stopped"
    assert not alive(sleeper)


def test_a_sigkilled_client_leaves_no_process_of_its_command(tmp_path):
    pid_file = tmp_path / "sleep.pid"
    client_code = (
        "import sys; from pipeline.backends.embedded.buildgroup import run_in_group; "
        f"run_in_group({grandchild(pid_file)!r}, output=sys.stdout)"
    )
    client = subprocess.Popen([sys.executable, "-c", client_code], cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        sleeper = wait_for(pid_file)
        client.send_signal(signal.SIGKILL)
        client.wait()
        deadline = time.monotonic() + 2
        while alive(sleeper) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(sleeper), "the watchdog ends its group once its parent is gone"
    finally:
        client.kill()


def test_the_exit_status_of_a_command_that_ends_on_its_own(tmp_path):
    with (tmp_path / "out.log").open("w") as output:
        assert run_in_group(["sh", "-c", "echo said; exit 3"], output=output) == 3
    assert (tmp_path / "out.log").read_text() == "said\n"


def test_stopping_with_nothing_running_ends_nothing_later(tmp_path):
    stop_all()
    with (tmp_path / "out.log").open("w") as output:
        assert run_in_group(["true"], output=output) == 0, "a command started after a stop is not taken as stopped"
