"""The engine's set-up commands (pip, cmake and the compilers cmake starts) in a process group of their own, ended
with fanout.

Ended alone, `cmake --build` leaves make and the compilers building. So each command runs under a watchdog, this
module run as `python -m pipeline.backends.embedded.buildgroup PARENT_PID COMMAND...`: the leader of a new session,
it starts the command in its own group and, the moment its parent is gone (fanout SIGKILLed, which no handler
sees), ends the whole group. fanout ends the group itself when it is stopped: SIGINT or SIGTERM raise in the thread
that waits (`run_in_group`), or the event loop cancels the set-up and calls `stop_all` from the loop's thread. A
group is sent SIGTERM, then SIGKILL after GRACE_S.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import IO

POLL_S = 0.2  # how often the watchdog looks for its parent, and the waiting thread for a stop
GRACE_S = 1.0  # between SIGTERM and SIGKILL to the group

_running: set[subprocess.Popen[bytes]] = set()
_stopped: set[int] = set()  # the pids of the watchdogs `stop_all` ended
_lock = threading.Lock()


class Stopped(Exception):
    """The command's group was ended by `stop_all` (fanout is stopping)."""


def run_in_group(command: list[str], *, output: IO[str], environment: dict[str, str] | None = None) -> int:
    """Run `command` under the watchdog with stdout and stderr to `output` (and `environment`); its exit status.
    Stopped when `stop_all` ended it; any exception while waiting (KeyboardInterrupt included) ends the group
    first."""
    watchdog = [sys.executable, "-m", __name__, str(os.getpid()), *command]
    process = subprocess.Popen(
        watchdog,
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=subprocess.STDOUT,
        env=environment,
        start_new_session=True,
    )
    with _lock:
        _running.add(process)
    try:
        returncode = process.wait()
    except BaseException:
        end_group(process)
        raise
    finally:
        with _lock:
            _running.discard(process)
    with _lock:
        if process.pid in _stopped:
            _stopped.discard(process.pid)
            raise Stopped(" ".join(command[:2]))
    return returncode


def stop_all() -> None:
    """End every group still running (fanout is stopping: the thread waiting on one then raises Stopped)."""
    with _lock:
        running = list(_running)
        _stopped.update(process.pid for process in running)
    for process in running:
        end_group(process)


def end_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process's group, SIGKILL after GRACE_S to what is left of it."""
    signal_group(process.pid, signal.SIGTERM)
    try:
        process.wait(GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    signal_group(process.pid, signal.SIGKILL)
    process.wait()


def signal_group(group: int, sig: signal.Signals) -> None:
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        pass


def watch(parent: int, command: list[str]) -> int:
    """The watchdog: run `command`, and end the group (itself with it) once `parent` is no longer its parent."""
    child = subprocess.Popen(command)
    while True:
        try:
            return child.wait(POLL_S)
        except subprocess.TimeoutExpired:
            if os.getppid() != parent:
                os.killpg(0, signal.SIGKILL)


if __name__ == "__main__":
    raise SystemExit(watch(int(sys.argv[1]), sys.argv[2:]))
