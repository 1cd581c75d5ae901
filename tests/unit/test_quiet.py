"""--quiet as the terminal shows it: a command run with it that fails prints its warnings and its one error line,
none of the run's INFO lines, while run.log keeps every line; without it the INFO lines reach the terminal. Each
command's stage is a FAKE (tests/fakes/fake_stage.py) that logs and fails at once."""

from __future__ import annotations

import pytest

import pipeline.bench.studies.frontier
import pipeline.bench.studies.quality
import pipeline.book.run
from pipeline.cli import main
from tests.fakes.fake_stage import ERROR, INFO_LINE, WARNING_LINE, failing_stage

UNREACHABLE = ["--backend", "http://127.0.0.1:9/v1"]
# each command with --quiet: the module and name of its stage, and its arguments before --out
COMMANDS = {
    "book": (pipeline.book.run, "book", ["book", "A handbook on bees", "--shape", "1x1x2"]),
    "plan": (pipeline.book.run, "plan", ["plan", "A handbook on bees", "--shape", "1x1x2"]),
    "repair": (pipeline.book.run, "book", ["repair", "{run}"]),
    "quality": (pipeline.bench.studies.quality, "run_quality", ["quality", "--shape", "1x1x2"]),
    "frontier": (pipeline.bench.studies.frontier, "run_frontier", ["frontier", "--shape", "1x1x2"]),
}


def run_failing(command: str, tmp_path, monkeypatch, *flags: str) -> int:
    module, name, args = COMMANDS[command]
    run = tmp_path / "run"
    monkeypatch.setattr(module, name, failing_stage(run))
    out = [] if command == "repair" else ["--out", str(run)]
    return main([*[arg.format(run=run) for arg in args], *out, *UNREACHABLE, *flags])


@pytest.mark.parametrize("command", COMMANDS)
def test_quiet_leaves_the_terminal_warnings_and_errors_and_run_log_every_line(command, tmp_path, monkeypatch, capsys):
    assert run_failing(command, tmp_path, monkeypatch, "--quiet") == 1
    assert capsys.readouterr().err == f"fanout: {WARNING_LINE}\nfanout: error: {ERROR}\n"
    logged = (tmp_path / "run" / "run.log").read_text()
    assert f"INFO {INFO_LINE}" in logged and f"WARNING {WARNING_LINE}" in logged


def test_without_quiet_the_info_lines_reach_the_terminal(tmp_path, monkeypatch, capsys):
    assert run_failing("book", tmp_path, monkeypatch) == 1
    assert capsys.readouterr().err.splitlines()[:2] == [f"fanout: {INFO_LINE}", f"fanout: {WARNING_LINE}"]


def test_verbose_wins_over_quiet(tmp_path, monkeypatch, capsys):
    assert run_failing("plan", tmp_path, monkeypatch, "--quiet") == 1 and INFO_LINE not in capsys.readouterr().err
    module, name, args = COMMANDS["plan"]
    monkeypatch.setattr(module, name, failing_stage(tmp_path / "again"))
    assert main(["-v", *args, "--out", str(tmp_path / "again"), *UNREACHABLE, "--quiet"]) == 1
    assert f"fanout: {INFO_LINE}" in capsys.readouterr().err
