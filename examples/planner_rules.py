"""What each planner rule costs and buys, over finished run folders: for each defect, the lines it refused and the
judge's fit of their titles to the request (all-MiniLM-L6-v2, pipeline/meaning/onsubject.py's unit fit, title
only), beside the fit of the titles the book took; for each fault, the lines passed over; and the nodes asked a
second round. A rule that refuses lines fitting the request better than those taken costs the book its subject.

    PYTHONPATH=. .venv/bin/python examples/planner_rules.py RUN_DIR [RUN_DIR ...]

It reads run.log's "refused under" (DEBUG) and "lines passed over" and "planned" (INFO) lines.
"""

from __future__ import annotations

import ast
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from pipeline.audit.book import read_spec
from pipeline.meaning.minilm import MiniLMEmbedder
from pipeline.meaning.onsubject import unit_fits
from pipeline.records import Outline

REFUSED = re.compile(r"refused under \S+: (['\"])(.*?)\1 (.+)$", re.M)
PASSED = re.compile(r"lines passed over: (\{.*\})")
ROUNDS = re.compile(r"(\d+) nodes asked a second round")
LOW_FIT = 0.3


def reason_of(text: str) -> str:
    return text.split(' "')[0].split(":")[0]


def taken_titles(folder: Path) -> list[str]:
    outline = Outline.model_validate_json((folder / "outline.json").read_text())
    nodes = [*outline.parts, *(c for p in outline.parts for c in p.chapters)] + [s for _, _, s in outline.sections()]
    return [node.title for node in nodes if not node.placeholder]


def main(folders: list[Path]) -> None:
    judge = MiniLMEmbedder()
    refused: dict[str, list[float]] = defaultdict(list)
    passed: dict[str, int] = defaultdict(int)
    taken: list[float] = []
    rounds: list[str] = []
    for folder in folders:
        spec = read_spec(folder)
        request = spec.prompt if spec else ""
        log = (folder / "run.log").read_text()
        titles: dict[str, list[str]] = defaultdict(list)
        for match in REFUSED.finditer(log):
            titles[reason_of(match.group(3))].append(match.group(2))
        taken += [float(fit) for fit in unit_fits(judge, request, taken_titles(folder))]
        for reason, found in titles.items():
            refused[reason] += [float(fit) for fit in unit_fits(judge, request, found)]
        if match := PASSED.search(log):
            for fault, count in ast.literal_eval(match.group(1)).items():
                passed[reason_of(fault)] += count
        rounds.append(match.group(1) if (match := ROUNDS.search(log)) else "–")
    print(f"books {len(folders)}; titles taken {len(taken)}, mean fit {statistics.mean(taken):.2f}")
    print(f"nodes asked a second round, a book: {', '.join(rounds)}")
    print(f"| defect (refused) | lines | mean fit of the refused | share under {LOW_FIT} |")
    for reason, fits in sorted(refused.items(), key=lambda pair: -len(pair[1])):
        low = sum(fit < LOW_FIT for fit in fits) / len(fits)
        print(f"| {reason} | {len(fits)} | {statistics.mean(fits):.2f} | {low:.2f} |")
    print("| fault (passed over) | lines |")
    for fault, count in sorted(passed.items(), key=lambda pair: -pair[1]):
        print(f"| {fault} | {count} |")


if __name__ == "__main__":
    main([Path(arg) for arg in sys.argv[1:]])
