"""The book PDF, part by part: split, render the parts in a process pool, then front matter, then merge.

A stock single WeasyPrint document of a 1,536-section book takes minutes and gigabytes. Here each part is
its own small document rendered in a worker process of typeset/renderpool.py's pool (`render_part`, with
the gc tuned for WeasyPrint's millions of short-lived boxes); the worker reports the part's page count and
where each heading landed. Once every part is in, the front matter (title page and a table of contents
with the real page numbers, `render_front`) is rendered, and `typeset.merge.merge` joins it all with pypdf,
keeping every part's bookmarks and links, linking the contents entries to their headings and printing
continuous page numbers.

Page numbers are stamped at the merge rather than rendered with each part: a part's first page number
depends on the page counts of all parts before it, so rendering it in the part would make every part wait
for the one before and the pool would work one part at a time. Every part starts on a right-hand page
(a blank page pads a part with an odd page count), so left/right page styles are right in the merged book.

`PartTypesetter` is the incremental form: submit each part as soon as its text is final, call `finish`
when the last one is in; the PDF is ready as soon as the last part and the front matter are rendered.
"""

from __future__ import annotations

import logging
import os
import re
import resource
import shutil
import tempfile
import time
from concurrent.futures import Future
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from pipeline.document import block_tokens, source_lines
from pipeline.errors import FanoutError
from pipeline.typeset.markdown import (
    TOC_LEVELS,
    Heading,
    TypesetResult,
    css_link,
    document,
    heading_counts,
    render_markdown,
    title_page_html,
    toc_html,
    untitled,
)
from pipeline.typeset.merge import merge
from pipeline.typeset.pages import (
    PAGE_NUMBER_GLYPHS,
    FrontDone,
    MarkdownSource,
    PartDone,
    PlacedHeading,
    RenderCost,
    TocLink,
)
from pipeline.typeset.renderpool import RenderScheduler, default_workers
from pipeline.typeset.shape import HANDBOOK, BookShape, Break, book_shape, printable
from pipeline.typeset.weasy import render_gc_threshold, weasy_html

log = logging.getLogger("fanout")
PX_TO_PT = 0.75  # WeasyPrint lays out in CSS px (1/96 in); PDF user space is pt (1/72 in)
TOC_PRIORITY, PART_PRIORITY = 0, 1  # a waiting contents slice goes before a waiting part
WORKER_PRELOAD = ["pipeline.typeset.parts", "weasyprint"]  # render_part and render_front live here
CHUNK_WORDS = 3_000  # run-on parts are rendered this many words at a time (about ten A5 pages)
EMPTY_PART = re.compile(r"##[ \t]*#*[ \t]*(\n|$)")  # a part heading with no text
DIGITS_PAGE = (
    '<style>@page{size:A5;margin:0} p{font-family:"DejaVu Sans",sans-serif;font-size:8pt;'
    f"margin:0}}</style><p>{PAGE_NUMBER_GLYPHS}</p>"
)


# ---------------------------------------------------------------- splitting


@dataclass(frozen=True)
class SplitBook:
    title: str
    parts: list[str]  # Markdown: anything before the first part (if not blank), then one per `## ` part
    shape: BookShape = HANDBOOK


def split_book(markdown: str, title: str) -> SplitBook:
    """Split at every top-level `## ` heading (none inside code, a list or a quote); the book's title heading
    is left out (`untitled`), every other heading stays, so no part loses its text. The book's shape
    (`shape.book_shape`) says where its parts and chapters start."""
    text, h1, tokens = untitled(markdown)
    lines = source_lines(text)
    cuts = [t.map[0] for t in tokens if t.type == "heading_open" and t.tag == "h2" and t.level == 0 and t.map]
    bounds = [0, *cuts, len(lines)]
    parts = [p for p in ("\n".join(lines[a:b]).lstrip("\n") + "\n" for a, b in pairwise(bounds)) if p.strip()]
    return SplitBook(title=h1 or printable(title), parts=parts or ["\n"], shape=book_shape(tokens, lines))


