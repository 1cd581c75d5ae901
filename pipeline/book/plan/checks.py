"""What a planned line is worth: its defects, its faults and its fit to the request; and the book's claim on
every title taken.

Defects are what a reader sees as one, and a line with a defect is never taken (`defect`): pipeline/titles.py's
refusal (no usable title, a sentence, a word that is not a word, an identifier or a JSON key, a count, an echo
of a title above it or of the request, a near repeat of a sibling by words), a word or a whole item of a worked
example, a planning note's words or a prompt's (`prompt_words`), no key point, a point that only repeats its title,
a fragment of the request (`is_fragment`), a word a handbook would not print (pipeline/meaning/offensive.py). Faults
make a line a worse choice (`faults`, pipeline/meaning/nearness.py's judgements and thresholds): its title says what
a sibling's says, its title and point cannot be told apart from a sibling's, its point says nothing of its own.
The fit (`subject_fit`) is the judge's cosine (all-MiniLM-L6-v2, pipeline/meaning/minilm.py) of its title and point
to the request and to its parent (a line whose fit to the request is below choose.py's PLAN_FLOOR is held back).
The claim (`claim`) refuses a title that another node has, or that nearly repeats one of its level anywhere in the
book, as the audit's similar_titles would find.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np

from pipeline.book.plan.answers import PlanItem, heading_from_point, parse_book_title, parse_item, parse_items
from pipeline.book.plan.schedule import carries_note
from pipeline.cpu import Stage, charged
from pipeline.meaning.asks import is_brief, request_asks
from pipeline.meaning.embed import Embedder
from pipeline.meaning.nearness import (
    SIMILAR_TITLE,
    carries,
    distinctive,
    nearest_example,
    point_vagueness,
    subject_words,
    title_near,
    unit,
    unit_near,
)
from pipeline.meaning.offensive import offensive_words
from pipeline.meaning.onsubject import unit_fits
from pipeline.records import Outline
from pipeline.templating import example_answer, example_answers, template
from pipeline.titles import TitleIndex, borrows_from, content_words, is_common, refusal, title_key, title_words

ELSEWHERE_NEAR = ", a title elsewhere in the book"

PLAN_TEMPLATES = ("plan_book.md", "plan_part.md", "plan_chapter.md")
PHRASE_TEMPLATES = ("phrase_title.md", "phrase_part.md", "phrase_chapter.md", "phrase_section.md")
EXAMPLE_TEMPLATES = PLAN_TEMPLATES + PHRASE_TEMPLATES
EXAMPLE_RARE_ZIPF = 4.2  # wordfreq's Zipf: 'sail' 4.0 and 'barometer' 3.2 name the example's subject; 'safe' 5.1
NO_POINT = "has no key point"
PROMPT_WORDS = "copies the words of a prompt"
FRAGMENT = "is a fragment of the request, not a heading"
OFFENSIVE = "uses a word a handbook would not print"


def example_items(name: str) -> list[PlanItem]:
    """A template's worked answers as items: a planning template's listed lines, a phrasing template's one line
    an answer."""
    if name in PHRASE_TEMPLATES:
        return [parse_item(answer.strip()) for answer in example_answers(name)]
    return parse_items(example_answer(name))


def example_words(template: str) -> frozenset[str]:
    """The content words of a worked example's headings: a heading built from them was copied."""
    return frozenset(word for item in example_items(template) for word in content_words(item.title))


@cache
def rare_example_words() -> frozenset[str]:
    """The worked examples' subject, refused at every level: the words of any example's headings rarer than
    EXAMPLE_RARE_ZIPF ('sail', 'barometer', 'gybe'), and of the example book's title that are not everyday
    words ('boat'); everyday words of a heading ('safe', 'local') are refused only at the level whose example
    uses them. Checked at every level against the 1,269 titles of 65 books of the embedded engine, they
    refused 11 more: 'Lunar Sails' for telescopes, 'The Tidal Barometer', 'How to Choose the Right Boat' for
    bicycles, and one a sailor's tides book might keep ('What to Do When a Tide's on Your Boat'); every
    heading word would have refused 'Staying Connected' and 'Sea Levels' too."""
    from wordfreq import zipf_frequency

    def zipf(word: str) -> float:
        return max(zipf_frequency(form, "en") for form in (word.casefold(), word.casefold().removesuffix("s")))

    headings = [item.title for name in EXAMPLE_TEMPLATES for item in example_items(name)]
    words = {word for title in headings for word in re.findall(r"[A-Za-z]+", title) if zipf(word) < EXAMPLE_RARE_ZIPF}
    book_title = parse_book_title(example_answer(PLAN_TEMPLATES[0]))
    words |= {word for word in re.findall(r"[A-Za-z]+", book_title) if not is_common(word)}
    return content_words(" ".join(words))


