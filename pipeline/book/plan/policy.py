"""The title policy: every way a planned line can be refused, held back or ranked lower, as named rules.

A line is one title and key point the model offered for a node. Each rule is one short function that returns a
Verdict (the rule's id, what the rule does with the line, a message for run.log, the figure it measured) or None;
RULES is the ordered table of them all, each with its action and its threshold, as markdown-it-py keeps its rules:
one function a rule, one ordered list. The planner asks them in groups, each a section of this module:

- defects: what a reader would see as a defect; a line with one is never taken (DEFECTS_BY_WORDS in order, then
  example_meaning; checks.TitleChecks.defect);
- faults: what makes a line a worse choice; it is held back while the pool has better (TitleChecks.faults);
- holds: held back for the node's sake: off the subject, or leaving out an ask a last slot owes (choose.held_back);
- claims: the book's claim on a title: another node has it or one of its level nearly has it (TitleChecks.claim);
- the book's title: the model's refused, so the title is made from the request (TitleChecks.book_title);
- ranking: DIVERSITY and OWED_BONUS weigh a line's score (choose.mmr); LAST_RESORT_FIT bounds the last resort.

Statistics, run.log and stats.json key on the rule's id (PlanStats.refuse and .hold, `plan_rules` in stats.json);
no code reads a message's words. The thresholds live beside the rules that use them (pipeline/meaning/nearness.py
holds the audit's own, which the planner shares); `rule_table()` lists them all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from pipeline.book.plan.answers import PlanItem, heading_from_point
from pipeline.book.plan.prompts import SHINGLE, carries_note, prompt_run
from pipeline.meaning.nearness import (
    CARRIED,
    FROM_EXAMPLE,
    SIMILAR_TITLE,
    SIMILAR_UNIT,
    VAGUE_RESTATES,
    VAGUE_STOCK,
    nearest_example,
    point_vagueness,
    title_near,
    unit,
    unit_near,
)
from pipeline.meaning.offensive import offensive_words
from pipeline.titles import (
    MAX_HEADING_WORDS,
    MAX_TITLE_CASE_WORDS,
    borrows_from,
    content_words,
    echoes,
    is_counted,
    looks_like_identifier,
    near_duplicates,
    non_words,
    plausible_title,
    same_title,
    title_case,
    title_key,
    title_words,
)

if TYPE_CHECKING:
    from pipeline.meaning.embed import Embedder

PLAN_FLOOR = 0.3  # a line whose title and point fit the request less (pipeline/meaning/onsubject.py's unit fit) is
# held back while the pool has others: 0.11-0.3 in the demo's pools were lemon sorbet, beer, sashimi
# A title whose own fit to the request (the judge's unit fit, pipeline/meaning/onsubject.py, of the title alone: the
# contents page shows it alone) is under this is passed over. On the demo's phrased titles, those under 0.3 were
# 'Milk Additives', 'Get Ready for War', 'Pest Control', 'Pronto' ('Getting Started' 0.29); over 0.45 all were about
# a starter. Readers' labels of 230 headings of nine books (tests/fixtures/meaning/on_subject_forms.json) separate
# on from off by this fit only partly (AUC 0.76): a floor near the judge's ON_SUBJECT would refuse most lines.
TITLE_FLOOR = 0.3
LAST_RESORT_FIT = 0.2  # a line held as off the subject is never taken below this fit: the node is short instead
# ('The Science Behind It: making sashimi with lemon and garlic breadcrumbs', 0.11 to a sourdough request)
DIVERSITY = 0.2  # MMR's weight on the similarity to the nearest chosen sibling: at 0.5, a line off the subject
# (fit 0.35, 0.2 to the chosen) outranked one on it (fit 0.55, 0.7 to a sibling) in the demo's chapters
OWED_BONUS = 0.15  # a line that carries an ask of the request the node still owes


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


@dataclass(frozen=True)
class Rule:
    """One row of the policy's table: the rule's id, its action, its threshold (if it has one), what it finds, and
    whether it is asked of a small model's lines only (`small_only`): a rule fitted to what SmolLM2-135M gets
    wrong that refuses or holds a capable author's good lines (the good-writing corpus,
    examples/good_writing.py and examples/rule_sides.py measure both)."""

    id: str
    action: Action
    finds: str
    threshold: str = ""
    small_only: bool = False


@dataclass
class Line:
    """One line as a rule sees it: the item, what is above it (what each is -> its text), the titles already
    chosen beside it, the worked example's words it may not borrow, the book's request and asks, and whether a
    small model gave it."""

    item: PlanItem
    ancestors: dict[str, str]
    chosen: Sequence[str]
    copied: frozenset[str]
    request: str
    asks: Sequence[str]
    small: bool = True  # the line is a small model's: the rules keep the strict form they were fitted in

    @property
    def unit(self) -> str:
        return unit(self.item.title, self.item.point)


RuleCheck = Callable[[Line], "Verdict | None"]


def verdict(rule: str, message: str, figure: float | None = None) -> Verdict:
    """A verdict of a rule of the table, with the table's action for it."""
    return Verdict(rule, RULES[rule].action, message, figure)


