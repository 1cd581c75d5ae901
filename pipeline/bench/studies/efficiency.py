"""Job efficiency: how much of what the backends sustain does a whole book job get?

Takes Settings (the backends and their caps, or the embedded engine) and a book shape; in one run it
measures the ladder's sustained rate at the caps (every backend full, closed loop), then writes the book
three ways (pipelined, each chapter's sections sent once it is whole; streamed, the book's default, each
section sent as its line lands; and with --barrier), and returns an EfficiencyRecord: plan + write tok/s ÷
sustained (the whole job: first request to last section) and write-phase tok/s ÷ sustained, with where the
CPU went in the ladder and in each job (pipeline/cpu.py). Tokens are the servers' usage counts; times are
the client's clock.

Each schedule also has its own limit: the planning it cannot write without, run alone on the idle fleet,
plus its written tokens at the sustained rate. For pipelined and streamed that planning is the chain a first
section waits for (the book, its first part, that part's first chapter: `first_chain_seconds`, timed once
before the jobs); for the barrier it is the whole plan, which runs alone in that job anyway (its own plan
seconds). `limit_tok_s` = tokens ÷ (that planning + tokens ÷ sustained), and `limit_ratio` = the job's tok/s
÷ its limit: a shortfall against the limit is the client's or the schedule's loss, not planning's nature.
Each schedule also gets what its own sends allow: the ladder runs a second level (an eighth of the cap a
backend) so that a step law a + b·n ms is fitted, and the job's sections, each sent when the job sent it, are
simulated on engines that keep it (pipeline/bench/studies/fleetsim.py): `sends_bound_s` is when the last one
would end, and `sends_ratio` that over the job's own time. Near 1, the sends (when planning let each section
go) set the job's length, not the client; well below 1, the client or the engines lost time the sends allowed.
The same simulation of the job's whole tree (`tree_bound_s`: its first-round planning requests too, each request
sent the moment its parent's answer generated the line that names it) says what the schedule could reach with
these planning answers on a client that costs nothing: the limit counts only the chain's planning, alone on an idle
fleet, while in the job a chapter's answer streams in a batch full of sections, at the loaded step's pace.

Each row also shows the time to the first section sent and the drain (the last section sent to the last
answer, while the fleet empties), from the job's stats.json. The jobs ask one candidate a section and no
off-point retry (`seed_job`), so no retry tail (stats.json's `retry_tail_s`) lengthens them. Each job starts
with the meaning models' caches empty (`cold_meaning`), so each pays its own judge, as a user's one book does.

Against a book's own workload (`workload_efficiency`): a finished run folder's requests (requests.jsonl:
every planning and section request as it was sent) replayed all at once on the same fleet, paced only by
the caps, are the ceiling for that very mix (its prompt lengths, answers that end on their own, its
sampling); the book's tok/s over its job ÷ the replay's tok/s says how much of it the book's schedule
(planning before writing, re-asks one after another) left unused. That is the figure that counts where a
ladder of fixed-length answers is not the book's load (the embedded engine).
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from pipeline.bench.studies.fleetsim import StepLaw, book_tree, first_section_sends, makespan, tree_makespan
from pipeline.bench.studies.ladder import bench
from pipeline.book.requestlog import REQUEST_LOG
from pipeline.book.run import RunOptions, book, first_chain_seconds
from pipeline.config import Settings
from pipeline.cpu import EVENT_LOOP, CpuMeter, Stage, cpu_use
from pipeline.errors import UsageError
from pipeline.meaning.embed import CachedEmbedder, Embedder, open_embedder
from pipeline.meaning.offrequest import open_judge
from pipeline.records import BookSpec, PlanSchedule
from pipeline.records.bench import BenchSpec, CpuUse
from pipeline.watch.listeners import BookListener


class JobRow(BaseModel):
    schedule: str
    sections: int
    tokens: int
    plan_seconds: float
    write_seconds: float
    generate_seconds: float
    generate_tok_s: float
    write_tok_s: float
    whole_ratio: float
    write_ratio: float
    critical_plan_s: float  # the planning this schedule cannot write without, alone on the idle fleet
    limit_tok_s: float  # tokens ÷ (critical_plan_s + tokens ÷ sustained)
    limit_ratio: float  # generate_tok_s ÷ limit_tok_s
    first_section_s: float | None = None  # first request to first section sent
    drain_s: float | None = None  # last section sent to last answer
    sends_bound_s: float | None = None  # the last section's end on the fitted step law, each sent when the job sent it
    sends_ratio: float | None = None  # sends_bound_s ÷ generate_seconds: the share of what its sends allow
    # the job's own planning answers and sections on the fitted step law, each sent the moment the line that names it
    # was generated (a client that costs nothing); pipelined: a section once its chapter's answer is in
    tree_bound_s: float | None = None
    tree_ratio: float | None = None  # tree_bound_s ÷ generate_seconds
    finished_tok_s: float | None = None  # tokens ÷ (first request to book.pdf written): the finished book's rate
    finished_ratio: float | None = None  # finished_tok_s ÷ sustained
    after_last_section: dict[str, float] = {}  # book.md, audit.json, book.pdf: seconds after the last section
    cpu: CpuUse | None = None  # the whole book() call: plan, write, then assembly and typesetting


class EfficiencyRecord(BaseModel):
    shape: str
    caps: list[int]
    sustained_tok_s: float
    sustained_source: str
    window_s: float
    step_law_a_ms: float | None = None  # the ladder's fit: step_ms = a + b × streams a backend (None: no fit)
    step_law_b_ms: float | None = None
    first_chain_s: float  # the book, its first part and that part's first chapter, planned alone on the idle fleet
    rows: list[JobRow]
    duration_s: float
    ladder_cpu: CpuUse | None = None  # the ladder's two windows (an eighth of the caps, the caps), with warm-ups


def caps_of(settings: Settings) -> list[int]:
    """The configured caps; the ladder at caps refuses a level above an effective (open-file limited) cap,
    so a study whose caps were lowered stops with that message rather than measuring the wrong load."""
    return [b.cap for b in settings.backends] or [settings.slots]


def cpu_meter(settings: Settings) -> CpuMeter:
    return CpuMeter({backend.name: backend.base_url for backend in settings.backends})


LOW_LEVEL_SHARE = 8  # the ladder's second level, for the step law's fit: this share of the cap a backend


@dataclass(frozen=True)
class FleetAtCaps:
    sustained: float
    source: str
    law: StepLaw | None  # the fitted step law; None when the fit is not a rising line


async def fleet_at_caps(settings: Settings, max_tokens: int, window_s: float) -> FleetAtCaps:
    """The sustained rate at the caps, and the step law fitted through it and a level of an eighth of them."""
    caps = caps_of(settings)
    if len(set(caps)) != 1:
        raise ValueError("the efficiency benchmark needs one cap for every backend")
    # The cap is the load the book job puts on each backend, so the ladder is measured at exactly that
    # many streams; for engines that cannot report their slots, the cap stands in for them.
    levels = sorted({max(1, caps[0] // LOW_LEVEL_SHARE), caps[0]})
    spec = BenchSpec(
        streams=levels, window_s=window_s, max_tokens=max_tokens, label="at caps", engine_slots={"*": caps[0]}
    )
    series = (await bench(settings, spec)).series[0]
    point = next(level.total for level in series.levels if level.streams == caps[0])
    fit = series.fit
    law = StepLaw(a_s=fit.a_ms / 1000, b_s=fit.b_ms / 1000) if fit and fit.a_ms > 0 and fit.b_ms >= 0 else None
    return FleetAtCaps(point.sustained, point.sustained_source, law)


SCHEDULES = (PlanSchedule.PIPELINED, PlanSchedule.STREAMED, PlanSchedule.BARRIER)


def seed_job(settings: Settings) -> Settings:
    """Seed 003's job: one request a section (no best of k, no off-point retries), so the figure measures the
    schedule against the fleet, not how many candidates the text asked for."""
    return settings.model_copy(update={"best_of": 1, "off_point_retries": 0})


def cold_meaning(settings: Settings) -> None:
    """Empty the caches of the meaning models a book uses (the static table and the judge, each loaded once a
    process): each job then embeds its own book's titles and texts, as a user's one book does. On FAKE engines the
    three jobs write the same book, so the first job's cache served the other two: on capable FAKE engines at
    8x12x16 the pipelined job spent 114.5 CPU-s on embeddings and streamed and barrier, after it, 0.5 and 0.8."""
    opened: list[Embedder | None] = [open_embedder(), open_embedder(settings.embeddings)]
    if settings.judge != "none":
        opened += [open_judge(), open_judge(settings.judge)]
    for embedder in opened:  # each as the book's stages open it: with the setting, or with their own default
        if isinstance(embedder, CachedEmbedder):
            embedder.cache.clear()


async def chain_seconds(settings: Settings, spec: BookSpec) -> float:
    """The pipelined and streamed schedules' planning critical path, timed alone on the idle fleet."""
    cold_meaning(settings)
    with tempfile.TemporaryDirectory(prefix="fanout-efficiency-") as folder:
        return await first_chain_seconds(seed_job(settings), spec, Path(folder) / "chain")


