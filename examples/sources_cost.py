"""What writing from sources costs a book job: the same book on six capable FAKE step-law engines (8x12x16), without
and with `--sources`, side by side in one run, the two alternating.

    PYTHONPATH=. .venv/bin/python examples/sources_cost.py --out DIR [--runs 2] [--shape 8x12x16]

The engines are `tests/fakes/fake_steplaw.py` in their own process (six, answering as a capable model would:
tests/fakes/fake_capable.py), each `--backend URL,cap=256`. The sources are the good-writing corpus's books
(tests/fixtures/corpus/) as Markdown files (19 files, about 6,500 passages); their index is built once before the
first run with sources (so each run with sources reuses it, as a second book on the same documents does), in
DIR/cache. Each run is `fanout book` as a process with one candidate a section; printed from its stats.json: the
generate time (first request to last section: plan and write, what the efficiency figures time), the planning and
writing seconds, the whole job (with the audit and the typesetting), and with sources the passages given and the
citations the audit judged. The cost is the median generate time with sources over the median without.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.bench.studies.corpus import book_markdown, load_corpus  # noqa: E402
from pipeline.journal import read_journal  # noqa: E402
from tests.fakes.fake_steplaw import steplaw_process  # noqa: E402

PROMPT = (
    "A practical handbook for people who learn from open textbooks: how to study, practise and check what they know"
)


def write_sources(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for book in load_corpus():
        (folder / f"{book.slug}.md").write_text(book_markdown(book))
    return folder


def fanout(args: list[str], cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "FANOUT_CACHE": str(cache), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True, text=True, env=env)


def one_run(urls: list[str], out: Path, shape: str, sources: Path | None, cache: Path) -> dict:
    backends = [flag for url in urls for flag in ("--backend", f"{url},cap=256")]
    extra = ["--sources", str(sources)] if sources is not None else []
    args = ["book", PROMPT, *extra, *backends, "--shape", shape, "--best-of", "1", "--off-point-retries", "0"]
    done = fanout([*args, "--out", str(out), "--quiet", "--json"], cache)
    if done.returncode != 0:
        raise SystemExit(f"fanout {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    stats = json.loads(done.stdout)
    audit = json.loads((out / "audit.json").read_text())
    given = sum(len(result.passages) for result in read_journal(out / "sections.jsonl").values())
    return {**stats, "passages_given": given, "citations": audit["meaning"].get("citations")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--shape", default="8x12x16")
    args = parser.parse_args()
    cache = args.out / "cache"
    sources = write_sources(args.out / "sources")
    indexed = fanout(["sources", str(sources)], cache)
    judge = [sys.executable, "-c", "from pipeline.meaning.minilm import graph_file; graph_file()"]  # as set-up does
    subprocess.run(judge, check=True, env={**os.environ, "FANOUT_CACHE": str(cache), "PYTHONPATH": str(ROOT)})
    print(f"sources: {indexed.stdout.strip().splitlines()[-1]}", file=sys.stderr)
    rows: list[tuple[str, dict]] = []
    with steplaw_process(6, plans=True, capable=True) as urls:
        for run in range(args.runs):
            for label, given in (
                (("without", None), ("with", sources)) if run % 2 == 0 else (("with", sources), ("without", None))
            ):
                stats = one_run(urls, args.out / f"{label}-{run}", args.shape, given, cache)
                rows.append((label, stats))
                print(f"{label} sources, run {run + 1}: generate {stats['generate_seconds']:.1f} s", file=sys.stderr)
    print("| sources | run | generate s | plan s | write s | job s | sections | passages given | citations |")
    print("|---|---|---|---|---|---|---|---|---|")
    for at, (label, stats) in enumerate(rows):
        cells = [label, str(at // 2 + 1), f"{stats['generate_seconds']:.1f}", f"{stats['plan_seconds']:.1f}",
                 f"{stats['write_seconds']:.1f}", f"{stats['job_seconds']:.1f}", str(stats["sections_ok"]),
                 str(stats["passages_given"]), str(stats["citations"])]  # fmt: skip
        print("| " + " | ".join(cells) + " |")
    medians = {
        label: statistics.median(s["generate_seconds"] for lab, s in rows if lab == label)
        for label in ("without", "with")
    }
    print(f"\ngenerate time with sources / without (medians): {medians['with'] / medians['without']:.3f}")


if __name__ == "__main__":
    main()
