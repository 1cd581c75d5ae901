"""`fanout sources`: what was read and skipped, the passages a title would be given, exit 2 when nothing is
readable (pipeline/cli/sources.py)."""

from __future__ import annotations

import json

from pipeline.cli.main import main


def test_sources_lists_reads_skips_and_finds(tmp_path, capsys):
    guide = "# Guide\n\n## Install\n\nRun pip install fanout.\n\n## Use\n\nAsk for a book.\n"
    (tmp_path / "guide.md").write_text(guide)
    (tmp_path / "a.png").write_bytes(b"png")
    (tmp_path / "b.png").write_bytes(b"png")
    (tmp_path / "old.txt").write_bytes(b"\xff\xfeold")
    assert main(["sources", str(tmp_path), "--query", "Installing it"]) == 0
    out, err = capsys.readouterr()
    assert "guide.md: markdown, 2 passages" in out and "1 files, 2 passages, 3 skipped; indexed in" in out
    assert "[1] " in out and "guide.md, Guide > Install" in out.split("[1] ")[1].splitlines()[0]
    assert "skipped 2 files of kinds fanout does not read (.png 2)" in err and "old.txt: not UTF-8" in err
    assert main(["sources", str(tmp_path), "--json", "--query", "Installing it", "--top", "1"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (
        shown["reused"] and shown["passages"] == 2 and shown["hits"][0]["place"].endswith("guide.md, Guide > Install")
    )


def test_nothing_readable_exits_2(tmp_path, capsys):
    (tmp_path / "x.bin").write_bytes(b"\x00")
    assert main(["sources", str(tmp_path)]) == 2
    assert "no readable source in" in capsys.readouterr().err


def test_a_book_with_no_readable_source_is_refused_before_its_run_folder(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    out = tmp_path / "run"
    asked = ["book", "Knives", "--sources", str(tmp_path / "empty"), "--backend", "http://127.0.0.1:9/v1", "--out"]
    assert main([*asked, str(out)]) == 2
    assert "no source file in" in capsys.readouterr().err and not out.exists()
    assert main(["plan", "Knives", "--sources", str(tmp_path / "gone"), "--out", str(out)]) == 2
    assert "no such file or folder" in capsys.readouterr().err and not out.exists()
