"""The title policy: every way a planned line can be refused or held back, as named rules that run.

A line is one title and key point the model offered for a node. Each rule is one short function, (line, context) ->
what it found or None: the Line holds the line and what its node knows of it, the Context what the book knows. RULES
is the table of them all, as markdown-it-py keeps its rules, each row with its id, group, action, the fields of a line
it reads and its thresholds; the row makes the Verdict (its id and action), the function only says what it found.
The planner meets the table in chains (CHAINS), each the rules of some groups in order, and asks a chain for its
first verdict (`first`); it names no rule and acts on the verdict's action (choose.decide):

- defect: what a reader would see as a defect; a line with one is never taken (by words, then by meaning);
- phrased: a phrased title that repeats what it was asked to phrase (then the defects: the `phrase` chain);
- title_off, fault, off, owed: held back: a phrased title alone off the subject; a worse choice while the pool has
  better; title and point off the subject; carrying none of the asks a last slot owes (the `hold` chains);
- last: a held line under the last resort's floor, never taken last (with the rules marked `again`: the title's form
  and place asked again);
- claim: the book's claim on a title: another node has it, or one of its level nearly has it;
- book_title: the model's book title refused, so the title is made from the request; then, in both planning modes,
  the defects marked `of_book` (a book title has no point, and nothing above it to echo: it names the request's
  subject as it should).

A rule fitted to what SmolLM2-135M gets wrong that refuses a capable author's good lines is `small_only` (the
good-writing corpus, examples/good_writing.py and examples/rule_sides.py measure both sides). run.log and stats.json
count by the rule's id (`plan_rules`); no code reads a message's words. The fit floors are pipeline/meaning/floors.py's;
the ranker's weights are choose.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pipeline.book.plan.prompts import (
    PLAN_TEMPLATES,
    SHINGLE,
    PlanItem,
    carries_note,
    example_book_title_words,
    example_words,
    heading_from_point,
    prompt_run,
)
from pipeline.meaning.claims import Claims
from pipeline.meaning.embed import Embedder
from pipeline.meaning.floors import LAST_RESORT_FIT, PLAN_FLOOR, TITLE_FLOOR
from pipeline.meaning.nearness import (
    CARRIED,
    FROM_EXAMPLE,
    SIMILAR_TITLE,
    SIMILAR_UNIT,
    VAGUE_RESTATES,
    VAGUE_STOCK,
    carries,
    distinctive,
    nearest_example,
    point_vagueness,
    title_near,
    unit,
    unit_near,
)
from pipeline.meaning.offensive import offensive_words
from pipeline.text import title_case
from pipeline.titles import (
    MAX_HEADING_WORDS,
    MAX_TITLE_CASE_WORDS,
    SIMILAR,
    borrows_from,
    content_words,
    echoes,
    is_counted,
    looks_like_identifier,
    near_duplicates,
    non_words,
    plausible_title,
    same_title,
    title_key,
    title_words,
)

REQUEST = "the request"  # the ancestor a line's request is named by (pipeline/book/plan/levels.py)


class Action(StrEnum):
    REFUSE = "refuse"  # never taken
    HOLD_BACK = "hold back"  # taken only when the pool has nothing better


class Group(StrEnum):
    """What a rule guards, the rows of the table by kind; the chains (CHAINS) are made of groups."""

    DEFECT = "defect"  # what a reader would see as a defect: never taken (by words, then by meaning)
    PHRASED = "phrased"  # a phrased title that repeats what it was asked to phrase
    TITLE_OFF = "title_off"  # a phrased title alone off the subject
    FAULT = "fault"  # a worse choice: held back while the pool has better
    OFF = "off"  # title and point off the subject
    OWED = "owed"  # carrying none of the asks a last slot owes
    LAST = "last"  # a held line never taken last
    CLAIM = "claim"  # the book's claim on a title
    BOOK_TITLE = "book_title"  # the model's book title refused: the title is made from the request


class Chain(StrEnum):
    """Where in the planner a line meets the table: each chain is the rules of some groups, in order (CHAINS)."""

    DEFECT = "defect"  # every pooled line of an open node, before it is ranked
    PHRASE = "phrase"  # every sample of a phrased unit, before it is ranked
    HOLD = "hold"  # an open node's line in rank order, before it is claimed
    HOLD_PHRASED = "hold_phrased"  # a phrased unit's line in rank order, before it is claimed
    AGAIN = "again"  # a held line taken last: its title's form and place again
    CLAIM = "claim"  # the book's claim on the title, the last step before a line is taken
    BOOK_TITLE = "book_title"  # the model's book title, in both modes


@dataclass(frozen=True)
class Verdict:
    """What one rule found in one line: the rule's id, its group and action, a message for run.log, the figure
    measured."""

    rule: str
    group: Group
    action: Action
    message: str
    figure: float | None = None

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Finding:
    """What a rule found, with the figure it measured."""

    message: str
    figure: float


Found = str | Finding | None  # a rule's answer: what it found (its message), or None


@dataclass
class Line:
    """One item as a rule sees it: what is above it (what each is -> its text), the titles taken beside it and their
    units, the worked examples' words it may not borrow, the request and its asks, whether a small model gave it; what
    its node measured of it (its fits to the request, the given node it phrases, the asks its slot owes); for a claim
    its level and whether a near title counts. `known`: the fields its caller gave (Line.of); a rule that needs
    another is refused the line (MissingField)."""

    item: PlanItem
    ancestors: dict[str, str] = field(default_factory=dict)
    taken: Sequence[str] = ()
    forbidden: frozenset[str] = frozenset()
    request: str = ""
    asks: Sequence[str] = ()
    small: bool = True  # the line is a small model's: the rules keep the strict form they were fitted in
    sibling_units: Sequence[str] = ()
    fit: float = 1.0
    title_fit: float = 1.0
    about: str = ""
    owed: Sequence[str] = ()
    level: str = ""
    near: bool = True
    known: frozenset[str] = frozenset()

    @classmethod
    def of(cls, item: PlanItem, **fields: Any) -> Line:
        """The line with the fields its caller knows, and their names."""
        return cls(item, **fields, known=frozenset(fields))

    @property
    def unit(self) -> str:
        return unit(self.item.title, self.item.point)


class MissingField(ValueError):
    """A rule was asked of a line without a field it reads: the caller's mistake, never a verdict."""


