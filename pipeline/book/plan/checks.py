"""The book's titles and the checks a planned line must pass: TitleChecks holds what the policy's rules
(pipeline/book/plan/policy.py) need beyond the line itself (the embedder and judge, the request's asks and
subject, the worked examples, the titles claimed at each level) and asks the policy's groups of a line: `defect`
(never taken), `fault` (held back while the pool has better), `taken_near` (asked again of a held line taken last),
`claim` (the book's claim on every title taken) and any other group by name (`first`: 'book_title', the
model's book title refused; the holds); and measures
`subject_fit` (the judge's cosine of a line's title and point to the request and its parent, which choose.py ranks
by and holds back under the floor).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pipeline.book.plan import policy
from pipeline.book.plan.answers import PlanItem
from pipeline.book.plan.claims import Claims
from pipeline.book.plan.policy import Context, Line, Verdict
from pipeline.book.plan.prompts import example_units
from pipeline.cpu import Stage, charged
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
        return Line(item, request=self.request, asks=self.asks, small=self.small, **known)

    @charged(Stage.PLANNING_CHECKS)
    def defect(
        self, item: PlanItem, ancestors: dict[str, str], taken: list[str], forbidden: frozenset[str]
    ) -> Verdict | None:
        """The first of the policy's defects in this line (by words, then near a worked example by meaning), or
        None: a line with one is never taken."""
        line = self.line(item, ancestors=ancestors, taken=taken, forbidden=forbidden)
        return policy.first("defect", line, self.context)

    @charged(Stage.PLANNING_CHECKS)
    def fault(self, item: PlanItem, taken: list[str], sibling_units: list[str]) -> Verdict | None:
        """The policy's first fault in this line: its title says what a chosen sibling's says, its title and point
        cannot be told apart from a sibling's (a writer could not keep them apart), its point says nothing of its
        own. A line with a fault is taken only when the pool has nothing better; a capable model's lines have none
        (its one answer: the pool has nothing better to take instead)."""
        line = self.line(item, taken=taken, sibling_units=sibling_units)
        return policy.first("fault", line, self.context)

    def first(self, group: str, item: PlanItem, **known: Any) -> Verdict | None:
        """The first verdict of a group of the policy ('off', 'title_off', 'owed', 'given', 'book_title') on the line,
        with what its node knows of it."""
        return policy.first(group, self.line(item, **known), self.context)

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

    def taken_near(self, ancestors: dict[str, str], item: PlanItem, taken: list[str]) -> bool:
        """The title's form or place fails again now (it echoes, or says what a chosen sibling's says, by words or
        by meaning): a held line is then never taken, even last."""
        line = self.line(item, ancestors=ancestors, taken=taken)
        return policy.first_again(line, self.context) is not None

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
        if not (self.small or strict):  # a capable author's book repeats and pairs titles as a reader expects
            self.claims.key_only(level, item.title)
            return None
        line = self.line(item, level=level, near=near)
        if (found := policy.first("claim", line, self.context, strict=True)) is not None:
            return found
        self.claims.add(level, item.title, distinctive(item.title, self.context.subject))
        return None
