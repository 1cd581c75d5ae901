"""The audit stage: the run folder's book (book.md, outline.json, spec.json, the journal) -> its AuditReport, written
as audit.json. Every rule for a written book (pipeline/audit/rules.py), the title rules alone for an outline
(`fanout plan`: TITLE_RULES)."""

from __future__ import annotations

from pipeline.audit.book import load_run
from pipeline.audit.report import audit
from pipeline.book.folder import RunFolder
from pipeline.cpu import Stage, charged
from pipeline.files import write_atomic
from pipeline.meaning.embed import Embedder
from pipeline.records.audit import AuditReport


@charged(Stage.FINISHING)
def audit_book(folder: RunFolder, *, embedder: Embedder, judge: str, only: list[str] | None = None) -> AuditReport:
    report = audit(load_run(folder.path), only=only, embedder=embedder, judge=judge)
    write_atomic(folder.audit, report.model_dump_json(indent=2))
    return report
