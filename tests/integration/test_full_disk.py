"""A book whose run folder is on a full disk: on small tmpfs mounts (where the machine lets the suite mount, as
root), the run ends in one error line naming the file and what is kept, exit 1, no traceback, no torn line a
resume would misread; `--resume` on a copy with room finishes it with every kept section unchanged. Without
root the same line is checked on a write that raises ENOSPC (tests/unit/test_disk_errors.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from pipeline.journal import read_journal
from tests.environ import isolated_env
from tests.fakes.fake_engine import fake_process_serving

FANOUT = [sys.executable, "-m", "pipeline"]


@pytest.fixture
def small_disk(tmp_path, request):
    """A tmpfs of `request.param` bytes mounted in tmp_path (skipped where this user may not mount)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    tried = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={request.param}", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if tried.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({tried.stderr.strip()[:120]}); the unit test covers the line")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


@pytest.fixture(scope="module")
def engine_url():
    with fake_process_serving(0.001, 0.0) as url:
        yield url


def book(out, url: str, *flags: str) -> subprocess.CompletedProcess:
    argv = [*FANOUT, "book", *flags, "--backend", f"{url},cap=8", "--out", str(out), "--quiet"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=isolated_env())


# 12 KB fills before the outline is written, 24 KB in the request log, 48 KB at book.md (FAKE answers' sizes)
@pytest.mark.parametrize("small_disk", ["12k", "24k", "48k"], indirect=True)
def test_a_full_disk_ends_the_run_in_one_line_and_a_resume_on_a_copy_finishes_it(small_disk, engine_url, tmp_path):
    out = small_disk / "run"
    done = book(out, engine_url, "Full disks", "--shape", "1x2x4")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("error") == 1, done.stderr
    last = done.stderr.splitlines()[-1]
    found = re.fullmatch(
        rf"fanout: error: no space left on device writing {re.escape(str(out))}/(\S+); (\d+) of 8 sections are "
        rf"written and kept in {re.escape(str(out))} \(--resume {re.escape(str(out))} finishes the book\)",
        last,
    )
    assert found, last
    kept = {r.id: r.text for r in read_journal(out / "sections.jsonl").values() if r.ok}
    assert int(found.group(2)) == len(kept)
    assert not (out / "stats.json").exists() and not (out / "book.pdf").exists(), "nothing looks finished"

    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    resumed = subprocess.run(
        [*FANOUT, "book", "--resume", str(copy), "--backend", f"{engine_url},cap=8", "--quiet", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=isolated_env(),
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["complete"] and (copy / "book.pdf").exists()
    results = read_journal(copy / "sections.jsonl")
    assert all(results[i].text == text for i, text in kept.items()), "kept sections are as written"
    rows = (copy / "requests.jsonl").read_text().splitlines()
    assert all(json.loads(row)["kind"] for row in rows), "no torn line in the request log"
