"""Typed records a book run hands back: its stats (stats.json), the repair pass's summary, and the outcome
the run's watchers and callers receive. They sit above the audit's records (an outcome carries the audit
report and the book's quality figures) and below the book stage that fills them, so the listeners of
pipeline/watch/ can name them without importing the book."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from pipeline.records import Outline
from pipeline.records.audit import AuditReport, BookQuality
from pipeline.records.bench import CpuUse


class BackendLine(BaseModel):
    name: str
    url: str
    cap: int
    model: str | None
    engine: str
    version: str | None
    sent: int  # attempts sent there, planning and writing
    failed: int
    reissued: int


class PromptCache(BaseModel):
    """The engines' prefix cache over a run's answered requests, as each answer told it."""

    requests: int  # answered requests of this run
    told: int  # of them, the ones whose engine said how many prompt tokens it took from its cache
    prompt_tokens: int  # usage prompt tokens of the requests that told
    cached_tokens: int
    share: float | None  # cached / prompt tokens
    prefill_seconds: float | None  # the engine's own prompt time summed (llama.cpp timings.prompt_ms)
    sources: list[str]  # where the cached counts came from (usage.prompt_tokens_details, timings.cache_n)


class BookStats(BaseModel):
    complete: bool
    resumed: bool
    plan_requests_by_level: str  # "1 -> P -> P*C": the planning requests of each level (BookSpec.shape is PxCxS)
    sections: int
    sections_ok: int
    requests_planning: int
    requests_writing: int  # every candidate of every section written this run
    requests: int
    plan_reasked: int = 0  # planning asks beyond each node's (or given node's) first round
    plan_taken_early: int = 0  # titles taken while their samples still streamed (the chain of first lines)
    asks_dropped: int = 0  # asks of the request no planned section carries
    plan_seconds: float
    tokens_written: int
    tokens_source: str = "server usage (completion_tokens), this run"
    write_seconds: float
    write_tok_s: float
    job_seconds: float
    generate_seconds: float = 0.0  # first request to last section: plan + write, the job the efficiency figures time
    generate_tok_s: float = 0.0
    first_section_s: float | None = None  # first request to first section sent (None: no section written this run)
    drain_s: float | None = None  # last section sent to last answer: the tail, while the fleet empties
    retry_tail_s: float | None = None  # every section's first answers in to the last off-point retry's answer
    hedges: int = 0  # second copies of late sections sent (the `hedge` setting)
    hedges_kept: int = 0  # of them, those whose answer landed and needed no retry
    words: int
    pages_at_300_words: float
    request_errors: int
    failed_attempts_by_kind: dict[str, int] = {}  # every failed attempt, planning's and writing's, by outcome
    asked_later: int = 0  # requests that failed on every backend and were asked again later in the run
    engine_restarts: int = 0  # the embedded engine died mid-job and was started again
    reissued_before_first_byte: int
    reissued_worker_lost: int = 0  # asked again because our own client worker process ended (--workers)
    empty_sections: int
    failed_sections: int
    truncated_sections: int  # stopped at the cap and still ending mid-sentence
    trimmed_sections: int = 0  # stopped at the cap, cut back to their last full sentence
    placeholder_titles: int = 0  # numbered stand-in titles (an outline of an older version; fanout makes none now)
    short_nodes: int = 0  # parts and chapters planned with fewer children than the shape asks
    phrased_units: int = 0  # given facets and concerns the model was asked to phrase (planning `given`)
    # the title policy's rules that acted (pipeline/book/plan/policy.py): rule id -> lines it refused, lines it
    # held back, and second rounds asked after it refused or held one of the node's lines
    plan_rules: dict[str, dict[str, int]] = Field(default_factory=dict)
    extra_candidates: int = 0  # section answers written beyond one a section (best of k, off-point retries)
    headings_removed: int = 0  # headings taken out of section answers
    backends: list[BackendLine]
    typeset_seconds: float | None = None  # the typesetter's final merge alone (parts were typeset while writing)
    pdf_pages: int | None = None
    # seconds from the last section's arrival to each file that finishes the book (book.md, audit.json, book.pdf),
    # by the client's clock; a resume that wrote nothing has no last section and so none
    after_last_section: dict[str, float] = {}
    finished_seconds: float | None = None  # first request to book.pdf: the job as its user waits for it
    finished_tok_s: float | None = None  # tokens_written ÷ finished_seconds
    quality: BookQuality | None = None  # the audit's book figures (pipeline.audit.quality)
    prompt_cache: PromptCache | None = None
    cpu: CpuUse | None = None  # CPU seconds from the fleet's opening to the last answer: client by stage, engines


class RepairSummary(BaseModel):
    before: dict[str, int]
    after: dict[str, int] = {}
    actions: dict[str, int]
    retitled: dict[str, tuple[str, str]]
    replanned: dict[str, tuple[str, str]] = {}  # chapter id -> (old title, new title): off the request, planned again
    tokens: int
    seconds: float
    asked_later: int = 0  # repair requests that failed on every backend and were asked again later


class PlanOutcome(BaseModel):
    """What `fanout plan` made: the run folder (outline.json, outline.md, audit.json), the outline, its audit
    (the outline-level rules and figures), and the planning's requests and seconds."""

    folder: Path
    outline: Outline
    audit: AuditReport
    requests: int
    seconds: float


class BookOutcome(BaseModel):
    folder: Path
    stats: BookStats
    audit: AuditReport
    repair: RepairSummary | None = None