def example_book_title_words() -> frozenset[str]:
    """The content words of the worked example's own book title ('Small Boat Sailing')."""
    return content_words(parse_book_title(example_answer(PLAN_TEMPLATES[0])))


def example_units() -> list[str]:
    """Every worked example's items as `title: point`: a planned item near one of them was copied."""
    return [unit(item.title, item.point) for name in EXAMPLE_TEMPLATES for item in example_items(name)]


PROMPT_TEMPLATES = ("book_context.md", "section.md", "retitle.md", "continue.md", *EXAMPLE_TEMPLATES)
SHINGLE = 4  # words in a run of a prompt's own words that a line may not hold
SHINGLE_CONTENT = 1  # ... of which content words ('its part made of'; 'what to do when' alone is no copy)


def shingles(text: str) -> set[tuple[str, ...]]:
    """The runs of SHINGLE words of a text that hold SHINGLE_CONTENT content words or more."""
    words = title_words(text)
    runs = (tuple(words[at : at + SHINGLE]) for at in range(len(words) - SHINGLE + 1))
    return {run for run in runs if sum(bool(content_words(word)) for word in run) >= SHINGLE_CONTENT}


@cache
def prompt_shingles() -> frozenset[tuple[str, ...]]:
    """The runs of words of what fanout itself says to the model: its prompts' instructions (the user turns of
    every template, not the worked answers, which the example checks judge) and the planning notes."""
    from pipeline.book.plan.schedule import CHOSEN_NOTE, must_note

    said = [CHOSEN_NOTE, must_note(["x", "y"], "section", 1), must_note(["x"], "section", 2)]
    for name in PROMPT_TEMPLATES:
        text = template(name).template
        said += [turn for turn in re.split(r"<<assistant>>.*?(?=<<user>>|$)", text, flags=re.S) if turn.strip()]
    return frozenset(run for text in said for run in shingles(re.sub(r"\$\w+", " ", text)))


def prompt_words(text: str, request: str) -> str | None:
    """A run of a prompt's own words the text holds (not one the request uses too), or None."""
    found = shingles(text) & prompt_shingles()
    found -= shingles(request)
    return " ".join(sorted(found)[0]) if found else None