@dataclass
class Context:
    """What the book knows that the rules read: the embedder, the worked examples' units, the request's subject words
    (titles are compared without them), the asks a book title must carry one of, and the titles claimed so far."""

    embedder: Embedder
    examples: Sequence[str] = ()
    subject: frozenset[str] = frozenset()
    title_asks: Sequence[str] = ()
    claims: Claims | None = None


RuleCheck = Callable[[Line, Context], Found]


@dataclass(frozen=True)
class Rule:
    """One row of the policy's table: the rule's id, its group, its action, what it finds, its check, the fields of a
    line it reads, its thresholds by name, whether it is asked of a small model's lines only (`small_only`), whether
    it is asked again of a held line taken last (`again`: the title's form and place), and whether a defect is asked of
    the book's title too (`of_book`: not those of a key point, which a book title has none of)."""

    id: str
    group: Group
    action: Action
    finds: str
    check: RuleCheck
    needs: tuple[str, ...] = ()
    thresholds: dict[str, float] = field(default_factory=dict)
    small_only: bool = False
    again: bool = False
    of_book: bool = True

    def verdict(self, line: Line, context: Context) -> Verdict | None:
        """The rule asked of the line: its Verdict, with the rule's id and action, or None."""
        if missing := set(self.needs) - line.known:
            raise MissingField(f"rule {self.id} reads {', '.join(sorted(missing))}, which the line does not give")
        found = self.check(line, context)
        if found is None:
            return None
        if isinstance(found, Finding):
            return Verdict(self.id, self.group, self.action, found.message, found.figure)
        return Verdict(self.id, self.group, self.action, found)


# ---------------------------------------------------------------- defects: never taken (by words, then meaning)


def unusable(line: Line, context: Context) -> Found:
    if plausible_title(line.item.title):
        return None
    return "is not a usable title (empty, too long, or repeating itself)"


