"""The embedded engine: a real llama-server process with a small instruct model, started by the tool.

Takes EngineSettings; gives a Backend once /health answers. The server runs in its own process group, is
told to die with its parent (PR_SET_PDEATHSIG, so even a SIGKILLed client leaves no orphan), and is
stopped with SIGTERM then SIGKILL after a grace period, from `stop()`, the context manager or atexit; stopping
also removes its temporary slots folder and the temporary log it made when given no log path.
Binaries and model come from pipeline.backends.embedded.install (built once, cached).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import BinaryIO

from pipeline.backends.embedded.install import EngineAssets, ensure_installed
from pipeline.config import EngineSettings
from pipeline.errors import FanoutError
from pipeline.records import Backend

PR_SET_PDEATHSIG = 1
HEALTH_TIMEOUT_S = 120.0
STOP_GRACE_S = 5.0
# llama-server keeps each slot's last prompt; with a RAM prompt cache it also saves a slot's prompt when the
# slot is given another request and loads the best match into a slot a new request lands on, so a chapter's
# sections reuse the book's shared opening on any slot. The demo book (2x3x4, 2 cores): 0.45 and 0.47 of
# prompt tokens from the cache without it, 0.49 and 0.54 with it (stats.json prompt_cache). 512 MiB holds
# about 20,000 tokens of SmolLM2-135M's cache. No endpoint empties that cache; `--slot-save-path` (a temporary
# folder) lets the bench erase every slot's (`POST /slots/{id}?action=erase`), and a bench that empties the
# cache between levels starts the engine without the RAM cache.
PROMPT_CACHE_MIB = 512


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def port_free(host: str, port: int) -> bool:
    """Can a server listen on this port now (with SO_REUSEADDR, as llama-server binds)?"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


def _die_with_parent() -> None:
    """Runs in the child before exec: the kernel sends SIGKILL when the parent dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class EmbeddedEngine:
    def __init__(
        self, settings: EngineSettings | None = None, assets: EngineAssets | None = None, log_path: Path | None = None
    ):
        self.settings = settings or EngineSettings()
        self.assets = assets or ensure_installed()
        self.log_path = log_path
        self.own_log = False  # the log is a temporary file this engine made (no log_path given): removed at stop
        self.process: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self.slot_dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def root_url(self) -> str:
        return f"http://{self.settings.host}:{self.port}"

    @property
    def backend(self) -> Backend:
        return Backend(
            name="embedded", base_url=self.root_url + "/v1", model=self.assets.model_name, cap=self.settings.slots
        )

    def command(self, port: int) -> list[str]:
        s = self.settings
        return [
            str(self.assets.server),
            "-m",
            str(self.assets.model),
            "--alias",
            self.assets.model_name,
            "-np",
            str(s.slots),
            "-c",
            str(s.slots * s.ctx_per_slot),
            "--host",
            s.host,
            "--port",
            str(port),
            "-t",
            str(s.threads),
            "--metrics",
            "--no-webui",
            "--cache-ram",
            str(PROMPT_CACHE_MIB if s.ram_prompt_cache else 0),
            *(["--slot-save-path", self.slot_dir.name] if self.slot_dir is not None else []),
        ]

    def start(self) -> Backend:
        """Launch the server and wait until it answers."""
        if self.process is None:
            self.launch()
            self.wait_ready()
        return self.backend

    def launch(self) -> None:
        """Start the process, without waiting for it. Call it from a thread that lives as long as the server
        should: PR_SET_PDEATHSIG fires when the launching *thread* exits, so a server launched from a pool
        worker thread is killed when the pool retires that thread."""
        if self.process is not None:
            return
        self.slot_dir = tempfile.TemporaryDirectory(prefix="fanout-slots-")
        self._spawn(self.settings.port or free_port(self.settings.host))
        atexit.register(self.stop)

    def relaunch(self) -> None:
        """Start the server again after it died (same thread rule as `launch`): on its old port when that
        is free, else on a new one (`backend` then names it)."""
        dead, self.process = self.process, None
        if dead is not None:
            dead.wait()
        port = self.port if self.port is not None and port_free(self.settings.host, self.port) else None
        self._spawn(port or free_port(self.settings.host))

    def _spawn(self, port: int) -> None:
        self.port = port
        log = self._open_log()
        self.process = subprocess.Popen(
            self.command(self.port),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        log.close()

    def wait_ready(self) -> None:
        """Block until /health answers (any thread); a server that dies or never answers is stopped."""
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise

    def _open_log(self) -> BinaryIO:
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
            os.close(handle)
            self.log_path, self.own_log = Path(name), True
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        return self.log_path.open("ab")

    def _wait_healthy(self) -> None:
        process = self.process
        assert process is not None, "_wait_healthy runs after start() launched the process"
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise FanoutError(f"llama-server exited with {process.returncode}: {self._log_tail()}")
            try:
                with urllib.request.urlopen(self.root_url + "/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        raise FanoutError(f"llama-server did not become healthy within {HEALTH_TIMEOUT_S:.0f} s")

    def _log_tail(self) -> str:
        if self.log_path is None:
            return "(no log)"
        try:
            return " | ".join(self.log_path.read_text(errors="replace").strip().splitlines()[-3:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            self._stop(process)
        if self.slot_dir is not None:
            self.slot_dir.cleanup()
            self.slot_dir = None
        if self.own_log and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
            self.log_path, self.own_log = None, False

    def _stop(self, process: subprocess.Popen[bytes]) -> None:
        self._signal_group(process, signal.SIGTERM)
        try:
            process.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self._signal_group(process, signal.SIGKILL)
            process.wait()

    @staticmethod
    def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass

    def __enter__(self) -> EmbeddedEngine:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
