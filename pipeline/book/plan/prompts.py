"""What fanout itself says to the planning model: the notes a planning prompt carries (the titles already chosen,
the asks its children must carry), its templates' worked examples (a line copied from one is
refused: pipeline/book/plan/policy.py's example rules) and the words of its instructions and planning notes (a
line holding a run of them is refused: policy.prompt_words)."""

from __future__ import annotations

import re
from functools import cache

from pipeline.book.plan.answers import PlanItem, parse_book_title, parse_item, parse_items
from pipeline.meaning.nearness import unit
from pipeline.templating import example_answer, example_answers, template
from pipeline.text import shingles
from pipeline.titles import content_words, is_common, title_words

SHINGLE = 4  # words in a run of a prompt's own words that a line may not hold

PLAN_TEMPLATES = ("plan_book.md", "plan_part.md", "plan_chapter.md")
PHRASE_TEMPLATES = ("phrase_title.md", "phrase_part.md", "phrase_chapter.md", "phrase_section.md")
EXAMPLE_TEMPLATES = PLAN_TEMPLATES + PHRASE_TEMPLATES
EXAMPLE_RARE_ZIPF = 4.2  # wordfreq's Zipf: 'sail' 4.0 and 'barometer' 3.2 name the example's subject; 'safe' 5.1


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
SHINGLE_CONTENT = 1  # ... of which content words ('its part made of'; 'what to do when' alone is no copy)


def content_shingles(text: str) -> set[tuple[str, ...]]:
    """The runs of SHINGLE words of a text that hold SHINGLE_CONTENT content words or more."""
    runs = shingles(title_words(text), SHINGLE)
    return {run for run in runs if sum(bool(content_words(word)) for word in run) >= SHINGLE_CONTENT}


@cache
def prompt_shingles() -> frozenset[tuple[str, ...]]:
    """The runs of words of what fanout itself says to the model: its prompts' instructions (the user turns of
    every template, not the worked answers, which the example checks judge) and the planning notes."""
    said = [CHOSEN_NOTE, must_note(["x", "y"], "section", 1), must_note(["x"], "section", 2)]
    for name in PROMPT_TEMPLATES:
        text = template(name).template
        said += [turn for turn in re.split(r"<<assistant>>.*?(?=<<user>>|$)", text, flags=re.S) if turn.strip()]
    return frozenset(run for text in said for run in content_shingles(re.sub(r"\$\w+", " ", text)))


def prompt_run(text: str, request: str) -> str | None:
    """A run of a prompt's own words the text holds (not one the request uses too), or None."""
    found = content_shingles(text) & prompt_shingles()
    found -= content_shingles(request)
    return " ".join(sorted(found)[0]) if found else None


CHOSEN_NOTE = "Already chosen, so give others:"  # the only note a planning prompt carries
SHOWN_CHOSEN = 30
# The words of the notes a planning prompt carries (chosen_note, must_note), of the refusal reasons an earlier
# planner showed ("does not repeat the chapter title" came back as a section title) and of the points it joined from
# the request's phrases ("The scent, as it bears on The Dog."): a line that holds them copied a note, not a heading.
NOTE_WORDS = re.compile(
    r"\b(?:already chosen|give others|the request asks for|(?:include|with) an? (?:part|chapter|section) on each"
    r"|cover several of them|do(?:es)? not repeat|repeats? the (?:entire |whole )?(?:book|part|chapter|section)"
    r"|refused|the worked example|as it bears on|as the request asks)\b",
    re.I,
)


def how_many(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def about(what: str, point: str) -> str:
    return f" The {what} covers: {point}" if point else ""


def chosen_note(chosen: list[str]) -> str:
    """What a second round must not give again: the titles already chosen (never why others were not)."""
    if not chosen:
        return ""
    return f"\n{CHOSEN_NOTE} " + "; ".join(f'"{t}"' for t in chosen[-SHOWN_CHOSEN:]) + "."


def carries_note(text: str) -> bool:
    """The text holds the words of a planning note (NOTE_WORDS)."""
    return NOTE_WORDS.search(text) is not None


def must_note(owed: list[str], noun: str, count: int) -> str:
    """What the request asks of this node's children, for its planning prompt: a child on each, or, when
    they outnumber the children (a brief's dozens of concerns), each child holding several."""
    if not owed:
        return ""
    if len(owed) <= count:
        return f"\nThe request asks for these, so include a {noun} on each: " + "; ".join(owed) + "."
    return f"\nThe request asks for all of these, so let each {noun} cover several of them: " + "; ".join(owed) + "."
