"""The good-writing corpus: human-written books from public repositories, kept as fixtures
(tests/fixtures/corpus/*.json), against which every planning rule and every judge is measured beside the small
model's junk.

A book is its source and licence, two requests a person would write for it (one naming its topics, one plain
sentence), and its outline at three levels (parts, chapters, sections), each heading with its key point (its
first sentence, or a learning objective it states) and each section with its text (Markdown: paragraphs, lists,
code fences; no headings, images, links or markup of the source). `held_out` books are never tuned on: no rule,
threshold or judge is fitted to them, and every figure is shown apart for them.

Takes the corpus folder; gives Book records (`load_corpus`), a book as an Outline (`book_outline`) and as a
Markdown book the audit reads (`book_markdown`), and what of a book's own lines a planned outline kept (`compare`:
a line is a part, chapter or section title; it is kept when the outline holds it word for word, as the planner
cleans a title, under its own parent, itself kept; a subtree is lost when a part or chapter is not there at
all). `python -m pipeline.bench.studies.corpus [FILE...]` checks files
against the format and prints each book's counts.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from pipeline.records import Chapter, Outline, Part, Section
from pipeline.titles import clean_title, title_key

DEFAULT_DIR = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "corpus"  # repository root
LICENCES = ("CC BY 4.0", "CC BY 3.0", "CC BY-SA 4.0", "CC BY-SA 3.0", "CC0", "public domain", "MIT", "Apache-2.0")


def one_line(text: str) -> str:
    if "\n" in text or not text.strip() or text != text.strip():
        raise ValueError(f"must be one non-empty line with no surrounding spaces: {text!r}")
    return text


class CorpusSection(BaseModel):
    title: str
    point: str
    text: str = Field(min_length=1)

    _line = field_validator("title", "point")(one_line)

    @field_validator("text")
    @classmethod
    def no_headings(cls, text: str) -> str:
        if any(line.startswith("#") for line in text.splitlines() if not line.startswith("#!")):
            raise ValueError("a section's text holds no heading lines")
        return text


class CorpusChapter(BaseModel):
    title: str
    point: str
    sections: list[CorpusSection] = Field(min_length=1)

    _line = field_validator("title", "point")(one_line)


class CorpusPart(BaseModel):
    title: str
    point: str
    chapters: list[CorpusChapter] = Field(min_length=1)

    _line = field_validator("title", "point")(one_line)


class Requests(BaseModel):
    topics: str  # a request that names the book's topics
    plain: str  # one plain sentence

    _line = field_validator("topics", "plain")(one_line)


class Book(BaseModel):
    slug: str
    title: str
    authors: str
    source: str  # the repository and commit: "github:owner/name@sha"
    url: str  # where a reader finds the book
    licence: Literal[LICENCES]  # type: ignore[valid-type]
    software: bool  # whether the book is about software
    held_out: bool = False
    trimmed: str = ""  # what was left out of the source, and why ("" when nothing was)
    requests: Requests
    parts: list[CorpusPart] = Field(min_length=2)

    _line = field_validator("title")(one_line)


def load_book(path: Path) -> Book:
    return Book.model_validate_json(path.read_text(encoding="utf-8"))


def load_corpus(folder: Path = DEFAULT_DIR) -> list[Book]:
    """Every book of the corpus, in the order of their slugs."""
    return [load_book(path) for path in sorted(folder.glob("*.json"))]


def book_outline(book: Book) -> Outline:
    """The book's own outline, with ids as fanout gives them (p01, p01.c01, p01.c01.s01)."""
    parts = []
    for p, part in enumerate(book.parts, 1):
        chapters = []
        for c, chapter in enumerate(part.chapters, 1):
            sections = [
                Section(id=f"p{p:02d}.c{c:02d}.s{s:02d}", title=section.title, point=section.point)
                for s, section in enumerate(chapter.sections, 1)
            ]
            chapters.append(
                Chapter(id=f"p{p:02d}.c{c:02d}", title=chapter.title, point=chapter.point, sections=sections)
            )
        parts.append(Part(id=f"p{p:02d}", title=part.title, point=part.point, chapters=chapters))
    return Outline(title=book.title, parts=parts)