def render_units(book: SplitBook) -> list[str]:
    """What is rendered apart: each part, or for parts that do not open on a page of their own, CHUNK_WORDS
    of them at a time (each rendered piece starts a page, so one a part would give a release-notes file
    hundreds of near-empty pages)."""
    return book.parts if book.shape.parts is Break.OPENER else _chunks(book.parts, CHUNK_WORDS)


def _chunks(parts: list[str], words: int) -> list[str]:
    """Consecutive parts joined until each piece holds at least `words` words (the last may hold fewer). A
    part whose heading is empty starts a piece of its own: it has no bookmark, and in a piece of its own its
    chapters' bookmarks stay at the top level rather than joining the part before."""
    chunks: list[str] = []
    held = words
    for part in parts:
        if held >= words or EMPTY_PART.match(part):
            chunks.append("")
            held = 0
        chunks[-1] += part if not chunks[-1] else "\n" + part
        held += len(part.split())
    return chunks


def toc_headings(markdown: str) -> list[Heading]:
    """The part/chapter/section headings of Markdown (texts unparsed: no inline markup removed); used only
    to count them before the parts are rendered."""
    tokens = block_tokens(markdown)
    return [
        Heading(level=int(t.tag[1]), anchor="", text=tokens[i + 1].content)
        for i, t in enumerate(tokens)
        if t.type == "heading_open" and int(t.tag[1]) in TOC_LEVELS
    ]


# ---------------------------------------------------------------- workers


@dataclass(frozen=True)
class PartJob:
    index: int
    source: str | MarkdownSource  # Markdown (or what the worker assembles it from), or HTML when is_html
    is_html: bool
    out: str
    classes: str = ""  # the book shape's body classes (book.css: where parts and chapters start)


@dataclass(frozen=True)
class FrontJob:
    """The title page (`entries` empty, `digits_out` set) or one part's slice of the contents."""

    title: str
    counts: tuple[int, ...]  # parts, chapters, sections (title page)
    entries: tuple[tuple[Heading, int], ...]  # contents: heading and its page number
    first: bool  # the slice that carries the "Contents" title
    out: str
    digits_out: str = ""


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cost_since(started: float) -> RenderCost:
    """This process's cost of a render job begun at `started` (time.perf_counter)."""
    return RenderCost(seconds=time.perf_counter() - started, rss_mb=_rss_mb(), pid=os.getpid())


def _html_headings(body: str, prefix: str) -> tuple[str, list[Heading]]:
    """Headings (h2-h4) of our own generated HTML, given ids."""
    headings: list[Heading] = []

    def name(match: re.Match) -> str:
        anchor = f"{prefix}a{len(headings)}"
        text = re.sub(r"<[^>]+>", "", match[2])
        from html import unescape

        headings.append(Heading(level=int(match[1]), anchor=anchor, text=unescape(text)))
        return f'<h{match[1]} id="{anchor}">{match[2]}</h{match[1]}>'

    return re.sub(r"<h([2-4])>(.*?)</h\1>", name, body), headings


def render_part(job: PartJob) -> PartDone:
    """Worker: render one part to its own PDF; report its pages and where its headings landed."""
    started = time.perf_counter()
    prefix = f"p{job.index}-"
    with render_gc_threshold():
        if job.is_html:
            assert isinstance(job.source, str), "an HTML job carries its HTML"
            body, headings = _html_headings(job.source, prefix)
        else:
            source = job.source if isinstance(job.source, str) else job.source.markdown()
            body, headings = render_markdown(source, prefix)
        rendered = weasy_html(document("part", css_link(), body, f"part {job.classes}".strip())).render()
        placed = _place(rendered, headings)
        rendered.write_pdf(job.out)
        pages = len(rendered.pages)
        del rendered
    return PartDone(
        index=job.index,
        path=job.out,
        pages=pages,
        headings=tuple(placed),
        cost=_cost_since(started),
    )


def _place(rendered, headings: list[Heading]) -> list[PlacedHeading]:
    where: dict[str, tuple[int, float, float]] = {}
    for number, page in enumerate(rendered.pages):
        height = page.height * PX_TO_PT
        for anchor, point in page.anchors.items():
            where.setdefault(anchor, (number, point[0] * PX_TO_PT, height - point[1] * PX_TO_PT))
    return [
        PlacedHeading(h.level, h.text, *where[h.anchor])
        for h in headings
        if h.level in TOC_LEVELS and h.anchor in where
    ]


