"""The title policy (pipeline/book/plan/policy.py): a fixture row for every rule of its table, each line found by
that rule (its id, its action, its words) and by no rule before it; the titles that must pass every rule; the
run's counts keyed on the rule id."""

from __future__ import annotations

import pytest

from pipeline import titles
from pipeline.book.plan import policy, prompts
from pipeline.book.plan.checks import TitleChecks
from pipeline.book.plan.policy import CHAINS, RULES, Chain, Context, Group, Line, MissingField
from pipeline.book.plan.prompts import CHOSEN_NOTE, PlanItem, rare_example_words
from pipeline.book.plan.rounds import PlanStats
from pipeline.book.stats import rules_line
from pipeline.meaning import floors, nearness
from pipeline.meaning.embed import open_embedder

REQUEST = "Write a short handbook on keeping a sourdough starter alive. Practical, with examples."
CHAPTER = {"the chapter title": "Sourdough Starter Sourcing"}


def line(title: str, point: str = "A point of its own about flour.", **given: object) -> Line:
    values: dict[str, object] = {
        "ancestors": {},
        "taken": [],
        "forbidden": frozenset(),
        "request": REQUEST,
        "asks": [],
    }
    values.update(given)
    return Line.of(PlanItem(title, point), **values)


def by_words(line: Line) -> policy.Verdict | None:
    """The first defect of the line found by its words alone (no embedder is asked: the meaning rules are last)."""
    by_words = [rule for rule in policy.CHAINS[Chain.DEFECT] if rule.id != "example_meaning"]
    return next(policy.found_by(by_words, line, CONTEXT, strict=True), None)


CONTEXT = Context(open_embedder())


def found(rule: str, verdict: policy.Verdict | None, words: str = "") -> None:
    assert verdict is not None, f"{rule} found nothing"
    assert (verdict.rule, verdict.action) == (rule, RULES[rule].action)
    assert words in verdict.message


TITLE_ROWS = [
    ("identifier", "contentTypeId", {}, "identifier"),
    ("identifier", "snake_case_name", {}, "identifier"),
    ("identifier", '{"title": "x"}', {}, "identifier"),
    ("echoes_above", "Sourdough Starter Sourcing 2", {"ancestors": CHAPTER}, "repeats the chapter title"),
    ("echoes_above", "Sourdough Starter Sourcing Basics", {"ancestors": CHAPTER}, "repeats the chapter title"),
    ("counted", "Keeping a Starter (section 3)", {}, "number"),
    ("echoes_above", "Keeping Your Starter Alive", {"ancestors": {"the request": REQUEST}}, "repeats the request"),
    ("repeats_sibling", "Choosing Flour", {"taken": ["Choosing the Flour"]}, 'nearly repeats "Choosing the'),
    ("repeats_sibling", "Starter Sourcing 3", {"taken": ["Starter Sourcing 2"]}, "nearly repeats"),
    ("unusable", "", {}, "not a usable title"),
    ("unusable", "go go go go go go", {}, "not a usable title"),
    ("unusable", "Sourdough Starters: Sourdough Starters", {}, "not a usable title"),
    ("generic", "The Basics", {}, "says nothing of its own"),
    ("generic", "Introduction", {}, "says nothing of its own"),
    ("sentence", "How to keep a sourdough starter is something all bakers do differently", {}, "short heading"),
    ("sentence", "The Art of Souring; A Guide for Beginners", {}, "not a short heading"),
    ("non_word", "Lifeguising at the Pool", {}, 'not a word: "Lifeguising"'),
]


@pytest.mark.parametrize(("rule", "title", "given", "words"), TITLE_ROWS)
def test_each_title_rule_finds_its_line_first(rule, title, given, words):
    found(rule, by_words(line(title, **given)), words)


