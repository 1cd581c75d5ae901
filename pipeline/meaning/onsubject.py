"""Is each section about what was asked? The on-subject judgement: the figure a reader would give a book, the
share of its sections whose title, point and text are about the request.

A section's fit is judged by all-MiniLM-L6-v2 (pipeline/meaning/minilm.py) against the request's anchors: the
request as a whole and each of its asks (pipeline/meaning/reading.py). Its unit fit is the nearest anchor's cosine
to its title and point; its text fit, the same for the opening TEXT_WORDS words of its text; its score is the
lower of the two, since a reader calls a section off the subject when either its heading or its text is
elsewhere. A section is on the subject when its score is at least ON_SUBJECT. Calibrated on sections of real
books labelled by reading them (tests/fixtures/meaning/on_subject.json, and a held-out set of other books,
on_subject_held_out.json; `python -m pipeline.bench.studies.calibrate` prints precision and recall on both).
Without the judge's wheel, or with the `judge` setting 'none', nothing is judged: the figure is None.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.meaning.embed import Embedder
from pipeline.meaning.floors import ON_SUBJECT
from pipeline.meaning.reading import request_asks

TEXT_WORDS = 120  # the opening words of a section's text that are judged


@dataclass(frozen=True)
class SubjectFit:
    """One section's fit to the request: of its title and point, of its text's opening, and the lower of them."""

    unit: float
    text: float

    @property
    def score(self) -> float:
        return min(self.unit, self.text)

    @property
    def on_subject(self) -> bool:
        return self.score >= ON_SUBJECT


def anchors(judge: Embedder, request: str) -> np.ndarray:
    """The request and each of its asks, embedded: what a section's fit is measured against."""
    rows: np.ndarray = judge.embed([request, *request_asks(request)])
    return rows


def opening(text: str) -> str:
    return " ".join(text.split()[:TEXT_WORDS])


def unit_fits(judge: Embedder, request: str, units: list[str]) -> np.ndarray:
    """Each title-and-point's fit to the request: its nearest anchor's cosine (what the planner ranks by)."""
    if not units:
        return np.zeros(0, dtype=np.float32)
    fits: np.ndarray = (judge.embed(units) @ anchors(judge, request).T).max(axis=1)
    return fits


def subject_fits(judge: Embedder, request: str, units: list[str], texts: list[str]) -> list[SubjectFit]:
    """Each section's fit, from its title and point (`units`) and its text."""
    if not units:
        return []
    marks = anchors(judge, request)
    unit_fit = unit_fits(judge, request, units)
    text_fit = (judge.embed([opening(text) or " " for text in texts]) @ marks.T).max(axis=1)
    return [SubjectFit(round(float(u), 4), round(float(t), 4)) for u, t in zip(unit_fit, text_fit)]