# ---------------------------------------------------------------- defects: never taken (by words, then meaning)


def unusable(line: Line) -> Verdict | None:
    if plausible_title(line.item.title):
        return None
    return verdict("unusable", "is not a usable title (empty, too long, or repeating itself)")


def sentence(line: Line) -> Verdict | None:
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


def generic(line: Line) -> Verdict | None:
    if content_words(line.item.title):
        return None
    return verdict("generic", "says nothing of its own (only generic words like 'basics' or 'introduction')")


def identifier(line: Line) -> Verdict | None:
    if not looks_like_identifier(line.item.title):
        return None
    return verdict("identifier", "looks like a code identifier or a JSON key, not a title")


def counted(line: Line) -> Verdict | None:
    if not is_counted(line.item.title):
        return None
    return verdict("counted", "is told apart from others only by a number")


def non_word(line: Line) -> Verdict | None:
    odd = non_words(line.item.title, " ".join(line.ancestors.values()))
    if not odd:
        return None
    return verdict("non_word", "uses a word that is not a word: " + ", ".join(f'"{word}"' for word in odd))


def echoes_above(line: Line) -> Verdict | None:
    """The title repeats the request or a title above it, by its words (titles.echoes); a capable model's title
    only when it is the title above it: its narrower titles say something of their own ('What Is Finance?' under
    'Introduction to Finance', 'Examples of the Central Limit Theorem' under 'The Central Limit Theorem')."""
    for what, text in line.ancestors.items():
        if text and (
            echoes(line.item.title, text) if what == REQUEST or line.small else same_title(line.item.title, text)
        ):
            return verdict("echoes_above", f"repeats {what}")
    return None


REQUEST = "the request"  # the ancestor a line's request is named by (pipeline/book/plan/schedule.py's NodeAsk)


def repeats_sibling(line: Line) -> Verdict | None:
    """The title repeats a chosen sibling's; a small model's also when their content words nearly match ('Choosing
    Flour', 'Choosing the Flour'): a capable model's siblings share words as a reader expects ('Step 1', 'Step 2';
    '... over the Long Run', '... over the Short Run')."""
    same = near_duplicates if line.small else same_title
    for sibling in line.chosen:
        if same(line.item.title, sibling):
            return verdict("repeats_sibling", f'nearly repeats "{sibling}"')
    return None


def example_words(line: Line) -> Verdict | None:
    if not borrows_from(line.item.title, line.copied):
        return None
    return verdict("example_words", "comes from the worked example, not from this book")


def planning_note(line: Line) -> Verdict | None:
    if not carries_note(line.unit):
        return None
    return verdict("planning_note", "copies a planning note")


def no_point(line: Line) -> Verdict | None:
    if line.item.point.strip():
        return None
    return verdict("no_point", "has no key point")


def point_repeats_title(line: Line) -> Verdict | None:
    said = content_words(line.item.point)
    if not said or not said <= content_words(line.item.title):
        return None
    return verdict("point_repeats_title", "has a point that only repeats its title")


def prompt_words(line: Line) -> Verdict | None:
    run = prompt_run(line.unit, line.request)
    if run is None:
        return None
    return verdict("prompt_words", f'copies the words of a prompt: "{run}"')


def fragment(line: Line) -> Verdict | None:
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


