"""The embedded engine supervised: the real llama-server that `fanout book` started is SIGKILLed mid-book.
Killed once, it is started again and the book completes (stats.json: engine_restarts 1); killed a second
time, the job ends in one line, exit 1, with what was written kept. Both books run at once."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.environ import isolated_env

pytestmark = pytest.mark.engine
FANOUT = [sys.executable, "-m", "pipeline"]


def engine_pid(parent: int) -> int | None:
    """The llama-server whose parent is `parent`, if one runs."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)
            name = stat.read_text().split("(", 1)[1].rsplit(")", 1)[0]
        except OSError:
            continue
        if name == "llama-server" and int(fields[1].split()[1]) == parent:
            return int(stat.parent.name)
    return None


def requests_logged(out: Path) -> int:
    path = out / "requests.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def kill_engine(process: subprocess.Popen, out: Path, *, after_requests: int, timeout: float = 240) -> int:
    """SIGKILL the run's engine once `after_requests` requests are logged; returns the pid killed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        pid = engine_pid(process.pid)
        if pid is not None and requests_logged(out) >= after_requests:
            os.kill(pid, signal.SIGKILL)
            return pid
        time.sleep(0.1)
    _, stderr = process.communicate(timeout=60) if process.poll() is not None else ("", "(still running)")
    raise AssertionError(
        f"no engine to kill after {after_requests} requests (exit {process.poll()}) in "
        f"{shlex.join(map(str, process.args))}; its stderr ends: {stderr[-1500:]}"
    )


@pytest.fixture(scope="module")
def killed_books(tmp_path_factory):
    root = tmp_path_factory.mktemp("engine-kill")
    env = isolated_env(FANOUT_THREADS="1")
    runs = {}
    for name in ("once", "twice"):
        out = root / name
        argv = [*FANOUT, "book", "A short guide to keeping houseplants", "--shape", "1x1x2", "--words", "80",
                "--out", str(out), "--quiet", "--json", "--slots", "4"]  # fmt: skip
        runs[name] = (out, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    first = {name: kill_engine(process, out, after_requests=1) for name, (out, process) in runs.items()}
    out, twice = runs["twice"]
    deadline = time.monotonic() + 120
    while "answers again" not in (out / "run.log").read_text() and twice.poll() is None:
        assert time.monotonic() < deadline, "the engine was not started again"
        time.sleep(0.1)
    pid = engine_pid(twice.pid)
    if pid is not None:
        assert pid != first["twice"]
        os.kill(pid, signal.SIGKILL)
    return {name: (out, *process.communicate(timeout=600), process.returncode) for name, (out, process) in runs.items()}


def test_an_engine_killed_once_is_started_again_and_the_book_completes(killed_books):
    out, stdout, stderr, code = killed_books["once"]
    assert code == 0, stderr
    stats = json.loads((out / "stats.json").read_text())
    assert stats["complete"] and 1 <= stats["sections_ok"] == stats["sections"] <= 2 and stats["engine_restarts"] == 1
    assert "the embedded engine died" in (out / "run.log").read_text()


def test_an_engine_killed_twice_ends_the_job_in_one_line_with_what_was_written_kept(killed_books):
    out, stdout, stderr, code = killed_books["twice"]
    assert code == 1, stderr
    last = stderr.splitlines()[-1]
    # one error line: a backend's last failure named inside it may hold the word ("b2: stream_error: ...")
    errors = [line for line in stderr.splitlines() if line.startswith("fanout: error:")]
    assert last.startswith("fanout: error: the embedded engine died again") and errors == [last], stderr
    assert f"kept in {out} (--resume {out} finishes the book)" in last
    assert "Traceback" not in stderr and not (out / "stats.json").exists()
