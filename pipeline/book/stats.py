"""Job statistics: stats.json and the table printed at the end.

Takes what the run measured (plan stats, this run's section results and write-phase times, the whole
journal) and returns BookStats. Token counts come from the servers' usage fields; times are client
wall-clock; every rate says so. The quality figures are the audit's, copied in by the run.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.table import Table

from pipeline.book.plan.rounds import PlanStats
from pipeline.records import Attempt, EngineInfo, Outcome, SectionResult
from pipeline.records.bench import CpuUse
from pipeline.records.book import BackendLine, BookStats, PromptCache
from pipeline.text import ends_closed

if TYPE_CHECKING:
    from pipeline.backends.pool import BackendSnapshot

WORDS_PER_PAGE = 300


def word_count(results: dict[str, SectionResult]) -> int:
    return sum(len(r.text.split()) for r in results.values() if r.ok)


@dataclass
class JobTally:
    """What a run's fleet did, gathered before the fleet closes: this run's sections, the write phase's and
    the generation's seconds, every attempt (planning and writing), each backend's counters and the prefix
    cache as the answers told it."""

    written: dict[str, SectionResult]
    write_seconds: float
    generate_seconds: float
    attempts: list[Attempt]
    backends: list[BackendLine]
    prompt_cache: PromptCache | None = None
    asked_later: int = 0  # section and repair requests asked again later in the run (planning's are PlanStats')
    engine_restarts: int = 0
    cpu: CpuUse | None = None  # from the fleet's opening to the last answer (pipeline/cpu.py)
    first_section_s: float | None = None  # the job's first request to its first section sent (the critical path)
    drain_s: float | None = None  # the last section sent to the last answer (the tail, the fleet emptying)
    retry_tail_s: float | None = None  # every section's first answers in to the last off-point retry's answer
    hedges: int = 0  # second copies of late sections sent (the `hedge` setting)
    hedges_kept: int = 0  # of them, those whose answer landed and needed no retry


def book_stats(
    plan: PlanStats,
    tally: JobTally,
    journal: dict[str, SectionResult],
    *,
    section_total: int,
    job_seconds: float,
    resumed: bool,
) -> BookStats:
    written, attempts, write_seconds, backends = tally.written, tally.attempts, tally.write_seconds, tally.backends
    tokens = sum((r.completion_tokens or 0) + r.discarded_tokens for r in written.values() if r.ok)
    candidates = sum(r.candidates for r in written.values())
    ok = sum(r.ok for r in journal.values())
    words = word_count(journal)
    return BookStats(
        complete=ok == section_total,
        resumed=resumed,
        plan_requests_by_level=" -> ".join(str(n) for n in plan.levels) if plan.levels else "loaded from outline.json",
        sections=section_total,
        sections_ok=ok,
        requests_planning=plan.requests,
        requests_writing=candidates,
        requests=plan.requests + candidates,
        plan_reasked=plan.reasked,
        plan_taken_early=plan.taken_early,
        asks_dropped=plan.asks_dropped,
        plan_seconds=round(plan.seconds, 2),
        tokens_written=tokens,
        write_seconds=round(write_seconds, 2),
        write_tok_s=round(tokens / write_seconds, 1) if write_seconds > 0 else 0.0,
        job_seconds=round(job_seconds, 2),
        words=words,
        pages_at_300_words=round(words / WORDS_PER_PAGE, 1),
        request_errors=sum(a.kind.request_error for a in attempts),
        failed_attempts_by_kind=dict(Counter(a.outcome for a in attempts if a.kind.request_error).most_common()),
        asked_later=plan.asked_later + tally.asked_later,
        engine_restarts=tally.engine_restarts,
        reissued_before_first_byte=sum(a.kind is Outcome.CUT_BEFORE_FIRST_BYTE for a in attempts),
        reissued_worker_lost=sum(a.kind is Outcome.CLIENT_WORKER_LOST for a in attempts),
        empty_sections=sum(1 for r in journal.values() if r.error is None and not r.text.strip()),
        failed_sections=section_total - ok,
        truncated_sections=sum(
            r.finish_reason == "length" and not ends_closed(r.text) for r in journal.values() if r.ok
        ),
        trimmed_sections=sum(r.trimmed for r in journal.values() if r.ok),
        short_nodes=plan.short,
        phrased_units=plan.phrased,
        plan_rules=plan.rule_counts(),
        extra_candidates=candidates - len(written),
        headings_removed=sum(r.headings_removed for r in written.values()),
        backends=backends,
        prompt_cache=tally.prompt_cache,
        cpu=tally.cpu,
        first_section_s=None if tally.first_section_s is None else round(tally.first_section_s, 2),
        drain_s=None if tally.drain_s is None else round(tally.drain_s, 2),
        retry_tail_s=None if tally.retry_tail_s is None else round(tally.retry_tail_s, 2),
        hedges=tally.hedges,
        hedges_kept=tally.hedges_kept,
    )


def backend_lines(
    snapshot: list[BackendSnapshot], urls: dict[str, str], models: dict[str, str | None], engines: dict[str, EngineInfo]
) -> list[BackendLine]:
    return [
        BackendLine(
            name=s["name"],
            url=urls[s["name"]],
            cap=s["cap"],
            model=models[s["name"]],
            engine=engines[s["name"]].kind.value,
            version=engines[s["name"]].version,
            sent=s["sent"],
            failed=s["failed"],
            reissued=s["reissued"],
        )
        for s in snapshot
    ]


def failed_line(stats: BookStats) -> str:
    """`12 (http_500 5, stream_cut 4, oversized 3)`: the failed attempts and their kinds."""
    kinds = ", ".join(f"{kind} {count}" for kind, count in stats.failed_attempts_by_kind.items())
    return f"{stats.request_errors} ({kinds})" if kinds else str(stats.request_errors)


def rules_line(rules: dict[str, dict[str, int]], shown: int = 5) -> str:
    """`near_elsewhere 6/0, 2; off_subject 0/9, 3; ...`: the title policy's busiest rules
    (pipeline/book/plan/policy.py), by the lines they acted on."""
    busiest = sorted(rules.items(), key=lambda item: -(item[1]["refused"] + item[1]["held"]))[:shown]
    return "; ".join(f"{rule} {n['refused']}/{n['held']}, {n['rounds']}" for rule, n in busiest)


def seconds_or_dash(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds:.2f}"


def stats_table(stats: BookStats) -> Table:
    table = Table(title="fanout book", show_header=True, header_style="bold")
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [
        ("plan (requests per level)", stats.plan_requests_by_level),
        ("sections (ok / planned)", f"{stats.sections_ok:,} / {stats.sections:,}"),
        ("requests (planning + writing)", f"{stats.requests:,} ({stats.requests_planning} + {stats.requests_writing})"),
        (
            "plan time s (nodes asked again, asks no section carries)",
            f"{stats.plan_seconds:.2f} ({stats.plan_reasked}, {stats.asks_dropped})",
        ),
        ("tokens written (server usage)", f"{stats.tokens_written:,}"),
        ("write time s", f"{stats.write_seconds:.2f}"),
        ("average while writing tok/s", f"{stats.write_tok_s:,.1f}"),
        ("plan + write s (first request to last section)", f"{stats.generate_seconds:.2f}"),
        (
            "first section sent / drain s (first request to it; last section sent to last answer)",
            f"{seconds_or_dash(stats.first_section_s)} / {seconds_or_dash(stats.drain_s)}",
        ),
        ("retry tail s (all first answers in to the last retry's answer)", seconds_or_dash(stats.retry_tail_s)),
        ("hedges sent / kept", f"{stats.hedges} / {stats.hedges_kept}"),
        ("average plan + write tok/s", f"{stats.generate_tok_s:,.1f}"),
        ("whole job s (with engine start and typesetting)", f"{stats.job_seconds:.2f}"),
        ("words", f"{stats.words:,}"),
        ("pages at 300 words", f"{stats.pages_at_300_words:,.1f}"),
        ("request errors (failed attempts)", failed_line(stats)),
        ("asked later (failed on every backend) / engine restarts", f"{stats.asked_later} / {stats.engine_restarts}"),
        (
            "re-asked: cut before first byte / client worker lost",
            f"{stats.reissued_before_first_byte} / {stats.reissued_worker_lost}",
        ),
        (
            "empty / failed / truncated / trimmed sections",
            f"{stats.empty_sections} / {stats.failed_sections} / {stats.truncated_sections} / {stats.trimmed_sections}",
        ),
        ("planned short (parts and chapters with fewer children)", str(stats.short_nodes)),
        ("extra candidates / headings taken out", f"{stats.extra_candidates} / {stats.headings_removed}"),
    ]
    cache = stats.prompt_cache
    if cache is not None and cache.share is not None:
        prefill = "" if cache.prefill_seconds is None else f", engine prefill {cache.prefill_seconds:.1f} s"
        rows.append(
            (
                "prompt tokens from the engine's cache",
                f"{cache.cached_tokens:,} / {cache.prompt_tokens:,} ({100 * cache.share:.0f}%{prefill})",
            )
        )
    if stats.plan_rules:
        rows.append(("title policy: lines refused / held, second rounds after (rule)", rules_line(stats.plan_rules)))
    if stats.cpu is not None:
        rows.append(("CPU s over plan + write: client (by stage) / engines here", cpu_line(stats.cpu)))
    if stats.pdf_pages is not None:
        rows.append(("PDF pages (its final merge s)", f"{stats.pdf_pages} ({stats.typeset_seconds:.1f})"))
    if stats.after_last_section:
        rows.append(("after the last section", after_last_section(stats.after_last_section)))
    if stats.finished_tok_s is not None:
        finished = f"{stats.finished_seconds:.2f} / {stats.finished_tok_s:,.1f}"
        rows.append(("first request to book.pdf s / tok/s", finished))
    for backend in stats.backends:
        rows.append(
            (
                f"backend {backend.name}",
                f"{backend.engine} {backend.version or ''} cap {backend.cap}, "
                f"{backend.sent} attempts, {backend.failed} failed".replace("  ", " "),
            )
        )
    for name, value in rows:
        table.add_row(name, value)
    return table


def after_last_section(seconds: dict[str, float]) -> str:
    """'book.md 1.2 s, audit.json 2.0 s, book.pdf 2.9 s': when each file that finishes the book was written, counted
    from the last section's arrival (or that this run wrote no section)."""
    return ", ".join(f"{name} {value:.1f} s" for name, value in seconds.items()) or "no section written this run"


def cpu_line(cpu: CpuUse) -> str:
    """`41.2 (embeddings 9.1, planning checks 3.0, …) / 180.4 of 2 x 150 s`: where the CPU went while the
    book was planned and written, and how many core-seconds the machine had."""
    stages = ", ".join(f"{name} {seconds:.1f}" for name, seconds in cpu.by_stage.items() if seconds >= 0.05)
    engines = sum(seconds for seconds in cpu.backends.values() if seconds is not None)
    local = "n/a" if all(seconds is None for seconds in cpu.backends.values()) else f"{engines:.1f}"
    return f"{cpu.client:.1f} ({stages}) / {local} of {os.cpu_count() or 1} x {cpu.seconds:.0f} s"
