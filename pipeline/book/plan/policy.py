"""The title policy: every way a planned line can be refused, held back or ranked lower, as named rules that run.

A line is one title and key point the model offered for a node. Each rule is one short function, (line, context) ->
Verdict or None: the Line holds the line and what its node knows of it, the Context what the book knows. RULES is the
ordered table of them all, as markdown-it-py keeps its rules, each row with its group, action and thresholds. The
planner asks a group for its first verdict (`first`) and names no rule:

- defect: what a reader would see as a defect; a line with one is never taken (by words, then by meaning);
- fault: what makes a line a worse choice; it is held back while the pool has better;
- off, title_off, owed: held back for the node's sake: off the subject (title and point, or a phrased title alone),
  or carrying none of the asks a last slot owes;
- given: a phrased title that repeats what it was asked to phrase;
- claim: the book's claim on a title: another node has it, or one of its level nearly has it;
- book_title: the model's book title refused, so the title is made from the request;
- rank: weights, not checks: DIVERSITY and OWED_BONUS weigh a line's score, LAST_RESORT_FIT bounds the last resort.

A rule fitted to what SmolLM2-135M gets wrong that refuses a capable author's good lines is `small_only` (the
good-writing corpus, examples/good_writing.py and examples/rule_sides.py measure both sides). run.log and stats.json
count by the rule's id (`plan_rules`); no code reads a message's words. The fit floors are pipeline/meaning/floors.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from pipeline.book.plan.answers import PlanItem, heading_from_point
from pipeline.book.plan.claims import Claims
from pipeline.book.plan.prompts import (
    PLAN_TEMPLATES,
    SHINGLE,
    carries_note,
    example_book_title_words,
    example_words,
    prompt_run,
)
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

DIVERSITY = 0.2  # MMR's weight on the similarity to the nearest chosen sibling: at 0.5, a line off the subject
# (fit 0.35, 0.2 to the chosen) outranked one on it (fit 0.55, 0.7 to a sibling) in the demo's chapters
OWED_BONUS = 0.15  # a line that carries an ask of the request the node still owes
REQUEST = "the request"  # the ancestor a line's request is named by (pipeline/book/plan/levels.py)


class Action(StrEnum):
    REFUSE = "refuse"  # never taken
    HOLD_BACK = "hold back"  # taken only when the pool has nothing better
    RANK_LOWER = "rank lower"  # scored lower, never refused


@dataclass(frozen=True)
class Verdict:
    """What one rule found in one line: the rule's id, its action, a message for run.log, the figure measured."""

    rule: str
    action: Action
    message: str
    figure: float | None = None

    def __str__(self) -> str:
        return self.message


@dataclass
class Line:
    """One item as a rule sees it: what is above it (what each is -> its text), the titles taken beside it and their
    units, the worked examples' words it may not borrow, the request and its asks, whether a small model gave it; what
    its node measured of it (its fits to the request, the given unit it phrases, the asks its slot owes); for a claim
    its level and whether a near title counts."""

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

    @property
    def unit(self) -> str:
        return unit(self.item.title, self.item.point)


@dataclass
class Context:
    """What the book knows that the rules read: the embedder, the worked examples' units, the request's subject words
    (titles are compared without them), the asks a book title must carry one of, and the titles claimed so far."""

    embedder: Embedder
    examples: Sequence[str] = ()
    subject: frozenset[str] = frozenset()
    title_asks: Sequence[str] = ()
    claims: Claims | None = None


RuleCheck = Callable[[Line, Context], "Verdict | None"]


@dataclass(frozen=True)
class Rule:
    """One row of the policy's table: the rule's id, its group, its action, what it finds, its check (None: a weight of
    the ranking), its thresholds by name, whether it is asked of a small model's lines only (`small_only`), and whether
    it is asked again of a held line taken last (`again`: the title's form and place)."""

    id: str
    group: str
    action: Action
    finds: str
    check: RuleCheck | None = None
    thresholds: dict[str, float] = field(default_factory=dict)
    small_only: bool = False
    again: bool = False


