"""The price of quality: the same book written under several settings, each setting's quality beside the
throughput it cost, and the settings no other beats on both marked (the Pareto front), as
`vllm bench sweep plot_pareto` marks throughput against latency.

Takes Settings (the fleet, and planner backends where given), one prompt, the book's shape and words, the
sampling profiles and best-of counts to cross, and the quality figure to rank by; with planner backends each
setting is written twice, planning on the fleet and planning apart on those; with section prompt variants
(`--section-templates`), once with each. Writes one book a setting (each
its own run folder under the record's folder) and returns a FrontierRecord: per setting the fleet's tok/s
(the run's generate_tok_s: usage tokens over the seconds from the first request to the last answer, planning
included), the job's seconds, and the audit's figures (pipeline/audit/quality.py). A setting is on the front
when no other has both more tok/s and a better figure (better as quality.py's columns say: higher on_point,
lower seq-rep-4, …). The chart (matplotlib) puts the figure against tok/s with the front joined.
"""

from __future__ import annotations

import time
from datetime import datetime
from itertools import product
from pathlib import Path

from pydantic import BaseModel

from pipeline.bench.report.plotting import plt, save_figure
from pipeline.bench.report.provenance import host_info
from pipeline.bench.studies.quality import MEANING_COLUMNS, WORD_COLUMNS, read_stats
from pipeline.book.run import book
from pipeline.config import Settings
from pipeline.errors import UsageError
from pipeline.files import slug
from pipeline.records import BookSpec
from pipeline.records.audit import BookQuality
from pipeline.records.provenance import HostInfo
from pipeline.watch.listeners import BookListener

RANKABLE = {figure: better.startswith("higher") for _, figure, _, better in WORD_COLUMNS + MEANING_COLUMNS
            if better.split()[0] in ("higher", "lower")}  # fmt: skip  # figure -> higher is better


class FrontierPoint(BaseModel):
    setting: str  # "greedy, best of 2" (", planner apart")
    profile: str
    best_of: int
    planner: str = "the fleet"  # where planning ran: the fleet, or the planner backends by name
    section_prompt: str = "templates/section.md"  # the section prompt variant it was written with
    run: str
    tok_s: float | None  # the run's generate_tok_s
    job_seconds: float | None
    tokens_written: int | None
    value: float | None  # the ranked figure
    on_front: bool = False  # no other setting has more tok/s and a better figure
    on_front_by_job_time: bool = False  # no other setting took less time for one book and has a better figure
    quality: BookQuality


class FrontierRecord(BaseModel):
    prompt: str
    shape: str
    words: int
    figure: str
    higher_is_better: bool
    points: list[FrontierPoint]
    host: HostInfo
    started: str
    duration_s: float
    rule: str = "on the front: no other setting has both more tok/s and a better figure"


def check_figure(figure: str) -> bool:
    if figure not in RANKABLE:
        raise UsageError(f"setting 'figure' {figure!r}: one of {', '.join(sorted(RANKABLE))}")
    return RANKABLE[figure]


def front(pairs: list[tuple[float | None, float | None]], *, higher_is_better: bool) -> list[bool]:
    """For each (speed, figure), whether no other pair dominates it: at least as fast and as good, and
    faster or better; a pair missing either number is never on the front. Speed: higher is better."""

    def better(a: float, b: float) -> bool:
        return a > b if higher_is_better else a < b

    def beaten(speed: float, value: float) -> bool:
        return any(
            other_speed is not None
            and other_value is not None
            and other_speed >= speed
            and (better(other_value, value) or other_value == value)
            and (other_speed > speed or better(other_value, value))
            for other_speed, other_value in pairs
        )

    return [s is not None and v is not None and not beaten(s, v) for s, v in pairs]


def mark_front(points: list[FrontierPoint], *, higher_is_better: bool) -> None:
    """The front by the fleet's tok/s (what the chart shows) and by the job's seconds (the price of one book:
    extra best-of candidates raise tok/s and the book's cost alike)."""
    by_rate = front([(p.tok_s, p.value) for p in points], higher_is_better=higher_is_better)
    by_time = front(
        [(None if p.job_seconds is None else -p.job_seconds, p.value) for p in points],
        higher_is_better=higher_is_better,
    )
    for point, on_rate, on_time in zip(points, by_rate, by_time):
        point.on_front, point.on_front_by_job_time = on_rate, on_time


