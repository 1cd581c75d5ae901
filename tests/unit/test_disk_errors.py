"""A full disk (or a quota, a read-only file system, a permission) as the user sees it, without root: the
journal and the request log name their file when a write to their open handle fails, a temporary file is
named as the file it stands for, the error is found inside a task group's exception group, the CLI ends in one
line with exit 1, and run.log stops quietly (the run's next write says what happened)."""

from __future__ import annotations

import errno
import logging

import pytest

from pipeline.book.folder import RunFolder, RunLogHandler, stopped_note
from pipeline.book.requestlog import RequestLog
from pipeline.cli import main
from pipeline.errors import disk_error_in, disk_words
from pipeline.files import atomic_target
from pipeline.journal import Journal

FULL = OSError(errno.ENOSPC, "No space left on device")


class FullHandle:
    """A FAKE open file on a full disk: every write and flush raises ENOSPC, with no file name (as the OS's)."""

    def write(self, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def fileno(self) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def close(self) -> None:  # a buffered file flushes as it closes
        raise OSError(errno.ENOSPC, "No space left on device")


def test_the_journal_and_the_request_log_name_their_file(tmp_path):
    journal = Journal(tmp_path / "sections.jsonl")
    journal.handle.close()
    journal.handle = FullHandle()  # type: ignore[assignment]
    with pytest.raises(OSError) as raised:
        journal.close()
    assert raised.value.filename == str(tmp_path / "sections.jsonl") and raised.value.errno == errno.ENOSPC
    log = RequestLog(tmp_path)
    log.handle.close()
    log.handle = FullHandle()  # type: ignore[assignment]
    with pytest.raises(OSError) as raised:
        log.close()
    assert raised.value.filename == str(tmp_path / "requests.jsonl")


def test_a_request_log_cut_mid_line_is_cut_back_to_whole_lines_when_opened_again(tmp_path):
    (tmp_path / "requests.jsonl").write_text('{"kind": "plan"}\n{"kind": "sec')
    RequestLog(tmp_path).close()
    assert (tmp_path / "requests.jsonl").read_text() == '{"kind": "plan"}\n'


def test_a_temporary_file_is_named_as_the_file_it_stands_for(tmp_path):
    with pytest.raises(OSError) as raised, atomic_target(tmp_path / "book.pdf") as tmp:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp))
    assert raised.value.filename == str(tmp_path / "book.pdf")
    assert list(tmp_path.iterdir()) == [], "the temporary file is removed"


def test_the_disk_error_is_found_in_a_group_or_behind_another_error():
    named = OSError(errno.EDQUOT, "Disk quota exceeded", "/runs/book.md")
    assert disk_error_in(ExceptionGroup("tasks", [ValueError("other"), named])) is named
    try:
        try:
            raise named
        except OSError:
            raise RuntimeError("while writing") from None
    except RuntimeError as outer:
        outer.__cause__ = named
        assert disk_error_in(outer) is named
    assert disk_error_in(OSError(errno.ECONNREFUSED, "refused")) is None
    assert disk_words(named) == "disk quota exceeded writing /runs/book.md"


def test_the_cli_ends_a_full_disk_in_one_line_with_exit_1(tmp_path, monkeypatch, capsys):
    import pipeline.typeset.book

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out" / "book.pdf"))

    monkeypatch.setattr(pipeline.typeset.book, "typeset_book", full)
    (tmp_path / "book.md").write_text("# A book\n")
    assert main(["typeset", str(tmp_path / "book.md"), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err == f"fanout: error: no space left on device writing {tmp_path / 'out' / 'book.pdf'}\n"


def test_what_a_stopped_run_keeps_is_said_even_when_it_kept_nothing(tmp_path):
    assert stopped_note(tmp_path / "never-made") == "nothing was kept"


def test_run_log_stops_quietly_on_a_full_disk(tmp_path, capsys):
    handler = RunLogHandler(RunFolder(tmp_path).log)
    logger = logging.getLogger("fanout")
    logger.addHandler(handler)
    try:
        handler.stream = FullHandle()  # type: ignore[assignment]
        handler.handle(logging.LogRecord("fanout", logging.INFO, __file__, 1, "a line", None, None))
        assert handler not in logger.handlers and handler.stream is None
        assert "Traceback" not in capsys.readouterr().err
    finally:
        logger.removeHandler(handler)
