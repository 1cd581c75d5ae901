"""What the audit reads: a book as AuditSections, from a run folder or from a bare Markdown book.

Takes a run folder (spec, outline, journal and book.md) or a Markdown file (split at its headings); returns
an AuditBook. A leaf of the audit: the rules, the quality figures and the report read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from markdown_it import MarkdownIt

from pipeline.errors import UsageError
from pipeline.journal import read_journal
from pipeline.records import BookSpec, Node, Outline, SectionResult
from pipeline.text import close_open_fence

SECTION_NUMBER = re.compile(r"^\d+(?:\.\d+)*\.?\s+")
_markdown = MarkdownIt("commonmark").enable("table")


@dataclass
class AuditSection:
    id: str
    title: str
    text: str
    finish_reason: str | None = None
    error: str | None = None

    @property
    def words(self) -> int:
        return len(self.text.split())


@dataclass
class AuditBook:
    source: str
    parts: list[tuple[str, str]]  # (id, title)
    chapters: list[tuple[str, str]]
    sections: list[AuditSection]
    from_journal: bool
    blocks: list[str] = field(default_factory=list)  # heading-delimited blocks of book.md, the unit the summary counts
    title: str = ""
    prompt: str | None = None  # what the user asked for: run folders only
    target_words: int | None = None  # words asked for per section: run folders only
    parents: dict[str, str] = field(default_factory=dict)  # a chapter's or section's id -> its parent's id
    placeholders: set[str] = field(default_factory=set)  # ids outline.json flags as numbered stand-ins
    points: dict[str, str] = field(default_factory=dict)  # a node's id -> its key point (run folders only)


def load_run(folder: Path) -> AuditBook:
    try:
        outline = Outline.model_validate_json((folder / "outline.json").read_text())
    except (OSError, ValueError):
        raise UsageError(f"{folder}: not a fanout run folder (no valid outline.json)") from None
    journal = read_journal(folder / "sections.jsonl")
    sections = [run_section(section, journal.get(section.id)) for _, _, section in outline.sections()]
    book_md = folder / "book.md"
    blocks = heading_blocks(book_md.read_text()) if book_md.exists() else [s.text for s in sections]
    spec = read_spec(folder)
    parents = {c.id: p.id for p in outline.parts for c in p.chapters}
    parents.update({s.id: c.id for _, c, s in outline.sections()})
    return AuditBook(
        str(folder),
        [(p.id, p.title) for p in outline.parts],
        [(c.id, c.title) for p in outline.parts for c in p.chapters],
        sections,
        from_journal=True,
        blocks=blocks,
        title=outline.title,
        prompt=spec.prompt if spec else None,
        target_words=spec.words if spec else None,
        parents=parents,
        placeholders={node.id for node in outline_nodes(outline) if node.placeholder},
        points={node.id: node.point for node in outline_nodes(outline) if node.point},
    )


def run_section(section: Node, result: SectionResult | None) -> AuditSection:
    if result is None:
        return AuditSection(section.id, section.title, "", error="never written")
    return AuditSection(section.id, section.title, result.text, result.finish_reason, result.error)


def read_spec(folder: Path) -> BookSpec | None:
    """The run's spec.json; None when it is missing or unreadable (the outline alone can be audited)."""
    try:
        return BookSpec.model_validate_json((folder / "spec.json").read_text())
    except (OSError, ValueError):
        return None


def outline_nodes(outline: Outline) -> list[Node]:
    return [
        node
        for part in outline.parts
        for node in (part, *part.chapters, *(s for c in part.chapters for s in c.sections))
    ]


def headings_of(markdown: str) -> list[tuple[int, int, str]]:
    """(line, level, text) of every heading, code blocks excluded."""
    tokens = _markdown.parse(markdown)
    return [
        (t.map[0], int(t.tag[1]), tokens[i + 1].content)
        for i, t in enumerate(tokens)
        if t.type == "heading_open" and t.map
    ]


def heading_blocks(markdown: str) -> list[str]:
    """The text between consecutive headings."""
    lines = markdown.splitlines()
    starts = [line for line, _, _ in headings_of(markdown)] + [len(lines)]
    blocks = ["\n".join(lines[a + 1 : b]).strip() for a, b in zip(starts, starts[1:])]
    return [b for b in blocks if b]


def load_markdown(path: Path) -> AuditBook:
    """A bare book: h2 parts, h3 chapters and the deepest heading level used as sections."""
    try:
        markdown = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    headings = headings_of(markdown)
    if not headings:
        raise UsageError(f"{path}: no headings, so no sections to audit")
    section_level = max(level for _, level, _ in headings)
    lines = markdown.splitlines()
    book = AuditBook(str(path), [], [], [], from_journal=False, blocks=heading_blocks(markdown))
    bounds = [line for line, _, _ in headings] + [len(lines)]
    part = chapter = None  # the ids the next headings belong to
    for index, (line, level, text) in enumerate(headings):
        title = SECTION_NUMBER.sub("", text.removeprefix("Part ").strip())
        if level == section_level:
            body = "\n".join(lines[line + 1 : bounds[index + 1]]).strip()
            book.sections.append(AuditSection(f"s{len(book.sections) + 1:04d}", title, body))
            add_child(book, book.sections[-1].id, chapter or part)
        elif level == 1 and not book.title:
            book.title = text.strip()
        elif level == 2:
            part, chapter = f"p{len(book.parts) + 1:02d}", None
            book.parts.append((part, title))
        elif level == 3:
            chapter = f"c{len(book.chapters) + 1:03d}"
            book.chapters.append((chapter, title))
            add_child(book, chapter, part)
    return book


def add_child(book: AuditBook, child: str, parent: str | None) -> None:
    if parent is not None:
        book.parents[child] = parent


def load_book(path: Path) -> AuditBook:
    if path.is_dir():
        return load_run(path)
    if path.exists():
        return load_markdown(path)
    raise UsageError(f"{path}: no such run folder or Markdown book")


def code_block_count(book: AuditBook) -> int:
    return sum(t.type == "fence" for s in book.sections for t in _markdown.parse(close_open_fence(s.text)))
