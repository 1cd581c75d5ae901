"""The audited book: what the audit reads, a book as a tree of titled nodes and the AuditSections (units) it is
made of, from a run folder or from any Markdown file.

Takes a run folder (spec, outline, journal and book.md) or a Markdown file and returns an AuditBook. A run's
tree is its outline: parts > chapters > sections, every section a unit. A Markdown file's tree is found in
the file itself (pipeline/document.py reads its headings and its title): each heading's parent is the
nearest heading above it of a higher rank, every heading-delimited block with text is a unit whatever its
level (a reference's `## Class` with its own text and `### method` entries under it are all units), a
heading with neither text nor headings under it is an empty unit, and one with only headings under it is a
container. HTML comments, anchors and other tag-only paragraphs, rules and link definitions are not text.
The BookStructure says which structure was found and counts words and code blocks over the whole book.
A leaf of the audit: the rules, the quality figures and the report read it.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from markdown_it.token import Token

from pipeline.document import (
    block_tokens,
    heading_level,
    source_lines,
    title_index,
    top_headings,
    without_silent_markup,
)
from pipeline.errors import UsageError
from pipeline.journal import read_journal
from pipeline.records import Author, BookSpec, Node, Outline, SectionResult
from pipeline.records.audit import TITLE_LEVEL, BookStructure, Defect, LevelShape
from pipeline.sources.markers import split_sources_list
from pipeline.text import close_open_fence, without_link_targets
from pipeline.titles import NUMBERING

RUN_LEVELS = ("part", "chapter", "section")
TAG_ONLY = re.compile(r"^(?:\s*</?[A-Za-z][^<>]*>)+\s*$")  # `<a id="1.95-Language"></a>`: markup, no text
TRAILING_TAGS = re.compile(r"(?:\s*</?[A-Za-z][^<>]*>)+\s*$")  # an anchor glued to a block's last line
NOT_TEXT = {"hr", "html_block"}
CODE = {"fence", "code_block"}


@dataclass
class AuditSection:
    id: str
    title: str
    text: str
    finish_reason: str | None = None
    error: str | None = None
    passages: tuple[str, ...] = ()  # the source passages its markers number: [1] is passages[0] ("" not known)
    cites_from: tuple[str, ...] = ()  # a Markdown section's Sources list: where each source it cites is from
    written_from_sources: bool = False  # a run's section whose prompt showed source passages

    @property
    def words(self) -> int:
        return len(self.text.split())

    def with_passages(self, passages: tuple[str, ...]) -> AuditSection:
        return replace(self, passages=passages)

    def defect(self, rule: str, detail: str) -> Defect:
        """What the rule found in this section, with the evidence."""
        return Defect(rule=rule, section_id=self.id, title=self.title, detail=detail)


@dataclass(frozen=True)
class BookNode:
    """A titled node of the book's tree: a part, chapter or section of a run, or a heading of a Markdown file."""

    id: str
    title: str
    level: str  # 'part', 'chapter', 'section'; or 'title', 'h1' … 'h6'
    rank: int  # orders the levels: 1 … 3 in a run, the heading level in a Markdown file (0: its title)


