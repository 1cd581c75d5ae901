"""Files a run writes: one atomic write, one way to name an output folder.

Takes a path and text (or a block that writes a temporary path); a reader sees the old file or the new one,
never half of one. `output_path(label)` names a fresh folder (or record file) under outputs/ as
`<slug>-<time>`.
"""

from __future__ import annotations

import os
import re
import uuid
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

OUTPUTS = Path("outputs")


@contextmanager
def atomic_target(out: Path):
    """Yield a temporary path next to `out`; rename it onto `out` only if the block succeeds."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        yield tmp
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


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