def limit_tok_s(tokens: int, planning_s: float, sustained: float) -> float:
    """What a schedule could reach at best: its tokens over the planning it must wait for plus their writing
    at the sustained rate."""
    seconds = planning_s + tokens / sustained if sustained > 0 else 0.0
    return tokens / seconds if seconds > 0 else 0.0


async def job_row(
    settings: Settings, spec: BookSpec, *, schedule: PlanSchedule, fleet: FleetAtCaps, chain_s: float
) -> JobRow:
    settings = seed_job(settings)
    meter = cpu_meter(settings)
    cold_meaning(settings)
    with tempfile.TemporaryDirectory(prefix="fanout-efficiency-") as folder:
        # Typesetting waits for the end here: on a machine that also hosts the backends (the embedded
        # engine, local fakes) its render processes would take CPU from them mid-job.
        options = RunOptions(schedule=schedule, incremental=False)
        before = meter.snapshot()
        outcome = await book(settings, spec, Path(folder) / "run", None, BookListener(), options=options)
        cpu = cpu_use(before, meter.snapshot())
        sends, tokens = first_section_sends(Path(folder) / "run" / REQUEST_LOG)
        tree = book_tree(Path(folder) / "run" / REQUEST_LOG, sections_streamed=schedule is PlanSchedule.STREAMED)
    stats = outcome.stats
    sustained = fleet.sustained
    bound = makespan(sends, tokens, caps=caps_of(settings), law=fleet.law) if fleet.law and sends else None
    tree_bound = (
        tree_makespan(tree, caps=caps_of(settings), law=fleet.law)
        if fleet.law and sends and schedule is not PlanSchedule.BARRIER
        else None
    )
    # the limit is of the planning the record shows (to 0.01 s), so a reader can recompute it from the record
    critical = round(stats.plan_seconds if schedule is PlanSchedule.BARRIER else chain_s, 2)
    limit = limit_tok_s(stats.tokens_written, critical, sustained)
    return JobRow(
        schedule=schedule.value,
        sections=stats.sections_ok,
        tokens=stats.tokens_written,
        plan_seconds=stats.plan_seconds,
        write_seconds=stats.write_seconds,
        generate_seconds=stats.generate_seconds,
        generate_tok_s=stats.generate_tok_s,
        write_tok_s=stats.write_tok_s,
        whole_ratio=round(stats.generate_tok_s / sustained, 3),
        write_ratio=round(stats.write_tok_s / sustained, 3),
        critical_plan_s=critical,
        limit_tok_s=round(limit, 1),
        limit_ratio=round(stats.generate_tok_s / limit, 3) if limit > 0 else 0.0,
        first_section_s=stats.first_section_s,
        drain_s=stats.drain_s,
        sends_bound_s=None if bound is None else round(bound, 2),
        sends_ratio=round(bound / stats.generate_seconds, 3) if bound and stats.generate_seconds > 0 else None,
        tree_bound_s=None if tree_bound is None else round(tree_bound, 2),
        tree_ratio=round(tree_bound / stats.generate_seconds, 3) if tree_bound and stats.generate_seconds else None,
        finished_tok_s=stats.finished_tok_s,
        finished_ratio=None if stats.finished_tok_s is None else round(stats.finished_tok_s / sustained, 3),
        after_last_section=stats.after_last_section,
        cpu=cpu,
    )