def offensive(line: Line) -> Verdict | None:
    words = offensive_words(line.unit)
    if not words:
        return None
    return verdict("offensive", "uses a word a handbook would not print: " + ", ".join(words))


DEFECTS_BY_WORDS: tuple[RuleCheck, ...] = (
    unusable,
    sentence,
    generic,
    identifier,
    counted,
    non_word,
    echoes_above,
    repeats_sibling,
    example_words,
    planning_note,
    no_point,
    point_repeats_title,
    prompt_words,
    fragment,
    offensive,
)
TITLE_FORM: tuple[RuleCheck, ...] = (unusable, sentence, generic, identifier, counted, non_word)
TITLE_PLACE: tuple[RuleCheck, ...] = (*TITLE_FORM, echoes_above, repeats_sibling)


def example_meaning(line: Line, embedder: Embedder, examples: Sequence[str]) -> Verdict | None:
    if nearest_example(embedder, line.unit, examples) is None:
        return None
    return verdict("example_meaning", "comes from the worked example, not from this book")


def first(checks: Sequence[RuleCheck], line: Line) -> Verdict | None:
    """The first verdict of `checks`, in order, on the line, or None."""
    for check in checks:
        if (found := check(line)) is not None:
            return found
    return None


# ---------------------------------------------------------------- faults: held back while the pool has better


def same_as_sibling(line: Line, embedder: Embedder, subject: frozenset[str]) -> Verdict | None:
    other = title_near(embedder, line.item.title, list(line.chosen), subject)
    return None if other is None else verdict("same_as_sibling", f'says the same as "{other}"')


def covers_sibling(line: Line, embedder: Embedder, sibling_units: Sequence[str]) -> Verdict | None:
    if not line.item.point or not sibling_units:
        return None
    near = unit_near(embedder, line.unit, sibling_units)
    if near is None:
        return None
    return verdict("covers_sibling", f'covers what "{sibling_units[near].split(":")[0]}" covers')


def vague_point(line: Line, embedder: Embedder) -> Verdict | None:
    item = line.item
    if title_key(item.title) == title_key(heading_from_point(item.point)):  # a title made from its point
        return None
    why = point_vagueness(embedder, item.title, item.point)
    return None if why is None else verdict("vague_point", f"has a key point that {why}")


# ---------------------------------------------------------------- holds: for the node's sake


def off_subject(fit: float) -> Verdict | None:
    if fit >= PLAN_FLOOR:
        return None
    return verdict("off_subject", "is not about what the request asks for", fit)


def title_off_subject(fit: float) -> Verdict | None:
    if fit >= TITLE_FLOOR:
        return None
    return verdict("title_off_subject", "has a title that is not about what the request asks for", fit)


def leaves_out(open_asks: Sequence[str]) -> Verdict:
    return verdict("leaves_out", "leaves out what the request asks for: " + "; ".join(open_asks))


def repeats_given(title: str, about: str, chosen: Sequence[str]) -> Verdict | None:
    """A phrased title that is what it was asked to phrase, or a title already taken beside it."""
    if title_key(title) not in {title_key(about), *map(title_key, chosen)}:
        return None
    return verdict("repeats_given", "repeats what it was asked to phrase")


# ---------------------------------------------------------------- claims: the book's titles


def taken_elsewhere() -> Verdict:
    return verdict("taken_elsewhere", "is already a title elsewhere in the book")


def near_elsewhere(other: str) -> Verdict:
    return verdict("near_elsewhere", f'nearly repeats "{other}", a title elsewhere in the book')


# ---------------------------------------------------------------- the book's title


def book_title_example() -> Verdict:
    return verdict("book_title_example", "comes from the worked example, not from this book")


def book_title_subject(wanted: str) -> Verdict:
    return verdict("book_title_subject", "does not name what the book is about: " + wanted)


def book_title_adds(added: Sequence[str]) -> Verdict:
    return verdict("book_title_adds", "adds words the request never used: " + ", ".join(added))


