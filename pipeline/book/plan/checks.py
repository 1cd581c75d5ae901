"""The checks a planned line must pass: TitleChecks holds what the policy's rules (pipeline/book/plan/policy.py) need
beyond the line itself (the embedder and judge, the request's asks and subject, the worked examples, the titles
claimed: pipeline/meaning/claims.py) and asks the policy's chains of a line (`first`; `claim`: the book's claim on
every title taken, made when no rule refuses it; `book_title`); and measures `subject_fit` (the judge's cosine of a
line's title and point to the request and its parent, which choose.py ranks by and holds back under the floor).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pipeline.book.plan import policy
from pipeline.book.plan.policy import Chain, Context, Line, Verdict
from pipeline.book.plan.prompts import PlanItem, example_units
from pipeline.cpu import Stage, charged
from pipeline.meaning.claims import Claims
from pipeline.meaning.embed import Embedder
from pipeline.meaning.nearness import distinctive, subject_words, unit
from pipeline.meaning.onsubject import unit_fits
from pipeline.meaning.reading import is_brief, request_asks
from pipeline.records import Outline


class TitleChecks:
    """The book's titles at each level, by words and by meaning, and the checks a new one must pass."""

    def __init__(
        self, embedder: Embedder, request: str = "", judge: Embedder | None = None, *, small: bool = True
    ) -> None:
        """`small`: the lines come from a small model (the `small` sampling profile): every rule is asked of them."""
        self.small = small
        self.embedder = embedder
        self.request = request
        self.judge = judge  # the off-request judge; None: parts and chapters are not judged on the request
        self.asks = request_asks(request)
        self.claims = Claims(embedder)
        self.context = Context(
            embedder,
            examples=example_units(),
            subject=subject_words(request),  # what every title may share: titles are compared without it
            title_asks=self.asks if is_brief(request) else self.asks[:1],  # what the book's title must carry one of
            claims=self.claims,
        )

    def claim_existing(self, outline: Outline) -> None:
        """Titles an interrupted run already planned stay taken."""
        for pt in outline.parts:
            self.claim("parts", PlanItem(pt.title, pt.point), near=False)
            for ch in pt.chapters:
                self.claim("chapters", PlanItem(ch.title, ch.point), near=False)
                for section in ch.sections:
                    self.claim("sections", PlanItem(section.title, section.point), near=False)

    def line(self, item: PlanItem, **known: Any) -> Line:
        """The line as the rules see it, with what its node knows of it (policy.Line's fields)."""
        return Line.of(item, request=self.request, asks=self.asks, small=self.small, **known)

    @charged(Stage.PLANNING_CHECKS)
    def first(self, chain: Chain, item: PlanItem, **known: Any) -> Verdict | None:
        """The first verdict of a chain of the policy on the line, with what its node knows of it: `defect` (by
        words, then near a worked example by meaning; never taken), `phrase` (a phrased line's), the holds (a line
        held back while the pool has better; a capable model's lines have no fault: its one answer has nothing better
        to take instead), `again` (a held line taken last), `book_title`."""
        return policy.first(chain, self.line(item, **known), self.context)

    def book_title(self, title: str, *, forbidden: frozenset[str] = frozenset()) -> Verdict | None:
        """The first verdict of the `book_title` chain on the model's book title: nothing is above it."""
        known = {"ancestors": {}, "taken": [], "forbidden": forbidden}
        return self.first(Chain.BOOK_TITLE, PlanItem(title), **known)

    def subject_fit(self, items: list[PlanItem], parent_unit: str) -> tuple[np.ndarray, np.ndarray]:
        """Each item's fit to the request (pipeline/meaning/onsubject.py's unit fit: the judge's cosine of its title
        and point to the request or its nearest ask), and the fit it is ranked by: the mean of that and its
        cosine to its parent's title and point. Without a judge, the static table ranks them and no item is
        judged off the request (its fit is 1: the floors are the judge's)."""
        model = self.judge or self.embedder
        units = [unit(item.title, item.point) for item in items]
        to_request = unit_fits(model, self.request, units)
        if not units:
            return to_request, to_request
        to_parent = model.embed(units) @ model.embed([parent_unit or self.request])[0]
        ranked: np.ndarray = (to_request + to_parent) / 2
        return (to_request if self.judge is not None else np.ones(len(units), dtype=np.float32)), ranked

    def similarity(self, items: list[PlanItem], others: list[str]) -> np.ndarray:
        """items x others: how near each item's title and point is to each other unit, by the judge."""
        model = self.judge or self.embedder
        if not items or not others:
            return np.zeros((len(items), len(others)), dtype=np.float32)
        matrix: np.ndarray = model.embed([unit(i.title, i.point) for i in items]) @ model.embed(others).T
        return matrix

    @charged(Stage.PLANNING_CHECKS)
    def claim(self, level: str, item: PlanItem, *, near: bool = True, strict: bool = False) -> Verdict | None:
        """Take a title for the book, or say why not: another node at any level has it, or (with `near`) one
        at this level nearly has it, by words or by meaning. A small model's lines only: a human book's titles
        repeat across its parts ('Installation', 'Step 1', 'Best Practices') and pair up ('Client-Side Hooks' and
        'Server-Side Hooks', 'over the Long Run' and 'over the Short Run'): across the good-writing corpus's 14
        tuned books, 1,152 pairs of chapters and sections are at or above SIMILAR_TITLE by the static table (187 at
        MiniLM's 0.8, which finds 17 of the 30 labelled same pairs of tests/fixtures/meaning/titles.json; the
        static table at SIMILAR_TITLE 20), and these two claims refused 454 of its lines. `strict`: every model's
        line as a small model's (a unit phrased for an ask the node owes is fanout's asking, and may not repeat a
        title of the book). The event loop makes this atomic."""
        strict = self.small or strict
        if found := policy.first(Chain.CLAIM, self.line(item, level=level, near=near), self.context, strict=strict):
            return found
        if not strict:  # a capable author's book repeats and pairs titles as a reader expects
            self.claims.key_only(level, item.title)
            return None
        self.claims.add(level, item.title, distinctive(item.title, self.context.subject))
        return None
