"""The whole book command: on FAKE engines (fast, with a kill and a resume), and once on the real engine."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from pypdf import PdfReader

from pipeline.book.repair import ACTIONS
from pipeline.journal import read_journal
from pipeline.text import repetition_loop
from tests.conftest import ENGINE_THREADS
from tests.fakes.fake_engine import fake_process as fake_engine_process
from tests.fakes.fake_prompts import plan_level, section_title

FANOUT = [sys.executable, "-m", "pipeline"]


def fanout(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*FANOUT, *args], capture_output=True, text=True, timeout=timeout)


def section_headings(book_md: str) -> list[str]:
    return re.findall(r"^#### (.+)$", book_md, flags=re.MULTILINE)


def asked_sections(url: str) -> list[str]:
    with urllib.request.urlopen(url[:-3] + "/fake/prompts") as response:
        prompts = json.load(response)
    return [title for title in map(section_title, prompts) if title is not None]


@pytest.fixture
def fake_fleet():
    process, url = fake_engine_process(token_delay=0.002, jitter=0.05)
    yield url
    process.kill()
    process.wait()


def test_book_on_fake_engines_end_to_end(fake_fleet, tmp_path):
    out = tmp_path / "run"
    done = fanout(
        "book",
        "A handbook about testing",
        "--shape",
        "2x3x4",
        "--backend",
        f"{fake_fleet},cap=5",
        "--out",
        str(out),
        "--quiet",
        "--json",
        "--fail-on",
        "failed,sections<24",
    )
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["complete"] and stats["sections_ok"] == 24 and stats["plan_requests_by_level"] == "1 -> 2 -> 6"
    assert stats["quality"] == json.loads((out / "audit.json").read_text())["quality"], "the audit's figures"
    audit = json.loads((out / "audit.json").read_text())
    repairable = [d for d in audit["defects"] if d["rule"] in ACTIONS and d["rule"] not in audit["figure_rules"]]
    offered = bool(repairable or audit["meaning"]["off_request_ids"])
    assert ("`fanout repair " in done.stderr) == offered, "repair is offered for a defect, never for a figure"
    journal = read_journal(out / "sections.jsonl")
    assert stats["requests_planning"] == 9 and stats["plan_reasked"] == 0
    assert stats["requests_writing"] == 24 + stats["extra_candidates"] == sum(r.candidates for r in journal.values())
    assert stats["tokens_written"] > 0 and stats["failed_sections"] == 0 and stats["empty_sections"] == 0
    for name in (
        "spec.json",
        "outline.json",
        "sections.jsonl",
        "book.md",
        "book.pdf",
        "book.html",
        "book.epub",
        "stats.json",
        "run.log",
    ):
        assert (out / name).exists(), name
    outline = json.loads((out / "outline.json").read_text())
    planned = [s["title"] for p in outline["parts"] for c in p["chapters"] for s in c["sections"]]
    headings = [re.sub(r"^\d+\.\d+ ", "", h) for h in section_headings((out / "book.md").read_text())]
    assert headings == planned, "book.md follows the outline"
    journal_order = [json.loads(line)["title"] for line in (out / "sections.jsonl").read_text().splitlines()]
    assert sorted(journal_order) == sorted(planned) and journal_order != planned, "completion order was random"
    assert len(PdfReader(out / "book.pdf").pages) >= 3


@pytest.mark.parametrize("barrier", [False, True])
def test_writing_starts_before_planning_ends_unless_barrier(tmp_path, barrier):
    # Every chapter's planning but the first one asked about waits 1.5 s before its first byte: the first
    # chapter's sections can go out while the others are planned, however busy the host (random pauses left
    # the last chapters' plans ending within the few ms a section takes to reach the server, now and then).
    # A cap of 16 holds the six chapters' plans (two samples each) with slots to spare for those sections.
    process, url = fake_engine_process(0.002, 0.0, "--later-chapters-pause", "1.5")
    try:
        done = fanout(
            "book",
            "Pipelined",
            "--shape",
            "2x3x4",
            "--backend",
            f"{url},cap=16",
            "--out",
            str(tmp_path / "run"),
            "--quiet",
            *(["--barrier"] if barrier else []),
        )
        assert done.returncode == 0, done.stderr
        with urllib.request.urlopen(url[:-3] + "/fake/timeline") as response:
            timeline = json.load(response)
    finally:
        process.kill()
        process.wait()
    first_section_sent = min(start for start, _, prompt in timeline if section_title(prompt) is not None)
    planning_done = max(end for _, end, prompt in timeline if plan_level(prompt) is not None)
    assert (first_section_sent >= planning_done) == barrier


STOPPED = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "terminated"), signal.SIGKILL: (-9, None)}


@pytest.mark.parametrize("stop_with", list(STOPPED))
def test_a_stopped_run_resumes_without_asking_finished_sections_again(tmp_path, stop_with):
    # Also: while it runs, a second writer of its folder is refused; stopped by a signal it can catch, it says
    # in its last line what it kept and how to finish. The engine holds every section past the sixth until
    # released, so the run is still writing when stopped, however fast the host.
    process, url = fake_engine_process(0.01, 0.0, "--hold-sections-after", "6")
    out = tmp_path / "run"
    stderr = (tmp_path / "stderr.txt").open("w+")
    try:
        writer = subprocess.Popen(
            [
                *FANOUT,
                "book",
                "Resumable",
                "--shape",
                "1x3x8",
                "--backend",
                f"{url},cap=2",
                "--out",
                str(out),
                "--quiet",
                "--pdf-engine",  # WeasyPrint's render pool starts with the run: it must end with the run too
                "weasyprint",
            ],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            # a shell starts a background job with SIGINT ignored, and a child keeps that; a terminal does not
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            env={**os.environ, "TMPDIR": str(tmp_path)},  # a SIGKILL leaves the typesetter's scratch folder
        )
        journal = out / "sections.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(read_journal(journal)) < 6:
            time.sleep(0.05)
        helpers = descendants(writer.pid)  # the render pool: forkserver and workers
        assert len(helpers) >= 2, "the render pool starts with the run"
        second = fanout("book", "--resume", str(out), "--backend", f"{url},cap=2", "--quiet")
        assert second.returncode == 2 and second.stderr.splitlines() == [
            f"fanout: error: {out} is being written by another fanout; wait for it to end, or stop it"
        ], second.stderr
        os.kill(writer.pid, stop_with)
        code, word = STOPPED[stop_with]
        assert writer.wait(30) == code
        kept_now = sum(r.ok for r in read_journal(journal).values())
        stderr.seek(0)
        last = (stderr.read().splitlines() or [""])[-1]  # a SIGKILL leaves no last word
        if word is not None:
            assert last == (
                f"fanout: error: {word}; {kept_now} of 24 sections are written and kept in {out} "
                f"(--resume {out} finishes the book)"
            )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in helpers):
            time.sleep(0.1)
        assert not [pid for pid in helpers if Path(f"/proc/{pid}").exists()], "render processes outlived the run"
        finished = {r.title for r in read_journal(journal).values() if r.ok}
        assert 6 <= len(finished) < 24, "killed mid-write"
        assert not (out / "stats.json").exists() and not (out / "book.md").exists(), "nothing looks finished"
        asked_before = len(asked_sections(url))
        outline_before = (out / "outline.json").read_bytes()
        kept = {r.id: r.text for r in read_journal(journal).values() if r.ok}

        urllib.request.urlopen(urllib.request.Request(url[:-3] + "/fake/release", method="POST")).close()
        resumed = fanout("book", "--resume", str(out), "--backend", f"{url},cap=2", "--quiet", "--json")
        assert resumed.returncode == 0, resumed.stderr
        asked_again = asked_sections(url)[asked_before:]
        assert not finished & set(asked_again), "a finished section was asked again"
        assert len(asked_again) == 24 - len(finished)
        stats = json.loads(resumed.stdout)
        assert stats["complete"] and stats["resumed"] and stats["requests_planning"] == 0
        assert len(section_headings((out / "book.md").read_text())) == 24
        assert (out / "outline.json").read_bytes() == outline_before, "the resume planned nothing again"
        results = read_journal(journal)
        assert all(results[i].text == text for i, text in kept.items()), "finished sections kept as written"
        assert_book_follows_outline(out, results)
    finally:
        process.kill()
        stderr.close()


def descendants(pid: int) -> set[int]:
    """Every process below `pid`, from /proc."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def assert_book_follows_outline(out: Path, results: dict) -> None:
    """The same section set as planned, and book.md's part, chapter and section headings in outline order."""
    outline = json.loads((out / "outline.json").read_text())
    planned = [s for p in outline["parts"] for c in p["chapters"] for s in c["sections"]]
    assert set(results) == {s["id"] for s in planned} and all(r.ok for r in results.values())
    expected = []
    for p in outline["parts"]:
        expected.append(("##", p["title"]))
        for c in p["chapters"]:
            expected.append(("###", c["title"]))
            expected += [("####", s["title"]) for s in c["sections"]]
    found = re.findall(
        r"^(#{2,4}) (?:Part \d+\. |\d+(?:\.\d+)?\.? )?(.+)$", (out / "book.md").read_text(), flags=re.MULTILINE
    )
    assert found == expected, "a book identical in structure to the outline"