def verdict(rule: str, message: str, figure: float | None = None) -> Verdict:
    """A verdict of a rule of the table, with the table's action for it."""
    return Verdict(rule, RULES[rule].action, message, figure)


# ---------------------------------------------------------------- defects: never taken (by words, then meaning)


def unusable(line: Line, context: Context) -> Verdict | None:
    if plausible_title(line.item.title):
        return None
    return verdict("unusable", "is not a usable title (empty, too long, or repeating itself)")


def sentence(line: Line, context: Context) -> Verdict | None:
    """More than MAX_HEADING_WORDS words ('How to keep a sourdough starter is something all bakers do
    differently'); a capable model's heading in title case or question runs to MAX_TITLE_CASE_WORDS ('How Does
    the U.S. Bureau of Labor Statistics Collect the U.S. Unemployment Data?')."""
    title = line.item.title
    words = len(title_words(title))
    longer = not line.small and (title_case(title) or title.endswith("?"))
    listed = line.small and ";" in title  # a small model's 'The Art of Souring; A Guide for Beginners'
    if not listed and (words <= MAX_HEADING_WORDS or (longer and words <= MAX_TITLE_CASE_WORDS)):
        return None
    return verdict("sentence", f"is a sentence or a list, not a short heading (at most {MAX_HEADING_WORDS} words)")


def generic(line: Line, context: Context) -> Verdict | None:
    if content_words(line.item.title):
        return None
    return verdict("generic", "says nothing of its own (only generic words like 'basics' or 'introduction')")


def identifier(line: Line, context: Context) -> Verdict | None:
    if not looks_like_identifier(line.item.title):
        return None
    return verdict("identifier", "looks like a code identifier or a JSON key, not a title")


def counted(line: Line, context: Context) -> Verdict | None:
    if not is_counted(line.item.title):
        return None
    return verdict("counted", "is told apart from others only by a number")


def non_word(line: Line, context: Context) -> Verdict | None:
    odd = non_words(line.item.title, " ".join(line.ancestors.values()))
    if not odd:
        return None
    return verdict("non_word", "uses a word that is not a word: " + ", ".join(f'"{word}"' for word in odd))


def echoes_above(line: Line, context: Context) -> Verdict | None:
    """The title repeats the request or a title above it, by its words (titles.echoes); a capable model's title
    only when it is the title above it: its narrower titles say something of their own ('What Is Finance?' under
    'Introduction to Finance', 'Examples of the Central Limit Theorem' under 'The Central Limit Theorem')."""
    for what, text in line.ancestors.items():
        if text and (
            echoes(line.item.title, text) if what == REQUEST or line.small else same_title(line.item.title, text)
        ):
            return verdict("echoes_above", f"repeats {what}")
    return None


def repeats_sibling(line: Line, context: Context) -> Verdict | None:
    """The title repeats a chosen sibling's; a small model's also when their content words nearly match ('Choosing
    Flour', 'Choosing the Flour'): a capable model's siblings share words as a reader expects ('Step 1', 'Step 2';
    '... over the Long Run', '... over the Short Run')."""
    same = near_duplicates if line.small else same_title
    for sibling in line.taken:
        if same(line.item.title, sibling):
            return verdict("repeats_sibling", f'nearly repeats "{sibling}"')
    return None


def example_words_rule(line: Line, context: Context) -> Verdict | None:
    if not borrows_from(line.item.title, line.forbidden):
        return None
    return verdict("example_words", "comes from the worked example, not from this book")


def planning_note(line: Line, context: Context) -> Verdict | None:
    if not carries_note(line.unit):
        return None
    return verdict("planning_note", "copies a planning note")


def no_point(line: Line, context: Context) -> Verdict | None:
    if line.item.point.strip():
        return None
    return verdict("no_point", "has no key point")


def point_repeats_title(line: Line, context: Context) -> Verdict | None:
    said = content_words(line.item.point)
    if not said or not said <= content_words(line.item.title):
        return None
    return verdict("point_repeats_title", "has a point that only repeats its title")