def sentence(line: Line, context: Context) -> Found:
    """More than MAX_HEADING_WORDS words ('How to keep a sourdough starter is something all bakers do
    differently'); a capable model's heading in title case or question runs to MAX_TITLE_CASE_WORDS ('How Does
    the U.S. Bureau of Labor Statistics Collect the U.S. Unemployment Data?')."""
    title = line.item.title
    words = len(title_words(title))
    longer = not line.small and (title_case(title) or title.endswith("?"))
    listed = line.small and ";" in title  # a small model's 'The Art of Souring; A Guide for Beginners'
    if not listed and (words <= MAX_HEADING_WORDS or (longer and words <= MAX_TITLE_CASE_WORDS)):
        return None
    return f"is a sentence or a list, not a short heading (at most {MAX_HEADING_WORDS} words)"


def generic(line: Line, context: Context) -> Found:
    if content_words(line.item.title):
        return None
    return "says nothing of its own (only generic words like 'basics' or 'introduction')"


def identifier(line: Line, context: Context) -> Found:
    if not looks_like_identifier(line.item.title):
        return None
    return "looks like a code identifier or a JSON key, not a title"


def counted(line: Line, context: Context) -> Found:
    if not is_counted(line.item.title):
        return None
    return "is told apart from others only by a number"


def non_word(line: Line, context: Context) -> Found:
    odd = non_words(line.item.title, " ".join([line.request, *line.ancestors.values()]))
    if not odd:
        return None
    return "uses a word that is not a word: " + ", ".join(f'"{word}"' for word in odd)


def echoes_above(line: Line, context: Context) -> Found:
    """The title repeats the request or a title above it, by its words (titles.echoes); a capable model's title
    only when it is the title above it: its narrower titles say something of their own ('What Is Finance?' under
    'Introduction to Finance', 'Examples of the Central Limit Theorem' under 'The Central Limit Theorem')."""
    for what, text in line.ancestors.items():
        if text and (
            echoes(line.item.title, text) if what == REQUEST or line.small else same_title(line.item.title, text)
        ):
            return f"repeats {what}"
    return None


def repeats_sibling(line: Line, context: Context) -> Found:
    """The title repeats a chosen sibling's; a small model's also when their content words nearly match ('Choosing
    Flour', 'Choosing the Flour'): a capable model's siblings share words as a reader expects ('Step 1', 'Step 2';
    '... over the Long Run', '... over the Short Run')."""
    same = near_duplicates if line.small else same_title
    for sibling in line.taken:
        if same(line.item.title, sibling):
            return f'nearly repeats "{sibling}"'
    return None


def example_words_rule(line: Line, context: Context) -> Found:
    if not borrows_from(line.item.title, line.forbidden):
        return None
    return "comes from the worked example, not from this book"


def planning_note(line: Line, context: Context) -> Found:
    if not carries_note(line.unit):
        return None
    return "copies a planning note"


def no_point(line: Line, context: Context) -> Found:
    if line.item.point.strip():
        return None
    return "has no key point"


def point_repeats_title(line: Line, context: Context) -> Found:
    said = content_words(line.item.point)
    if not said or not said <= content_words(line.item.title):
        return None
    return "has a point that only repeats its title"


def prompt_words(line: Line, context: Context) -> Found:
    run = prompt_run(line.unit, line.request)
    if run is None:
        return None
    return f'copies the words of a prompt: "{run}"'


def fragment(line: Line, context: Context) -> Found:
    """The title is a run of the request's own words cut out whole ('Library Board Each Quarter', 'Evenings') and
    not one of its asks of two words or more ('First Aid for Burns and Cuts' is a concern a person would title so).
    A small model's lines only: a capable model that names a topic the request names ('Harmony', 'Components')
    heads its part with it."""
    title = line.item.title
    words, said = title_words(title), title_words(line.request)
    if not words or not content_words(title):
        return None
    runs = {tuple(said[at : at + len(words)]) for at in range(len(said) - len(words) + 1)}
    if tuple(words) not in runs:
        return None
    if len(words) >= 2 and any(title_key(title) == title_key(ask) for ask in line.asks):
        return None
    return "is a fragment of the request, not a heading"


