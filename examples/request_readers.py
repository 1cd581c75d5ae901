"""Which reader finds a request's asks: the measurement behind pipeline/meaning/asks.py.

Reads every request of the labelled sets (tests/fixtures/meaning/requests.json, the set the rules were
written from, and requests_held_out.json, written after them) with fanout's rules and with yake 0.7.3 (a
keyword extractor with no model; 3-grams, its top 5 and top 10), and scores each against the asks marked by
hand with the calibration's own matching (pipeline/bench/studies/calibrate.py `same_ask`).

    .venv/bin/pip install yake==0.7.3 && .venv/bin/python examples/request_readers.py

Measured 2026-12-04 (2-core Intel Xeon; no model, so the figures do not depend on the machine):

| reader | set | precision | recall |
|---|---|---|---|
| fanout's rules | requests (64) | 0.97 (203/210) | 0.98 (194/198) |
| fanout's rules | held out (20) | 1.00 (57/57) | 0.98 (61/62) |
| yake, top 5 | requests | 0.75 (230/306) | 0.72 (143/198) |
| yake, top 10 | requests | 0.72 (391/546) | 0.87 (173/198) |
| yake, top 5 | held out | 0.81 (79/98) | 0.85 (53/62) |
| yake, top 10 | held out | 0.77 (134/174) | 0.98 (61/62) |

yake ranks words by where and how often they occur, so it also returns the request's framing ("handbook
covering", "write") and cuts across its phrases; the rules know a request's shape (its opening, its form,
its lists, who it is for, what it is not about) and keep each phrase whole.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.bench.studies.calibrate import DEFAULT_DIR, same_ask  # noqa: E402
from pipeline.meaning.reading import read_request  # noqa: E402

Reader = Callable[[str], list[str]]


def score(reader: Reader, entries: list[dict]) -> str:
    right = read_count = found = marked = 0
    for entry in entries:
        read = reader(entry["request"])
        right += sum(any(same_ask(r, m) for m in entry["asks"]) for r in read)
        found += sum(any(same_ask(r, m) for r in read) for m in entry["asks"])
        read_count, marked = read_count + len(read), marked + len(entry["asks"])
    return f"{right / read_count:.2f} ({right}/{read_count}) | {found / marked:.2f} ({found}/{marked})"


def yake_reader(top: int) -> Reader:
    import yake  # measured here only: not one of fanout's dependencies

    extractor = yake.KeywordExtractor(lan="en", n=3, top=top)
    return lambda request: [keyword for keyword, _ in extractor.extract_keywords(request)]


def main() -> int:
    readers: list[tuple[str, Reader]] = [("fanout's rules", lambda r: [ask.text for ask in read_request(r)])]
    try:
        readers += [(f"yake, top {top}", yake_reader(top)) for top in (5, 10)]
    except ImportError:
        print("yake is not installed: `.venv/bin/pip install yake==0.7.3` to compare with it", file=sys.stderr)
    print("| reader | set | precision | recall |\n|---|---|---|---|")
    for name, reader in readers:
        for set_name in ("requests", "requests_held_out"):
            entries = json.loads((DEFAULT_DIR / f"{set_name}.json").read_text())["requests"]
            print(f"| {name} | {set_name} ({len(entries)}) | {score(reader, entries)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
