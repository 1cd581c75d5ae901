"""An outline a person can read and edit: outline.md, written by `fanout plan` and read by `fanout book --outline`.

The format (one heading a line; a key point is the one line of text under its heading, and may be left out):

    ---
    request: Write a short handbook on keeping a sourdough starter alive
    ---
    # The book's title
    ## A part
    What the part covers.
    ### A chapter
    What the chapter covers.
    #### A section
    What the section covers.
    Sources: notes/flour.md, Rye | notes/water.md, Hardness

A `Sources:` line under a heading (a book with sources) names where the passages that support the node are from,
separated by " | "; a section is written from those, and an edited line is kept as edited.

The request is a front-matter line (a JSON string when it holds a line break or starts with a quote). A file
may stop at chapters or at parts: the levels it leaves out are planned under what it gives. The most children
any part (chapter) has is the book's shape at that level; a part or chapter with fewer is short, kept as it is (a
plan whose node could not be filled has fewer children, and a person may cut a section). `outline_markdown` and
`read_outline_markdown` round-trip an Outline exactly (titles and points are single lines; a point that would read
as a heading or front matter is written after a backslash).

Bad files end in one UsageError naming the file and the line: a heading level skipped (a section outside a
chapter), an empty title, a second book title, text under the book title, a second line of text under one
heading. `.json` files are an outline.json as a run folder holds it.

Takes a path or text; gives a EditedOutline (the request, the outline with ids p01, p01.c01, p01.c01.s01 in
order, and the shape). Model output never passes through here as markup: titles are data in the Outline.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from pipeline.errors import UsageError
from pipeline.records import Chapter, Node, Outline, Part, Section
from pipeline.text import joined

HEADING = re.compile(r"^(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
LEVEL_NAMES = {1: "book title", 2: "part", 3: "chapter", 4: "section"}
FRONT = "---"
SOURCES = "Sources:"
SOURCES_SEPARATOR = " | "


@dataclass
class EditedOutline:
    """An outline a person gave: its request (None when the file has none), the outline (complete when the file
    gives every level), and the counts of the levels it gives (parts, then chapters, then sections)."""

    request: str | None
    outline: Outline
    counts: tuple[int, ...]

    def asked(self) -> str:
        """What the book was asked for: the file's request, else its title and its parts' titles (a person who wrote
        the outline has said what the book is): 'Sourdough Starter and Bread: Feeding, Baking and Storing'."""
        if self.request:
            return self.request
        parts = [part.title for part in self.outline.parts if part.title]
        if not parts:
            return self.outline.title
        return f"{self.outline.title}: {joined(parts)}"

    def shape(self, planned: tuple[int, int, int]) -> tuple[int, int, int]:
        """parts x chapters x sections: the file's counts, then `planned`'s for the levels it leaves out."""
        given = self.counts
        return (given[0], *[given[i] if i < len(given) else planned[i] for i in (1, 2)])  # type: ignore[return-value]


# ---------------------------------------------------------------- writing


def outline_markdown(outline: Outline, request: str | None) -> str:
    """outline.md for `outline` (every level it has) with `request` as its front matter."""
    lines = [FRONT, f"request: {front_value(request)}", FRONT] if request else []
    lines += [f"# {outline.title}"]
    for part in outline.parts:
        lines += node_lines(2, part)
        for chapter in part.chapters:
            lines += node_lines(3, chapter)
            for section in chapter.sections:
                lines += node_lines(4, section)
    return "\n".join(lines) + "\n"


def node_lines(level: int, node: Node) -> list[str]:
    lines = ["", f"{'#' * level} {node.title}", *([point_line(node.point)] if node.point else [])]
    return lines + ([f"{SOURCES} {SOURCES_SEPARATOR.join(node.places)}"] if node.places else [])


def point_line(point: str) -> str:
    """A point that would read as a heading, front matter, a Sources line or an escaped line is written after a
    backslash."""
    return "\\" + point if point.startswith(("#", "\\", FRONT, SOURCES)) else point


def front_value(request: str) -> str:
    plain = request == request.strip() and not request.startswith('"') and not any(c in request for c in "\n\r")
    return request if plain else json.dumps(request)


# ---------------------------------------------------------------- reading


def read_outline_file(path: Path) -> EditedOutline:
    """An outline from `path`: outline.md's format, or an outline.json (by its suffix)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"setting 'outline' {path}: cannot read it ({error})") from None
    if path.suffix == ".json":
        return outline_from_json(text, path)
    return read_outline_markdown(text, str(path))


def outline_from_json(text: str, where: Path) -> EditedOutline:
    try:
        outline = Outline.model_validate_json(text)
    except (ValidationError, ValueError) as error:
        first = error.errors()[0]["msg"] if isinstance(error, ValidationError) else str(error)
        raise UsageError(f"{where}: not an outline.json ({first})") from None
    edited = EditedOutline(None, Outline(title=outline.title, parts=[]), ())
    builder = _Builder(edited, str(where))
    for part in outline.parts:
        builder.add(2, part.title, 0, part.point)
        for chapter in part.chapters:
            builder.add(3, chapter.title, 0, chapter.point)
            for section in chapter.sections:
                builder.add(4, section.title, 0, section.point)
    return builder.finished()


