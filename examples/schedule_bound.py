"""How fast a finished book's schedule could have been on a step-law fleet, and what a faster plan is worth.

    PYTHONPATH=. .venv/bin/python examples/schedule_bound.py RUN_DIR [--a-ms 12.94] [--b-ms 0.2451] [--caps 256x6]

Reads the run's requests.jsonl: each section's first request, when it was sent (from the job's first request)
and how many tokens its answer had. Simulates them on engines that keep the step law (a + b·n ms a step of n
streams; the defaults are the FAKE step-law engines of `fanout efficiency`'s figures) with
pipeline/bench/studies/fleetsim.py, and prints beside the run's own time:
- the makespan its own sends allow (each section sent when the book sent it);
- the ideal: the same tokens at the fleet's sustained rate, every engine full from the first request;
- the makespan with every send moved earlier by a factor (planning that many times faster).
Planning's own requests and the off-point retries are left out (retries are sent when their first answer is
scored, which the simulation moves), so the run's own time can be longer than the first row by its retry tail.

Then what the run's own plan allows: its first-round planning requests and its sections on the same engines, each
sent the moment its parent's answer generated the line that names it (fleetsim.tree_makespan), and the same tree
with each chapter's sections asked in K requests of their own (each piece's lines at the chapter's tokens a line,
sent when the chapter was): what splitting a chapter's question would be worth.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pipeline.bench.studies.fleetsim import (
    StepLaw,
    TreeRequest,
    book_tree,
    first_section_sends,
    makespan,
    tree_makespan,
)
from pipeline.book.requestlog import REQUEST_LOG

FACTORS = (1.0, 0.75, 0.5, 0.25, 0.1)
SPLITS = (1, 2, 4, 8, 16)
SPARE_LINES = 3  # the lines a chapter's answer gives beyond its sections (book/plan/schedule.py SPARE_ITEMS)


def chapters_split(tree: list[TreeRequest], pieces: int) -> list[TreeRequest]:
    """The tree with each chapter's question (a request whose children have none) asked in `pieces` requests."""
    children: dict[int, list[int]] = {}
    for index, request in enumerate(tree):
        if request.parent is not None:
            children.setdefault(request.parent, []).append(index)
    out, extra = list(tree), []
    for node, kids in children.items():
        if pieces == 1 or any(kid in children for kid in kids):
            continue
        chapter, kids = tree[node], sorted(kids, key=lambda kid: tree[kid].after)
        per_line = chapter.tokens / (len(kids) + SPARE_LINES)
        size = -(-len(kids) // pieces)
        for start in range(0, len(kids), size):
            piece = kids[start : start + size]
            number = len(tree) + len(extra)
            extra.append(TreeRequest(round(per_line * (len(piece) + 1)), chapter.parent, chapter.after))
            for line, kid in enumerate(piece, 1):
                out[kid] = TreeRequest(tree[kid].tokens, number, round(per_line * line))
        out[node] = TreeRequest(0, chapter.parent, chapter.after)  # asked in its pieces instead
    return out + extra


def own_seconds(request_log: Path) -> float:
    """The run's own time: its first request to its last answer."""
    rows = [json.loads(line) for line in request_log.read_text().splitlines() if line.strip()]
    return max(row["t_done"] for row in rows) - min(row["t_asked"] for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--a-ms", type=float, default=12.94)
    parser.add_argument("--b-ms", type=float, default=0.2451)
    parser.add_argument("--caps", default="256x6", metavar="CAPxENGINES")
    args = parser.parse_args()
    cap, engines = (int(n) for n in args.caps.split("x"))
    law = StepLaw(a_s=args.a_ms / 1000, b_s=args.b_ms / 1000)
    sends, tokens = first_section_sends(args.run_dir / REQUEST_LOG)
    own = own_seconds(args.run_dir / REQUEST_LOG)
    ideal = sum(tokens) / (engines * law.sustained(cap))
    print(f"{len(sends)} sections, {sum(tokens):,} tokens; the last sent at {max(sends):.2f} s")
    print(f"the run: {own:.2f} s (whole ÷ ideal {ideal / own:.3f}); ideal at the sustained rate: {ideal:.2f} s")
    print("| sends × | last sent s | makespan s | ideal ÷ makespan |")
    print("|---|---|---|---|")
    for factor in FACTORS:
        moved = [at * factor for at in sends]
        end = makespan(moved, tokens, caps=[cap] * engines, law=law)
        print(f"| {factor:g} | {max(moved):.2f} | {end:.2f} | {ideal / end:.3f} |")
    tree = book_tree(args.run_dir / REQUEST_LOG)
    print()
    print("| a chapter's sections asked in | its plan allows s | ideal ÷ that |")
    print("|---|---|---|")
    for pieces in SPLITS:
        end = tree_makespan(chapters_split(tree, pieces), caps=[cap] * engines, law=law)
        print(f"| {pieces} request{'s' if pieces > 1 else ''} | {end:.2f} | {ideal / end:.3f} |")


if __name__ == "__main__":
    main()