REFUSE, HOLD, LOWER = Action.REFUSE, Action.HOLD_BACK, Action.RANK_LOWER
RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in (
        Rule("unusable", REFUSE, "no usable title: empty, too long, or repeating itself"),
        Rule("sentence", REFUSE, "a sentence or a list, not a heading", f"MAX_HEADING_WORDS {MAX_HEADING_WORDS}"),
        Rule("generic", REFUSE, "only generic words ('basics', 'introduction')", small_only=True),
        Rule("identifier", REFUSE, "a code identifier or a JSON key"),
        Rule("counted", REFUSE, "told apart from others only by a number", small_only=True),
        Rule("non_word", REFUSE, "a word that is not a word (wordfreq)", small_only=True),
        Rule("echoes_above", REFUSE, "repeats a title above it or the request"),
        Rule("repeats_sibling", REFUSE, "nearly repeats a chosen sibling, by words"),
        Rule("example_words", REFUSE, "borrows the worked example's subject words", small_only=True),
        Rule("planning_note", REFUSE, "copies a planning note's words"),
        Rule("no_point", REFUSE, "has no key point"),
        Rule("point_repeats_title", REFUSE, "a point that only repeats its title"),
        Rule("prompt_words", REFUSE, "a run of a prompt's own words", f"SHINGLE {SHINGLE} words"),
        Rule("fragment", REFUSE, "a run of the request's words cut out whole", small_only=True),
        Rule("offensive", REFUSE, "a word a handbook would not print (glin-profanity)"),
        Rule(
            "example_meaning", REFUSE, "near a worked example's item", f"FROM_EXAMPLE {FROM_EXAMPLE}", small_only=True
        ),
        Rule("repeats_given", REFUSE, "a phrased title that repeats what it was asked to phrase"),
        Rule(
            "same_as_sibling",
            HOLD,
            "says what a chosen sibling's title says",
            f"SIMILAR_TITLE {SIMILAR_TITLE}",
            small_only=True,
        ),
        Rule(
            "covers_sibling", HOLD, "title and point near a sibling's", f"SIMILAR_UNIT {SIMILAR_UNIT}", small_only=True
        ),
        Rule(
            "vague_point",
            HOLD,
            "a point near a stock phrase or its own title",
            f"VAGUE_STOCK {VAGUE_STOCK}, VAGUE_RESTATES {VAGUE_RESTATES}",
            small_only=True,
        ),
        Rule(
            "off_subject",
            HOLD,
            "title and point off the request (judge's fit)",
            f"PLAN_FLOOR {PLAN_FLOOR}",
            small_only=True,
        ),
        Rule("title_off_subject", HOLD, "a phrased title alone off the request", f"TITLE_FLOOR {TITLE_FLOOR}"),
        Rule("leaves_out", HOLD, "a last slot's line that carries none of the asks still owed", f"CARRIED {CARRIED}"),
        Rule("taken_elsewhere", REFUSE, "another node of the book has the title", small_only=True),
        Rule(
            "near_elsewhere",
            REFUSE,
            "nearly repeats a title of its level elsewhere, by words or meaning",
            f"SIMILAR_TITLE {SIMILAR_TITLE}",
            small_only=True,
        ),
        Rule("book_title_example", REFUSE, "the book title borrows the worked example's book title"),
        Rule(
            "book_title_subject",
            REFUSE,
            "the book title does not carry the request's subject",
            f"CARRIED {CARRIED}",
            small_only=True,
        ),
        Rule("book_title_adds", REFUSE, "the book title adds a content word the request never used", small_only=True),
        Rule("near_chosen", LOWER, "similar to the nearest chosen sibling (MMR)", f"DIVERSITY {DIVERSITY}"),
        Rule(
            "owed_bonus",
            LOWER,
            "lines that carry no ask still owed rank below those that do",
            f"OWED_BONUS {OWED_BONUS}",
        ),
        Rule(
            "last_resort",
            REFUSE,
            "a held off-subject line never taken last below",
            f"LAST_RESORT_FIT {LAST_RESORT_FIT}",
        ),
    )
}


def rule_table() -> list[tuple[str, str, str, str]]:
    """The table in order: (id, action, threshold, what it finds)."""
    return [(rule.id, str(rule.action), rule.threshold, rule.finds) for rule in RULES.values()]


def asked(checks: Sequence[RuleCheck], *, small: bool) -> tuple[RuleCheck, ...]:
    """The checks asked of a model's lines: a small model's all, a capable one's those not `small_only`."""
    return tuple(check for check in checks if small or not RULES[check.__name__].small_only)
