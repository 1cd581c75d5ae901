"""The sources' records: a passage of a document a user gave (its file, heading path and page), a file read or
skipped (and why), and a passage found for a query. pipeline/sources/ makes them; the planner, the writer, the
audit and the typesetter read them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Passage:
    """A run of a document's paragraphs under one heading path: the unit that is retrieved and cited. `file` is the
    path as the user named it (a folder's files under the folder's name); `page` is the PDF page it starts on
    (1-based), None for other kinds."""

    number: int  # its place in the index, from 0
    file: str
    headings: tuple[str, ...]
    text: str
    page: int | None = None

    def place(self) -> str:
        """Where it is from, 'guide.md, Install > From source' or 'manual.pdf, Safety, p. 12': what a reference
        names."""
        path = " > ".join(self.headings)
        page = f"p. {self.page}" if self.page is not None else ""
        return ", ".join(part for part in (self.file, path, page) if part)

    def indexed_text(self) -> str:
        """What retrieval reads of it: its heading path, then its text."""
        return "\n".join([*self.headings, self.text])


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A file read: its name as shown, its kind, the passages cut from it (0 until they are: pipeline/sources/read.py
    parses, passages.py cuts) and (a PDF) its pages."""

    file: str
    kind: str  # 'markdown', 'text', 'html' or 'pdf'
    passages: int = 0
    pages: int | None = None


@dataclass(frozen=True, slots=True)
class Skipped:
    """A path not read, and why in a few words ('encrypted PDF', 'binary file', 'not UTF-8 (byte 0xe9 at 12)')."""

    path: str
    why: str

    def line(self) -> str:
        return f"skipped {self.path}: {self.why}"


@dataclass(slots=True)
class SourceReport:
    """What a set of source paths gave: the files read, those skipped, and whether the index was reused."""

    read: list[SourceFile] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    reused: bool = False

    @property
    def passages(self) -> int:
        return sum(file.passages for file in self.read)


@dataclass(frozen=True, slots=True)
class Query:
    """What a passage is looked for with: the thing itself (a section's title), what it is under (its chapter's
    title) and the book's request, weighed in that order (pipeline/sources/index.py)."""

    focus: str
    above: str = ""
    request: str = ""

    def texts(self) -> tuple[str, str, str]:
        return self.focus, self.above, self.request


@dataclass(frozen=True, slots=True)
class Hit:
    """A passage found for a query: its fused score (0 to 1), and its scores by words (BM25) and by meaning
    (cosine)."""

    passage: Passage
    score: float
    lexical: float
    meaning: float
