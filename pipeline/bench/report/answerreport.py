"""Report table and chart for --audit-answers: per ladder level and per open-loop rate, the share of answers
capped mid-sentence, looping, empty or duplicated (bench/report/answers.py defines each).

Takes a BenchRecord; returns Tables for report.py and, for charts, a PNG of the four shares against load.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.bench.report.plotting import plt, save_figure
from pipeline.bench.report.table import Table
from pipeline.records.bench import AnswerAudit, BenchRecord

HEADER = ["Level", "Answers", "Capped mid-sentence", "Looping", "Empty", "Duplicate"]


def cell(count: int, share: float | None) -> str:
    return "–" if share is None else f"{count} ({100 * share:.1f}%)"


def row(level: str, audit: AnswerAudit) -> list[str]:
    return [
        level,
        str(audit.answers),
        cell(audit.capped, audit.capped_share),
        cell(audit.looping, audit.looping_share),
        cell(audit.empty, audit.empty_share),
        cell(audit.duplicate, audit.duplicate_share),
    ]


def levels_audited(record: BenchRecord) -> list[tuple[str, str, list[tuple[str, float, AnswerAudit]]]]:
    """(title, x label, [(level name, x, audit)]) for every ladder series and rate sweep that was audited."""
    found = []
    for series in record.series:
        points = [(f"{lv.streams} streams", float(lv.streams), lv.total.answers) for lv in series.levels]
        found.append((f"Answers under load: {series.label}", "streams per backend", points))
    for sweep in record.sweeps:
        points = [(f"{p.rate:g} req/s", p.rate or 0.0, p.answers) for p in sweep.points]
        found.append((f"Answers under load: {sweep.label} (open loop)", "offered requests per second", points))
    return [(title, axis, [(n, x, a) for n, x, a in points if a is not None]) for title, axis, points in found
            if any(a is not None for _, _, a in points)]  # fmt: skip


def answer_tables(record: BenchRecord) -> list[Table]:
    tables = []
    for title, _, points in levels_audited(record):
        first = points[0][2]
        notes = [f"Each answered request's text, audited: {first.rule}. Failed requests are not answers."]
        if first.ignore_eos:
            notes.append("ignore_eos was on: every answer ran to its cap, so 'capped' is by construction here.")
        tables.append(Table(title, HEADER, [row(name, audit) for name, _, audit in points], notes))
    return tables


def answers_chart(record: BenchRecord, path: Path) -> Path | None:
    audited = levels_audited(record)
    if not audited:
        return None
    figure, axes_list = plt.subplots(1, len(audited), figsize=(6 * len(audited), 4), squeeze=False)
    for axes, (title, axis, points) in zip(axes_list[0], audited):
        xs = [x for _, x, _ in points]
        for flag in AnswerAudit.FLAGS:
            shares = [100 * (getattr(a, f"{flag}_share") or 0.0) for _, _, a in points]
            axes.plot(xs, shares, "o-", label=flag)
        axes.set_title(title, fontsize=10)
        axes.set_xlabel(axis)
        axes.set_ylabel("% of answers")
        axes.set_ylim(-2, 102)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    return save_figure(figure, path)