def read_outline_markdown(text: str, where: str = "outline.md") -> EditedOutline:
    """Parse outline.md's format (module docstring); UsageError naming `where` and the line when it breaks it."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]  # only line feeds end a line
    request, start = front_matter(lines, where)
    builder: _Builder | None = None
    for number, line in enumerate(lines[start:], start + 1):
        heading = HEADING.match(line)
        if heading:
            level, title = len(heading.group(1)), (heading.group(2) or "").strip()
            builder = opened(builder, request, level, title, number, where)
        elif line.strip():
            if builder is None:
                raise UsageError(f"{where} line {number}: text before the book title (a `# ` line)")
            if line.strip().startswith(SOURCES):
                builder.places(line.strip().removeprefix(SOURCES), number)
            else:
                builder.point(line.strip(), number)
    if builder is None:
        raise UsageError(f"{where}: no book title (a `# ` line)")
    return builder.finished()


def opened(builder: _Builder | None, request: str | None, level: int, title: str, number: int, where: str) -> _Builder:
    """The builder after the heading on line `number`: the book title opens it, every other heading goes in."""
    if level not in LEVEL_NAMES:
        raise UsageError(f"{where} line {number}: a level-{level} heading; the outline has four levels (# to ####)")
    if not title:
        raise UsageError(f"{where} line {number}: an empty {LEVEL_NAMES[level]} title")
    if level == 1:
        if builder is not None:
            raise UsageError(f"{where} line {number}: a second book title (`# `); the outline has one")
        return _Builder(EditedOutline(request, Outline(title=title, parts=[]), ()), where)
    if builder is None:
        raise UsageError(f"{where} line {number}: a {LEVEL_NAMES[level]} before the book title (a `# ` line)")
    builder.add(level, title, number)
    return builder


def front_matter(lines: list[str], where: str) -> tuple[str | None, int]:
    """The request of a `---` block opening the file, and the index of the line after it."""
    if not lines or lines[0].strip() != FRONT:
        return None, 0
    request = None
    for index, line in enumerate(lines[1:], 1):
        if line.strip() == FRONT:
            return request, index + 1
        if not line.strip():
            continue
        if HEADING.match(line):
            raise UsageError(f"{where} line {index + 1}: a heading inside the front matter (no closing `---` above it)")
        key, _, value = line.partition(":")
        if key.strip() != "request":
            raise UsageError(f"{where} line {index + 1}: front matter takes `request: ...` only, not {key.strip()!r}")
        request = request_value(value.strip(), where, index + 1)
    raise UsageError(f"{where}: the front matter opened on line 1 has no closing `---`")


def request_value(value: str, where: str, number: int) -> str:
    if not value.startswith('"'):
        return value
    try:
        decoded = json.loads(value)
    except json.JSONDecodeError:
        raise UsageError(f"{where} line {number}: the request opens with a quote but is no JSON string") from None
    if not isinstance(decoded, str):
        raise UsageError(f"{where} line {number}: the request is not text")
    return decoded


class _Builder:
    """Adds headings and points in file order, checking the shape as it goes."""

    def __init__(self, edited: EditedOutline, where: str):
        self.edited = edited
        self.where = where
        self.last: tuple[Node, int] | None = None  # the latest node (or the book's, as None) and its line
        self.point_line: int | None = None
        self.lines: dict[str, int] = {}  # node id -> its line, for errors about counts

    def add(self, level: int, title: str, number: int, point: str = "") -> None:
        outline = self.edited.outline
        if level == 2:
            node: Node = Part(id=f"p{len(outline.parts) + 1:02d}", title=title, point=point)
            outline.parts.append(node)  # type: ignore[arg-type]
        else:
            parent = self.parent(level, number)
            if isinstance(parent, Part):
                node = Chapter(id=f"{parent.id}.c{len(parent.chapters) + 1:02d}", title=title, point=point)
                parent.chapters.append(node)
            else:
                node = Section(id=f"{parent.id}.s{len(parent.sections) + 1:02d}", title=title, point=point)
                parent.sections.append(node)
        self.last, self.point_line = (node, number), None
        self.lines[node.id] = number

    def parent(self, level: int, number: int) -> Part | Chapter:
        parts = self.edited.outline.parts
        if not parts or (level == 4 and not parts[-1].chapters):
            above = LEVEL_NAMES[level - 1]
            raise UsageError(
                f"{self.where} line {number}: a {LEVEL_NAMES[level]} outside a {above} (a heading level skipped)"
            )
        return parts[-1] if level == 3 else parts[-1].chapters[-1]

    def point(self, text: str, number: int) -> None:
        if self.point_line is not None:
            raise UsageError(
                f"{self.where} line {number}: a second line of text under one heading (line {self.point_line} is its "
                "key point; a heading takes one line)"
            )
        if self.last is None:
            raise UsageError(
                f"{self.where} line {number}: text under the book title; what the book is about is the request "
                "(front matter `request: ...`)"
            )
        self.last[0].point = text[1:] if text.startswith("\\") else text
        self.point_line = number

    def places(self, text: str, number: int) -> None:
        if self.last is None:
            raise UsageError(f"{self.where} line {number}: a Sources line under the book title; it goes under a node")
        self.last[0].places = [place.strip() for place in text.split(SOURCES_SEPARATOR.strip()) if place.strip()]

    def finished(self) -> EditedOutline:
        outline = self.edited.outline
        if not outline.parts:
            raise UsageError(f"{self.where}: no parts (`## ` lines) under the book title")
        chapters = [c for p in outline.parts for c in p.chapters]
        counts = [len(outline.parts)]
        if chapters:
            counts.append(shape_count([(p, len(p.chapters)) for p in outline.parts]))
            if outline.sections():
                counts.append(shape_count([(c, len(c.sections)) for c in chapters]))
        self.edited.counts = tuple(counts)
        outline.complete = len(counts) == 3
        return self.edited


def shape_count(sizes: list[tuple[Part, int]] | list[tuple[Chapter, int]]) -> int:
    """The most children any of these parts (or chapters) has, the book's shape at that level; each with fewer
    is marked short, so nothing is planned to fill it."""
    most = max(size for _, size in sizes)
    for node, size in sizes:
        node.short = node.short or size < most
    return most
