"""Assembly: Outline + SectionResults -> book.md, in outline order whatever the completion order (the assemble
stage of a book run, assemble_book; book/incremental.py assembles each part while the book is written).

The book is `# title`, `## Part n. title`, `### n. chapter`, `#### n.m section`. A section body is model
output: headings inside it are demoted below the section's own level (to h5/h6) so they never outrank it,
a leading heading that only repeats the section title is dropped, and a code fence left open by a
truncated answer is closed so it cannot swallow the sections after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt

from pipeline.cpu import Stage, charged
from pipeline.files import write_atomic
from pipeline.records import Outline, Part, SectionResult
from pipeline.text import close_open_fence
from pipeline.titles import title_key
from pipeline.typeset.cited import cited_body

SECTION_LEVEL = 4
ATX_MARKS = re.compile(r"^((?:\s*>)*\s*)#{1,6}")
_parser = MarkdownIt("commonmark")


def demote_headings(body: str, section_title: str, floor: int = SECTION_LEVEL + 1) -> str:
    """Rewrite every heading of the body at `floor` or below; drop a first heading equal to the title."""
    lines = body.splitlines()
    tokens = _parser.parse(body)
    first_block = next((t for t in tokens if t.map is not None), None)
    for index, token in enumerate(tokens):
        if token.type != "heading_open" or token.map is None:
            continue
        start, end = token.map
        text = tokens[index + 1].content
        if token is first_block and title_key(text) == title_key(section_title):
            lines[start:end] = [""] * (end - start)
            continue
        level = min(6, floor + int(token.tag[1]) - 1)
        if token.markup.startswith("#"):  # ATX: keep any blockquote prefix, change only the marks
            lines[start] = ATX_MARKS.sub(r"\g<1>" + "#" * level, lines[start], count=1)
        else:  # setext: text lines and an underline become one ATX line
            lines[start:end] = ["#" * level + " " + " ".join(text.split())] + [""] * (end - start - 1)
    return "\n".join(lines).strip("\n")


def section_body(result: SectionResult | None) -> str:
    if result is None:
        return "*This section was not written.*"
    if not result.ok:
        return f"*This section could not be written: {result.error or 'empty answer'}.*"
    return demote_headings(close_open_fence(cited_body(result.text, result.passages)), result.title)


def part_markdown(part: Part, number: int, results: dict[str, SectionResult], chapter_offset: int) -> str:
    """One part, from its `## Part {number}.` heading; chapters are numbered from chapter_offset + 1."""
    out = [f"## Part {number}. {part.title}", ""]
    for chapter_number, chapter in enumerate(part.chapters, chapter_offset + 1):
        out += [f"### {chapter_number}. {chapter.title}", ""]
        for section_number, section in enumerate(chapter.sections, 1):
            out += [
                f"#### {chapter_number}.{section_number} {section.title}",
                "",
                section_body(results.get(section.id)),
                "",
            ]
    return "\n".join(out)


@dataclass(frozen=True)
class PartSource:
    """What `part_markdown` needs for one part, picklable: a typesetting worker assembles the part itself,
    so the parsing of its sections (a few hundred ms for 192) never blocks the run's event loop."""

    part: Part
    number: int
    results: dict[str, SectionResult]
    chapter_offset: int

    def markdown(self) -> str:
        return part_markdown(self.part, self.number, self.results, self.chapter_offset)

    def heading_counts(self) -> tuple[int, int, int]:
        """Parts, chapters, sections: the `##`-`####` headings its Markdown will have."""
        return 1, len(self.part.chapters), sum(len(c.sections) for c in self.part.chapters)


def chapter_offsets(outline: Outline) -> list[int]:
    offsets, total = [], 0
    for part in outline.parts:
        offsets.append(total)
        total += len(part.chapters)
    return offsets


def assemble(outline: Outline, results: dict[str, SectionResult]) -> str:
    parts = [
        part_markdown(part, i + 1, results, offset)
        for i, (part, offset) in enumerate(zip(outline.parts, chapter_offsets(outline)))
    ]
    return "\n".join([f"# {outline.title}", "", *parts])


@charged(Stage.FINISHING)
def assemble_book(out: Path, outline: Outline, results: dict[str, SectionResult]) -> None:
    """book.md (`out`), written whole."""
    write_atomic(out, assemble(outline, results))
