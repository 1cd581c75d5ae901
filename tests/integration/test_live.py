"""The live page in a real headless browser (Debian's chromium + chromedriver, driven by selenium), during a
book on a FAKE engine and during a bench ladder on a FAKE step-law engine, each in its own process; and the
feed's bookkeeping (late joiners, retried attempts) without a browser."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pipeline.errors import UsageError
from pipeline.watch.live import LiveFeed, check_bind
from tests.fakes.fake_steplaw import steplaw_process

HOSTILE = (
    '<script>window.pwned = 1</script> <img src=x onerror="window.pwned = 2"> '
    '<svg onload="window.pwned = 3"></svg> and some words.'
)


def browser(profile: Path):
    """Headless chromium with its profile under the test's own folder (by default it leaves one in /tmp)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1200,900",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def fake_backend(reply: str, token_delay: float = 0.02) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.fake_engine", str(token_delay), "0.0", "--section-text", reply],
        stdout=subprocess.PIPE,
        text=True,
    )
    return process, process.stdout.readline().strip()


def wait_for(condition, timeout: float = 30.0, step: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("condition not met in time")


def live_port(process: subprocess.Popen) -> str:
    for line in process.stderr:
        if "live page: " in line:
            return line.split("live page: ", 1)[1].strip()
    raise AssertionError("no live page line")


def test_the_feed_shows_sections_arriving_and_tokens_rising_and_runs_no_model_script(tmp_path):
    # The browser starts first and the answers stream slowly: a busy machine takes seconds to start Chrome,
    # and a book that was written by then (Typst typesets it in a tenth of a second) shows no tokens rising.
    driver = browser(tmp_path / "chromium")
    backend, url = fake_backend(HOSTILE, token_delay=0.06)
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipeline",
            "book",
            "Live test",
            "--shape",
            "2x2x3",
            "--backend",
            f"{url},cap=4",
            "--out",
            str(tmp_path / "run"),
            "--quiet",
            "--live",
            "--live-linger",
            "20",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        page = live_port(run)
        driver.get(page)
        # planning samples each node's question several times first: at 0.06 s a token the first section starts later
        cards = wait_for(lambda: driver.find_elements("css selector", "article.card"), timeout=90)
        assert cards, "sections appear as they are written"
        first_tokens = int(driver.find_element("id", "tokens").text.replace(",", "") or 0)
        wait_for(lambda: int(driver.find_element("id", "tokens").text.replace(",", "")) > first_tokens)
        wait_for(lambda: driver.find_element("id", "final").is_displayed(), timeout=60)
        driver.save_screenshot(str(tmp_path / "live-page.png"))  # to look at: kept with pytest's last runs
        assert driver.execute_script("return window.pwned") is None, "model text was executed"
        body = driver.find_element("css selector", "article.card pre").text
        assert "<script>" in body, "model text is shown as text"
        assert not driver.find_elements("css selector", "main img, main svg, main script")
        source = driver.find_element("id", "rate-source").text
        assert "client token timestamps" in source or "server counter" in source
        html = urllib.request.urlopen(page).read().decode()
        assert "http://" not in html and "https://" not in html, "no external assets"
    finally:
        driver.quit()
        run.kill()
        backend.kill()


def test_the_page_refuses_non_loopback_unless_asked():
    check_bind("127.0.0.1", allow_public=False)
    check_bind("::1", allow_public=False)
    with pytest.raises(UsageError, match="loopback"):
        LiveFeed("0.0.0.0")
    LiveFeed("0.0.0.0", allow_public=True)  # asked explicitly
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "book", "x", "--live", "--live-host", "0.0.0.0"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "--live-public" in done.stderr


def test_events_are_json_with_text_as_data(tmp_path):
    backend, url = fake_backend(HOSTILE)
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipeline",
            "book",
            "Events",
            "--shape",
            "1x1x2",
            "--backend",
            f"{url},cap=2",
            "--out",
            str(tmp_path / "run"),
            "--quiet",
            "--live",
            "--live-linger",
            "5",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        page = live_port(run)
        with urllib.request.urlopen(page + "events", timeout=10) as stream:
            first = json.loads(stream.readline().decode().removeprefix("data: "))
        assert {"title", "levels", "tokens", "rate", "rate_source", "sections", "backends"} <= set(first)
    finally:
        run.kill()
        backend.kill()


def test_bench_live_shows_requests_streaming_the_server_rate_and_the_ladder(tmp_path):
    with steplaw_process(1) as (url,):
        run = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pipeline",
                "bench",
                "--backend",
                f"{url},cap=8",
                "--streams",
                "2,4",
                "--window",
                "2",
                "--warmup",
                "0.2",
                "--max-tokens",
                "200",
                "--engine-slots",
                "64",
                "--out",
                str(tmp_path / "bench"),
                "--live",
                "--live-linger",
                "20",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        driver = browser(tmp_path / "chromium")
        try:
            driver.get(live_port(run))
            wait_for(lambda: driver.find_elements("css selector", "article.card pre"))
            assert driver.find_element("id", "unit").text == "requests"
            wait_for(lambda: int(driver.find_element("id", "tokens").text.replace(",", "") or 0) > 0)
            wait_for(lambda: "server counter" in driver.find_element("id", "rate-source").text)
            assert float(driver.find_element("id", "rate").text.replace(",", "")) > 0
            wait_for(lambda: driver.find_element("id", "final-title").text == "Finished", timeout=60)
            streams = driver.execute_script(  # in one call: the page re-renders the table every tick
                "return [...document.querySelectorAll('#final-table tr')].slice(1).map(r => r.cells[1].textContent)"
            )
            assert streams == ["2", "4"]
            driver.save_screenshot(str(tmp_path / "bench-live-page.png"))  # to look at, as above
        finally:
            driver.quit()
            run.kill()


def test_bench_live_refuses_public_binding_and_the_ceiling():
    for extra, message in ((["--live-host", "0.0.0.0"], "--live-public"), (["--ceiling"], "--ceiling")):
        done = subprocess.run(
            [sys.executable, "-m", "pipeline", "bench", "--live", *extra], capture_output=True, text=True
        )
        assert done.returncode == 2 and message in done.stderr, done.stderr


def test_a_late_page_gets_no_text_twice_and_a_retried_attempt_starts_clean():
    feed = LiveFeed()
    feed.section_started("s1", "One")
    feed.section_delta("s1", "abc")
    assert [c["append"] for c in feed._changes()] == ["abc"]
    feed.section_delta("s1", "de")
    (late,) = feed._snapshot()["sections"]
    assert late["append"] == "abc", "the rest comes with the next tick, to every page"
    (change,) = feed._changes()
    assert change["append"] == "de" and not change["reset"]
    feed.section_restarted("s1")
    feed.section_delta("s1", "fresh")
    (change,) = feed._changes()
    assert change["reset"] and change["append"] == "fresh"
    feed.section_delta("s1", "!")
    (change,) = feed._changes()
    assert not change["reset"] and change["append"] == "!"