def book_markdown(book: Book, *, parts: list[CorpusPart] | None = None) -> str:
    """The book as Markdown (`#` title, `##` parts, `###` chapters, `####` sections and their texts), as the
    audit reads a book; `parts` replaces the book's own (a book with a chapter planted from another)."""
    lines = [f"# {book.title}"]
    for part in book.parts if parts is None else parts:
        lines += ["", f"## {part.title}"]
        for chapter in part.chapters:
            lines += ["", f"### {chapter.title}"]
            for section in chapter.sections:
                lines += ["", f"#### {section.title}", "", section.text.strip()]
    return "\n".join(lines) + "\n"


def write_part_notes(book: Book, folder: Path) -> Path:
    """The book's own text as a folder of Markdown files, one a part (`#` part, `##` chapters, `###` sections), as
    a team's notes would be: sources for `fanout book --sources` (examples/sources_fake.py, the suite)."""
    folder.mkdir(parents=True, exist_ok=True)
    for number, part in enumerate(book.parts, 1):
        lines = [f"# {part.title}"]
        for chapter in part.chapters:
            lines += ["", f"## {chapter.title}"]
            for section in chapter.sections:
                lines += ["", f"### {section.title}", "", section.text.strip()]
        (folder / f"{number:02d}-part.md").write_text("\n".join(lines) + "\n")
    return folder


@dataclass
class Kept:
    """What of one book's lines one planned outline kept."""

    lines: int = 0
    kept: int = 0
    subtrees_lost: int = 0
    out_of_order: int = 0  # parents whose kept children are not in the book's order
    title_kept: bool = False
    rules: Counter[str] = field(default_factory=Counter)  # the lines each planning rule refused or held


def book_shape(book: Book) -> str:
    """parts x chapters x sections, the most of each the book has: the shape to plan it at."""
    chapters = max(len(part.chapters) for part in book.parts)
    sections = max(len(chapter.sections) for part in book.parts for chapter in part.chapters)
    return f"{len(book.parts)}x{chapters}x{sections}"


def same(title: str) -> str:
    """A title as the planner keeps it, word for word: without Markdown's marks (clean_title) and case."""
    return title_key(clean_title(title))


def compare(book: Book, outline: Outline) -> Kept:
    kept = Kept(title_kept=same(outline.title) == same(book.title))
    parts = {same(part.title): part for part in outline.parts}
    kept.out_of_order += not in_order([same(p.title) for p in book.parts], list(parts))
    for part in book.parts:
        planned = parts.get(same(part.title))
        kept.lines += 1
        kept.kept += planned is not None
        kept.subtrees_lost += planned is None
        chapters = {same(c.title): c for c in planned.chapters} if planned else {}
        if planned:
            kept.out_of_order += not in_order([same(c.title) for c in part.chapters], list(chapters))
        for chapter in part.chapters:
            got = chapters.get(same(chapter.title))
            kept.lines += 1
            kept.kept += got is not None
            kept.subtrees_lost += planned is not None and got is None
            sections = [same(s.title) for s in got.sections] if got else []
            if got:
                kept.out_of_order += not in_order([same(s.title) for s in chapter.sections], sections)
            kept.lines += len(chapter.sections)
            kept.kept += sum(same(section.title) in sections for section in chapter.sections)
    return kept


def in_order(wanted: list[str], got: list[str]) -> bool:
    """The titles of `got` that `wanted` has come in `wanted`'s order."""
    common = [title for title in got if title in wanted]
    return common == [title for title in wanted if title in common]


def counts(book: Book) -> tuple[int, int, int, int]:
    """parts, chapters, sections and the words of the sections' texts."""
    chapters = [chapter for part in book.parts for chapter in part.chapters]
    sections = [section for chapter in chapters for section in chapter.sections]
    return len(book.parts), len(chapters), len(sections), sum(len(s.text.split()) for s in sections)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args(argv)
    files = args.files or sorted(DEFAULT_DIR.glob("*.json"))
    bad = 0
    for path in files:
        try:
            book = load_book(path)
        except (OSError, ValidationError) as exc:
            print(f"{path}: {exc}", file=sys.stderr)
            bad += 1
            continue
        parts, chapters, sections, words = counts(book)
        mark = " (held out)" if book.held_out else ""
        print(
            f"{book.slug}: {book.title!r}, {book.licence}, {parts} parts, {chapters} chapters, {sections} sections, "
            f"{words:,} words{mark}"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
