"""What fanout says to the planning model, and how its answers are read.

- Said: the notes a planning prompt carries (the titles already chosen, the asks its children must carry), its
  templates' worked examples (a line copied from one is refused: pipeline/book/plan/policy.py's example rules) and
  the words of its instructions and planning notes (a line holding a run of them is refused: policy.prompt_words).
- Read: numbered `Heading: sentence` lines, JSON after all, the book title; a refused item's key point as a heading;
  the lines of samples still streaming (StreamingSamples). Model output is untrusted: nothing in an answer raises,
  and what is read is only ever text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from pipeline.meaning.nearness import unit
from pipeline.templating import example_answer, example_answers, template
from pipeline.text import as_title, list_item, shingles, title_case
from pipeline.titles import (
    MAX_HEADING_WORDS,
    MAX_TITLE_CASE_WORDS,
    clean_title,
    content_words,
    is_common,
    title_words,
)

MAX_POINT_CHARS = 240


@dataclass(frozen=True)
class PlanItem:
    title: str
    point: str = ""


TITLE_LINE = re.compile(r"^\s*[*_#\s]*(?:book\s+)?title[*_]*\s*:\s*(.+?)\s*$", re.I)
SPLIT = re.compile(r"^(.+?)(?:\*\*|__)?\s*(?::|;|\s[-–—]\s)\s*(.+)$")
QUESTION = re.compile(r"^([^?]{3,}\?)\s+(\S.+)$")  # a question as the heading, the rest as its point


def parse_item(body: str) -> PlanItem:
    """`Heading: sentence` (or `**Heading** - sentence`, `"Heading" — sentence`, `Heading; sentence`,
    `Question? sentence`) -> PlanItem. A heading may hold a colon, semicolon or dash of its own ('Time Value of
    Money I: Single Payment Value: How …'): it runs on past one while what follows is in title case and a point
    still follows it. Of the good-writing corpus's 4,608 lines written `Title: point`, 190 titles hold such a mark;
    split at the first, all 190 were cut; so, 51 still are (a subtitle in sentence case, 'Step 1: Break the UI
    into a component hierarchy'). Running on past any short phrase was measured too: 54 ('Start Timestamps:
    Breaking: …', a point that opens on a label, ran on)."""
    match = SPLIT.match(body) or QUESTION.match(body)
    if not match:
        return PlanItem(clean_title(body))
    title, point = match.group(1), match.group(2)
    while (
        (more := SPLIT.match(point))
        and title_case(more.group(1))
        and words(title, more.group(1)) <= MAX_TITLE_CASE_WORDS
    ):
        title, point = body[: len(body) - len(point) + more.end(1)], more.group(2)
    return PlanItem(clean_title(title), clean_point(point))


def words(*texts: str) -> int:
    return sum(len(text.split()) for text in texts)


# a re-ask's note the model copied into a point: a bracket holding a refusal reason (checks.py, titles.py)
NOTE_IN_POINT = re.compile(
    r"\s*(?:\([\"“][^\"”()]*[\"”]\s*)?"  # the refused title it was said of, in its own bracket
    r"\([^()]*\b(?:repeats?|refused|already|chosen|elsewhere|covers what|leaves out|not about|says the same"
    r"|says nothing|worked example|told apart)\b.*$",
    re.I,
)


def clean_point(text: str) -> str:
    """A key point as the model gave it, without Markdown marks, and without a re-ask's note it copied back
    ('… (nearly repeats "X", a title elsewhere in the book)')."""
    point = " ".join(re.sub(r"[#*_`>\[\]{}]", "", text).split()).strip(" \"'“”-–—:")
    point = NOTE_IN_POINT.sub("", point).strip(" ,;:-–—")
    if len(point) > MAX_POINT_CHARS:
        point = point[:MAX_POINT_CHARS].rsplit(" ", 1)[0] + "…"
    return point


def find_json(text: str) -> Any:
    """The first JSON object or array in the text (fences and chatter around it are ignored), or None."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, (dict, list)):
            return value
    return None


def json_items(text: str) -> list[PlanItem]:
    """Items from an answer that came as JSON after all: a list, or the first list in an object."""
    value = find_json(text)
    if isinstance(value, dict):
        value = next((v for v in value.values() if isinstance(v, list)), [])
    if not isinstance(value, list):
        return []
    items = []
    for entry in value:
        if isinstance(entry, dict):
            items.append(PlanItem(clean_title(entry), clean_point(str(entry.get("point") or ""))))
        elif isinstance(entry, str):
            items.append(parse_item(entry))
    return items


def item_lines(text: str) -> list[PlanItem]:
    """Every numbered (or bulleted) `Heading: sentence` line of the text."""
    return [parse_item(item) for line in text.splitlines() if (item := list_item(line, loose=True)) is not None]


def titled(items: list[PlanItem]) -> list[PlanItem]:
    """The items with a title of two characters or more."""
    return [item for item in items if len(item.title) >= 2]


def parse_items(text: str) -> list[PlanItem]:
    """Every numbered (or bulleted) `Heading: sentence` line of a whole answer; failing that, JSON."""
    return titled(item_lines(text) or json_items(text))


def interleaved(answers: list[list[PlanItem]]) -> list[PlanItem]:
    """The samples' lines pooled in turn: every sample's first, then every second ..., so the lines a model
    gives first, its surest, come first."""
    longest = max((len(items) for items in answers), default=0)
    return [items[at] for at in range(longest) for items in answers if at < len(items)]


def parse_book_title(text: str) -> str:
    for line in text.splitlines():
        if match := TITLE_LINE.match(line):
            return clean_title(match.group(1))
    value = find_json(text)
    return clean_title(value.get("title", "")) if isinstance(value, dict) else ""


def heading_from_point(point: str) -> str:
    """A key point as a heading ('How vaccines protect against disease.' -> 'How Vaccines Protect Against Disease',
    pipeline/text.py's as_title); empty when the point is too long to read as a heading. policy.vague_point compares
    a title with it by title_key, so a title made from its own point is not called vague."""
    text = clean_title(point.rstrip("…"))
    words = text.split()
    if not words or len(words) > MAX_HEADING_WORDS:
        return ""
    return as_title(text)


def well_formed(item: PlanItem) -> bool:
    """The line is text: a stream may carry bytes that are not UTF-8 (lone surrogates after decoding), and the pool
    asks such an answer again once it ends (sse.py); its lines are not taken meanwhile."""
    try:
        (item.title + item.point).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class StreamingSamples:
    """A round's samples as they stream: each one's text so far, and the items of its complete lines (a line is
    complete once its newline came)."""

    def __init__(self, samples: int) -> None:
        self.texts = [""] * samples
        self.items: list[list[PlanItem]] = [[] for _ in range(samples)]

    def piece(self, sample: int, text: str) -> bool:
        """Add a piece of `sample`'s text; True when it completed a line."""
        if not 0 <= sample < len(self.texts):  # an index the request did not ask for: the backend's bad answer
            return False
        self.texts[sample] += text
        if "\n" not in text:
            return False
        complete = self.texts[sample].rsplit("\n", 1)[0]
        self.items[sample] = [item for item in titled(item_lines(complete)) if well_formed(item)]
        return True

    def restart(self, sample: int | None = None) -> None:
        """A sample (None: every one) is asked again: what it streamed before is void."""
        for index in range(len(self.texts)) if sample is None else [sample]:
            self.texts[index], self.items[index] = "", []

    def depth(self) -> int:
        """The complete item lines every sample has given."""
        return min((len(items) for items in self.items), default=0)

    def pool(self) -> list[PlanItem]:
        """The complete lines so far, pooled as the whole answers are (interleaved)."""
        return interleaved(self.items)


# ---------------------------------------------------------------- what fanout says

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