def _toc_links(number: int, page) -> list[TocLink]:
    """Take the page's contents links out of WeasyPrint's hands (their anchors are in other documents) and
    return one rectangle an entry (the union of the entry's boxes), in PDF points."""
    boxes: dict[int, list[float]] = {}
    for link_type, target, rect, _ in page.links:
        if link_type == "internal":
            x1, y1, x2, y2 = rect
            box = boxes.setdefault(int(target[3:]), [x1, y1, x2, y2])
            box[:] = [min(box[0], x1), min(box[1], y1), max(box[2], x2), max(box[3], y2)]
    page.links[:] = [link for link in page.links if link[0] != "internal"]
    height = page.height
    return [
        TocLink(number, entry, (x1 * PX_TO_PT, (height - y2) * PX_TO_PT, x2 * PX_TO_PT, (height - y1) * PX_TO_PT))
        for entry, (x1, y1, x2, y2) in boxes.items()
    ]


def render_front(job: FrontJob) -> FrontDone:
    """Worker: the title page (and a digits sample for the page numbers), or one slice of the contents."""
    started = time.perf_counter()
    if job.digits_out:
        body = title_page_html(job.title, job.counts)
    else:
        entries: list[tuple[Heading, int | None]] = [
            (Heading(h.level, f"toc{i}", h.text), page) for i, (h, page) in enumerate(job.entries)
        ]
        body = toc_html(entries, title=job.first)
    with render_gc_threshold():
        rendered = weasy_html(document(job.title, css_link(), body, "front")).render()
        links = [link for number, page in enumerate(rendered.pages) for link in _toc_links(number, page)]
        rendered.write_pdf(job.out)
        if job.digits_out:
            weasy_html(DIGITS_PAGE).write_pdf(job.digits_out)
    return FrontDone(
        path=job.out,
        digits_path=job.digits_out,
        pages=len(rendered.pages),
        links=tuple(links),
        cost=_cost_since(started),
    )


# ---------------------------------------------------------------- the incremental typesetter