LINE_ROWS = [
    ("example_words", "Trimming the Sails", "How a starter rises.", {"forbidden": rare_example_words()}, "example"),
    ("planning_note", "Feeding Times", f"{CHOSEN_NOTE} nothing", {}, "planning note"),
    ("no_point", "Feeding Times", "", {}, "no key point"),
    ("point_repeats_title", "Feeding Times", "Feeding times.", {}, "only repeats its title"),
    ("prompt_words", "Feeding Times", "You are writing one section of a book on flour.", {}, "words of a prompt"),
    ("fragment", "Starter Alive", "Why a starter lives on flour.", {}, "fragment of the request"),
    ("offensive", "What the Fuck Is a Starter", "A starter explained.", {}, "fuck"),
]


@pytest.mark.parametrize(("rule", "title", "point", "given", "words"), LINE_ROWS)
def test_each_line_rule_by_words_finds_its_line_first(rule, title, point, given, words):
    found(rule, by_words(line(title, point, **given)), words)


def test_a_concern_the_request_names_is_no_fragment():
    asks = ["keeping a sourdough starter alive"]
    assert policy.fragment(line("Keeping a Sourdough Starter Alive", asks=asks), CONTEXT) is None


MEANING_RULES = ("example_meaning", "same_as_sibling", "covers_sibling", "vague_point", "taken_elsewhere")
MEANING_RULES += ("near_elsewhere", "book_title_example", "book_title_subject", "book_title_adds")
HOLD_RULES = ("off_subject", "title_off_subject", "leaves_out", "repeats_given", "last_resort")


def test_the_rules_by_meaning_and_the_books_claims():
    embedder = open_embedder()
    checks = TitleChecks(embedder, REQUEST)
    example = checks.context.examples[0]
    title, _, point = example.partition(": ")
    defect = checks.first(Chain.DEFECT, PlanItem(title, point), ancestors={}, taken=[], forbidden=frozenset())
    found("example_meaning", defect, "worked example")

    def hold(item: PlanItem, taken: list[str], sibling_units: list[str]) -> policy.Verdict | None:
        return checks.first(Chain.HOLD, item, taken=taken, sibling_units=sibling_units, fit=1.0, owed=[])

    near = hold(PlanItem("Feeding the Starter", "When to feed."), ["Feeding Your Starter"], [])
    found("same_as_sibling", near, 'says the same as "Feeding Your Starter"')
    covers = hold(
        PlanItem("Daily Feeding", "How often to feed a starter flour and water."),
        [],
        ["Feeding Schedule: how often to feed a starter flour and water"],
    )
    found("covers_sibling", covers, 'covers what "Feeding Schedule" covers')
    found("vague_point", hold(PlanItem("Rye Flour", "What you need to know."), [], []), "key point")
    assert checks.claim("chapters", PlanItem("Feeding Your Starter", "When to feed.")) is None
    found("taken_elsewhere", checks.claim("sections", PlanItem("Feeding Your Starter", "x")), "elsewhere in the book")
    found("near_elsewhere", checks.claim("chapters", PlanItem("Feeding the Starter", "x")), "nearly repeats")
    found("book_title_example", checks.book_title("Small Boat Sailing"), "worked example")
    found("book_title_subject", checks.book_title("The Greatest Guide Ever"), "does not name")
    found(
        "book_title_adds",
        checks.book_title("Keeping a Sourdough Starter Alive in Paris"),
        "never used",
    )


def ask(rule: str, line: Line) -> policy.Verdict | None:
    return RULES[rule].verdict(line, CONTEXT)


def test_the_holds_and_their_floors():
    off = RULES["off_subject"].thresholds["PLAN_FLOOR"]
    found("off_subject", ask("off_subject", line("Flour", fit=off - 0.01)), "not about what the request")
    assert ask("off_subject", line("Flour", fit=off)) is None
    title_floor = RULES["title_off_subject"].thresholds["TITLE_FLOOR"]
    found("title_off_subject", ask("title_off_subject", line("Flour", title_fit=title_floor - 0.01)), "title")
    assert ask("title_off_subject", line("Flour", title_fit=title_floor)) is None
    last = RULES["last_resort"].thresholds["LAST_RESORT_FIT"]
    found("last_resort", ask("last_resort", line("Flour", fit=last - 0.01)), "even last")
    assert ask("last_resort", line("Flour", fit=last)) is None
    owed = ["allergen labelling"]
    found("leaves_out", ask("leaves_out", line("Rye Flour", owed=owed)), "leaves out what the request")
    assert ask("leaves_out", line("Allergen Labelling", "Labelling allergens.", owed=owed)) is None
    found("repeats_given", ask("repeats_given", line("Tools", about="tools")), "repeats what it was asked")
    assert ask("repeats_given", line("Jars, Spoons and Scales", about="tools")) is None