@dataclass
class AuditBook:
    source: str
    nodes: list[BookNode]  # every part, chapter and section (a run) or heading (a Markdown file), level by level
    sections: list[AuditSection]  # the units
    from_journal: bool
    blocks: list[str] = field(default_factory=list)  # heading-delimited blocks, the unit the summary counts
    title: str = ""
    prompt: str | None = None  # what the user asked for: a run folder's spec, or `fanout audit --prompt`
    target_words: int | None = None  # words asked for per section: run folders only
    parents: dict[str, str] = field(default_factory=dict)  # a node's id -> its parent's id
    placeholders: set[str] = field(default_factory=set)  # ids outline.json flags as numbered stand-ins
    author: Author = Author.CAPABLE  # who wrote it: a run's spec's sampling profile says; a Markdown book is told
    points: dict[str, str] = field(default_factory=dict)  # a node's id -> its key point (run folders only)
    structure: BookStructure = field(default_factory=lambda: BookStructure(kind="markdown"))

    def levels(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """(level, [(id, title)]) for each level of the tree, highest rank first, nodes in book order."""
        ranks: dict[str, int] = {}
        members: dict[str, list[tuple[str, str]]] = {}
        for node in self.nodes:
            ranks.setdefault(node.level, node.rank)
            members.setdefault(node.level, []).append((node.id, node.title))
        return [(level, members[level]) for level in sorted(members, key=ranks.__getitem__)]

    def titles(self) -> dict[str, str]:
        return {node.id: node.title for node in self.nodes}

    def path(self, node_id: str) -> str:
        """The titles from the top of the tree down to the node: 'Class: http.Server > Event: close'."""
        titles, chain = self.titles(), [node_id]
        while chain[-1] in self.parents:
            chain.append(self.parents[chain[-1]])
        return " > ".join(titles.get(i, i) for i in reversed(chain))


# ---------------------------------------------------------------- a run folder


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
    nodes = run_nodes(outline)
    return AuditBook(
        str(folder),
        nodes,
        sections,
        from_journal=True,
        blocks=blocks,
        title=outline.title,
        prompt=spec.prompt if spec else None,
        target_words=spec.words if spec else None,
        author=spec.profile.author if spec and spec.profile else Author.CAPABLE,
        parents=parents,
        placeholders={node.id for node in outline_nodes(outline) if node.placeholder},
        points={node.id: node.point for node in outline_nodes(outline) if node.point},
        structure=run_structure(outline, nodes, sections),
    )


def run_section(section: Node, result: SectionResult | None) -> AuditSection:
    if result is None:
        return AuditSection(section.id, section.title, "", error="never written")
    passages = tuple(passage.text for passage in result.passages)
    return AuditSection(
        section.id,
        section.title,
        result.text,
        result.finish_reason,
        result.error,
        passages=passages,
        written_from_sources=bool(passages),
    )


def run_nodes(outline: Outline) -> list[BookNode]:
    chapters: list[Node] = [c for p in outline.parts for c in p.chapters]
    sections: list[Node] = [s for _, _, s in outline.sections()]
    by_level: tuple[list[Node], ...] = (list(outline.parts), chapters, sections)
    return [
        BookNode(node.id, node.title, level, rank)
        for rank, (level, nodes) in enumerate(zip(RUN_LEVELS, by_level), 1)
        for node in nodes
    ]


def run_structure(outline: Outline, nodes: list[BookNode], sections: list[AuditSection]) -> BookStructure:
    written = sum(bool(s.text.strip()) for s in sections)
    counts = Counter(node.level for node in nodes)
    levels = [
        LevelShape(
            level=level,
            headings=counts[level],
            with_text=written if level == "section" else 0,
            containers=0 if level == "section" else counts[level],
        )
        for level in RUN_LEVELS
    ]
    texts = [close_open_fence(s.text) for s in sections]
    return BookStructure(
        kind="fanout run",
        title=outline.title,
        levels=levels,
        units=len(sections),
        words=sum(s.words for s in sections),
        code_blocks=sum(token_count(text, "fence") for text in texts),
        indented_code_blocks=sum(token_count(text, "code_block") for text in texts),
    )


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


# ---------------------------------------------------------------- Markdown


def headings_of(markdown: str) -> list[tuple[int, int, str]]:
    """(line, level, text) of every heading, code blocks excluded."""
    tokens = block_tokens(markdown)
    return [
        (t.map[0], heading_level(t), tokens[i + 1].content)
        for i, t in enumerate(tokens)
        if t.type == "heading_open" and t.map
    ]


def heading_blocks(markdown: str) -> list[str]:
    """The text between consecutive headings."""
    lines = markdown.splitlines()
    starts = [line for line, _, _ in headings_of(markdown)] + [len(lines)]
    blocks = ["\n".join(lines[a + 1 : b]).strip() for a, b in zip(starts, starts[1:])]
    return [b for b in blocks if b]


def token_count(markdown: str, kind: str) -> int:
    return sum(t.type == kind for t in block_tokens(markdown))


def is_text(tokens: list[Token], index: int) -> bool:
    """A top-level block a reader reads: not a rule, an HTML block, or a paragraph of tags alone."""
    token = tokens[index]
    if token.type in NOT_TEXT:
        return False
    return not (token.type == "paragraph_open" and TAG_ONLY.match(tokens[index + 1].content))


@dataclass
class HeadingBlock:
    """One heading of a Markdown file, with the text of the blocks under it (before the next heading)."""

    id: str
    title: str
    level: int
    parent: str | None = None
    texts: list[str] = field(default_factory=list)
    children: int = 0


def bare_title(text: str) -> str:
    """The heading's text without its numbering ('Part 1. One' -> 'One'), unless numbering is all it is."""
    stripped = NUMBERING.sub("", text.strip()).strip()
    return stripped or text.strip()


def read_headings(tokens: list[Token], lines: list[str], skip: int | None) -> tuple[list[HeadingBlock], list[str]]:
    """Each top-level heading but the one at token index `skip` (the title), with its parent and its text
    blocks; and the text blocks that stand before the first heading or under the title."""
    found: list[HeadingBlock] = []
    loose: list[str] = []
    open_headings: list[HeadingBlock] = []  # the chain of headings the next one may belong to
    current: HeadingBlock | None = None
    for index, token in enumerate(tokens):
        if token.level != 0 or token.nesting < 0 or not token.map:
            continue
        if token.type == "heading_open":
            current = None if index == skip else heading_block(tokens, index, open_headings)
            if current is not None:
                found.append(current)
            continue
        if is_text(tokens, index):
            start, end = token.map
            text = "\n".join(lines[start:end]).strip("\n")
            if token.type not in CODE:
                text = without_link_targets(TRAILING_TAGS.sub("", text).rstrip())
            (current.texts if current is not None else loose).append(text)
    return found, loose


def heading_block(tokens: list[Token], index: int, open_headings: list[HeadingBlock]) -> HeadingBlock:
    level = heading_level(tokens[index])
    while open_headings and open_headings[-1].level >= level:
        open_headings.pop()
    parent = open_headings[-1] if open_headings else None
    start = (tokens[index].map or (0, 0))[0]
    block = HeadingBlock(
        f"L{start + 1}", bare_title(tokens[index + 1].content), level, parent.id if parent is not None else None
    )
    if parent is not None:
        parent.children += 1
    open_headings.append(block)
    return block


def load_markdown(path: Path) -> AuditBook:
    """Any Markdown file, its structure found from the file itself (see the module's docstring)."""
    try:
        markdown = without_silent_markup(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    tokens = block_tokens(markdown)
    headings = top_headings(tokens)
    if not headings:
        raise UsageError(f"{path}: no headings, so no sections to audit")
    title_at = title_index(tokens, headings)
    blocks, loose = read_headings(tokens, source_lines(markdown), title_at)
    title = bare_title(tokens[title_at + 1].content) if title_at is not None else ""
    book = AuditBook(str(path), [], [], from_journal=False, title=title)
    if title_at is not None and (loose or not blocks):  # its own text, or all the book has
        title_id = f"L{(tokens[title_at].map or (0, 0))[0] + 1}"
        book.nodes.append(BookNode(title_id, title, TITLE_LEVEL, 0))
        book.sections.append(AuditSection(title_id, title, "\n\n".join(loose)))
    for block in blocks:
        book.nodes.append(BookNode(block.id, block.title, f"h{block.level}", block.level))
        if block.parent is not None:
            book.parents[block.id] = block.parent
        if block.texts or not block.children:
            text, cites_from = split_sources_list("\n\n".join(block.texts))
            book.sections.append(AuditSection(block.id, block.title, text, cites_from=tuple(cites_from)))
    book.nodes.sort(key=lambda node: node.rank)  # level by level, book order kept within each
    book.blocks = [s.text for s in book.sections if s.text]
    book.structure = markdown_structure(book, blocks, tokens, title or None)
    if title_at is None:
        book.structure.words += sum(len(text.split()) for text in loose)  # text above the first heading
    return book


def markdown_structure(
    book: AuditBook, blocks: list[HeadingBlock], tokens: list[Token], title: str | None
) -> BookStructure:
    units = {s.id for s in book.sections if s.text}
    titled = sum(node.level == TITLE_LEVEL and node.id in units for node in book.nodes)
    levels = [LevelShape(level=TITLE_LEVEL, headings=1, with_text=titled, containers=0)] if title else []
    for level in sorted({b.level for b in blocks}):
        mine = [b for b in blocks if b.level == level]
        levels.append(
            LevelShape(
                level=f"h{level}",
                headings=len(mine),
                with_text=sum(b.id in units for b in mine),
                containers=sum(b.children > 0 for b in mine),
            )
        )
    return BookStructure(
        kind="markdown",
        title=title,
        levels=levels,
        units=len(book.sections),
        words=sum(s.words for s in book.sections),
        code_blocks=sum(t.type == "fence" for t in tokens),
        indented_code_blocks=sum(t.type == "code_block" for t in tokens),
    )


def load_book(path: Path) -> AuditBook:
    if path.is_dir():
        return load_run(path)
    if path.exists():
        return load_markdown(path)
    raise UsageError(f"{path}: no such run folder or Markdown book")