def offensive(line: Line, context: Context) -> Found:
    words = offensive_words(line.unit)
    if not words:
        return None
    return "uses a word a handbook would not print: " + ", ".join(words)


def example_meaning(line: Line, context: Context) -> Found:
    if nearest_example(context.embedder, line.unit, context.examples) is None:
        return None
    return "comes from the worked example, not from this book"


# ---------------------------------------------------------------- faults: held back while the pool has better


def same_as_sibling(line: Line, context: Context) -> Found:
    other = title_near(context.embedder, line.item.title, list(line.taken), context.subject)
    return None if other is None else f'says the same as "{other}"'


def covers_sibling(line: Line, context: Context) -> Found:
    units = line.sibling_units
    if not line.item.point or not units:
        return None
    near = unit_near(context.embedder, line.unit, units)
    if near is None:
        return None
    return f'covers what "{units[near].split(":")[0]}" covers'


def vague_point(line: Line, context: Context) -> Found:
    item = line.item
    if title_key(item.title) == title_key(heading_from_point(item.point)):  # a title made from its point
        return None
    why = point_vagueness(context.embedder, item.title, item.point)
    return None if why is None else f"has a key point that {why}"


# ---------------------------------------------------------------- holds: for the node's sake


def off_subject(line: Line, context: Context) -> Found:
    if line.fit >= PLAN_FLOOR:
        return None
    return Finding("is not about what the request asks for", line.fit)


def title_off_subject(line: Line, context: Context) -> Found:
    if line.title_fit >= TITLE_FLOOR:
        return None
    return Finding("has a title that is not about what the request asks for", line.title_fit)


def leaves_out(line: Line, context: Context) -> Found:
    """A line for a slot that owes asks (a chapter's last sections) that carries none of them."""
    if not line.owed or any(carries(context.embedder, ask, [line.unit]) for ask in line.owed):
        return None
    return "leaves out what the request asks for: " + "; ".join(line.owed)


def repeats_given(line: Line, context: Context) -> Found:
    """A phrased title that is what it was asked to phrase, or a title already taken beside it."""
    if title_key(line.item.title) not in {title_key(line.about), *map(title_key, line.taken)}:
        return None
    return "repeats what it was asked to phrase"


def last_resort(line: Line, context: Context) -> Found:
    """A line held as off the subject whose fit is under the last resort's floor is never taken, even last."""
    if line.fit >= LAST_RESORT_FIT:
        return None
    return Finding("is too far off the request to be taken even last", line.fit)


# ---------------------------------------------------------------- claims: the book's titles


def taken_elsewhere(line: Line, context: Context) -> Found:
    """Another node at any level has the title: a section named like a chapter reads as one."""
    if context.claims is None or not context.claims.taken(line.item.title):
        return None
    return "is already a title elsewhere in the book"


def near_elsewhere(line: Line, context: Context) -> Found:
    """A title of its level elsewhere says what it says, by words (a small model's, by meaning too)."""
    if context.claims is None or not line.near:
        return None
    other = context.claims.near(line.level, distinctive(line.item.title, context.subject), meaning=line.small)
    if other is None:
        return None
    return f'nearly repeats "{other}", a title elsewhere in the book'


# ---------------------------------------------------------------- the book's title


def book_title_example(line: Line, context: Context) -> Found:
    """Two words or more of the worked example's book title that the request does not use (a brief's book came back
    titled 'Small Boat Sailing'), or a word of the worked example's book answer in a title that has no word of the
    request ('The Boat and Its Equipment' for an allotment society's handbook)."""
    title, own = content_words(line.item.title), content_words(line.request)
    copied = (title & example_book_title_words()) - own
    borrowed = (title & (example_book_title_words() | example_words(PLAN_TEMPLATES[0]))) - own
    if len(copied) >= 2 or (borrowed and not title & own):
        return "comes from the worked example, not from this book"
    return None


