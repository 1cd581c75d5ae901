"""`fanout identity --book`: a finished book's section requests asked again alone and under load, against six
FAKE engines (tests/fakes/fake_engine.py, deterministic: every answer depends on its prompt only), so the
whole 8x12x16 book must come back identical, alone and at 1,536 in flight."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.fakes.fake_engine import BookReplies, FakeEngine, FakeEngineThread


def fanout(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True, text=True, timeout=timeout)


def test_the_8x12x16_book_is_identical_alone_and_at_1536_in_flight(tmp_path):
    replies = BookReplies(words=20)
    engines = [FakeEngine(reply=replies) for _ in range(6)]
    with FakeEngineThread(*engines):
        backends = [arg for i, e in enumerate(engines) for arg in ("--backend", f"{e.url},cap=256,name=f{i}")]
        run = tmp_path / "book"
        written = fanout(
            "book", "A handbook on bees", "--shape", "8x12x16", "--words", "20", "--profile", "greedy",
            "--best-of", "1", "--out", str(run), "--quiet", *backends,
        )  # fmt: skip
        assert written.returncode == 0, written.stderr[-2000:]
        asked = fanout("identity", "--book", str(run), "--levels", "1536", *backends, "--out", str(tmp_path / "id"))
        assert asked.returncode == 0, asked.stderr[-2000:]
    record = json.loads((tmp_path / "id" / "identity.json").read_text())
    assert record["requests"] >= 1536 and record["greedy"] and record["identity_claimed"]
    own, loaded = record["sets"]
    assert own["label"] == "the book's own load" and loaded["in_flight"] == loaded["peak_in_flight"] == 1536
    for one in (own, loaded):
        assert one["identical"] == one["compared"] == record["requests"] and not one["divergences"]
    assert "| 1536 in flight | " in (tmp_path / "id" / "identity.md").read_text()


def test_a_folder_without_answer_texts_is_refused_in_one_line(tmp_path):
    (tmp_path / "requests.jsonl").write_text(json.dumps({"kind": "section", "outcome": "ok", "tag": "s"}) + "\n")
    refused = fanout("identity", "--book", str(tmp_path), timeout=60)
    assert refused.returncode == 2 and "texts are not in the log" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
