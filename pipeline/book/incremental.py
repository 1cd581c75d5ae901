"""Typesetting while the book is written. With WeasyPrint, each part goes to the render pool the moment its
last section lands, so the PDF is ready a few seconds after the last section rather than a whole render later.
With Typst (the default), the whole book is one compile at the end: it takes seconds where WeasyPrint's
parts take minutes, and a compile of the book so far would not be reused (typeset/typst.py).

Takes the run's outline and results as they grow (`section_done`), and at the end (`finish`) typesets what is
still missing, adds the appendix and (WeasyPrint) merges. `finish` returns the TypesetResult, whose `seconds`
is the delay from the end of writing to the PDF on disk.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.book.assemble import PartSource, assemble
from pipeline.errors import FanoutError
from pipeline.records import BookSpec, Outline, PdfEngine, SectionResult, wants_children
from pipeline.typeset.markdown import TypesetResult
from pipeline.typeset.shape import HANDBOOK
from pipeline.typeset.typst import dejavu_folder, typeset_typst
from pipeline.typeset.weasy import require_fonts

if TYPE_CHECKING:
    from pipeline.typeset.parts import PartTypesetter

log = logging.getLogger("fanout")


class IncrementalTypesetter:
    def __init__(
        self, spec: BookSpec, out_pdf: Path, workers: int | None = None, *, engine: PdfEngine = PdfEngine.TYPST
    ):
        self.spec = spec
        self.out_pdf = out_pdf
        self.workers = workers
        self.engine = engine
        self.typesetter: PartTypesetter | None = None
        self.lock = threading.Lock()
        self.closed = False
        self.submitted: set[int] = set()

    def start(self) -> None:
        """Open the typesetter now (its font check fails before anything is asked) and start the render
        processes in the background, so their start-up (WeasyPrint's import, ~1 CPU-second) overlaps the
        planning instead of landing in the middle of the last sections' streams. Typst: check its fonts and
        load the compiler now."""
        if self.engine is PdfEngine.TYPST:
            dejavu_folder()
            threading.Thread(target=lambda: import_module("typst"), name="typeset-warm", daemon=True).start()
            return
        typesetter = self._open("")
        threading.Thread(target=self._warm, args=(typesetter,), name="typeset-warm", daemon=True).start()

    @staticmethod
    def _warm(typesetter: PartTypesetter) -> None:
        try:
            typesetter.warm()
        except Exception as error:  # closed meanwhile (a run that stopped early): nothing to warm
            log.debug("typesetting warm-up skipped: %s", error)

    def _open(self, title: str) -> PartTypesetter:
        with self.lock:
            if self.closed:
                raise FanoutError("typesetting: already closed")
            if self.typesetter is None:
                from pipeline.typeset.parts import PartTypesetter

                require_fonts()
                self.typesetter = PartTypesetter(title, self.out_pdf, workers=self.workers)
            if title:
                self.typesetter.title = title
            return self.typesetter

    def section_done(self, outline: Outline, results: Mapping[str, SectionResult], section_id: str) -> None:
        """Submit the section's part if this was its last section (planned and answered)."""
        if self.engine is PdfEngine.TYPST:
            return
        part_id = section_id.split(".")[0]
        index = next((at for at, part in enumerate(outline.parts) if part.id == part_id), None)
        if index is None or index in self.submitted:
            return
        part = outline.parts[index]
        if wants_children(part, self.spec.chapters) or any(
            wants_children(c, self.spec.sections) for c in part.chapters
        ):
            return  # the part may still gain chapters or sections
        if all(s.id in results for c in part.chapters for s in c.sections):
            self._submit(outline, results, index)

    def _submit(self, outline: Outline, results: Mapping[str, SectionResult], index: int) -> None:
        """Hand the part's sections to the pool, which assembles and renders it (no parsing here: this
        runs on the event loop that is still streaming other sections)."""
        part = outline.parts[index]
        mine = {s.id: results[s.id] for c in part.chapters for s in c.sections if s.id in results}
        chapters_before = sum(len(earlier.chapters) for earlier in outline.parts[:index])
        source = PartSource(part.model_copy(deep=True), index + 1, mine, chapters_before)
        self._open(outline.title).submit_part(index, source)
        self.submitted.add(index)

    def finish(self, outline: Outline, results: dict[str, SectionResult], appendix_html: str) -> TypesetResult:
        """Blocking: run it in a thread. Parts not yet submitted (a resumed run, say) go now."""
        if self.engine is PdfEngine.TYPST:
            self.close()
            markdown = assemble(outline, results)
            return typeset_typst(markdown, outline.title, self.out_pdf, appendix_html, shape=HANDBOOK)
        for index in range(len(outline.parts)):
            if index not in self.submitted:
                self._submit(outline, results, index)
        try:
            return self._open(outline.title).finish(appendix_html=appendix_html)
        finally:
            self.close()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            typesetter, self.typesetter = self.typesetter, None
        if typesetter is not None:
            typesetter.close()
