"""Reliability with real processes on 127.0.0.1: a backend SIGKILLed mid-write and brought back,
bad input refused with one line and the documented exit code, and the embedded engine bound to loopback.
Hostile backend modes and the API key are in test_reliability_modes.py, load in test_reliability_load.py.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pipeline.backends.pool import BackendPool, RequestFailed, RetryPolicy
from pipeline.journal import read_journal
from pipeline.records import Backend, ChatRequest
from tests.environ import isolated_env
from tests.fakes.fake_engine import FakeEngine, fake_process

FANOUT = [sys.executable, "-m", "pipeline"]


def fake_stats(url: str) -> dict:
    with urllib.request.urlopen(url[: -len("/v1")] + "/fake/stats", timeout=10) as response:
        return json.load(response)


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_backend_killed_mid_write_loses_nothing_and_is_used_again_when_it_returns(tmp_path):
    """Three FAKE engines in their own processes; b1 is SIGKILLed while sections are being written and
    restarted on the same port. The job completes with every section, the cut and refused attempts are in
    stats.json and the journal, and once its rest is over (RetryPolicy.probe_after) b1 takes work again."""
    fakes = [fake_process(0.02, 0.0, "--title-prefix", f"Fleet {name} topic") for name in ("alpha", "bravo", "charlie")]
    out = tmp_path / "run"
    backends = [arg for _, url in fakes for arg in ("--backend", f"{url},cap=3")]
    env = isolated_env()
    writer = subprocess.Popen(
        [
            *FANOUT,
            "book",
            "Surviving a dead backend",
            "--shape",
            "1x8x8",
            "--out",
            str(out),
            "--quiet",
            "--json",
            *backends,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    restarted = None
    try:
        journal = out / "sections.jsonl"
        wait_for(lambda: len(read_journal(journal)) >= 3 or writer.poll() is not None, 60, "the first sections")
        victim, victim_url = fakes[1]
        wait_for(lambda: fake_stats(victim_url)["in_flight"] >= 1, 10, "work on the victim")
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        killed_at = time.time()
        port = victim_url.rsplit(":", 1)[1].split("/")[0]
        restarted, restarted_url = fake_process(0.02, 0.0, "--port", port, "--title-prefix", "Fleet bravotwo topic")
        assert restarted_url == victim_url
        stdout, stderr = writer.communicate(timeout=120)
        assert writer.returncode == 0, stderr
        after_restart = fake_stats(restarted_url)["requests"]
    finally:
        for process in [p for p, _ in fakes] + [restarted] * (restarted is not None):
            process.kill()
            process.wait()

    stats = json.loads(stdout)
    assert stats == json.loads((out / "stats.json").read_text())
    assert stats["complete"] and stats["sections_ok"] == stats["sections"] == 64
    assert stats["failed_sections"] == 0 and stats["empty_sections"] == 0
    audit = json.loads((out / "audit.json").read_text())
    assert audit["counts"]["failed"] == 0 and audit["counts"]["empty"] == 0
    results = read_journal(out / "sections.jsonl")
    outline = json.loads((out / "outline.json").read_text())
    planned = {s["id"] for p in outline["parts"] for c in p["chapters"] for s in c["sections"]}
    assert set(results) == planned and all(r.ok and len(r.text.split()) >= 40 for r in results.values())
    headings = re.findall(r"^#### ", (out / "book.md").read_text(), flags=re.MULTILINE)
    assert len(headings) == 64, "every section is in the book"

    failed = [a for r in results.values() for a in r.attempts if a.outcome not in ("ok", "cut_before_first_byte")]
    assert failed and {a.backend for a in failed} == {"b1"}, "only the killed backend failed"
    assert stats["request_errors"] == len(failed), "stats.json counts the reissued attempts the journal shows"
    b1 = next(b for b in stats["backends"] if b["name"] == "b1")
    assert b1["failed"] == len(failed)
    assert after_restart >= 1, "the restarted backend was sent requests"
    back = [r for r in results.values() if r.backend == "b1" and r.t_sent > killed_at]
    assert back, "sections landed on b1 after it came back"


BAD_INPUT = {
    "empty prompt": (["book", "   "], "prompt is empty"),
    "1 MB prompt": (["book", "x" * 1_000_000], "at most"),
    "shape 0x0x0": (["book", "x", "--shape", "0x0x0"], "--shape"),
    "negative cap": (["book", "x", "--backend", "http://127.0.0.1:9,cap=-5"], "cap must be positive"),
    "unreachable backend": (["book", "x", "--backend", "http://127.0.0.1:9,cap=2"], "no backend reachable"),
    "bad TOML": (["book", "x", "--config", "{config}"], "bad TOML"),
    "negative cap in TOML": (["book", "x", "--config", "{negative}"], "cap"),
    "unknown flag": (["book", "x", "--no-such-flag"], "unrecognized arguments"),
}


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    """Every bad-input case, run at once. A 1 MB argument is over Linux's 128 KiB limit for one argv string,
    so each case calls the CLI's main() inside a fresh interpreter, which also takes such a prompt."""
    root = tmp_path_factory.mktemp("bad-input")
    (root / "bad.toml").write_text("[[backends]\nurl = 'http://127.0.0.1:9'\n")
    (root / "negative.toml").write_text("[[backends]]\nurl = 'http://127.0.0.1:9'\ncap = -1\n")
    env = isolated_env()
    started = {}
    for name, (args, _) in BAD_INPUT.items():
        out = root / re.sub(r"\W+", "-", name)
        argv = [a.format(config=root / "bad.toml", negative=root / "negative.toml") for a in args]
        script = "import json, sys; from pipeline.cli import main; sys.exit(main(json.load(sys.stdin)))"
        process = subprocess.Popen(
            [sys.executable, "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        started[name] = (out, process, json.dumps([*argv, "--out", str(out)]))
    results = {}
    for name, (out, process, stdin) in started.items():
        stdout, stderr = process.communicate(stdin, timeout=120)
        results[name] = (out, process.returncode, stdout, stderr)
    return results


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_gets_one_line_exit_2_and_no_run_folder(refused, case):
    """One line on stderr starting `fanout: error:`, exit 2 (docs/commands.md's table), and no folder at --out."""
    out, code, stdout, stderr = refused[case]
    assert code == 2, stderr
    assert stderr.startswith("fanout: error:") and stderr.count("\n") == 1, stderr
    assert BAD_INPUT[case][1] in stderr
    assert len(stderr) < 400, "the line does not repeat a huge input"
    assert not out.exists(), "nothing at --out, so nothing can look like a finished run"


def listening_addresses(port: int) -> set[str]:
    """Local addresses of the sockets listening on `port`, from /proc/net/tcp and tcp6."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port_hex = local.split(":")
            if state == "0A" and int(port_hex, 16) == port:
                found.add(address)
    return found


@pytest.mark.engine
def test_the_embedded_engine_binds_to_loopback_only(engine8):
    """The server fanout starts is told 127.0.0.1 and listens there alone."""
    argv = Path(f"/proc/{engine8.process.pid}/cmdline").read_bytes().split(b"\0")
    assert argv[argv.index(b"--host") + 1] == b"127.0.0.1"
    assert listening_addresses(engine8.port) == {"0100007F"}, "listening on 127.0.0.1 only"
    assert engine8.backend.base_url.startswith("http://127.0.0.1:")


def test_one_giant_sse_line_fails_as_oversized_and_is_asked_again():
    """A 2 MB answer in a single SSE line trips the client's line limit, not only its answer bound: it is
    flagged `oversized`, the backend's fault, and asked again (here the only backend, every time)."""

    async def scenario() -> list:
        engine = await FakeEngine(reply=lambda body: "x" * 2_000_000).start()
        policy = RetryPolicy(attempts=3, backoff_initial=0.01, backoff_max=0.02, read_timeout=5.0)
        try:
            pool = BackendPool([Backend(name="a", base_url=engine.url, model="fake-model", cap=2)], policy)
            with pytest.raises(RequestFailed) as failure:
                await pool.complete(ChatRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=8))
        finally:
            await engine.stop()
        return failure.value.attempts

    assert [a.outcome for a in asyncio.run(scenario())] == ["oversized"] * 3
