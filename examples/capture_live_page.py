"""Screenshot the live page during a real run on the embedded engine (docs/live-page.png).

    .venv/bin/python examples/capture_live_page.py [--shape 2x3x4] [--out docs/live-page.png]
    .venv/bin/python examples/capture_live_page.py --bench [--out docs/bench-live-page.png]

Starts `fanout book --live` (or, with --bench, a short `fanout bench --live` ladder) on the embedded engine,
opens the page in Debian's headless chromium, waits until several sections (requests) are streaming and
some are done (with --bench: until a ladder level is measured too), and saves the screenshot. The run is
left to finish normally.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def browser() -> webdriver.Chrome:
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
        "--window-size=1280,900",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="2x3x4")
    parser.add_argument("--out", type=Path, default=Path("docs/live-page.png"))
    parser.add_argument("--streaming", type=int, default=6, help="sections with text before the shot")
    parser.add_argument("--done", type=int, default=3, help="finished sections before the shot")
    parser.add_argument("--bench", action="store_true", help="a bench ladder (1,4,8 streams) instead of a book")
    args = parser.parse_args()
    if args.bench:
        command = ["bench", "--streams", "1,4,8", "--window", "8", "--max-tokens", "128", "--slots", "8"]
    else:
        command = [
            "book",
            "Write a short handbook on keeping a sourdough starter alive. Practical, with examples.",
            "--shape",
            args.shape,
            "--quiet",
        ]
    run = subprocess.Popen(
        [sys.executable, "-m", "pipeline", *command, "--live", "--live-linger", "5"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = next(line.split("live page: ", 1)[1].strip() for line in run.stderr if "live page: " in line)
    driver = browser()
    try:
        driver.get(url)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            texts = [e.text for e in driver.find_elements("css selector", "article.card pre")]
            done = int(driver.find_element("id", "done").text or 0)
            measured = len(driver.find_elements("css selector", "#final-table td")) > 0 or not args.bench
            if sum(len(t) > 80 for t in texts) >= args.streaming and done >= args.done and measured:
                break
            time.sleep(1)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(args.out))
        print(f"saved {args.out}", file=sys.stderr)
    finally:
        driver.quit()
    return run.wait()


if __name__ == "__main__":
    raise SystemExit(main())
