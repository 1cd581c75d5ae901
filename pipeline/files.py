"""Files a run writes: one atomic write, one way to name an output folder.

Takes a path and text (or a block that writes a temporary path); a reader sees the old file or the new one,
never half of one; an OSError names the file the user knows (`naming`). One process writes a run folder at a
time (`only_writer`). `output_path(label)` names a fresh folder (or record file) under outputs/ as
`<slug>-<time>`.
"""

from __future__ import annotations

import fcntl
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from pipeline.errors import UsageError

OUTPUTS = Path("outputs")
CACHE_SETTING = "FANOUT_CACHE"
WRITER_LOCK = ".fanout.lock"  # in a run folder: held by the one process writing it


@contextmanager
def naming(path: Path, *, instead_of: Path | None = None) -> Iterator[None]:
    """An OSError raised in the block names `path`: a write to an open handle names no file, and a write to
    a temporary file (`instead_of`) is a write to `path` for the user."""
    try:
        yield
    except OSError as error:
        if error.filename is None or (instead_of is not None and error.filename in (instead_of, str(instead_of))):
            raise OSError(error.errno, error.strerror, str(path)) from error
        raise


@contextmanager
def atomic_target(out: Path) -> Iterator[Path]:
    """Yield a temporary path next to `out`; rename it onto `out` only if the block succeeds."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with naming(out, instead_of=tmp):
            yield tmp
            os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


def cache_dir() -> Path:
    """fanout's cache: the engine, the model, source indexes (FANOUT_CACHE, else ~/.cache/fanout)."""
    return Path(os.environ.get(CACHE_SETTING) or Path.home() / ".cache" / "fanout")


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` atomically (through `atomic_target`)."""
    with atomic_target(path) as tmp:
        tmp.write_text(text)


def slug(text: str, limit: int | None = 40, fallback: str = "book") -> str:
    words = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return words[:limit].rstrip("-") or fallback


def output_path(label: str, suffix: str = "", root: Path = OUTPUTS, limit: int | None = 40) -> Path:
    """The one name for a fresh run folder or record: `root/<slug of label>-<YYYYmmdd-HHMMSS><suffix>`."""
    return root / f"{slug(label, limit)}-{datetime.now().strftime('%Y%m%d-%H%M%S')}{suffix}"


@contextmanager
def only_writer(folder: Path) -> Iterator[None]:
    """Hold the run folder's writer lock (an fcntl lock on WRITER_LOCK) for the block; a UsageError at once
    when another process holds it. The kernel drops the lock of a process that dies, so a lock file left
    behind never refuses a resume."""
    with (folder / WRITER_LOCK).open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"{folder} is being written by another fanout; wait for it to end, or stop it") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
