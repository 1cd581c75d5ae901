"""The journal: sections.jsonl, one SectionResult a line, appended and flushed to disk as each lands.

A kill or a full disk can leave at most a torn last line; reading ignores it and `open_for_append` cuts it off, so the
journal stays consistent. For a section written more than once (a failure, then a success on resume) the
last line wins.

The source passages a section was given are kept once a run, in passages.jsonl beside it (PassageFile, one Passage a
line, written before any line that names it); a journal line names its passages by number ("passages": [12, 40];
no such field for a section given none), and reading puts them back in SectionResult.passages. A journal of an
earlier version reads as it did: its `given` field (the passages inline, or none) is read as `passages`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from pydantic import ValidationError

from pipeline.cpu import Stage, charged
from pipeline.files import naming
from pipeline.records import SectionResult
from pipeline.records.sources import Passage

PASSAGES_FILE = "passages.jsonl"


def read_passages(path: Path) -> dict[int, Passage]:
    """passages.jsonl: each passage by its number; a torn or garbled line is skipped."""
    found: dict[int, Passage] = {}
    if not path.exists():
        return found
    for line in path.read_bytes().split(b"\n"):
        try:
            row = json.loads(line)
            passage = Passage(**{**row, "headings": tuple(row["headings"])})
        except (ValueError, TypeError, KeyError):
            continue
        found[passage.number] = passage
    return found


class PassageFile:
    """passages.jsonl of one run folder: each passage written the first time a section is given it (one instance a
    folder and process: `passage_file`, shared by the journal and the request log)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        cut_torn_tail(path)
        self.kept = set(read_passages(path))

    def keep(self, passages: Sequence[Passage]) -> list[int]:
        """Write the passages not written yet (all of them where the file is gone: a folder made anew); their numbers,
        in order."""
        if passages and not self.path.exists():
            self.kept.clear()
        fresh = {p.number: p for p in passages if p.number not in self.kept}
        if fresh:
            with naming(self.path), self.path.open("ab") as handle:
                handle.write(b"".join(json.dumps(dataclasses.asdict(p)).encode() + b"\n" for p in fresh.values()))
            self.kept |= set(fresh)
        return [passage.number for passage in passages]


def passage_file(folder: Path) -> PassageFile:
    return _passage_file(folder.resolve())


@cache
def _passage_file(folder: Path) -> PassageFile:
    return PassageFile(folder / PASSAGES_FILE)


def journal_line(result: SectionResult, numbers: list[int]) -> bytes:
    """The result as one JSON line, its passages named by number."""
    text = result.model_dump_json(exclude={"passages"})
    if numbers:
        text = f'{text[:-1]},"passages":{json.dumps(numbers)}}}'
    return text.encode() + b"\n"


def parsed_line(
    line: bytes, passages: dict[int, Passage] | None, folder: Path
) -> tuple[SectionResult, dict[int, Passage] | None]:
    """A journal line's result, its passages put back from passages.jsonl (read once, when a line first names one)."""
    if b'"passages":' not in line:
        return SectionResult.model_validate_json(line), passages
    row = json.loads(line)
    numbers = row.pop("passages", None)
    if numbers is None:  # the words were in a text, not the key
        return SectionResult.model_validate(row), passages
    passages = read_passages(folder / PASSAGES_FILE) if passages is None else passages
    given = [passages[number] for number in numbers if number in passages]
    return SectionResult.model_validate({**row, "passages": given}), passages


def read_journal(path: Path) -> dict[str, SectionResult]:
    """Latest result per section id; a torn or garbled line is skipped."""
    results: dict[str, SectionResult] = {}
    if not path.exists():
        return results
    passages: dict[int, Passage] | None = None
    with path.open("rb") as handle:
        for line in handle:
            if not line.endswith(b"\n"):
                break  # torn tail from a kill mid-write
            try:
                result, passages = parsed_line(line, passages, path.parent)
            except (ValidationError, ValueError, KeyError, TypeError):
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
        self.passages = passage_file(path.parent)
        self.handle = path.open("ab")

    @charged(Stage.JOURNALING)
    def append(self, result: SectionResult) -> None:
        # One write a line, flushed to the OS at once: a killed client loses nothing it journaled.
        # No fsync per line: it would stall the event loop, and so every stream, on each section.
        numbers = self.passages.keep(result.passages)  # on disk before the line that names them
        with naming(self.path):
            self.handle.write(journal_line(result, numbers))
            self.handle.flush()

    def close(self) -> None:
        with naming(self.path):
            try:
                self.handle.flush()
                os.fsync(self.handle.fileno())
            finally:
                self.handle.close()