def prompt_words(line: Line, context: Context) -> Verdict | None:
    run = prompt_run(line.unit, line.request)
    if run is None:
        return None
    return verdict("prompt_words", f'copies the words of a prompt: "{run}"')


def fragment(line: Line, context: Context) -> Verdict | None:
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
    return verdict("fragment", "is a fragment of the request, not a heading")


def offensive(line: Line, context: Context) -> Verdict | None:
    words = offensive_words(line.unit)
    if not words:
        return None
    return verdict("offensive", "uses a word a handbook would not print: " + ", ".join(words))


def example_meaning(line: Line, context: Context) -> Verdict | None:
    if nearest_example(context.embedder, line.unit, context.examples) is None:
        return None
    return verdict("example_meaning", "comes from the worked example, not from this book")


# ---------------------------------------------------------------- faults: held back while the pool has better


def same_as_sibling(line: Line, context: Context) -> Verdict | None:
    other = title_near(context.embedder, line.item.title, list(line.taken), context.subject)
    return None if other is None else verdict("same_as_sibling", f'says the same as "{other}"')


def covers_sibling(line: Line, context: Context) -> Verdict | None:
    units = line.sibling_units
    if not line.item.point or not units:
        return None
    near = unit_near(context.embedder, line.unit, units)
    if near is None:
        return None
    return verdict("covers_sibling", f'covers what "{units[near].split(":")[0]}" covers')


def vague_point(line: Line, context: Context) -> Verdict | None:
    item = line.item
    if title_key(item.title) == title_key(heading_from_point(item.point)):  # a title made from its point
        return None
    why = point_vagueness(context.embedder, item.title, item.point)
    return None if why is None else verdict("vague_point", f"has a key point that {why}")


# ---------------------------------------------------------------- holds: for the node's sake


def off_subject(line: Line, context: Context) -> Verdict | None:
    if line.fit >= PLAN_FLOOR:
        return None
    return verdict("off_subject", "is not about what the request asks for", line.fit)


def title_off_subject(line: Line, context: Context) -> Verdict | None:
    if line.title_fit >= TITLE_FLOOR:
        return None
    return verdict("title_off_subject", "has a title that is not about what the request asks for", line.title_fit)


def leaves_out(line: Line, context: Context) -> Verdict | None:
    """A line for a slot that owes asks (a chapter's last sections) that carries none of them."""
    if not line.owed or any(carries(context.embedder, ask, [line.unit]) for ask in line.owed):
        return None
    return verdict("leaves_out", "leaves out what the request asks for: " + "; ".join(line.owed))


def repeats_given(line: Line, context: Context) -> Verdict | None:
    """A phrased title that is what it was asked to phrase, or a title already taken beside it."""
    if title_key(line.item.title) not in {title_key(line.about), *map(title_key, line.taken)}:
        return None
    return verdict("repeats_given", "repeats what it was asked to phrase")


# ---------------------------------------------------------------- claims: the book's titles


def taken_elsewhere(line: Line, context: Context) -> Verdict | None:
    """Another node at any level has the title: a section named like a chapter reads as one."""
    if context.claims is None or not context.claims.taken(line.item.title):
        return None
    return verdict("taken_elsewhere", "is already a title elsewhere in the book")


def near_elsewhere(line: Line, context: Context) -> Verdict | None:
    """A title of its level elsewhere says what it says, by words (a small model's, by meaning too)."""
    if context.claims is None or not line.near:
        return None
    other = context.claims.near(line.level, distinctive(line.item.title, context.subject), meaning=line.small)
    if other is None:
        return None
    return verdict("near_elsewhere", f'nearly repeats "{other}", a title elsewhere in the book')


# ---------------------------------------------------------------- the book's title


def book_title_example(line: Line, context: Context) -> Verdict | None:
    """Two words or more of the worked example's book title that the request does not use (a brief's book came back
    titled 'Small Boat Sailing'), or a word of the worked example's book answer in a title that has no word of the
    request ('The Boat and Its Equipment' for an allotment society's handbook)."""
    title, own = content_words(line.item.title), content_words(line.request)
    copied = (title & example_book_title_words()) - own
    borrowed = (title & (example_book_title_words() | example_words(PLAN_TEMPLATES[0]))) - own
    if len(copied) >= 2 or (borrowed and not title & own):
        return verdict("book_title_example", "comes from the worked example, not from this book")
    return None