async def job_efficiency(settings: Settings, spec: BookSpec, window_s: float) -> EfficiencyRecord:
    started = time.monotonic()
    meter = cpu_meter(settings)
    before = meter.snapshot()
    fleet = await fleet_at_caps(settings, spec.max_tokens, window_s)
    ladder_cpu = cpu_use(before, meter.snapshot())
    chain_s = await chain_seconds(settings, spec)
    rows = [await job_row(settings, spec, schedule=schedule, fleet=fleet, chain_s=chain_s) for schedule in SCHEDULES]
    return EfficiencyRecord(
        shape=spec.shape,
        caps=caps_of(settings),
        sustained_tok_s=round(fleet.sustained, 1),
        sustained_source=fleet.source,
        window_s=window_s,
        step_law_a_ms=None if fleet.law is None else round(fleet.law.a_s * 1000, 3),
        step_law_b_ms=None if fleet.law is None else round(fleet.law.b_s * 1000, 4),
        first_chain_s=round(chain_s, 2),
        rows=rows,
        duration_s=round(time.monotonic() - started, 1),
        ladder_cpu=ladder_cpu,
    )


def efficiency_markdown(record: EfficiencyRecord) -> str:
    lines = [
        f"# Job efficiency: book {record.shape} at caps {record.caps}",
        "",
        f"Sustained at the caps: {record.sustained_tok_s:,.1f} tok/s ({record.sustained_source}, "
        f"{record.window_s:.0f} s window). Jobs: tokens from server usage, times from the client clock; "
        f"{record.duration_s:.0f} s in all.",
        "",
        "| schedule | sections | plan s | write s | plan + write s | plan + write tok/s | ÷ sustained "
        "| write tok/s | ÷ sustained | limit tok/s | ÷ limit | sends allow s | ÷ sends | its plan allows s | ÷ plan "
        "| first section s | drain s | to book.pdf tok/s | ÷ sustained | book.pdf s after the last section |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in record.rows:
        lines.append(
            f"| {row.schedule} | {row.sections:,} | {row.plan_seconds:.2f} | {row.write_seconds:.2f} | "
            f"{row.generate_seconds:.2f} | {row.generate_tok_s:,.1f} | {row.whole_ratio:.3f} | "
            f"{row.write_tok_s:,.1f} | {row.write_ratio:.3f} | {row.limit_tok_s:,.1f} | {row.limit_ratio:.3f} | "
            f"{seconds_cell(row.sends_bound_s)} | {ratio_cell(row.sends_ratio)} | "
            f"{seconds_cell(row.tree_bound_s)} | {ratio_cell(row.tree_ratio)} | "
            f"{seconds_cell(row.first_section_s)} | {seconds_cell(row.drain_s)} | "
            f"{rate_cell(row.finished_tok_s)} | {ratio_cell(row.finished_ratio)} | "
            f"{seconds_cell(row.after_last_section.get('book.pdf'))} |"
        )
    lines += [
        "",
        f"Limit: tokens ÷ (the planning a schedule cannot write without, alone on the idle fleet, + tokens at the "
        f"sustained rate). Pipelined and streamed wait for the chain book → first part → its first chapter: "
        f"{record.first_chain_s:.2f} s planned alone; the barrier for its whole plan (its own plan s).",
        "",
        f"Sends allow: when the last section would end on engines keeping the ladder's step law "
        f"({law_text(record)}), each sent when the job sent it (pipeline/bench/studies/fleetsim.py); ÷ sends is "
        "that over the job's own time: near 1, the schedule's sends set the job's length, not the client.",
        "",
        "Its plan allows: the job's own planning answers (first rounds) and sections on the same engines, each "
        "sent the moment the line that names it was generated (a client that costs nothing; pipelined: a section once "
        "its chapter's answer is in), planning's streams in the same batches as the sections. Under the step law a "
        "planning answer streams at the loaded step's pace, so this, not the limit, is what the schedule can reach "
        "with these answers; ÷ plan is it over the job's own time (the client's share of the loss).",
        "",
        "To book.pdf: the tokens over the time from the first request to the finished book (book.md, audit.json and "
        "book.pdf written), what its user waits for; ÷ sustained is the finished-book ratio beside plan + write's.",
    ]
    return "\n".join(lines) + "\n" + cpu_markdown(record)


def law_text(record: EfficiencyRecord) -> str:
    if record.step_law_a_ms is None or record.step_law_b_ms is None:
        return "none fitted: the two levels gave no rising line"
    return f"step ms = {record.step_law_a_ms:.2f} + {record.step_law_b_ms:.4f} × streams a backend"


def ratio_cell(ratio: float | None) -> str:
    return "–" if ratio is None else f"{ratio:.3f}"


def rate_cell(tok_s: float | None) -> str:
    return "–" if tok_s is None else f"{tok_s:,.1f}"


def seconds_cell(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds:.2f}"


def cpu_markdown(record: EfficiencyRecord) -> str:
    """Where the CPU went in the ladder and in each job (pipeline/cpu.py), CPU seconds."""
    runs = [("ladder at caps", record.ladder_cpu)] + [(f"job, {row.schedule}", row.cpu) for row in record.rows]
    measured = [(name, cpu) for name, cpu in runs if cpu is not None]
    if not measured:
        return ""
    stages = [*Stage, EVENT_LOOP]
    backends = sorted({name for _, cpu in measured for name in cpu.backends})
    header = ["run", "wall s", "client", *stages, "children", *backends]
    lines = [
        "",
        "Where the CPU went (CPU seconds: the client's by stage, its child processes, and each backend's server "
        "where it runs on this machine; – : elsewhere, or served from inside the client):",
        "",
        "| " + " | ".join(header) + " |",
        "|---" * len(header) + "|",
    ]
    for name, cpu in measured:
        served = ["–" if (seconds := cpu.backends.get(b)) is None else f"{seconds:.2f}" for b in backends]
        cells = [name, f"{cpu.seconds:.1f}", f"{cpu.client:.2f}"]
        cells += [f"{cpu.by_stage.get(s, 0.0):.2f}" for s in stages] + [f"{cpu.children:.2f}", *served]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


class WorkloadEfficiency(BaseModel):
    """A finished book's job against its own requests replayed at once on the same fleet."""

    run: str
    shape: str
    requests: int  # in the book's request log
    book_seconds: float  # the book's job: first request to last section (stats.json generate_seconds)
    book_tokens: int  # completion tokens the engines counted for the book's requests (cancelled ones: none)
    book_tok_s: float
    replay_seconds: float  # first send to last answer
    replay_tokens: int
    replay_tok_s: float
    replay_failed: int
    tok_s_ratio: float  # book tok/s ÷ replay tok/s: the share of its own mix's ceiling the book got
    seconds_ratio: float  # replay seconds ÷ book seconds (the replay's answers may run longer: cut ones end)
    duration_s: float


def book_figures(run_dir: Path) -> tuple[str, float, int, int]:
    """(shape, job seconds, completion tokens, requests) of a finished run folder."""
    try:
        stats = json.loads((run_dir / "stats.json").read_text())
        spec = BookSpec.model_validate_json((run_dir / "spec.json").read_text())
        rows = [json.loads(line) for line in (run_dir / REQUEST_LOG).read_text().splitlines() if line.strip()]
        seconds = float(stats["generate_seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        raise UsageError(
            f"setting 'workload' {run_dir}: not a finished book run (spec.json, stats.json and {REQUEST_LOG})"
        ) from None
    tokens = sum(int(row.get("completion_tokens") or 0) for row in rows if isinstance(row, dict))
    return spec.shape, seconds, tokens, len(rows)


async def workload_efficiency(settings: Settings, run_dir: Path) -> WorkloadEfficiency:
    started = time.monotonic()
    shape, book_seconds, book_tokens, requests = book_figures(run_dir)
    if book_seconds <= 0 or book_tokens <= 0:
        raise UsageError(f"setting 'workload' {run_dir}: the run counted no tokens or time")
    # as in the book, each backend runs as many as its cap lets in; for engines that cannot report their
    # slots, the cap stands in for them
    slots = {backend.name: backend.cap for backend in settings.backends}
    spec = BenchSpec(streams=[], workload=str(run_dir), replay_speed=0, label="book replay", engine_slots=slots)
    record = await bench(settings, spec)
    point = record.replays[0].point
    replay_seconds = point.duration_s_measured or 0.0
    replay_tok_s = point.output_throughput or 0.0  # usage completion tokens over the same seconds
    book_tok_s = book_tokens / book_seconds
    return WorkloadEfficiency(
        run=str(run_dir),
        shape=shape,
        requests=requests,
        book_seconds=round(book_seconds, 2),
        book_tokens=book_tokens,
        book_tok_s=round(book_tok_s, 1),
        replay_seconds=round(replay_seconds, 2),
        replay_tokens=point.completion_tokens,
        replay_tok_s=round(replay_tok_s, 1),
        replay_failed=point.failed,
        tok_s_ratio=round(book_tok_s / replay_tok_s, 3) if replay_tok_s > 0 else 0.0,
        seconds_ratio=round(replay_seconds / book_seconds, 3),
        duration_s=round(time.monotonic() - started, 1),
    )


def workload_markdown(record: WorkloadEfficiency) -> str:
    return "\n".join(
        [
            f"# Job efficiency against its own workload: {record.run} ({record.shape})",
            "",
            f"The book's {record.requests} requests replayed at once on the same fleet, paced by the caps. Tokens "
            "from server usage, times from the client clock; the book's cancelled planning answers count no "
            "tokens, their replays run to their end.",
            "",
            "| | seconds | completion tokens | tok/s |",
            "|---|---|---|---|",
            f"| book job | {record.book_seconds:.1f} | {record.book_tokens:,} | {record.book_tok_s:,.1f} |",
            f"| replay at once | {record.replay_seconds:.1f} | {record.replay_tokens:,} | {record.replay_tok_s:,.1f} |",
            "",
            f"Book tok/s ÷ replay tok/s: **{record.tok_s_ratio:.3f}**; replay seconds ÷ book seconds: "
            f"{record.seconds_ratio:.3f}; {record.replay_failed} replayed requests failed; "
            f"{record.duration_s:.0f} s in all.",
            "",
        ]
    )
