"""The audit's rules by meaning: each reads the book's BookMeaning (pipeline/audit/analysis.py: the judge's
figures for every section) and returns the Defects it finds, each naming the section and the figure. rules.py
holds them in RULES, after the rules by words.
"""

from __future__ import annotations

from pipeline.audit.analysis import subject_evidence
from pipeline.audit.book import AuditBook, AuditSection
from pipeline.records.audit import BookMeaning, Defect


def by_id(book: AuditBook) -> dict[str, AuditSection]:
    return {section.id: section for section in book.sections}


def rule_off_point(book: AuditBook, meaning: BookMeaning) -> list[Defect]:
    """Sections whose text is nearer a sibling's title and point than their own (pipeline/audit/analysis.py)."""
    sections = by_id(book)
    return [
        sections[m.id].defect(
            "off_point", f"nearer {m.nearest} {sections[m.nearest].title!r} by {-(m.margin or 0):.2f}"
        )
        for m in meaning.sections
        if m.on_point is False and m.nearest in sections
    ]


def rule_off_book(book: AuditBook, meaning: BookMeaning) -> list[Defect]:
    sections = by_id(book)
    return [
        sections[m.id].defect("off_book", f"{m.to_book:.2f} to the request, {m.to_above:.2f} to the headings above it")
        for m in meaning.sections
        if m.off_book
    ]


def rule_off_subject(book: AuditBook, meaning: BookMeaning) -> list[Defect]:
    """A written section whose heading or text is not about the request (pipeline/meaning/onsubject.py)."""
    sections = by_id(book)
    return [
        sections[m.id].defect("off_subject", subject_evidence(m)) for m in meaning.sections if m.on_subject is False
    ]


def rule_repeated_content(book: AuditBook, meaning: BookMeaning) -> list[Defect]:
    sections = by_id(book)
    return [
        sections[m.id].defect("repeated_content", f"a paragraph says what one of {m.repeats} says")
        for m in meaning.sections
        if m.repeats is not None
    ]


def rule_unsupported(book: AuditBook, meaning: BookMeaning) -> list[Defect]:
    """Cited sentences the passage they cite does not support (pipeline/audit/citations.py)."""
    sections = by_id(book)
    return [
        sections[m.id].defect("unsupported", f"{len(m.unsupported)} of {m.citations}: {m.unsupported[0]}")
        for m in meaning.sections
        if m.unsupported and m.id in sections
    ]


def rule_stray_headings(book: AuditBook, meaning: BookMeaning) -> list[Defect]:
    """Headings inside a written section's body (a run folder's journal): in the book they read as sections."""
    if not book.from_journal:
        return []
    sections = by_id(book)
    return [
        sections[m.id].defect("stray_headings", f"{m.stray_headings} heading(s) inside the body")
        for m in meaning.sections
        if m.stray_headings
    ]