def book_title_subject(line: Line, context: Context) -> Found:
    """The title does not carry what the book is about, as the audit's coverage judges it: the request's subject
    ('The Greatest Field Guide Ever!' for a field guide to lichens), or for a brief, whose first phrase may be the
    asker's own story, any of its asks."""
    wanted = context.title_asks
    if not wanted or any(carries(context.embedder, ask, [line.item.title]) for ask in wanted):
        return None
    return "does not name what the book is about: " + wanted[0]


def book_title_adds(line: Line, context: Context) -> Found:
    """A content word the request never used: every section's prompt names the book title, and a small model's
    writer follows such a word ('How to Keep a Sourdough Sustainably at Home' gave sections on sustainable living,
    'The Art of Beekeeping' a part on artists). A capable model's title is its own ('Pro Git', 'Learn React')."""
    added = sorted(content_words(line.item.title) - content_words(line.request))
    if not added:
        return None
    return "adds words the request never used: " + ", ".join(added)


# ---------------------------------------------------------------- the table

REFUSE, HOLD = Action.REFUSE, Action.HOLD_BACK
G = Group
ABOVE, TAKEN, FORBIDDEN, SIBLINGS = ("ancestors",), ("taken",), ("forbidden",), ("sibling_units",)
# fmt: off
RULES: dict[str, Rule] = {rule.id: rule for rule in (
    # id, group, action, what it finds, its check, the fields it reads, thresholds; small_only, again, of_book
    Rule("unusable", G.DEFECT, REFUSE, "no usable title: empty, too long, or repeating itself", unusable, again=True),
    Rule("sentence", G.DEFECT, REFUSE, "a sentence or a list, not a heading", sentence,
         thresholds={"MAX_HEADING_WORDS": MAX_HEADING_WORDS, "MAX_TITLE_CASE_WORDS": MAX_TITLE_CASE_WORDS},
         again=True),
    Rule("generic", G.DEFECT, REFUSE, "only generic words ('basics', 'introduction')", generic,
         small_only=True, again=True),
    Rule("identifier", G.DEFECT, REFUSE, "a code identifier or a JSON key", identifier, again=True),
    Rule("counted", G.DEFECT, REFUSE, "told apart from others only by a number", counted, small_only=True, again=True),
    Rule("non_word", G.DEFECT, REFUSE, "a word that is not a word (wordfreq)", non_word, ABOVE, small_only=True,
         again=True),
    Rule("echoes_above", G.DEFECT, REFUSE, "repeats a title above it or the request", echoes_above, ABOVE,
         again=True),
    Rule("repeats_sibling", G.DEFECT, REFUSE, "nearly repeats a chosen sibling, by words", repeats_sibling, TAKEN,
         {"SIMILAR": SIMILAR}, again=True),
    Rule("example_words", G.DEFECT, REFUSE, "borrows the worked example's subject words", example_words_rule,
         FORBIDDEN, small_only=True),
    Rule("planning_note", G.DEFECT, REFUSE, "copies a planning note's words", planning_note),
    Rule("no_point", G.DEFECT, REFUSE, "has no key point", no_point, of_book=False),
    Rule("point_repeats_title", G.DEFECT, REFUSE, "a point that only repeats its title", point_repeats_title,
         of_book=False),
    Rule("prompt_words", G.DEFECT, REFUSE, "a run of a prompt's own words", prompt_words, ("request",),
         {"SHINGLE": SHINGLE}),
    Rule("fragment", G.DEFECT, REFUSE, "a run of the request's words cut out whole", fragment, ("request", "asks"),
         small_only=True),
    Rule("offensive", G.DEFECT, REFUSE, "a word a handbook would not print (glin-profanity)", offensive),
    Rule("example_meaning", G.DEFECT, REFUSE, "near a worked example's item", example_meaning,
         thresholds={"FROM_EXAMPLE": FROM_EXAMPLE}, small_only=True),
    Rule("repeats_given", G.PHRASED, REFUSE, "a phrased title that repeats what it was asked to phrase",
         repeats_given, ("about", "taken")),
    Rule("title_off_subject", G.TITLE_OFF, HOLD, "a phrased title alone off the request", title_off_subject,
         ("title_fit",), {"TITLE_FLOOR": TITLE_FLOOR}),
    Rule("same_as_sibling", G.FAULT, HOLD, "says what a chosen sibling's title says", same_as_sibling, TAKEN,
         {"SIMILAR_TITLE": SIMILAR_TITLE}, small_only=True, again=True),
    Rule("covers_sibling", G.FAULT, HOLD, "title and point near a sibling's", covers_sibling, SIBLINGS,
         {"SIMILAR_UNIT": SIMILAR_UNIT}, small_only=True),
    Rule("vague_point", G.FAULT, HOLD, "a point near a stock phrase or its own title", vague_point,
         thresholds={"VAGUE_STOCK": VAGUE_STOCK, "VAGUE_RESTATES": VAGUE_RESTATES}, small_only=True),
    Rule("off_subject", G.OFF, HOLD, "title and point off the request (judge's fit)", off_subject, ("fit",),
         {"PLAN_FLOOR": PLAN_FLOOR}, small_only=True),
    Rule("leaves_out", G.OWED, HOLD, "a last slot's line that carries none of the asks still owed", leaves_out,
         ("owed",), {"CARRIED": CARRIED}),
    Rule("last_resort", G.LAST, REFUSE, "a held off-subject line under the last resort's floor", last_resort,
         ("fit",), {"LAST_RESORT_FIT": LAST_RESORT_FIT}),
    Rule("taken_elsewhere", G.CLAIM, REFUSE, "another node of the book has the title", taken_elsewhere,
         small_only=True),
    Rule("near_elsewhere", G.CLAIM, REFUSE, "nearly repeats a title of its level elsewhere, by words or meaning",
         near_elsewhere, ("level", "near"), {"SIMILAR": SIMILAR, "SIMILAR_TITLE": SIMILAR_TITLE}, small_only=True),
    Rule("book_title_example", G.BOOK_TITLE, REFUSE, "the book title borrows the worked example's book title",
         book_title_example, ("request",)),
    Rule("book_title_subject", G.BOOK_TITLE, REFUSE, "the book title does not carry the request's subject",
         book_title_subject, thresholds={"CARRIED": CARRIED}, small_only=True),
    Rule("book_title_adds", G.BOOK_TITLE, REFUSE, "the book title adds a content word the request never used",
         book_title_adds, ("request",), small_only=True),
)}
# fmt: on