async def run_frontier(
    settings: Settings,
    spec: BookSpec,
    profiles: list[str],
    best_ofs: list[int],
    figure: str,
    folder: Path,
    listener: BookListener,
    variants: list[tuple[str, str | None]] | None = None,
) -> FrontierRecord:
    """`variants`: (name, section template text) pairs; None or empty: the shipped template only."""
    higher = check_figure(figure)
    started, clock = datetime.now().isoformat(timespec="seconds"), time.monotonic()
    points = []
    planners = [[], settings.planner_backends] if settings.planner_backends else [[]]
    prompts = variants or [("templates/section.md", None)]
    for profile, best_of, planner, (variant, text) in product(profiles, best_ofs, planners, prompts):
        update = {"profile": profile, "best_of": best_of, "planner_backends": planner}
        name = (
            f"{profile}-best-of-{best_of}"
            + ("-planner-apart" if planner else "")
            + (f"-{slug(variant, 24)}" if text else "")
        )
        written = spec.model_copy(update={"section_template": text})
        outcome = await book(settings.model_copy(update=update), written, folder / name, None, listener)
        point = point_of(outcome.folder, outcome.audit.quality, profile, best_of, figure)
        point.section_prompt = variant
        if planner:
            point.setting += ", planner apart"
            point.planner = ", ".join(b.name for b in planner)
        if len(prompts) > 1:
            point.setting += f", prompt {variant}"
        points.append(point)
    mark_front(points, higher_is_better=higher)
    return FrontierRecord(
        prompt=spec.prompt,
        shape=spec.shape,
        words=spec.words,
        figure=figure,
        higher_is_better=higher,
        points=points,
        host=host_info(),
        started=started,
        duration_s=round(time.monotonic() - clock, 1),
    )


def point_of(run: Path, quality: BookQuality, profile: str, best_of: int, figure: str) -> FrontierPoint:
    stats = read_stats(run)
    return FrontierPoint(
        setting=f"{profile}, best of {best_of}",
        profile=profile,
        best_of=best_of,
        run=str(run),
        tok_s=stats.get("generate_tok_s"),
        job_seconds=stats.get("job_seconds"),
        tokens_written=stats.get("tokens_written"),
        value=getattr(quality, figure),
        quality=quality,
    )


def frontier_chart(record: FrontierRecord, path: Path) -> Path:
    figure, axes = plt.subplots(figsize=(7, 4.5))
    shown = [(p.tok_s, p.value, p) for p in record.points if p.tok_s is not None and p.value is not None]
    for x, y, point in shown:
        axes.plot(x, y, "o" if point.on_front else "x", color="C0" if point.on_front else "C7")
        axes.annotate(point.setting, (x, y), fontsize=8, xytext=(4, 4), textcoords="offset points")
    front = sorted((x, y) for x, y, point in shown if point.on_front)
    axes.plot([x for x, _ in front], [y for _, y in front], "-", color="C0", alpha=0.6, label="Pareto front")
    axes.set_xlabel("fleet tok/s (usage tokens over the job's generating seconds)")
    axes.set_ylabel(f"{record.figure} ({'higher' if record.higher_is_better else 'lower'} is better)")
    axes.set_title(f"Quality against throughput: {record.prompt[:60]}", fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    return save_figure(figure, path)


def frontier_markdown(record: FrontierRecord) -> str:
    columns = [c for c in WORD_COLUMNS + MEANING_COLUMNS if c[1] in ("on_point", "seq_rep_4_median", "unfinished_share",
               "distinct_2", "repeated_content", "length_ratio_median")]  # fmt: skip
    head = ["setting", "tok/s", "job s", "tokens", f"{record.figure} (ranked)", "front: tok/s", "front: job s"]
    head += [c[0] for c in columns]
    lines = [
        f"# The price of quality: {record.prompt}",
        "",
        f"Shape {record.shape}, {record.words} words a section; ranked by {record.figure} "
        f"({'higher' if record.higher_is_better else 'lower'} is better) against tok/s; {record.rule}. "
        f"{record.host.cpu_model} ({record.host.cores} cores), {record.duration_s:.0f} s.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for p in record.points:
        figures = []
        for _, name, fmt, _ in columns:
            value = getattr(p.quality, name)
            figures.append("–" if value is None else fmt.format(value))
        value = "–" if p.value is None else f"{p.value:.3f}"
        cells = [p.setting, f"{p.tok_s or 0:.1f}", f"{p.job_seconds or 0:.0f}", str(p.tokens_written or 0), value]
        fronts = ["yes" if p.on_front else "", "yes" if p.on_front_by_job_time else ""]
        lines.append("| " + " | ".join([*cells, *fronts, *figures]) + " |")
    note = (
        "tok/s counts every token the fleet generated, extra best-of candidates included, so best-of raises it "
        "as it raises the book's cost; the job's seconds are the price of one book, and the second front ranks "
        "by them."
    )
    return "\n".join(lines + ["", note, "", "![Quality against throughput](frontier.png)"]) + "\n"
