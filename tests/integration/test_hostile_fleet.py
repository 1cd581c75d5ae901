"""A hostile fleet (tests/fakes/hostile_fleet.py): `fanout book` and `fanout bench` run as real processes
against backends that draw, per request and from a seed, a fault of every kind a server can cause.

- Two backends fail half of their requests in every way, one answers only with HTML error pages, one is healthy:
  a 2x4x6 book with --repair completes with every section, exit 0, no traceback, its failed attempts
  counted by kind, and nothing fetched (the prose carries links and images to a listener and to files).
  Three seeds, run at once.
- The same fleet with every fault at 100% and the healthy backend killed mid-write: one line, exit 1, what
  was written kept, no stats.json; `--resume` against a healthy backend finishes it, asking only what is
  missing.
- A ladder level and an open-loop rate over the hostile backends finish, the failures counted by kind.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from pipeline.journal import read_journal
from tests.environ import isolated_env
from tests.fakes.fake_engine import BookReplies, FakeEngine, FakeEngineThread, fake_process
from tests.fakes.fake_prompts import section_title
from tests.fakes.hostile import Listener
from tests.fakes.hostile_fleet import FAULTS, HostileBackend, hostile_trio

FANOUT = [sys.executable, "-m", "pipeline"]
SHAPE, SECTIONS = "2x4x6", 48
SEEDS = [1, 2, 3]
SHARE = 0.5


class HostileProse(BookReplies):
    """BookReplies whose sections also carry Markdown that would fetch a URL or read a file if it were
    obeyed: model output is data."""

    def __init__(self, port: int, title_prefix: str):
        super().__init__(title_prefix=title_prefix)
        self.port = port

    def __call__(self, body: dict) -> str:
        text = super().__call__(body)
        if section_title(body["messages"][-1]["content"]) is None:
            return text
        return (
            f"{text} See ![a figure](http://127.0.0.1:{self.port}/x.png) and ![x](file:///etc/passwd) "
            f'or [the page](http://127.0.0.1:{self.port}/page) <img src="file:///etc/hostname">.'
        )


def environment(**extra: str) -> dict[str, str]:
    env = isolated_env()
    env.update({"FANOUT_READ_TIMEOUT": "2", "FANOUT_THREADS": "1", **extra})
    return env


def book(out: Path, backends: list[str], *flags: str) -> list[str]:
    specs = [arg for spec in backends for arg in ("--backend", spec)]
    return [*FANOUT, "book", "A handbook about faults", "--shape", SHAPE, "--out", str(out), "--quiet", "--json",
            *flags, *specs]  # fmt: skip


@pytest.fixture(scope="module")
def listener():
    server = Listener()
    yield server
    server.close()


@pytest.fixture(scope="module")
def hostile_books(tmp_path_factory, listener):
    """One book a seed, all at once; each seed its own fleet of three hostile backends and a healthy one."""
    root = tmp_path_factory.mktemp("hostile-books")
    fleets, engines = {}, []
    for seed in SEEDS:
        replies = HostileProse(listener.port, title_prefix=f"Seed {seed} topic")
        fleet = [*hostile_trio(replies, seed, SHARE), FakeEngine(reply=replies)]
        fleets[seed] = fleet
        engines += fleet
    with FakeEngineThread(*engines):
        started = {
            seed: subprocess.Popen(
                # pipelined: the premise is faults of many kinds, so traffic on every backend; a whole
                # chapter's sections at once fill every backend's slots, where streamed sends them one by
                # one as they are planned and the least loaded (the healthy) backend takes most of them. And a
                # small model's sampling profile (planned open, as the FAKE answers): its random-word sections are
                # a small model's junk, asked again while off point and repaired, which keeps the hostile backends
                # asked after the pool has learnt to spare them; a capable model's book asks each section once
                book(
                    root / f"seed-{seed}",
                    [f"{e.url},cap=4" for e in fleets[seed]],
                    "--repair",
                    "--schedule",
                    "pipelined",
                    "--profile",
                    "small",
                    "--planning",
                    "open",
                ),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=environment(),
            )
            for seed in SEEDS
        }
        done = {seed: (*process.communicate(timeout=300), process.returncode) for seed, process in started.items()}
    return {seed: (root / f"seed-{seed}", fleets[seed], *done[seed]) for seed in SEEDS}


@pytest.mark.parametrize("seed", SEEDS)
def test_a_book_over_a_hostile_fleet_completes_with_every_section(hostile_books, listener, seed):
    out, fleet, stdout, stderr, code = hostile_books[seed]
    assert code == 0, stderr
    assert "Traceback" not in stderr
    stats = json.loads((out / "stats.json").read_text())
    assert stats == json.loads(stdout)
    assert stats["complete"] and stats["sections_ok"] == SECTIONS and stats["failed_sections"] == 0
    journal = read_journal(out / "sections.jsonl")
    assert len(journal) == SECTIONS and all(r.ok for r in journal.values())
    drawn = Counter(fault for backend in fleet[:3] for fault in backend.drawn if fault != "ok")
    assert len(drawn) >= 8, f"the fleet served many kinds of fault: {drawn}"
    by_kind = stats["failed_attempts_by_kind"]
    assert sum(by_kind.values()) == stats["request_errors"] > 0
    expected = {FAULTS[fault] for fault in drawn} - {"cut_before_first_byte"}  # asked again at once, not an error
    assert set(by_kind) <= expected | {"connect"}, by_kind
    by_prose = {FAULTS[f] for backend in fleet[:3] for f in backend.drawn_by_prose if f != "ok"}
    read_to_the_end = by_prose - {"cut_before_first_byte", "timeout"}  # a stall may still be running at the end
    assert set(by_kind) >= read_to_the_end, "every kind served to a request read to its end is counted"
    assert json.loads((out / "repair.json").read_text())["before"] is not None, "the repair ran over the fleet"
    assert listener.connections == 0, "no URL in the prose was fetched"
    typeset = (out / "book.html").read_text()
    assert "root:x:0" not in typeset and 'src="file:' not in typeset, "no file is read into the book or linked"


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def written(out: Path) -> int:
    return sum(result.ok for result in read_journal(out / "sections.jsonl").values())


def test_a_fleet_that_can_answer_nothing_stops_in_one_line_and_resume_finishes(tmp_path):
    """Every hostile backend fails every request; the healthy one (its own process) is SIGKILLed once some
    sections are written. No backend can answer: after FANOUT_GIVE_UP_AFTER seconds the job stops in one
    line, exit 1, with the sections kept and no stats.json; a resume against a healthy backend finishes it."""
    out = tmp_path / "run"
    # a stretch of titles of its own (tests/fakes/fake_prompts.py fake_title): the hostile backends' lines that
    # stream before they fail are taken as a capable model's, so they may not meet the healthy engine's
    replies = BookReplies(title_prefix="Doomed heading")
    fleet = hostile_trio(replies, seed=5, share=1.0)
    healthy, healthy_url = fake_process(0.03, 0.0, "--title-prefix", "Healthy topic")
    with FakeEngineThread(*fleet):
        process = subprocess.Popen(
            book(out, [healthy_url + ",cap=2", *(f"{e.url},cap=2" for e in fleet)]),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(FANOUT_GIVE_UP_AFTER="3"),
        )
        try:
            wait_for(lambda: written(out) >= 6 or process.poll() is not None, 120, "six sections")
        finally:
            healthy.send_signal(signal.SIGKILL)
            healthy.wait()
        stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, stderr
    last = stderr.splitlines()[-1]
    # one error line: a backend's last failure named inside it may hold the word ("b2: stream_error: ...")
    errors = [line for line in stderr.splitlines() if line.startswith("fanout: error:")]
    assert last.startswith("fanout: error: no backend has answered for 3 s") and errors == [last], stderr
    assert "Traceback" not in stderr
    before = read_journal(out / "sections.jsonl")
    kept = sum(result.ok for result in before.values())
    assert f"{kept} of {SECTIONS} sections are written and kept in {out} (--resume {out} finishes" in last
    assert kept >= 6 and not (out / "stats.json").exists(), "unfinished: kept, and not passed off as finished"

    rescue = FakeEngine(reply=BookReplies(title_prefix="Rescue topic"))
    with FakeEngineThread(rescue):
        resumed = subprocess.run(
            [*FANOUT, "book", "--resume", str(out), "--quiet", "--json", "--backend", rescue.url],
            capture_output=True,
            text=True,
            env=environment(),
            timeout=120,
        )
    assert resumed.returncode == 0, resumed.stderr
    stats = json.loads(resumed.stdout)
    assert stats["complete"] and stats["sections_ok"] == SECTIONS and stats["resumed"]
    kept_titles = {r.title for r in before.values() if r.ok}
    asked = set(rescue.reply.sections_asked)  # an off-point section may be asked twice (a second candidate)
    assert len(asked) == SECTIONS - kept and not asked & kept_titles, "only what was missing is asked"


def test_a_ladder_level_and_a_rate_over_hostile_backends_count_their_failures_by_kind(tmp_path):
    replies = BookReplies()
    fleet = [HostileBackend(replies, seed=9, share=0.5), HostileBackend(replies, seed=19, share=0.5)]
    with FakeEngineThread(*fleet):
        done = subprocess.run(
            [
                *FANOUT,
                "bench",
                "--streams",
                "2",
                "--window",
                "4",
                "--rate",
                "6",
                "--duration",
                "4",
                "--max-tokens",
                "16",
                "--engine-slots",
                "4",
                "--out",
                str(tmp_path / "bench"),
                "--json",
                *(arg for e in fleet for arg in ("--backend", f"{e.url},cap=4")),
            ],  # fmt: skip
            capture_output=True,
            text=True,
            env=environment(FANOUT_READ_TIMEOUT="1"),
            timeout=180,
        )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    record = json.loads((tmp_path / "bench" / "bench.json").read_text())
    (level,) = record["series"][0]["levels"]
    (rate,) = record["sweeps"][0]["points"]
    for failed, by_kind in ((level["total"]["requests_failed"], level["total"]["failures_by_kind"]),
                            (rate["failed"], rate["failures_by_kind"])):  # fmt: skip
        assert failed > 0 and sum(by_kind.values()) == failed, by_kind
        assert set(by_kind) <= set(FAULTS.values()) - {"cut_before_first_byte"}, by_kind
    drawn = Counter(fault for backend in fleet for fault in backend.drawn if fault != "ok")
    assert len(drawn) >= 8, drawn