class PartTypesetter:
    """Typeset a book part by part, as each part's text becomes final.

    ::

        with PartTypesetter(title, folder / "book.pdf") as typesetter:
            for index, part_markdown in parts_as_they_finish():   # any order, indices 0..P-1, once each
                typesetter.submit_part(index, part_markdown)       # returns at once; renders in the pool
            result = typesetter.finish(appendix_html)              # -> TypesetResult, book.pdf written

    `submit_part(index, markdown)`: one part's Markdown, starting with its `## ` heading (what `split_book`
    cuts from book.md; text before the first part may be submitted as a part of its own). `finish(
    appendix_html="")` waits for the parts, renders the appendix (HTML from `typeset.appendix.appendix_html`,
    if any), merges and writes `out_pdf` atomically; the returned `TypesetResult.seconds` counts from the
    `finish` call. `close()` (or leaving the `with`) stops the pool and removes the scratch files.

    The front matter (title page, contents) is numbered i, ii, iii...; the body from 1 on its first page.
    So a part's page numbers depend only on the parts before it, never on the contents' length, and each
    part's slice of the contents is rendered as soon as that part and every part before it are done:
    when the last part lands, only its own slice and the merge remain.
    workers: None = one a core (at most 4); 0 = render in this process. With a pool, code that calls this
    at import time of a script needs the usual `if __name__ == "__main__":` guard (forkserver start).
    """

    def __init__(self, title: str, out_pdf: Path, workers: int | None = None, shape: BookShape = HANDBOOK) -> None:
        workers = default_workers() if workers is None else workers
        self.title = title
        self.shape = shape
        self.out_pdf = Path(out_pdf)
        self.scratch = Path(tempfile.mkdtemp(prefix="fanout-typeset-"))
        self.scheduler = RenderScheduler(workers, preload=WORKER_PRELOAD)
        self.scheduler.on_done = self._advance
        self.parts: dict[int, Future] = {}
        self.counts: dict[int, tuple[int, ...]] = {}  # parts, chapters, sections of each submitted part
        self.tocs: dict[int, Future | None] = {}
        self.body_pages = 0  # body pages before the part whose contents slice is next
        self.appendix_index: int | None = None

    def __enter__(self) -> PartTypesetter:
        return self

    def warm(self) -> None:
        """Start every render process (and the forkserver's WeasyPrint import) before the first part."""
        self.scheduler.warm()

    def __exit__(self, *exc) -> None:
        self.close()

    def submit_part(self, index: int, markdown: str | MarkdownSource) -> None:
        """`markdown`: the part's Markdown, or a MarkdownSource (book.assemble.PartSource) the worker
        assembles it from."""
        if index in self.parts or index < 0:
            raise FanoutError(f"typesetting: part {index} submitted twice or negative")
        self._submit(index, markdown, is_html=False)

    def _submit(self, index: int, source: str | MarkdownSource, *, is_html: bool) -> None:
        if is_html:
            self.counts[index] = (0, 0, 0)
        elif isinstance(source, str):
            self.counts[index] = heading_counts(toc_headings(source))
        else:
            self.counts[index] = source.heading_counts()
        job = PartJob(index, source, is_html, str(self.scratch / f"part-{index:04d}.pdf"), self.shape.classes)
        self.parts[index] = self.scheduler.submit(PART_PRIORITY, render_part, job)
        self._advance()

    def _advance(self) -> None:
        """Queue the contents slice of every part whose page numbers are now known."""
        with self.scheduler.lock:
            while (k := len(self.tocs)) in self.parts and self.parts[k].done():
                if self.parts[k].exception() is not None:
                    return
                part = self.parts[k].result()
                entries = tuple((Heading(h.level, "", h.text), self.body_pages + h.page + 1) for h in part.headings)
                self.body_pages += _even(part.pages)
                job = FrontJob(self.title, (), entries, k == 0, str(self.scratch / f"toc-{k:04d}.pdf"))
                self.tocs[k] = None  # taken before submitting: an inline run calls back in here
                self.tocs[k] = self.scheduler.submit(TOC_PRIORITY, render_front, job)

    def finish(self, appendix_html: str = "") -> TypesetResult:
        started = time.perf_counter()
        indices = sorted(self.parts)
        if indices != list(range(len(indices))):
            raise FanoutError(f"typesetting: parts {indices} submitted; expected 0..{len(indices) - 1}")
        if appendix_html.strip():
            self.appendix_index = len(indices)
            self._submit(self.appendix_index, appendix_html, is_html=True)
        counts = tuple(map(sum, zip(*self.counts.values())))
        title = self.scheduler.submit(
            TOC_PRIORITY,
            render_front,
            FrontJob(
                self.title,
                counts,
                (),
                first=False,
                out=str(self.scratch / "title.pdf"),
                digits_out=str(self.scratch / "digits.pdf"),
            ),
        )
        parts = [self.parts[i].result() for i in sorted(self.parts)]
        parts_done = time.perf_counter()
        self._advance()
        tocs = [toc.result() for toc in (self.tocs.get(i) for i in sorted(self.parts)) if toc is not None]
        if len(tocs) != len(self.parts):
            raise FanoutError("typesetting: a part's contents slice was never queued")
        front = [title.result(), *tocs]
        front_done = time.perf_counter()
        pages = merge(front, parts, self.out_pdf, self.title)
        log.debug(
            "typeset: parts %.1f s after finish(), then contents %.1f s, merge %.1f s",
            parts_done - started,
            front_done - parts_done,
            time.perf_counter() - front_done,
        )
        rss: dict[int, float] = {}
        for done in parts + front:
            rss[done.cost.pid] = max(rss.get(done.cost.pid, 0.0), done.cost.rss_mb)
        workers = tuple(sorted(mb for pid, mb in rss.items() if pid != os.getpid()))
        return TypesetResult(
            pages=pages,
            seconds=time.perf_counter() - started,
            path=self.out_pdf,
            render_seconds=sum(p.cost.seconds for p in parts + front),
            peak_rss_mb=max([*workers, _rss_mb()]),
            worker_rss_mb=workers,
        )

    def close(self) -> None:
        try:
            self.scheduler.close()
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)


def _even(pages: int) -> int:
    return pages + pages % 2