def book_title_subject(line: Line, context: Context) -> Verdict | None:
    """The title does not carry what the book is about, as the audit's coverage judges it: the request's subject
    ('The Greatest Field Guide Ever!' for a field guide to lichens), or for a brief, whose first phrase may be the
    asker's own story, any of its asks."""
    wanted = context.title_asks
    if not wanted or any(carries(context.embedder, ask, [line.item.title]) for ask in wanted):
        return None
    return verdict("book_title_subject", "does not name what the book is about: " + wanted[0])


def book_title_adds(line: Line, context: Context) -> Verdict | None:
    """A content word the request never used: every section's prompt names the book title, and a small model's
    writer follows such a word ('How to Keep a Sourdough Sustainably at Home' gave sections on sustainable living,
    'The Art of Beekeeping' a part on artists). A capable model's title is its own ('Pro Git', 'Learn React')."""
    added = sorted(content_words(line.item.title) - content_words(line.request))
    if not added:
        return None
    return verdict("book_title_adds", "adds words the request never used: " + ", ".join(added))


# ---------------------------------------------------------------- the table

REFUSE, HOLD, LOWER = Action.REFUSE, Action.HOLD_BACK, Action.RANK_LOWER
# fmt: off
RULES: dict[str, Rule] = {rule.id: rule for rule in (
    # id, group, action, what it finds, its check (None: a weight of the ranking), thresholds; small_only, again
    Rule("unusable", "defect", REFUSE, "no usable title: empty, too long, or repeating itself",
         unusable, {}, again=True),
    Rule("sentence", "defect", REFUSE, "a sentence or a list, not a heading",
         sentence, {"MAX_HEADING_WORDS": MAX_HEADING_WORDS, "MAX_TITLE_CASE_WORDS": MAX_TITLE_CASE_WORDS}, again=True),
    Rule("generic", "defect", REFUSE, "only generic words ('basics', 'introduction')",
         generic, {}, small_only=True, again=True),
    Rule("identifier", "defect", REFUSE, "a code identifier or a JSON key", identifier, {}, again=True),
    Rule("counted", "defect", REFUSE, "told apart from others only by a number",
         counted, {}, small_only=True, again=True),
    Rule("non_word", "defect", REFUSE, "a word that is not a word (wordfreq)",
         non_word, {}, small_only=True, again=True),
    Rule("echoes_above", "defect", REFUSE, "repeats a title above it or the request", echoes_above, {}, again=True),
    Rule("repeats_sibling", "defect", REFUSE, "nearly repeats a chosen sibling, by words",
         repeats_sibling, {"SIMILAR": SIMILAR}, again=True),
    Rule("example_words", "defect", REFUSE, "borrows the worked example's subject words",
         example_words_rule, {}, small_only=True),
    Rule("planning_note", "defect", REFUSE, "copies a planning note's words", planning_note, {}),
    Rule("no_point", "defect", REFUSE, "has no key point", no_point, {}),
    Rule("point_repeats_title", "defect", REFUSE, "a point that only repeats its title", point_repeats_title, {}),
    Rule("prompt_words", "defect", REFUSE, "a run of a prompt's own words", prompt_words, {"SHINGLE": SHINGLE}),
    Rule("fragment", "defect", REFUSE, "a run of the request's words cut out whole", fragment, {}, small_only=True),
    Rule("offensive", "defect", REFUSE, "a word a handbook would not print (glin-profanity)", offensive, {}),
    Rule("example_meaning", "defect", REFUSE, "near a worked example's item",
         example_meaning, {"FROM_EXAMPLE": FROM_EXAMPLE}, small_only=True),
    Rule("repeats_given", "given", REFUSE, "a phrased title that repeats what it was asked to phrase",
         repeats_given, {}),
    Rule("same_as_sibling", "fault", HOLD, "says what a chosen sibling's title says",
         same_as_sibling, {"SIMILAR_TITLE": SIMILAR_TITLE}, small_only=True, again=True),
    Rule("covers_sibling", "fault", HOLD, "title and point near a sibling's",
         covers_sibling, {"SIMILAR_UNIT": SIMILAR_UNIT}, small_only=True),
    Rule("vague_point", "fault", HOLD, "a point near a stock phrase or its own title",
         vague_point, {"VAGUE_STOCK": VAGUE_STOCK, "VAGUE_RESTATES": VAGUE_RESTATES}, small_only=True),
    Rule("off_subject", "off", HOLD, "title and point off the request (judge's fit)",
         off_subject, {"PLAN_FLOOR": PLAN_FLOOR}, small_only=True),
    Rule("title_off_subject", "title_off", HOLD, "a phrased title alone off the request",
         title_off_subject, {"TITLE_FLOOR": TITLE_FLOOR}),
    Rule("leaves_out", "owed", HOLD, "a last slot's line that carries none of the asks still owed",
         leaves_out, {"CARRIED": CARRIED}),
    Rule("taken_elsewhere", "claim", REFUSE, "another node of the book has the title",
         taken_elsewhere, {}, small_only=True),
    Rule("near_elsewhere", "claim", REFUSE, "nearly repeats a title of its level elsewhere, by words or meaning",
         near_elsewhere, {"SIMILAR": SIMILAR, "SIMILAR_TITLE": SIMILAR_TITLE}, small_only=True),
    Rule("book_title_example", "book_title", REFUSE, "the book title borrows the worked example's book title",
         book_title_example, {}),
    Rule("book_title_subject", "book_title", REFUSE, "the book title does not carry the request's subject",
         book_title_subject, {"CARRIED": CARRIED}, small_only=True),
    Rule("book_title_adds", "book_title", REFUSE, "the book title adds a content word the request never used",
         book_title_adds, {}, small_only=True),
    Rule("near_chosen", "rank", LOWER, "similar to the nearest chosen sibling (MMR)", None, {"DIVERSITY": DIVERSITY}),
    Rule("owed_bonus", "rank", LOWER, "lines that carry no ask still owed rank below those that do",
         None, {"OWED_BONUS": OWED_BONUS}),
    Rule("last_resort", "rank", REFUSE, "a held off-subject line never taken last below",
         None, {"LAST_RESORT_FIT": LAST_RESORT_FIT}),
)}
# fmt: on
GROUPS: dict[str, tuple[Rule, ...]] = {
    group: tuple(rule for rule in RULES.values() if rule.group == group and rule.check is not None)
    for group in dict.fromkeys(rule.group for rule in RULES.values())
}
AGAIN: tuple[Rule, ...] = tuple(rule for rule in RULES.values() if rule.again)