def of_groups(*groups: Group) -> tuple[Rule, ...]:
    """The rules of these groups, group by group, each group in the table's order."""
    return tuple(rule for group in groups for rule in RULES.values() if rule.group is group)


CHAINS: dict[Chain, tuple[Rule, ...]] = {
    Chain.DEFECT: of_groups(G.DEFECT),
    Chain.PHRASE: of_groups(G.PHRASED, G.DEFECT),
    Chain.HOLD: of_groups(G.FAULT, G.OFF, G.OWED),
    Chain.HOLD_PHRASED: of_groups(G.TITLE_OFF, G.FAULT, G.OFF),  # a phrased unit carries the ask it was phrased for
    Chain.AGAIN: of_groups(G.LAST) + tuple(rule for rule in RULES.values() if rule.again),
    Chain.CLAIM: of_groups(G.CLAIM),
    Chain.BOOK_TITLE: of_groups(G.BOOK_TITLE) + tuple(rule for rule in of_groups(G.DEFECT) if rule.of_book),
}


def first(chain: Chain, line: Line, context: Context, *, strict: bool | None = None) -> Verdict | None:
    """The first verdict of the chain's rules, in order, on the line, or None. `strict` (by default the line's
    `small`): the rules fitted to a small model's lines are asked too."""
    return next(found_by(CHAINS[chain], line, context, strict=line.small if strict is None else strict), None)


def verdicts(chain: Chain, line: Line, context: Context, *, strict: bool | None = None) -> list[Verdict]:
    """Every verdict of the chain's rules on the line (examples/rule_sides.py counts each rule that acts)."""
    return list(found_by(CHAINS[chain], line, context, strict=line.small if strict is None else strict))


def found_by(rules: Sequence[Rule], line: Line, context: Context, *, strict: bool) -> Iterator[Verdict]:
    for rule in rules:
        if strict or not rule.small_only:
            if (found := rule.verdict(line, context)) is not None:
                yield found
