"""The quality benchmark: books from a list of prompts, and the audit's quality figures for each, side by side.

Takes Settings (the backends, or the embedded engine), the prompts and the book's shape, words and sampling
profile; writes one book per prompt (one after another, each in its own run folder under the record's
folder) and returns a QualityRecord: per prompt the model, engine and profile that wrote it, and the
figures of pipeline/audit/quality.py (seq-rep-4, distinct-2, title echo, placeholders, near-duplicate siblings,
unfinished sections, length against the target). `score_runs` scores finished run folders instead (a book
written by an older fanout, say), and a baseline record puts before -> after in one table. Figures are
computed from the books' text, never asserted in tests: a model writes what it writes.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

from pipeline.audit.book import load_run
from pipeline.audit.report import audit
from pipeline.bench.report.provenance import host_info
from pipeline.book.folder import load_run_folder
from pipeline.book.run import book
from pipeline.config import Settings
from pipeline.errors import UsageError
from pipeline.files import slug
from pipeline.records import BookSpec
from pipeline.records.audit import BookQuality
from pipeline.records.provenance import HostInfo
from pipeline.watch.listeners import BookListener

DEFAULT_PROMPTS = [
    "Write a short handbook on keeping a sourdough starter alive. Practical, with examples.",
    "Write a handbook on building command-line tools in Python, with code examples.",
    "Write a short history of the printing press in Europe, from Gutenberg to the steam press.",
    "Write a beginner's guide to woodworking with hand tools: sharpening, joints and finishing.",
    "Explain how vaccines train the immune system, for curious readers without a biology degree.",
]
# (column, figure, format, better): the tables' columns, by words and by meaning
Column = tuple[str, str, str, str]
WORD_COLUMNS: list[Column] = [
    ("placeholders", "placeholder_titles", "{:d}", "lower"),
    ("echo", "title_echo_rate", "{:.0%}", "lower"),
    ("near-dup", "near_duplicate_titles", "{:d}", "lower"),
    ("non-words", "non_words", "{:d}", "lower"),
    ("rep4 med", "seq_rep_4_median", "{:.3f}", "lower"),
    ("rep4 max", "seq_rep_4_max", "{:.2f}", "lower"),
    ("unfinished", "unfinished_share", "{:.0%}", "lower"),
    ("words/target", "length_ratio_median", "{:.2f}", "closer to 1"),
    ("distinct-2", "distinct_2", "{:.2f}", "higher"),
]
MEANING_COLUMNS: list[Column] = [
    ("on subject", "on_subject", "{:.2f}", "higher"),
    ("on point", "on_point", "{:.2f}", "higher"),
    ("on point, restating cut", "on_point_unrestated", "{:.2f}", "higher"),
    ("opens restating", "restating_openings", "{:.0%}", "lower"),
    ("coverage", "coverage", "{:.2f}", "higher (1: all the request names)"),
    ("similar titles", "similar_titles", "{:d}", "lower"),
    ("overlap", "overlap", "{:d}", "lower"),
    ("vague points", "vague_points", "{:d}", "lower"),
    ("off book", "off_book", "{:d}", "lower"),
    ("off request", "off_request", "{:d}", "lower"),
    ("repeated content", "repeated_content", "{:d}", "lower"),
    ("stray headings", "stray_headings", "{:d}", "lower"),
]


class QualityRow(BaseModel):
    prompt: str
    run: str
    model: str | None
    engine: str | None
    profile: str | None
    shape: str
    words_target: int
    quality: BookQuality
    job_seconds: float | None = None
    pdf_pages: int | None = None
    plan_seconds: float | None = None
    plan_requests: int | None = None
    plan_reasked: int | None = None  # planning nodes asked again


class QualityRecord(BaseModel):
    host: HostInfo
    started: str
    duration_s: float
    rows: list[QualityRow]


def read_prompts(path: Path | None) -> list[str]:
    if path is None:
        return DEFAULT_PROMPTS
    try:
        prompts = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the prompt list {path}: {exc}") from None
    if not prompts:
        raise UsageError(f"{path}: no prompts in it (one a line)")
    return prompts


async def run_quality(
    settings: Settings,
    prompts: list[str],
    shape: tuple[int, int, int],
    words: int,
    max_tokens: int | None,
    folder: Path,
    listener: BookListener,
) -> QualityRecord:
    """One book per prompt, one after another, then the figures of each."""
    started, clock = datetime.now().isoformat(timespec="seconds"), time.monotonic()
    rows = []
    for number, prompt in enumerate(prompts, 1):
        parts, chapters, sections = shape
        fields = {"parts": parts, "chapters": chapters, "sections": sections, "words": words, "max_tokens": max_tokens}
        spec = BookSpec.model_validate({"prompt": prompt, **fields})  # max_tokens None: the spec's own cap rule
        outcome = await book(settings, spec, folder / f"{number:02d}-{slug(prompt, 30)}", None, listener)
        rows.append(score_run(outcome.folder))
    return QualityRecord(host=host_info(), started=started, duration_s=round(time.monotonic() - clock, 1), rows=rows)


def score_run(folder: Path) -> QualityRow:
    """The figures of one finished run folder, from its outline, journal and spec."""
    _, spec = load_run_folder(folder)
    report = audit(load_run(folder))
    stats = read_stats(folder)
    backend = (stats.get("backends") or [{}])[0]
    return QualityRow(
        prompt=spec.prompt,
        run=str(folder),
        model=backend.get("model"),
        engine=backend.get("engine"),
        profile=spec.profile.name if spec.profile else "greedy (before profiles)",
        shape=spec.shape,
        words_target=spec.words,
        quality=report.quality,
        job_seconds=stats.get("job_seconds"),
        pdf_pages=stats.get("pdf_pages"),
        plan_seconds=stats.get("plan_seconds"),
        plan_requests=stats.get("requests_planning"),
        plan_reasked=stats.get("plan_reasked"),
    )


def read_stats(folder: Path) -> dict:
    try:
        return json.loads((folder / "stats.json").read_text())
    except (OSError, ValueError):
        raise UsageError(f"{folder}: no stats.json, so not a finished run") from None


def score_runs(folders: list[Path]) -> QualityRecord:
    started, clock = datetime.now().isoformat(timespec="seconds"), time.monotonic()
    rows = [score_run(folder) for folder in folders]
    return QualityRecord(host=host_info(), started=started, duration_s=round(time.monotonic() - clock, 1), rows=rows)


def load_record(path: Path) -> QualityRecord:
    try:
        return QualityRecord.model_validate_json(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"setting 'baseline' {path}: not a quality record ({str(exc).splitlines()[0]})") from None


def cell(row: QualityRow, figure: str, fmt: str) -> str:
    value = getattr(row.quality, figure)
    return "–" if value is None else fmt.format(value)


def figure_table(record: QualityRecord, before: dict[str, QualityRow], columns: list[Column]) -> list[str]:
    head = ["prompt", "model / profile"] + [name for name, _, _, _ in columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in record.rows:
        old = before.get(row.prompt)
        cells = [row.prompt[:48], f"{row.model} / {row.profile}"]
        for _, figure, fmt, _ in columns:
            now = cell(row, figure, fmt)
            cells.append(f"{cell(old, figure, fmt)} → {now}" if old else now)
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def job_table(record: QualityRecord, before: dict[str, QualityRow]) -> list[str]:
    """Each book's job: whole seconds, planning seconds, planning requests and nodes asked again."""
    lines = ["| prompt | job s | plan s | plan requests | re-asked |", "|---|---|---|---|---|"]
    for row in record.rows:
        old = before.get(row.prompt)
        cells = [row.prompt[:48]]
        for name in ("job_seconds", "plan_seconds", "plan_requests", "plan_reasked"):
            now = "–" if getattr(row, name) is None else f"{getattr(row, name):g}"
            then = "–" if old is None or getattr(old, name) is None else f"{getattr(old, name):g}"
            cells.append(f"{then} → {now}" if old else now)
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def quality_markdown(record: QualityRecord, baseline: QualityRecord | None = None) -> str:
    """Two tables, by words and by meaning: one row a prompt, one column a figure; with a baseline, each
    cell reads `before → after` (rows are matched by prompt)."""
    before = {row.prompt: row for row in baseline.rows} if baseline else {}
    columns = WORD_COLUMNS + MEANING_COLUMNS
    better = "; ".join(f"{name}: {how}" for name, _, _, how in columns)
    lines = [
        "By words:",
        "",
        *figure_table(record, before, WORD_COLUMNS),
        "",
        "By meaning:",
        "",
        *figure_table(record, before, MEANING_COLUMNS),
        "",
        "The jobs:",
        "",
        *job_table(record, before),
        "",
        f"Better is: {better}. Figures from the books' own text (`fanout audit` defines each); "
        f"machine: {record.host.cpu_model} ({record.host.cores} cores); {record.duration_s:.0f} s.",
    ]
    return "\n".join(lines) + "\n"