def test_a_rule_is_refused_a_line_without_a_field_it_reads():
    with pytest.raises(MissingField, match="off_subject reads fit"):
        ask("off_subject", line("Flour"))
    with pytest.raises(MissingField, match="leaves_out reads owed"):
        policy.first(Chain.HOLD, line("Flour", sibling_units=[], fit=1.0, small=False), CONTEXT)


def test_every_rule_is_in_a_chain_and_a_chain_runs_in_the_tables_order():
    chained = {rule.id for rules in CHAINS.values() for rule in rules}
    assert chained == set(RULES)
    assert [rule.group for rule in CHAINS[Chain.HOLD]] == sorted(
        (rule.group for rule in CHAINS[Chain.HOLD]), key=[Group.FAULT, Group.OFF, Group.OWED].index
    )


def test_a_capable_authors_title_meets_no_claim_rule():
    embedder = open_embedder()
    checks = TitleChecks(embedder, REQUEST, small=False)
    assert all(rule.small_only for rule in CHAINS[Chain.CLAIM])
    assert checks.claim("chapters", PlanItem("Installation", "x")) is None
    assert checks.claim("sections", PlanItem("Installation", "y")) is None  # a human book repeats such titles
    found("taken_elsewhere", checks.claim("sections", PlanItem("Installation", "z"), strict=True), "elsewhere")


@pytest.mark.parametrize(
    "title",
    [
        "Feeding Schedule",
        "World War II",
        "Python 3",
        "HTTP/2 Explained",
        "C++ Basics",
        "JavaScript",
        "PostgreSQL",
        "The 1450s",
        "Sourdough Starters at Home",
    ],
)
def test_ordinary_titles_pass_every_rule_by_words(title):
    ancestors = {"the chapter title": "Starter Feeding", "the book title": "A Handbook"}
    assert by_words(line(title, ancestors=ancestors, taken=["Overview"])) is None


def test_every_rule_has_a_row_and_every_verdict_its_rule():
    rows = {row[0] for row in TITLE_ROWS + LINE_ROWS} | set(MEANING_RULES) | set(HOLD_RULES)
    assert set(RULES) == rows, "each rule is found by a row above"
    named = {**vars(nearness), **vars(prompts), **vars(titles), **vars(policy), **vars(floors)}
    for rule in RULES.values():  # each threshold the table names is the constant its rule uses
        for name, value in rule.thresholds.items():
            assert named[name] == value, rule.id


def test_the_runs_counts_key_on_the_rule_id():
    stats = PlanStats()
    stats.refuse("p01", "The Basics", by_words(line("The Basics")))  # type: ignore[arg-type]
    stats.hold("p01", ask("off_subject", line("Flour", fit=0.1)))  # type: ignore[arg-type]
    stats.asked_again("p01")
    stats.hold("p02", ask("off_subject", line("Flour", fit=0.1)))  # type: ignore[arg-type]
    assert stats.rule_counts() == {
        "generic": {"refused": 1, "held": 0, "rounds": 1},
        "off_subject": {"refused": 0, "held": 2, "rounds": 1},
    }


def test_the_stats_table_names_the_busiest_rules_first():
    counts = {"generic": {"refused": 1, "held": 0, "rounds": 1}, "off_subject": {"refused": 0, "held": 2, "rounds": 1}}
    assert rules_line(counts) == "off_subject 0/2, 1; generic 1/0, 1"
