"""The book's titles and the checks a planned line must pass: TitleChecks holds what the policy's rules
(pipeline/book/plan/policy.py) need beyond the line itself (the embedder and judge, the request's asks and
subject, the worked examples, the titles taken at each level) and asks them in the policy's groups: `defect`
(never taken), `faults` (held back while the pool has better), `subject_fit` (the judge's cosine of a line's
title and point to the request and its parent, which choose.py ranks by and holds back under policy.PLAN_FLOOR),
`claim` (the book's claim on every title taken) and `book_title` (the model's book title refused).
"""

from __future__ import annotations

import numpy as np

from pipeline.book.plan import policy
from pipeline.book.plan.answers import PlanItem
from pipeline.book.plan.policy import Line, Verdict
from pipeline.book.plan.prompts import PLAN_TEMPLATES, example_book_title_words, example_units, example_words
from pipeline.cpu import Stage, charged
from pipeline.meaning.embed import Embedder
from pipeline.meaning.nearness import SIMILAR_TITLE, carries, distinctive, subject_words, unit
from pipeline.meaning.onsubject import unit_fits
from pipeline.meaning.reading import is_brief, request_asks
from pipeline.records import Outline
from pipeline.titles import TitleIndex, content_words, title_key


class MeaningIndex:
    """The titles of one level across the book, embedded as they are taken: a new title that says what one
    of them says (pipeline/meaning/nearness.py's SIMILAR_TITLE, the audit's own) is refused."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.titles: list[str] = []
        self.vectors = np.zeros((0, 0), dtype=np.float32)

    def add(self, title: str) -> None:
        row = self.embedder.embed([title])
        self.vectors = row if not self.titles else np.vstack([self.vectors, row])
        self.titles.append(title)

    def near(self, title: str) -> str | None:
        """The first title of the book at this level that says what `title` says, or None."""
        if not self.titles:
            return None
        scores = self.vectors @ self.embedder.embed([title])[0]
        best = int(np.argmax(scores))
        return self.titles[best] if scores[best] >= SIMILAR_TITLE else None


class TitleChecks:
    """The book's titles at each level, by words and by meaning, and the checks a new one must pass."""

    def __init__(
        self, embedder: Embedder, request: str = "", judge: Embedder | None = None, *, small: bool = True
    ) -> None:
        """`small`: the lines come from a small model (the `small` sampling profile), whose writer follows any
        word its book title adds."""
        self.small = small
        self.embedder = embedder
        self.request = request
        self.judge = judge  # the off-request judge; None: parts and chapters are not judged on the request
        self.examples = example_units()
        self.book_keys: dict[str, set[str]] = {"parts": set(), "chapters": set(), "sections": set()}
        self.book_titles: dict[str, TitleIndex] = {level: TitleIndex() for level in self.book_keys}
        self.meanings: dict[str, MeaningIndex] = {level: MeaningIndex(embedder) for level in self.book_keys}
        asks = request_asks(request)
        self.asks = asks
        self.subject = subject_words(request)  # what every title may share: titles are compared without it
        self.whole: dict[str, str] = {}  # a title without the subject's words -> the title
        self.title_asks = asks if is_brief(request) else asks[:1]  # what the book's title must carry one of

    def claim_existing(self, outline: Outline) -> None:
        """Titles an interrupted run already planned stay taken."""
        for pt in outline.parts:
            self.claim("parts", PlanItem(pt.title, pt.point), near=False)
            for ch in pt.chapters:
                self.claim("chapters", PlanItem(ch.title, ch.point), near=False)
                for section in ch.sections:
                    self.claim("sections", PlanItem(section.title, section.point), near=False)

    def line(self, item: PlanItem, ancestors: dict[str, str], chosen: list[str], copied: frozenset[str]) -> Line:
        return Line(item, ancestors, chosen, copied, self.request, self.asks, self.small)

    @charged(Stage.PLANNING_CHECKS)
    def defect(
        self, item: PlanItem, ancestors: dict[str, str], chosen: list[str], copied: frozenset[str]
    ) -> Verdict | None:
        """The first of the policy's defects in this line (by words, then near a worked example by meaning), or
        None: a line with one is never taken."""
        line = self.line(item, ancestors, chosen, copied)
        defects = policy.asked(policy.DEFECTS_BY_WORDS, small=self.small)
        found = policy.first(defects, line)
        if found is None and self.small:
            found = policy.example_meaning(line, self.embedder, self.examples)
        return found

    @charged(Stage.PLANNING_CHECKS)
    def faults(self, item: PlanItem, chosen: list[str], sibling_units: list[str]) -> list[Verdict]:
        """The policy's faults in this line: its title says what a chosen sibling's says, its title and point
        cannot be told apart from a sibling's (a writer could not keep them apart), its point says nothing of its
        own. A line with a fault is taken only when the pool has nothing better."""
        if not self.small:  # a capable model's one answer: the pool has nothing better to take instead
            return []
        line = self.line(item, {}, chosen, frozenset())
        found = (
            policy.same_as_sibling(line, self.embedder, self.subject),
            policy.covers_sibling(line, self.embedder, sibling_units),
            policy.vague_point(line, self.embedder),
        )
        return [verdict for verdict in found if verdict is not None]

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

    def title_taken_near(self, ancestors: dict[str, str], item: PlanItem, chosen: list[str]) -> bool:
        """The title says what a chosen sibling's says, by words or by meaning: never taken, even last."""
        line = self.line(item, ancestors, chosen, frozenset())
        return policy.first(policy.asked(policy.TITLE_PLACE, small=self.small), line) is not None or (
            self.small and policy.same_as_sibling(line, self.embedder, self.subject) is not None
        )

    def similarity(self, items: list[PlanItem], others: list[str]) -> np.ndarray:
        """items x others: how near each item's title and point is to each other unit, by the judge."""
        model = self.judge or self.embedder
        if not items or not others:
            return np.zeros((len(items), len(others)), dtype=np.float32)
        matrix: np.ndarray = model.embed([unit(i.title, i.point) for i in items]) @ model.embed(others).T
        return matrix

    def book_title(self, title: str) -> Verdict | None:
        """Why the model's book title cannot be used: two words or more of the worked example's book title
        that the request does not use (a brief's book came back titled 'Small Boat Sailing'), or a word of the
        worked example's book answer in a title that has no word of the request ('The Boat and Its Equipment'
        for an allotment society's handbook); or it does not carry what the book is about, as the audit's
        coverage judges it: the request's subject ('The Greatest Field Guide Ever!' for a field guide to
        lichens), or for a brief, whose first phrase may be the asker's own story, any of its asks; or it adds a
        content word the request never used: every section's prompt names the book title, and the writer follows
        such a word ('How to Keep a Sourdough Sustainably at Home' gave sections on sustainable living, 'The Art of
        Beekeeping' a part on artists), so the title is then made from the request: a small model's only. A capable
        model's title is its own ('Pro Git', 'Learn React', 'The Sourdough Framework'), and its writer keeps to the
        subject."""
        own = content_words(self.request)
        copied = (content_words(title) & example_book_title_words()) - own
        borrowed = (content_words(title) & (example_book_title_words() | example_words(PLAN_TEMPLATES[0]))) - own
        if len(copied) >= 2 or (borrowed and not content_words(title) & own):
            return policy.book_title_example()
        wanted = self.title_asks
        if self.small and wanted and not any(carries(self.embedder, ask, [title]) for ask in wanted):
            return policy.book_title_subject(wanted[0])
        if self.small and (added := sorted(content_words(title) - own)):
            return policy.book_title_adds(added)
        return None

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
        title = item.title
        key = title_key(title)
        if not (self.small or strict):  # a capable author's book repeats and pairs titles as a reader expects
            self.book_keys[level].add(key)
            return None
        if any(key in keys for keys in self.book_keys.values()):  # a section named like a chapter reads as one
            return policy.taken_elsewhere()
        if near:
            mine = distinctive(title, self.subject)
            other = self.book_titles[level].near(mine) or (self.meanings[level].near(mine) if self.small else None)
            other = self.whole.get(other, other) if other is not None else None
            if other is not None:
                return policy.near_elsewhere(other)
        self.book_keys[level].add(key)
        self.whole.setdefault(distinctive(title, self.subject), title)
        self.book_titles[level].add(distinctive(title, self.subject))
        self.meanings[level].add(distinctive(title, self.subject))
        return None
