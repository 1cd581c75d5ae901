"""The title policy's table beside what each rule did in one or more runs: its cost and its yield.

    python examples/plan_rules.py [RUN_DIR ...]

Prints pipeline/book/plan/policy.py's rules in their order (id, action, threshold, what it finds) and, for each
RUN_DIR, the lines each rule refused and held back and the second rounds asked after it acted on a node's lines
(stats.json's `plan_rules`), as a Markdown table.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.book.plan.policy import RULES  # noqa: E402


def cell(counts: dict[str, int] | None) -> str:
    return f" | {counts['refused']} / {counts['held']}, {counts['rounds']}" if counts else " | –"


def main(runs: list[Path]) -> None:
    counted = [json.loads((run / "stats.json").read_text()).get("plan_rules", {}) for run in runs]
    runs_head = "".join(f" | {run.name}: refused / held, rounds" for run in runs)
    print(f"| rule | action | threshold | finds{runs_head} |")
    print("|---|---|---|---" + "|---" * len(runs) + "|")
    for row in RULES.values():
        rule, action, finds = row.id, str(row.action), row.finds
        threshold = ", ".join(f"{name} {value}" for name, value in row.thresholds.items())
        cells = "".join(
            f" | {n['refused']} / {n['held']}, {n['rounds']}" if (n := counts.get(rule)) else " | –"
            for counts in counted
        )
        print(f"| {rule} | {action} | {threshold} | {finds}{cells} |")


if __name__ == "__main__":
    main([Path(arg) for arg in sys.argv[1:]])
