"""The run folder: the files of one book run, made new or opened to resume, what a stopped run leaves in it, and
run.log; a run works in it holding its writer lock (working_in).

A new folder gets spec.json at once (and outline.json and outline.md when a person gave the outline); a resume
reads spec.json back. `read_saved` is what every run starts from: the saved outline (outline.json, None before
planning saved one) and the journal (sections.jsonl: every section written so far), empty in a new folder, so a
new run and a resume go through the same stages (pipeline/book/run.py).
"""

from __future__ import annotations

import logging
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from pipeline.backends.pool import FleetUnavailable
from pipeline.book.outlinefile import outline_markdown
from pipeline.errors import UsageError, fanout_error_in
from pipeline.files import OUTPUTS, only_writer, output_path, write_atomic
from pipeline.journal import read_journal
from pipeline.records import BookSpec, Outline, SectionResult


class RunFolder:
    """The files of one run."""

    def __init__(self, path: Path):
        self.path = path
        self.spec = path / "spec.json"
        self.outline = path / "outline.json"
        self.outline_md = path / "outline.md"  # the same outline for a person to edit (book/outlinefile.py)
        self.journal = path / "sections.jsonl"
        self.book = path / "book.md"
        self.pdf = path / "book.pdf"
        self.html = path / "book.html"
        self.epub = path / "book.epub"
        self.stats = path / "stats.json"
        self.audit = path / "audit.json"
        self.log = path / "run.log"
        self.engine_log = path / "llama-server.log"


def new_run_folder(spec: BookSpec, out: Path | None, root: Path = OUTPUTS) -> RunFolder:
    path = out or output_path(spec.prompt, root=root)
    if path.exists() and any(path.iterdir()):
        raise UsageError(f"setting 'out' {path} is not empty (use setting 'resume' {path} to continue a run there)")
    path.mkdir(parents=True, exist_ok=True)
    folder = RunFolder(path)
    write_atomic(folder.spec, spec.model_dump_json(indent=2))
    return folder


def load_run_folder(path: Path) -> tuple[RunFolder, BookSpec]:
    folder = RunFolder(path)
    try:
        return folder, BookSpec.model_validate_json(folder.spec.read_text())
    except (OSError, ValidationError, ValueError):
        raise UsageError(f"setting 'resume' {path}: not a fanout run folder (no valid spec.json)") from None


def load_outline(folder: RunFolder) -> Outline | None:
    if not folder.outline.exists():
        return None
    try:
        return Outline.model_validate_json(folder.outline.read_text())
    except (ValidationError, ValueError):
        raise UsageError(f"{folder.outline}: damaged outline; start a new run") from None


def save_outline(folder: RunFolder, outline: Outline, prompt: str) -> None:
    """outline.json, and outline.md for a person to read or edit (book/outlinefile.py)."""
    write_atomic(folder.outline, outline.model_dump_json(indent=2))
    write_atomic(folder.outline_md, outline_markdown(outline, prompt))


@dataclass(frozen=True)
class Saved:
    """What a run folder holds when a run starts: the outline (None before one was saved) and the journal, the
    latest result of every section written so far (empty in a new folder)."""

    outline: Outline | None
    journal: dict[str, SectionResult]


def read_saved(folder: RunFolder) -> Saved:
    return Saved(outline=load_outline(folder), journal=read_journal(folder.journal))


def stopped_note(path: Path) -> str:
    """What a job stopped in `path` leaves: its kept sections and how to finish it, or that nothing is kept."""
    folder = RunFolder(path)
    try:
        spec = BookSpec.model_validate_json(folder.spec.read_text())
    except (OSError, ValidationError, ValueError):
        return "nothing was kept"
    return kept_note(folder, spec)


def kept_note(folder: RunFolder, spec: BookSpec) -> str:
    """What a job that stopped leaves: its written sections, and how to finish it."""
    written = sum(result.ok for result in read_journal(folder.journal).values())
    return (
        f"{written} of {spec.section_count} sections are written and kept in {folder.path} "
        f"(setting 'resume' {folder.path} finishes the book)"
    )


class RunLogHandler(logging.FileHandler):
    """run.log: on a full disk (or any OSError) it stops writing, without logging's traceback on stderr; the
    run's next write to the journal or an output ends the run in one line."""

    def handleError(self, record: logging.LogRecord) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            logging.getLogger("fanout").removeHandler(self)
            stream, self.stream = self.stream, None
            with suppress(OSError):
                if stream is not None:
                    stream.close()
            return
        super().handleError(record)


def attach_run_log(folder: RunFolder) -> logging.Handler:
    handler = RunLogHandler(folder.log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logging.getLogger("fanout").addHandler(handler)
    return handler


@contextmanager
def logged_to(folder: RunFolder) -> Iterator[None]:
    """The `fanout` log goes to the folder's run.log too while the block runs."""
    handler = attach_run_log(folder)
    try:
        yield
    finally:
        logging.getLogger("fanout").removeHandler(handler)
        handler.close()


@contextmanager
def working_in(folder: RunFolder, *, new: bool) -> Iterator[None]:
    """A run working in `folder`: run.log beside the terminal, no second writer at once; refused before any work
    (an unreachable backend, a wrong model), it leaves no `new` folder behind."""
    with logged_to(folder):
        try:
            with only_writer(folder.path):
                yield
        except UsageError:
            if new:
                shutil.rmtree(folder.path, ignore_errors=True)
            raise


@contextmanager
def kept_when_stopped(folder: RunFolder, spec: BookSpec) -> Iterator[None]:
    """A fleet that stopped answering ends the run in one line that says what is kept (kept_note)."""
    try:
        yield
    except (FleetUnavailable, BaseExceptionGroup) as caught:
        if not isinstance(stopped := fanout_error_in(caught), FleetUnavailable):
            raise
        raise FleetUnavailable(f"{stopped}; {kept_note(folder, spec)}") from None
