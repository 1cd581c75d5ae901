"""The journal: sections.jsonl, one SectionResult a line, appended and flushed to disk as each lands.

A kill or a full disk can leave at most a torn last line; reading ignores it and `open_for_append` cuts it off, so the
journal stays consistent. For a section written more than once (a failure, then a success on resume) the
last line wins.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ValidationError

from pipeline.cpu import Stage, charged
from pipeline.files import naming
from pipeline.records import SectionResult


def read_journal(path: Path) -> dict[str, SectionResult]:
    """Latest result per section id; a torn or garbled line is skipped."""
    results: dict[str, SectionResult] = {}
    if not path.exists():
        return results
    with path.open("rb") as handle:
        for line in handle:
            if not line.endswith(b"\n"):
                break  # torn tail from a kill mid-write
            try:
                result = SectionResult.model_validate_json(line)
            except ValidationError:
                continue
            results[result.id] = result
    return results


def cut_torn_tail(path: Path) -> None:
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as handle:
            handle.truncate(data.rfind(b"\n") + 1)


class Journal:
    def __init__(self, path: Path):
        self.path = path
        cut_torn_tail(path)
        self.handle = path.open("ab")

    @charged(Stage.JOURNALING)
    def append(self, result: SectionResult) -> None:
        # One write a line, flushed to the OS at once: a killed client loses nothing it journaled.
        # No fsync per line: it would stall the event loop, and so every stream, on each section.
        with naming(self.path):
            self.handle.write(result.model_dump_json().encode() + b"\n")
            self.handle.flush()

    def close(self) -> None:
        with naming(self.path):
            try:
                self.handle.flush()
                os.fsync(self.handle.fileno())
            finally:
                self.handle.close()
