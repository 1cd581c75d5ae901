"""The typeset stage: the assembled book, its stats and audit -> book.pdf, book.html and book.epub, each with the
appendix of the run's figures and the audit's findings; returns the stats with the typesetting's seconds and the
PDF's pages. The parts already rendered while the book was written (book/incremental.py) are only merged now."""

from __future__ import annotations

import logging

import anyio

from pipeline.book.folder import RunFolder
from pipeline.book.incremental import IncrementalTypesetter
from pipeline.cpu import Stage, charged, stage
from pipeline.records import Outline, SectionResult
from pipeline.records.audit import AuditReport
from pipeline.records.book import BookStats
from pipeline.typeset.appendix import appendix_html
from pipeline.typeset.book import typeset_html
from pipeline.typeset.epub import typeset_epub
from pipeline.watch.events import FileFinished, TypesettingStarted
from pipeline.watch.listeners import BookListener

log = logging.getLogger("fanout")
# stats.json's figures of the finished book itself, not known while its appendix is typeset: left out of the appendix
OF_THE_FINISHED_BOOK = {"typeset_seconds", "pdf_pages", "after_last_section", "finished_seconds", "finished_tok_s"}


async def typeset_book(
    folder: RunFolder,
    outline: Outline,
    journal: dict[str, SectionResult],
    stats: BookStats,
    report: AuditReport,
    *,
    typesetter: IncrementalTypesetter,
    listener: BookListener,
) -> BookStats:
    listener.hear(TypesettingStarted())
    run = stats.model_dump(mode="json", exclude=OF_THE_FINISHED_BOOK)
    appendix = appendix_html(run, report.model_dump(mode="json"))
    finish = charged(Stage.FINISHING)(typesetter.finish)
    result = await anyio.to_thread.run_sync(finish, outline, journal, appendix)
    listener.hear(FileFinished(folder.pdf.name))
    markdown = folder.book.read_text()
    with stage(Stage.FINISHING):
        typeset_html(markdown, outline.title, folder.html, appendix)
        typeset_epub(markdown, outline.title, folder.epub, appendix)
    log.info("PDF merged in %.1f s (%d pages)", result.seconds, result.pages)
    return stats.model_copy(update={"typeset_seconds": round(result.seconds, 2), "pdf_pages": result.pages})