def first(group: str, line: Line, context: Context, *, strict: bool | None = None) -> Verdict | None:
    """The first verdict of the group's rules, in the table's order, on the line, or None. `strict` (by default the
    line's `small`): the rules fitted to a small model's lines are asked too."""
    return first_of(GROUPS.get(group, ()), line, context, strict=line.small if strict is None else strict)


def first_again(line: Line, context: Context) -> Verdict | None:
    """The first verdict of the rules asked again of a held line taken last (its title's form and place)."""
    return first_of(AGAIN, line, context, strict=line.small)


def first_of(rules: Sequence[Rule], line: Line, context: Context, *, strict: bool) -> Verdict | None:
    return next(found_by(rules, line, context, strict=strict), None)


def verdicts(group: str, line: Line, context: Context, *, strict: bool | None = None) -> list[Verdict]:
    """Every verdict of the group's rules on the line (examples/rule_sides.py counts each rule that acts)."""
    return list(found_by(GROUPS.get(group, ()), line, context, strict=line.small if strict is None else strict))


def found_by(rules: Sequence[Rule], line: Line, context: Context, *, strict: bool) -> Iterator[Verdict]:
    for rule in rules:
        if rule.check is not None and (strict or not rule.small_only):
            if (found := rule.check(line, context)) is not None:
                yield found