def is_fragment(title: str, request: str, asks: list[str]) -> bool:
    """The title is a run of the request's own words cut out whole ('Library Board Each Quarter', 'Evenings') and not
    one of its asks of two words or more ('First Aid for Burns and Cuts' is a concern a person would title so)."""
    words, said = title_words(title), title_words(request)
    if not words or not content_words(title):
        return False
    runs = {tuple(said[at : at + len(words)]) for at in range(len(said) - len(words) + 1)}
    if tuple(words) not in runs:
        return False
    return not (len(words) >= 2 and any(title_key(title) == title_key(ask) for ask in asks))


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

    def __init__(self, embedder: Embedder, request: str = "", judge: Embedder | None = None) -> None:
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

    @charged(Stage.PLANNING_CHECKS)
    def defect(
        self, item: PlanItem, ancestors: dict[str, str], chosen: list[str], copied: frozenset[str]
    ) -> str | None:
        """What a reader would see as a defect in this line, or None: the title checks of pipeline/titles.py (no
        usable title, a sentence, not a word, an identifier, a count, an echo of a title above it or of the
        request, a near repeat of a sibling by words), a word or a whole item of a worked example, a planning
        note's or a prompt's words, no key point, a point that only repeats its title ('Checklists: Checklists.'),
        a fragment of the request, a word a handbook would not print."""
        title, whole = item.title, unit(item.title, item.point)
        reason = refusal(title, ancestors, chosen)
        if reason is None and borrows_from(title, copied):
            reason = "comes from the worked example, not from this book"
        if reason is None and carries_note(whole):
            reason = "copies a planning note"
        if reason is None and not item.point.strip():
            reason = NO_POINT
        if reason is None and (said := content_words(item.point)) and said <= content_words(title):
            reason = "has a point that only repeats its title"
        if reason is None and (run := prompt_words(whole, self.request)):
            reason = f'{PROMPT_WORDS}: "{run}"'
        if reason is None and is_fragment(title, self.request, self.asks):
            reason = FRAGMENT
        if reason is None and (words := offensive_words(whole)):
            reason = f"{OFFENSIVE}: " + ", ".join(words)
        if reason is None and nearest_example(self.embedder, whole, self.examples) is not None:
            reason = "comes from the worked example, not from this book"
        return reason

    @charged(Stage.PLANNING_CHECKS)
    def faults(self, item: PlanItem, chosen: list[str], sibling_units: list[str]) -> list[str]:
        """What makes a line a worse choice, not a defect: its title says what a chosen sibling's says, its title
        and point cannot be told apart from a sibling's (a writer could not keep them apart), its point says
        nothing of its own. A line with a fault is taken only when the pool has nothing better."""
        found = []
        if (other := title_near(self.embedder, item.title, chosen, self.subject)) is not None:
            found.append(f'says the same as "{other}"')
        if item.point and sibling_units:
            near = unit_near(self.embedder, unit(item.title, item.point), sibling_units)
            if near is not None:
                found.append(f'covers what "{sibling_units[near].split(":")[0]}" covers')
        made_from_point = title_key(item.title) == title_key(heading_from_point(item.point))
        if not made_from_point and (why := point_vagueness(self.embedder, item.title, item.point)):
            found.append(f"has a key point that {why}")
        return found

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
        return (
            refusal(item.title, ancestors, chosen) is not None
            or title_near(self.embedder, item.title, chosen, self.subject) is not None
        )

    def similarity(self, items: list[PlanItem], others: list[str]) -> np.ndarray:
        """items x others: how near each item's title and point is to each other unit, by the judge."""
        model = self.judge or self.embedder
        if not items or not others:
            return np.zeros((len(items), len(others)), dtype=np.float32)
        matrix: np.ndarray = model.embed([unit(i.title, i.point) for i in items]) @ model.embed(others).T
        return matrix

    def book_title_refusal(self, title: str) -> str | None:
        """Why the model's book title cannot be used: two words or more of the worked example's book title
        that the request does not use (a brief's book came back titled 'Small Boat Sailing'), or a word of the
        worked example's book answer in a title that has no word of the request ('The Boat and Its Equipment'
        for an allotment society's handbook); or it does not carry what the book is about, as the audit's
        coverage judges it: the request's subject ('The Greatest Field Guide Ever!' for a field guide to
        lichens), or for a brief, whose first phrase may be the asker's own story, any of its asks; or it adds a
        content word the request never used: every section's prompt names the book title, and the writer follows
        such a word ('How to Keep a Sourdough Sustainably at Home' gave sections on sustainable living, 'The Art of
        Beekeeping' a part on artists), so the title is then made from the request."""
        own = content_words(self.request)
        copied = (content_words(title) & example_book_title_words()) - own
        borrowed = (content_words(title) & (example_book_title_words() | example_words(PLAN_TEMPLATES[0]))) - own
        if len(copied) >= 2 or (borrowed and not content_words(title) & own):
            return "comes from the worked example, not from this book"
        wanted = self.title_asks
        if wanted and not any(carries(self.embedder, ask, [title]) for ask in wanted):
            return "does not name what the book is about: " + wanted[0]
        if added := sorted(content_words(title) - own):
            return "adds words the request never used: " + ", ".join(added)
        return None

    @charged(Stage.PLANNING_CHECKS)
    def claim(self, level: str, item: PlanItem, *, near: bool = True) -> str | None:
        """Take a title for the book, or say why not: another node at any level has it, or (with `near`) one
        at this level nearly has it, by words or by meaning (a chapter: by its title and point too), as the
        audit's rules would find. The event loop makes this atomic."""
        title = item.title
        key = title_key(title)
        if any(key in keys for keys in self.book_keys.values()):  # a section named like a chapter reads as one
            return "is already a title elsewhere in the book"
        if near:
            mine = distinctive(title, self.subject)
            other = self.book_titles[level].near(mine) or self.meanings[level].near(mine)
            other = self.whole.get(other, other) if other is not None else None
            if other is not None:
                return f'nearly repeats "{other}"{ELSEWHERE_NEAR}'
        self.book_keys[level].add(key)
        self.whole.setdefault(distinctive(title, self.subject), title)
        self.book_titles[level].add(distinctive(title, self.subject))
        self.meanings[level].add(distinctive(title, self.subject))
        return None