@pytest.mark.parametrize(
    "args, words",
    [
        (["book", ""], "prompt is empty"),
        (["book", "x", "--shape", "0x1x1"], "--shape"),
        (["book", "x", "--shape", "500x500x500"], "--shape"),
        (["book", "x", "--shape", "banana"], "PxCxS"),
        (["book", "x" * 20_000], "characters"),
        (["book", "x", "--words", "0"], "--words"),
        (["book", "x", "--backend", "http://127.0.0.1:9,cap=-1"], "cap must be positive"),
        (["book", "x", "--backend", "http://127.0.0.1:9"], "no backend reachable"),
        (["book", "x", "--no-such-flag"], "unrecognized arguments"),
        (["book", "x", "--fail-on", "distinct_2<oops"], "not a number"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_no_run_folder(tmp_path, args, words):
    out = tmp_path / "run"
    done = fanout(*args, "--out", str(out))
    assert done.returncode == 2
    assert words in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not (out / "stats.json").exists() and not (out / "book.md").exists()


def test_resume_of_a_folder_that_is_not_a_run(tmp_path):
    done = fanout("book", "--resume", str(tmp_path))
    assert done.returncode == 2 and "not a fanout run folder" in done.stderr


@pytest.mark.engine
def test_a_small_book_on_the_real_engine(tmp_path):
    out = tmp_path / "run"
    done = fanout(
        "book",
        "A pocket guide to brewing tea",
        "--shape",
        "1x2x2",
        "--max-tokens",
        "160",
        "--slots",
        "4",
        "--threads",
        str(ENGINE_THREADS),
        "--out",
        str(out),
        "--quiet",
        "--json",
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    # a node the model's lines cannot fill has fewer children: the count of sections is the model's, not asserted
    assert stats["complete"] and 1 <= stats["sections_ok"] == stats["sections"] <= 4
    assert stats["backends"][0]["engine"] == "llama.cpp" and stats["phrased_units"] > 0, "a small model's: given"
    outline = json.loads((out / "outline.json").read_text())
    nodes = [
        *outline["parts"],
        *(c for p in outline["parts"] for c in p["chapters"]),
        *(s for p in outline["parts"] for c in p["chapters"] for s in c["sections"]),
    ]
    assert not [n["title"] for n in nodes if n["placeholder"]] and stats["placeholder_titles"] == 0
    assert json.loads((out / "spec.json").read_text())["profile"]["name"] == "small", "chosen from SmolLM2-135M"
    journal = read_journal(out / "sections.jsonl")
    assert stats["tokens_written"] == sum(r.completion_tokens + r.discarded_tokens for r in journal.values())
    reader = PdfReader(out / "book.pdf")
    assert len(reader.pages) >= 3 and len(reader.outline) >= 1
    assert_audit_matches_an_independent_recount(out, journal)


def assert_audit_matches_an_independent_recount(out: Path, journal: dict) -> None:
    """The audit's counts, recomputed here from the raw files without the audit's code."""
    audit = json.loads((out / "audit.json").read_text())
    outline = json.loads((out / "outline.json").read_text())

    def repeats(titles: list[str]) -> int:
        keys = [" ".join(t.casefold().split()).strip(" .,:;!?") for t in titles]
        return len(keys) - len(set(keys))

    chapters = [c for p in outline["parts"] for c in p["chapters"]]
    duplicates = (
        repeats([p["title"] for p in outline["parts"]])
        + repeats([c["title"] for c in chapters])
        + repeats([s["title"] for c in chapters for s in c["sections"]])
    )
    closing = tuple(".!?:;)]}\"'`*_…»”’")
    assert audit["counts"]["truncated"] == sum(
        r.finish_reason == "length" and not r.text.rstrip().endswith(closing)
        for r in journal.values()
        if r.text.strip()
    )
    assert audit["counts"]["failed"] == sum(r.error is not None for r in journal.values())
    assert audit["counts"]["duplicate"] == duplicates
    assert audit["counts"]["empty"] == sum(len(r.text.split()) < 40 for r in journal.values() if r.error is None)
    looping = sum(repetition_loop(result.text) is not None for result in journal.values())
    assert audit["counts"]["repetition_loop"] == looping
