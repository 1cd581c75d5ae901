"""What a render worker reports: the pages of a part or of the front matter, where its headings landed, and what
the job cost the worker (RenderCost).

Plain records shared by the pool (`typeset.parts`) and the merge (`typeset.merge`), so the merge needs
nothing from the pool; `MarkdownSource` is what a part's worker may assemble its Markdown from (the book's
`book.assemble.PartSource` is one), so typesetting needs nothing from the book stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class MarkdownSource(Protocol):
    """A part given as what its Markdown is made from; the worker calls `markdown()` itself."""

    def markdown(self) -> str: ...

    def heading_counts(self) -> tuple[int, int, int]: ...


PAGE_NUMBER_GLYPHS = "0123456789ivxlcdm"  # arabic body numbers, roman front matter


@dataclass(frozen=True)
class PlacedHeading:
    level: int
    text: str
    page: int  # 0-based, in its own document
    x: float  # PDF points from the page's bottom-left
    y: float


@dataclass(frozen=True)
class RenderCost:
    """What one render job cost the worker process that ran it."""

    seconds: float
    rss_mb: float  # the process's peak resident memory so far
    pid: int


@dataclass(frozen=True)
class PartDone:
    index: int
    path: str
    pages: int
    headings: tuple[PlacedHeading, ...]
    cost: RenderCost


@dataclass(frozen=True)
class TocLink:
    page: int
    entry: int  # index into FrontJob.entries
    rect: tuple[float, float, float, float]  # PDF points


@dataclass(frozen=True)
class FrontDone:
    path: str
    digits_path: str
    pages: int
    links: tuple[TocLink, ...]
    cost: RenderCost
