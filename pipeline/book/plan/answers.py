"""Reading the planner's answers: numbered `Heading: sentence` lines, JSON after all, the book title; and a
refused item's key point as a heading.

Model output is untrusted: nothing in an answer raises, and what is read is only ever text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pipeline.text import list_item, title_case
from pipeline.titles import MAX_HEADING_WORDS, MAX_TITLE_CASE_WORDS, clean_title

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
    """A refused title's key point as its heading ('How vaccines protect against disease.' -> 'How Vaccines
    Protect Against Disease'): the model's own words, so better than a numbered placeholder. Empty when the
    point is too long to read as a heading."""
    text = clean_title(point.rstrip("…"))
    words = text.split()
    if not words or len(words) > MAX_HEADING_WORDS:
        return ""
    small = {"a", "an", "the", "of", "and", "or", "to", "in", "on", "for", "with", "by", "at", "as"}
    return " ".join(
        w if (i and w.casefold() in small) or not w[:1].islower() else w[:1].upper() + w[1:]
        for i, w in enumerate(words)
    )


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
